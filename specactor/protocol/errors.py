"""Error vocabulary: JSON-RPC protocol errors and the seeds' tool-result error codes.

`ProtocolError` becomes a JSON-RPC error response. `ToolError` becomes a tool result with
`isError: true` and the seed's envelope `{success: false, error: {code, message, retryable,
details}}`, because the current specification wants tool failures visible to the model.
"""

from __future__ import annotations

from typing import Any, Final, Literal

# JSON-RPC 2.0
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

# AirsSpec seed domain codes (legacy range, kept for the AirsSpec toolset)
WORKSPACE_NOT_FOUND: Final = -32000
SPEC_NOT_FOUND: Final = -32001
PLAN_NOT_FOUND: Final = -32002  # same number as the legacy "resource not found"
INVALID_TRANSITION: Final = -32003
DEPENDENCY_NOT_SATISFIED: Final = -32004
VALIDATION_FAILED: Final = -32005

# MCP
RESOURCE_NOT_FOUND_LEGACY: Final = -32002
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

ToolErrorCode = Literal[
    "INVALID_INPUT", "NOT_FOUND", "PROVIDER_ERROR", "RATE_LIMITED", "UNAUTHORIZED", "CONFLICT", "TIMEOUT", "INTERNAL"
]

RETRYABLE: Final[dict[str, bool]] = {
    "INVALID_INPUT": False,
    "NOT_FOUND": False,
    "PROVIDER_ERROR": True,
    "RATE_LIMITED": True,
    "UNAUTHORIZED": False,  # an upstream refused our credentials: only a new key helps
    "CONFLICT": True,
    "TIMEOUT": True,
    "INTERNAL": False,
}


class ProtocolError(Exception):
    """A JSON-RPC error reply: `code`, a one-sentence `message`, optional `data`."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class ToolError(Exception):
    """A tool failure reported to the model as an `isError` result with the seed's envelope.

    Args:
        code: one of the seed's codes (INVALID_INPUT, NOT_FOUND, ...).
        message: a sentence naming the problem.
        details: structured context (the field, the id, the valid values, ...).
        retryable: defaults to the code's rule.
    """

    def __init__(
        self,
        code: ToolErrorCode,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.code: ToolErrorCode = code
        self.message = message
        self.details = details or {}
        self.retryable = RETRYABLE[code] if retryable is None else retryable


class NotFound(ToolError):
    """NOT_FOUND, carrying the id that was asked for."""

    def __init__(self, kind: str, ident: str) -> None:
        super().__init__("NOT_FOUND", f"{kind} '{ident}' was not found", {"id": ident, "kind": kind})


class ProviderError(ToolError):
    """A transient failure of an upstream provider; the registry retries it before surfacing."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__("PROVIDER_ERROR", message, details)


class RateLimited(ToolError):
    """The provider asked us to wait `retry_after` seconds; the registry waits, then retries."""

    def __init__(self, message: str, retry_after: float, details: dict[str, Any] | None = None) -> None:
        super().__init__("RATE_LIMITED", message, {**(details or {}), "retryAfter": retry_after})
        self.retry_after = retry_after


class ResourceNotFound(Exception):
    """Raised by a resource handler when its URI names nothing; the core answers per era."""

    def __init__(self, uri: str, reason: str | None = None) -> None:
        super().__init__(reason or f"Resource not found: {uri}")
        self.uri = uri
        self.reason = reason or f"Resource not found: {uri}"
