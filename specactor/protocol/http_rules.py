"""The Streamable HTTP transport's protocol rules, sans I/O: header checks, status codes, and
the DNS-rebinding guards. The HTTP actor moves bytes; every decision it makes is made here,
or in `admission`, whose envelope rules a 2026-07-28 POST meets before its headers are read.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

from specactor.protocol import versions as v
from specactor.protocol.admission import refuse_envelope, refuse_modern_method
from specactor.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    ProtocolError,
)
from specactor.protocol.frames import Incoming, Reply, error_reply
from specactor.wire.codec import any_decoder

LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_ENCODED = re.compile(r"^=\?base64\?(.*)\?=$", re.IGNORECASE)
_SESSION_ID = re.compile(r"^[\x21-\x7e]{1,256}$")
_NAMED: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
# 2026-07-28: errors that are the client's fault about the request's shape or headers.
_BAD_REQUEST: Final = frozenset({HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION,
                                 INVALID_PARAMS, PARSE_ERROR, INVALID_REQUEST})


def is_loopback(host: str) -> bool:
    return host.strip("[]").lower() in {"localhost", "127.0.0.1", "::1"} or host.startswith("127.")


def _hostname(value: str) -> str:
    if value.startswith("["):
        return value[: value.find("]") + 1].lower()
    return value.rsplit(":", 1)[0].lower() if value.count(":") == 1 else value.lower()


def host_allowed(host_header: str | None, allowed: list[str]) -> bool:
    """The `Host` header names this server: loopback, or a configured name (with or without port)."""
    if not host_header:
        return False
    name = _hostname(host_header)
    return name in LOOPBACK_HOSTS or host_header.lower() in allowed or name in allowed


def origin_allowed(origin: str | None, allowed: list[str]) -> bool:
    """A browser `Origin`, when present, must be a loopback origin or a configured one."""
    if origin is None:
        return True
    if origin in allowed:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and (parts.hostname or "") in {"localhost", "127.0.0.1", "::1"}


def valid_session_id(value: str) -> bool:
    return bool(_SESSION_ID.match(value))


def header_value(raw: str) -> str:
    """A header value, decoding the `=?base64?…?=` form used for non-ASCII values."""
    match = _ENCODED.match(raw.strip())
    if match is None:
        return raw.strip()
    try:
        return base64.b64decode(match.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ProtocolError(HEADER_MISMATCH, f"malformed base64 header value {raw!r}") from None


def check_modern_headers(headers: dict[str, str], method: str, params: dict[str, Any],
                         tool_schema: dict[str, Any] | None) -> None:
    """2026-07-28: headers must mirror the body. Raises -32020 naming the first mismatch."""
    meta = params.get("_meta") or {}
    version = headers.get("mcp-protocol-version")
    if version is not None and version != meta.get(v.META_PROTOCOL_VERSION):
        raise ProtocolError(HEADER_MISMATCH, f"MCP-Protocol-Version header {version!r} does not match "
                            f"_meta protocolVersion {meta.get(v.META_PROTOCOL_VERSION)!r}")
    got = headers.get("mcp-method")
    if got is None:
        raise ProtocolError(HEADER_MISMATCH, "the Mcp-Method header is required")
    if header_value(got) != method:
        raise ProtocolError(HEADER_MISMATCH, f"Mcp-Method header {got!r} does not match the body's method {method!r}")
    key = _NAMED.get(method)
    if key is not None:
        name = headers.get("mcp-name")
        if name is None:
            raise ProtocolError(HEADER_MISMATCH, f"the Mcp-Name header is required for {method}")
        if header_value(name) != params.get(key):
            raise ProtocolError(HEADER_MISMATCH, f"Mcp-Name header {name!r} does not match params.{key}")
    if tool_schema is not None:
        _check_param_headers(headers, params.get("arguments") or {}, tool_schema)


def _check_param_headers(headers: dict[str, str], arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    for prop, spec in (schema.get("properties") or {}).items():
        name = spec.get("x-mcp-header") if isinstance(spec, dict) else None
        if not isinstance(name, str) or prop not in arguments:
            continue
        got = headers.get(f"mcp-param-{name.lower()}")
        value = arguments[prop]
        expected = value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
        if got is None:
            raise ProtocolError(HEADER_MISMATCH, f"the Mcp-Param-{name} header is required (argument '{prop}')")
        if header_value(got) != expected:
            raise ProtocolError(HEADER_MISMATCH, f"Mcp-Param-{name} header does not match argument '{prop}'")


def refuse_modern_post(msg: Incoming, headers: dict[str, str],
                       input_schema: Callable[[str], dict[str, Any] | None]) -> Reply | None:
    """What a 2026-07-28 request earns before it reaches the core, or None to go on: an unknown
    or removed method (404), params that are not an object or lack the `_meta` envelope, and
    headers that do not mirror the body (400). `input_schema` names a tool's inputSchema."""
    refused = refuse_modern_method(msg.id, msg.method)
    if refused is not None:
        return refused
    try:
        params = any_decoder.decode(bytes(msg.frame.params) or b"{}")
    except msgspec.DecodeError:  # pragma: no cover - the frame's params were read as JSON already
        return error_reply(msg.id, PARSE_ERROR, "Parse error")
    if not isinstance(params, dict):
        return error_reply(msg.id, INVALID_PARAMS, "params must be an object")
    refused = refuse_envelope(msg.id, params.get("_meta"))
    if refused is not None:
        return refused
    name = params.get("name")
    schema = input_schema(name) if msg.method == "tools/call" and isinstance(name, str) else None
    try:
        check_modern_headers(headers, msg.method, params, schema)
    except ProtocolError as err:
        return error_reply(msg.id, err.code, err.message, err.data)
    return None


def modern_status(reply: Reply) -> int:
    """The HTTP status of a 2026-07-28 reply: 404 for an unknown method, 400 for a bad request."""
    if reply.code == METHOD_NOT_FOUND:
        return 404
    return 400 if reply.code in _BAD_REQUEST else 200


def legacy_status(reply: Reply) -> int:
    return 400 if reply.code in (PARSE_ERROR, INVALID_REQUEST) else 200


def is_modern(headers: dict[str, str], single: Incoming | None) -> bool:
    """Whether a POST is of the 2026-07-28 era: its version header says so, or its one message
    carries the `_meta` envelope (a quick look at the raw params; admission reads it properly)."""
    if headers.get("mcp-protocol-version") in v.MODERN_VERSIONS:
        return True
    return single is not None and bool(single.frame.params) and \
        v.META_PROTOCOL_VERSION.encode() in bytes(single.frame.params)
