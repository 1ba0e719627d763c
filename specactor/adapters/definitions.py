"""Tool definitions for frameworks that take function definitions rather than MCP, purely.

From a tool's name, description and inputSchema (the registry's, or a `tools/list` answer's):
`json-schema` gives one draft-07 document per tool (`$schema`, `title`, `description`, the
parameters); `openai` gives `{"type": "function", "function": {name, description, parameters}}`;
`langchain` gives what `StructuredTool` takes (`name`, `description`, `args_schema`). Every object
schema that lists properties and says nothing about others gets `additionalProperties: false`,
and 2020-12's `$defs` become draft-07's `definitions` (with their `$ref`s).
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

DRAFT_07: Final = "http://json-schema.org/draft-07/schema#"
Format = Literal["json-schema", "openai", "langchain"]
FORMATS: Final[tuple[str, ...]] = get_args(Format)


def draft07(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as a closed draft-07 schema (a copy; `schema` is left alone)."""
    out = _close(schema)
    assert isinstance(out, dict)
    return out


def _close(node: Any, *, combined: bool = False) -> Any:
    if isinstance(node, list):
        return [_close(n, combined=combined) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$defs":
            key = "definitions"
        if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
            value = "#/definitions/" + value.removeprefix("#/$defs/")
        if key in ("properties", "definitions", "patternProperties"):  # maps of names to schemas
            out[key] = {name: _close(sub) for name, sub in value.items()} if isinstance(value, dict) else value
        elif key in ("enum", "const", "default", "examples"):
            out[key] = value  # values, not schemas
        else:
            out[key] = _close(value, combined=key == "allOf")
    # A branch of allOf is merged with its siblings: closing it would refuse their properties.
    if "properties" in out and "additionalProperties" not in out and not combined:
        out["additionalProperties"] = False
    return out


def parameters(input_schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameters: its inputSchema, closed, as draft-07, without a `$schema` of its own."""
    params = draft07(input_schema)
    params.pop("$schema", None)
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    params.setdefault("additionalProperties", False)
    return params


def definition(fmt: Format, name: str, description: str, input_schema: dict[str, Any]) -> dict[str, Any]:
    """One tool's definition in the format `fmt`."""
    params = parameters(input_schema)
    if fmt == "openai":
        return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}
    if fmt == "langchain":
        return {"name": name, "description": description, "args_schema": {"$schema": DRAFT_07, **params}}
    return {"$schema": DRAFT_07, "title": name, "description": description, **params}
