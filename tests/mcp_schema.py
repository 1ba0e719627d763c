"""Validate server messages against the vendored official MCP schema of the negotiated version."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

HERE = Path(__file__).parent / "schemas"

# The result definition for each request method.
RESULTS = {
    "initialize": "InitializeResult",
    "server/discover": "DiscoverResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
}


def schema_version(version: str) -> str:
    return "2025-06-18" if version == "2025-03-26" else version


@cache
def _root(version: str) -> dict[str, Any]:
    return json.loads((HERE / schema_version(version) / "schema.json").read_text())


@cache
def _validator(version: str, definition: str) -> jsonschema.protocols.Validator:
    root = _root(version)
    defs_key = "$defs" if "$defs" in root else "definitions"
    schema = {**root, "$ref": f"#/{defs_key}/{definition}"}
    cls = jsonschema.validators.validator_for(root)
    return cls(schema)


def has_definition(version: str, definition: str) -> bool:
    root = _root(version)
    return definition in root.get("$defs", root.get("definitions", {}))


def validate(version: str, message: Any, method: str | None = None) -> None:
    """Raise jsonschema.ValidationError when `message` (one frame from the server) breaks the schema.

    `method` is the method of the request a response answers; with it the result is checked
    against that method's result type as well as the generic frame.
    """
    if isinstance(message, list):
        for item in message:
            validate(version, item)
        return
    if version == "2025-03-26" and "result" in message:
        result = message["result"]
        assert "structuredContent" not in result, "2025-03-26 has no structuredContent"
        for tool in result.get("tools", []):
            assert "outputSchema" not in tool and "title" not in tool, "2025-03-26 tools have no outputSchema/title"
    if "method" in message and "id" in message:
        _validator(version, "JSONRPCRequest").validate(message)
        return
    if "method" in message:
        _validator(version, "ServerNotification").validate(message)
        return
    if "error" in message:
        name = "JSONRPCErrorResponse" if has_definition(version, "JSONRPCErrorResponse") else "JSONRPCError"
        if name == "JSONRPCError" and "id" not in message:
            # 2025-06-18 requires an id even when the request's id could not be read; no value can
            # satisfy it then (null is not a RequestId). The server leaves it out, as 2025-11-25 allows.
            message = {**message, "id": "(unknown)"}
        _validator(version, name).validate(message)
        return
    definition = "JSONRPCResultResponse" if has_definition(version, "JSONRPCResultResponse") else "JSONRPCResponse"
    _validator(version, definition).validate(message)
    if method in RESULTS and has_definition(version, RESULTS[method]):
        _validator(version, RESULTS[method]).validate(message["result"])
