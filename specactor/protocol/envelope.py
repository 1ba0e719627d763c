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
    if type(data) is Encoded:
        return data.result()
    return _result(Envelope(success=True, data=data), False)


class Encoded:
    """A tool's output with its envelope encoded once, for an output served many times unchanged
    (a listing cached until the workspace changes): each call then copies the bytes where it
    would encode them twice (0.3 ms a call for 1,000 specs). `data` must not change after."""

    __slots__ = ("data", "structured", "text")

    def __init__(self, data: Any) -> None:
        self.data = data
        once = envelope_ok(data)
        self.structured = once.structuredContent
        self.text = Raw(encode(once.content[0]))

    def result(self) -> CallToolResult:
        # a fresh result each call: the core may still set its era's fields on it
        text: Any = self.text  # encoded as the TextContent block it holds
        return CallToolResult(content=[text], structuredContent=self.structured)


def envelope_error(err: ToolError) -> CallToolResult:
    return _result(Envelope(success=False, error=ErrorBody(err.code, err.message, err.retryable, err.details)),
                   True)
