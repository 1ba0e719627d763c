"""YAML front matter: `---`, a YAML mapping, `---`, then the markdown body.

Timestamps are written unquoted as the seed shows them (`created_at: 2026-01-24T10:00:00Z`)
and read back as strings: the loader and dumper here leave out YAML's timestamp rule. PyYAML
is imported on first use (it costs ~12 ms), never at start-up.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Final

from specactor.domain.airsspec.errors import ValidationFailed
from specactor.domain.airsspec.text import parse_timestamp

_KEY_LINE: Final = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:")


class FrontMatter:
    """A parsed front matter: the mapping, the body, and where each top-level key sits."""

    def __init__(self, file: str, data: dict[str, Any], body: str, key_lines: dict[str, int]) -> None:
        self.file = file
        self.data = data
        self.body = body
        self.key_lines = key_lines

    def fail(self, key: str, reason: str) -> ValidationFailed:
        """A ValidationFailed at the line of `key` (the opening `---` when the key is absent)."""
        return ValidationFailed(self.file, self.key_lines.get(key, 1), reason)

    def timestamps(self) -> tuple[str, str]:
        """`created_at` and `updated_at` (the latter defaults to the former), each a valid timestamp.

        Raises:
            ValidationFailed: at the line of the first that is missing or malformed.
        """
        created = parse_timestamp(self.data.get("created_at"))
        if created is None:
            raise self.fail("created_at", "'created_at' must be a timestamp like 2026-01-24T10:00:00Z")
        updated = parse_timestamp(self.data.get("updated_at", created))
        if updated is None:
            raise self.fail("updated_at", "'updated_at' must be a timestamp like 2026-01-24T10:00:00Z")
        return created, updated


@cache
def _yaml() -> tuple[type[Any], type[Any]]:
    import yaml

    loader_base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    dumper_base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    def without_timestamps(cls: Any) -> None:
        cls.yaml_implicit_resolvers = {
            first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
            for first, resolvers in cls.yaml_implicit_resolvers.items()
        }

    def text(dumper: Any, value: str) -> Any:
        # multi-line text as a literal block (PyYAML falls back to quoting when it cannot be one)
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    loader: Any = type("FrontMatterLoader", (loader_base,), {})
    dumper: Any = type("FrontMatterDumper", (dumper_base,), {})
    without_timestamps(loader)
    without_timestamps(dumper)
    dumper.add_representer(str, text)
    return loader, dumper


def dump(data: dict[str, Any]) -> str:
    """The YAML for `data`, keys in the given order, block style, UTF-8 kept as is."""
    import yaml

    _, dumper = _yaml()
    text: str = yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                          width=1_000_000)
    return text


def render(data: dict[str, Any], body: str) -> str:
    return f"---\n{dump(data)}---\n\n{body}"


def parse(text: str, file: str) -> FrontMatter:
    """Split and load a front matter document.

    Raises:
        ValidationFailed: naming `file` and the line of the problem.
    """
    import yaml

    if text.startswith("---\r\n"):  # saved by a Windows editor: read it with plain newlines
        text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise ValidationFailed(file, 1, "the file must start with a '---' line opening the YAML front matter")
    end = text.find("\n---\n", 3)
    if end < 0:
        if text.endswith("\n---"):
            end = len(text) - 4
        else:
            raise ValidationFailed(file, 1, "the front matter is not closed by a '---' line")
    yaml_text = text[4:end + 1]
    body = text[end + 5:]
    if body.startswith("\n"):
        body = body[1:]
    loader, _ = _yaml()
    try:
        data = yaml.load(yaml_text, Loader=loader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        # where the broken construct began (an unclosed quote, say) beats where parsing gave up
        mark = err.context_mark or err.problem_mark
        line = 2 + (mark.line if mark is not None else 0)
        reason = "; ".join(str(part) for part in (err.problem, err.context) if part)
        raise ValidationFailed(file, line, f"invalid YAML: {reason}") from None
    except yaml.YAMLError as err:
        raise ValidationFailed(file, 2, f"invalid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ValidationFailed(file, 2, "the front matter must be a YAML mapping of keys to values")
    key_lines: dict[str, int] = {}
    for number, row in enumerate(yaml_text.split("\n"), start=2):
        match = _KEY_LINE.match(row)
        if match and match.group(1) not in key_lines:
            key_lines[match.group(1)] = number
    return FrontMatter(file, data, body, key_lines)
