"""Knowledge items from markdown: YAML front matter, a body, constraints in a fenced yaml block.

Items live under `company/`, `orgs/<orgId>/`, `teams/<teamId>/` and `projects/<projectId>/`
(the path decides the layer and its scope; other `.md` files, README.md and names starting with
`.` or `_` are not items). A file that cannot be read as an item (bad YAML, a missing title, an
unknown status, a constraint glob that does not parse) becomes a `Problem` naming the file and
the reason; it never stops the other items from loading. A regex is left to the engine that runs
it: knowledge_check reports one RE2 refuses and still checks the item's other constraints.

    ---
    id: adr-042-database-selection       # default: the file name without .md
    type: adr                            # default: from the folder (adrs/, policies/, patterns/, specs/)
    title: Database Selection for New Services
    status: accepted
    severity: block                      # default severity of its constraints (default warn)
    tags: [database]
    ---
    ## Constraints
    ```yaml
    - operator: must_not_use
      target: dependency
      pattern: "mysql|mysql2|mariadb"
      message: MySQL not allowed for new services per ADR-042. Use PostgreSQL instead.
    ```
"""

from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any, Final

import msgspec

from specactor.domain.knowledge.api import (
    OPERATORS,
    SEVERITIES,
    STATUSES,
    TARGETS,
    TYPES,
    Constraint,
    Item,
    KnowledgeLayer,
    Problem,
)
from specactor.domain.knowledge.globs import BadGlob, compile_glob

FOLDER_TYPES: Final = {"adrs": "adr", "policies": "policy", "patterns": "pattern", "specs": "spec"}
SCOPED: Final[dict[str, KnowledgeLayer]] = {"orgs": "org", "teams": "team", "projects": "project"}
ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_FENCE = re.compile(r"^```ya?ml[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t]*$", re.MULTILINE)
SUMMARY_CHARS: Final = 300


class ItemError(ValueError):
    """Why one file is not a usable item."""


@lru_cache(maxsize=1 << 16)  # every sync asks again about each path of the repository
def item_scope(path: str) -> tuple[KnowledgeLayer, str | None] | None:
    """The layer and scope id an item at `path` belongs to, or None when `path` is not an item."""
    parts: Sequence[str] = path.split("/")
    if "" in parts or "." in parts:  # git's paths never are; others are read as a path would be
        parts = PurePosixPath(path).parts
    if not path.endswith(".md") or not parts:
        return None
    name = parts[-1]
    if name.lower() == "readme.md" or name.startswith((".", "_")):
        return None
    if parts[0] == "company" and len(parts) >= 2:
        return "company", None
    if parts[0] in SCOPED and len(parts) >= 3:
        return SCOPED[parts[0]], parts[1]
    return None


def _load_yaml(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as err:
        raise ItemError(f"invalid YAML: {' '.join(str(err).split())}") from None


def plain(value: Any) -> Any:
    """YAML values as JSON ones: dates as ISO strings, keys as strings."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, float) and value != value:
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---"):
        raise ItemError("no YAML front matter (the file must start with a '---' line)")
    lines = text.splitlines(keepends=True)
    if lines[0].strip() != "---":
        raise ItemError("no YAML front matter (the file must start with a '---' line)")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            data = _load_yaml("".join(lines[1:i]))
            if not isinstance(data, dict):
                raise ItemError("the front matter must be a YAML mapping")
            return plain(data), "".join(lines[i + 1:])
    raise ItemError("the front matter is not closed by a '---' line")


def _text(data: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ItemError(f"'{key}' must be a non-empty string")
    return value.strip()


def _choice(data: Mapping[str, Any], key: str, valid: tuple[str, ...], default: str | None = None) -> str:
    value = data.get(key, default)
    if value not in valid:
        raise ItemError(f"'{key}' is {value!r}; valid values are {', '.join(valid)}")
    assert isinstance(value, str)
    return value


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ItemError(f"'{what}' must be a list of strings")
    return list(value)


def constraints_block(body: str) -> str | None:
    """The fenced yaml block under the `## Constraints` heading, if there is one."""
    headings = list(_HEADING.finditer(body))
    for i, heading in enumerate(headings):
        if heading.group(1).strip().lower() == "constraints":
            end = headings[i + 1].start() if i + 1 < len(headings) else len(body)
            fence = _FENCE.search(body, heading.end(), end)
            return fence.group(1) if fence else None
    return None


def parse_constraint(raw: Any, index: int, default_severity: str) -> Constraint:
    where = f"constraint {index + 1}"
    if not isinstance(raw, dict):
        raise ItemError(f"{where} must be a mapping with operator, target and pattern")
    data = plain(raw)
    try:
        operator = _choice(data, "operator", OPERATORS)
        target = _choice(data, "target", TARGETS)
        pattern = data.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ItemError("'pattern' must be a non-empty string")
        severity = _choice(data, "severity", SEVERITIES, default_severity)
        applies = data.get("appliesTo", data.get("applies_to"))
        applies_to = _strings(applies, "appliesTo") or None
        message = data.get("message")
        if message is not None and not isinstance(message, str):
            raise ItemError("'message' must be a string")
    except ItemError as err:
        raise ItemError(f"{where}: {err}") from None
    try:
        for glob in ([pattern] if target == "file" else []) + (applies_to or []):
            compile_glob(glob)
    except BadGlob as err:
        raise ItemError(f"{where}: pattern {pattern!r} does not compile: {err}") from None
    return msgspec.convert({"operator": operator, "target": target, "pattern": pattern, "severity": severity,
                            "appliesTo": applies_to, "message": message}, Constraint)


def _summary(body: str) -> str:
    for block in re.split(r"\n\s*\n", body):
        text = " ".join(block.split())
        if text and not text.startswith(("#", "```", "-", "|")):
            return text[:SUMMARY_CHARS]
    return ""


def parse_item(path: str, data: bytes) -> Item:
    """One item from the file at `path` (relative to the knowledge root) holding `data`.

    Raises:
        ItemError: why the file is not a usable item.
    """
    where = item_scope(path)
    if where is None:
        raise ItemError("not an item path (items live under company/, orgs/<id>/, teams/<id>/, projects/<id>/)")
    layer, scope = where
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ItemError("not UTF-8 text") from None
    meta, body = split_front_matter(text.replace("\r\n", "\n"))
    stem = PurePosixPath(path).stem
    item_id = _text(meta, "id", stem)
    if not ID_PATTERN.fullmatch(item_id):
        raise ItemError(f"'id' {item_id!r} may hold only letters, digits, '.', '_' and '-'")
    if "layer" in meta and meta["layer"] != layer:
        raise ItemError(f"'layer' is {meta['layer']!r} but the file lives in the {layer} layer's folder")
    folder = next((FOLDER_TYPES[p] for p in PurePosixPath(path).parts if p in FOLDER_TYPES), None)
    kind = _choice(meta, "type", TYPES, folder)
    severity = _choice(meta, "severity", SEVERITIES, "warn")
    block = constraints_block(body)
    constraints: list[Constraint] = []
    if block is not None:
        raw = _load_yaml(block)
        if isinstance(raw, dict) and "constraints" in raw:
            raw = raw["constraints"]
        if raw is not None and not isinstance(raw, list):
            raise ItemError("the constraints block must be a YAML list of constraints")
        constraints = [parse_constraint(c, i, severity) for i, c in enumerate(raw or [])]
    superseded = _strings(meta.get("supersededBy"), "supersededBy") or None
    supersedes = meta.get("supersedes")
    known = {"id", "type", "layer", "title", "summary", "status", "severity", "tags", "createdAt", "updatedAt",
             "supersedes", "supersededBy"}
    return msgspec.convert({
        "id": item_id, "type": kind, "layer": layer, "scope": scope, "title": _text(meta, "title"),
        "summary": meta["summary"].strip() if isinstance(meta.get("summary"), str) else _summary(body),
        "content": body.strip("\n"), "status": _choice(meta, "status", STATUSES), "severity": severity,
        "tags": _strings(meta.get("tags"), "tags"), "constraints": constraints,
        "metadata": {k: v for k, v in meta.items() if k not in known}, "path": path,
        "contentHash": hashlib.sha256(data).hexdigest(),
        "createdAt": _optional(meta, "createdAt"), "updatedAt": _optional(meta, "updatedAt"),
        "supersedes": supersedes if isinstance(supersedes, str) else None, "supersededBy": superseded,
    }, Item)


def _optional(meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    return str(value) if value is not None else None


def parse_or_problem(path: str, data: bytes) -> Item | Problem:
    """`parse_item`, with a failure turned into a Problem naming the file."""
    try:
        return parse_item(path, data)
    except ItemError as err:
        return Problem(file=path, error=str(err))
