"""Admission: the era and version rules every request passes, in arrival order, before it runs.

`admit` decodes a request's params for its method and settles what order decides: the
connection's era (legacy by `initialize`, modern by the first accepted `_meta` envelope) and
the negotiated version. It returns the `Admitted` request, or the error `Reply` it earns, and
never raises. The rules of the 2026-07-28 envelope live here once: the HTTP transport asks
`refuse_modern_method` and `refuse_envelope` before it checks the headers that mirror them.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from specactor.protocol import versions as v
from specactor.protocol.context import LOG_LEVELS
from specactor.protocol.errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION
from specactor.protocol.frames import Incoming, Reply, error_reply
from specactor.protocol.session import Session
from specactor.wire import mcp as w
from specactor.wire.codec import decoder_for

LEGACY_ONLY: Final = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe",
                                "resources/unsubscribe"})
MODERN_ONLY: Final = frozenset({"server/discover", "subscriptions/listen"})
SHARED: Final = frozenset({"tools/list", "tools/call", "resources/list", "resources/templates/list",
                           "resources/read", "prompts/list", "prompts/get", "completion/complete"})
KNOWN: Final = LEGACY_ONLY | MODERN_ONLY | SHARED
ENVELOPE: Final = (v.META_PROTOCOL_VERSION, v.META_CLIENT_CAPABILITIES)

PARAMS: Final[dict[str, type[w.Params]]] = {
    "initialize": w.InitializeParams,
    "ping": w.Params,
    "server/discover": w.Params,
    "logging/setLevel": w.SetLevelParams,
    "tools/list": w.PaginatedParams,
    "tools/call": w.CallToolParams,
    "resources/list": w.PaginatedParams,
    "resources/templates/list": w.PaginatedParams,
    "resources/read": w.ReadResourceParams,
    "resources/subscribe": w.ReadResourceParams,
    "resources/unsubscribe": w.ReadResourceParams,
    "prompts/list": w.PaginatedParams,
    "prompts/get": w.GetPromptParams,
    "completion/complete": w.CompleteParams,
    "subscriptions/listen": w.ListenParams,
}


class Admitted(msgspec.Struct):
    """A request the era rules accepted: its id, method, typed params, and the tool it calls
    (`""` unless the method is `tools/call`)."""

    id: int | str
    method: str
    params: Any
    tool: str = ""


def accepts_batches(session: Session) -> bool:
    """Whether `session` takes JSON-RPC batches: only the 2025-03-26 handshake era does."""
    return session.era == "legacy" and v.accepts_batches(session.protocol_version or "")


def admit(msg: Incoming, session: Session, *, in_batch: bool = False) -> Admitted | Reply:
    """Decode `msg`'s params and apply the era rules, updating `session` when `msg` settles its
    era or version. `msg` must be a request (it has an id)."""
    method, ident = msg.method, msg.id
    assert ident is not None
    if method not in KNOWN:
        return error_reply(ident, METHOD_NOT_FOUND, f"Method not found: {method}")
    try:
        params: Any = decoder_for(PARAMS[method]).decode(bytes(msg.frame.params) if msg.frame.params else b"{}")
    except msgspec.ValidationError as err:
        return error_reply(ident, INVALID_PARAMS, f"Invalid params for {method}: {err}")
    tool = params.name if method == "tools/call" else ""
    meta = params.meta or {}
    enveloped = v.META_PROTOCOL_VERSION in meta
    if session.era == "new" and method != "initialize" and enveloped:
        refused = _refuse_modern(ident, method, params, meta, tool)
        if refused is None:  # only an accepted request decides the era; a refused probe may fall back
            session.era = "modern"
            return Admitted(ident, method, params, tool)
        return refused
    if session.era == "modern":
        return _refuse_modern(ident, method, params, meta, tool) or Admitted(ident, method, params, tool)
    if enveloped and method != "initialize":
        return error_reply(ident, INVALID_REQUEST, "this connection serves the handshake protocol era; requests "
                           "carrying the 2026-07-28 _meta envelope are not accepted on it", tool=tool)
    if method in MODERN_ONLY:
        return error_reply(ident, INVALID_PARAMS, f"{method} needs the 2026-07-28 _meta envelope "
                           f"('{v.META_PROTOCOL_VERSION}' and '{v.META_CLIENT_CAPABILITIES}')")
    if method == "initialize":
        if session.era == "legacy":
            return error_reply(ident, INVALID_REQUEST, "Invalid Request: this session is already initialized "
                               f"(protocol version {session.protocol_version})")
        if in_batch:
            return error_reply(ident, INVALID_REQUEST, "Invalid Request: initialize cannot be part of a batch")
        session.era = "legacy"
        session.protocol_version = v.negotiate_legacy(params.protocolVersion)
        session.client_info = params.clientInfo
        session.client_capabilities = params.capabilities
    elif session.era == "new" and method != "ping":
        return error_reply(ident, INVALID_REQUEST, "Invalid Request: the session is not initialized; send "
                           "initialize first, or a 2026-07-28 request with _meta", tool=tool)
    return Admitted(ident, method, params, tool)


def refuse_modern_method(ident: int | str | None, method: str) -> Reply | None:
    """The error a method earns in the 2026-07-28 era when it is unknown or was removed from it."""
    if method not in KNOWN:
        return error_reply(ident, METHOD_NOT_FOUND, f"Method not found: {method}")
    if method in LEGACY_ONLY:
        return error_reply(ident, METHOD_NOT_FOUND, f"Method not found: {method} "
                           "(removed in protocol version 2026-07-28)")
    return None


def refuse_envelope(ident: int | str | None, meta: Any, tool: str = "") -> Reply | None:
    """The error a 2026-07-28 request earns when its `_meta` lacks a key of the envelope."""
    missing = [key for key in ENVELOPE if not isinstance(meta, dict) or key not in meta]
    if missing:
        return error_reply(ident, INVALID_PARAMS, "params._meta is missing the required envelope key(s): "
                           + ", ".join(missing), tool=tool)
    return None


def _refuse_modern(ident: int | str, method: str, params: Any, meta: dict[str, Any], tool: str) -> Reply | None:
    if method == "initialize":
        return error_reply(ident, UNSUPPORTED_PROTOCOL_VERSION,
                           "this connection serves the 2026-07-28 protocol; initialize is not accepted",
                           {"supported": list(v.MODERN_VERSIONS), "requested": params.protocolVersion})
    refused = refuse_modern_method(ident, method) or refuse_envelope(ident, meta, tool)
    if refused is not None:
        return refused
    version = meta[v.META_PROTOCOL_VERSION]
    if not isinstance(version, str):
        return error_reply(ident, INVALID_PARAMS, f"_meta['{v.META_PROTOCOL_VERSION}'] must be a string", tool=tool)
    if version not in v.MODERN_VERSIONS:
        return error_reply(ident, UNSUPPORTED_PROTOCOL_VERSION, f"unsupported protocol version {version!r}",
                           {"supported": list(v.SUPPORTED_VERSIONS), "requested": version}, tool=tool)
    if not isinstance(meta[v.META_CLIENT_CAPABILITIES], dict):
        return error_reply(ident, INVALID_PARAMS, f"_meta['{v.META_CLIENT_CAPABILITIES}'] must be an object",
                           tool=tool)
    level = meta.get(v.META_LOG_LEVEL)
    if level is not None and level not in LOG_LEVELS:
        return error_reply(ident, INVALID_PARAMS, f"invalid _meta['{v.META_LOG_LEVEL}']: {level!r}", tool=tool)
    return None
