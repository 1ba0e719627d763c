"""`.airsspec/config.toml`: `[project] name, description` and `[defaults] category`."""

from __future__ import annotations

import functools
import tomllib

from specactor.domain.airsspec import vocab
from specactor.domain.airsspec.errors import ValidationFailed
from specactor.domain.airsspec.model import ProjectConfig

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def toml_string(value: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters (DEL too) escaped."""
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def render(config: ProjectConfig) -> str:
    return (f"[project]\nname = {toml_string(config.name)}\n"
            f"description = {toml_string(config.description)}\n\n"
            f"[defaults]\ncategory = {toml_string(config.default_category)}\n")


@functools.lru_cache(maxsize=16)  # every write reads the config; ProjectConfig is frozen, so sharing is safe
def parse(text: str, file: str, default_name: str) -> ProjectConfig:
    """Raises:
        ValidationFailed: naming `file` and the line (TOML errors carry it).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        line = getattr(err, "lineno", None) or _line_from(str(err))
        raise ValidationFailed(file, line, f"invalid TOML: {str(err).split(' (at line')[0]}") from None
    project = data.get("project", {})
    defaults = data.get("defaults", {})
    if not isinstance(project, dict) or not isinstance(defaults, dict):
        raise ValidationFailed(file, 1, "[project] and [defaults] must be tables")
    name = project.get("name", default_name)
    description = project.get("description", "")
    category = vocab.category(str(defaults.get("category", "feature")))
    if not isinstance(name, str) or not isinstance(description, str):
        raise ValidationFailed(file, _key_line(text, "name" if not isinstance(name, str) else "description"),
                               "[project] name and description must be strings")
    if category is None:
        raise ValidationFailed(file, _key_line(text, "category"),
                               f"[defaults] category must be one of {', '.join(vocab.CATEGORIES)}")
    return ProjectConfig(name=name, description=description, default_category=category)


def _line_from(message: str) -> int:
    marker = "(at line "
    if marker in message:
        digits = message.split(marker, 1)[1].split(",", 1)[0]
        if digits.isdigit():
            return int(digits)
    return 1


def _key_line(text: str, key: str) -> int:
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip().startswith(key) and "=" in line:
            return number
    return 1
