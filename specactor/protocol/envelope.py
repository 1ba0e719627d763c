"""The seeds' tool-result envelope: `{success, data}` or `{success: false, error}`.

Each result carries the envelope as `structuredContent` and, for clients that read only
text, the same JSON as one text block. The JSON is encoded once and embedded raw.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

from specactor.protocol.errors import ToolError
from specactor.wire.codec import encode
from specactor.wire.mcp import CallToolResult, TextContent


class ErrorBody(msgspec.Struct):
    code: str
    message: str
    retryable: bool
    details: dict[str, Any]


class Envelope(msgspec.Struct, omit_defaults=True):
    success: bool
    data: Any | UnsetType = UNSET
    error: ErrorBody | UnsetType = UNSET


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "enum": ["INVALID_INPUT", "NOT_FOUND", "PROVIDER_ERROR", "RATE_LIMITED",
                                            "UNAUTHORIZED", "CONFLICT", "TIMEOUT", "INTERNAL"]},
        "message": {"type": "string"},
        "retryable": {"type": "boolean"},
        "details": {"type": "object"},
    },
    "required": ["code", "message", "retryable", "details"],
}


def envelope_schema(data_schema: dict[str, Any]) -> dict[str, Any]:
    """The `outputSchema` of a typed tool whose `data` has `data_schema`."""
    return {
        "type": "object",
        "properties": {"success": {"type": "boolean"}, "data": data_schema, "error": ERROR_SCHEMA},
        "required": ["success"],
    }


def _result(body: Envelope, is_error: bool) -> CallToolResult:
    raw = encode(body)
    return CallToolResult(content=[TextContent(text=raw.decode())], structuredContent=Raw(raw),
                          isError=True if is_error else UNSET)


def envelope_ok(data: Any) -> CallToolResult:
    return _result(Envelope(success=True, data=data), False)


def envelope_error(err: ToolError) -> CallToolResult:
    return _result(Envelope(success=False, error=ErrorBody(err.code, err.message, err.retryable, err.details)),
                   True)
