"""YAML the way the 1.x CLI reads it: `config.yaml` and a change's `.openspec.yaml`.

The CLI parses YAML 1.2 (npm `yaml`), where `yes` and `2025-01-01` are strings; PyYAML's safe
loader is YAML 1.1, so `load` drops its 1.1-only boolean and timestamp rules. `read_marker`
ports `readBooleanMarker` (skip_specs, retire_capabilities): a marker counts only when the
whole metadata file is valid, and an unhonourable one says why, with zod's wording.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from specactor.domain.openspec.text import rx

BUILTIN_SCHEMAS = ("spec-driven",)
METADATA_FILE = ".openspec.yaml"
_KEBAB = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")


class YamlError(ValueError):
    """The text is not YAML."""


@lru_cache(maxsize=1)
def _loader() -> Any:
    """SafeLoader with YAML 1.2 core booleans and no timestamps (PyYAML is imported on first use:
    it costs ~10 ms, which start-up should not pay)."""
    import yaml

    class Yaml12Loader(yaml.SafeLoader):  # type: ignore[misc]
        pass

    Yaml12Loader.yaml_implicit_resolvers = {
        key: [(tag, regexp) for tag, regexp in resolvers
              if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
    return Yaml12Loader


def load(text: str) -> Any:
    """Parse YAML 1.2-style.

    Raises:
        YamlError: when the text is not YAML.
    """
    import yaml

    try:
        return yaml.load(text, Loader=_loader())
    except yaml.YAMLError as err:
        raise YamlError(str(err)) from None


def _js_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def metadata_problem(data: Any) -> str | None:
    """The first issue `ChangeMetadataSchema` reports, as "path: message", or None when valid."""
    def expected(path: str, kind: str, value: Any) -> str:
        where = f"{path}: " if path else ""
        received = "undefined" if value is _MISSING else _js_type(value)
        return f"{where}Invalid input: expected {kind}, received {received}"

    if not isinstance(data, dict):
        return expected("", "object", data)
    schema = data.get("schema", _MISSING)
    if not isinstance(schema, str):
        return expected("schema", "string", schema)
    if not schema:
        return "schema: schema is required"
    checks: list[tuple[str, str]] = [("created", "string"), ("goal", "string"), ("affected_areas", "array"),
                                     ("initiative", "object"), ("skip_specs", "boolean"),
                                     ("retire_capabilities", "boolean")]
    for key, kind in checks:
        if key not in data:
            continue
        value = data[key]
        if _js_type(value) != kind:
            return expected(key, kind, value)
        if key == "created" and not _DATE.match(value):
            return "created: created must be YYYY-MM-DD format"
        if key == "goal" and not value:
            return "goal: Too small: expected string to have >=1 characters"
        if key == "affected_areas":
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    return expected(f"affected_areas.{i}", "string", item)
                if not item:
                    return f"affected_areas.{i}: Too small: expected string to have >=1 characters"
        if key == "initiative":
            for field, label in (("store", "Store id"), ("id", "Initiative id")):
                item = value.get(field, _MISSING)
                if not isinstance(item, str):
                    return expected(f"initiative.{field}", "string", item)
                if not _KEBAB.match(item):
                    return (f"initiative.{field}: {label} must be kebab-case with lowercase letters, numbers, "
                            "and single hyphen separators")
            extra = [k for k in value if k not in ("store", "id")]
            if extra:
                return f'initiative: Unrecognized key: "{extra[0]}"'
    return None


_MISSING: Any = object()


@dataclass(frozen=True)
class Marker:
    declared: bool
    invalid_reason: str | None = None


def read_marker(raw: str | None, key: str, schemas: tuple[str, ...] = BUILTIN_SCHEMAS) -> Marker:
    """Whether `key` (skip_specs, retire_capabilities) is set in a change's metadata and can be honoured."""
    if raw is None:
        return Marker(False)
    try:
        parsed = load(raw)
    except YamlError:
        mentioned = rx(r"^\s*(['\"]?)" + key + r"\1\s*:", "m").search(raw) is not None
        return _unhonourable("the file is not valid YAML") if mentioned else Marker(False)
    problem = metadata_problem(parsed)
    if problem is None:
        if parsed.get(key) is not True:
            return Marker(False)
        if parsed["schema"] not in schemas:
            return _unhonourable(f"schema: unknown schema '{parsed['schema']}'")
        return Marker(True)
    if isinstance(parsed, dict) and key in parsed and parsed[key] is not False:
        return _unhonourable(problem)
    return Marker(False)


def _unhonourable(reason: str) -> Marker:
    return Marker(False, re.sub(r"[\x00-\x1f\x7f]", "?", reason))


def _load_mapping(raw: str | None) -> dict[str, Any] | None:
    """`raw` as a YAML mapping; None when absent, not YAML, or not a mapping."""
    if raw is None:
        return None
    try:
        parsed = load(raw)
    except YamlError:
        return None
    return parsed if isinstance(parsed, dict) else None


def metadata_schema(raw: str | None) -> str | None:
    """The schema a change's valid metadata names (None when absent or invalid)."""
    parsed = _load_mapping(raw)
    return parsed["schema"] if parsed is not None and metadata_problem(parsed) is None else None


def config_value(raw: str | None, key: str) -> Any:
    """One top-level value of `openspec/config.yaml` (None when absent or unparsable)."""
    parsed = _load_mapping(raw)
    return parsed.get(key) if parsed is not None else None
