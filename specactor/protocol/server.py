"""The MCP core: era and version rules, then one coroutine per method, returning reply bytes.

`admit` runs in arrival order and settles what order decides (the connection's era, the
negotiated version); `respond` may then run concurrently with other requests. Both are pure
apart from awaiting handlers, which reach I/O only through the actors they were given.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from msgspec import UNSET

from specactor.logsetup import get_logger
from specactor.protocol import versions as v
from specactor.protocol.context import LOG_LEVELS, Peer, RequestContext, Runtime
from specactor.protocol.envelope import envelope_error
from specactor.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND_LEGACY,
    UNSUPPORTED_PROTOCOL_VERSION,
    ProtocolError,
    ResourceNotFound,
    ToolError,
)
from specactor.protocol.frames import Incoming, error_response, result_response
from specactor.protocol.input_required import (
    ALLOWED_METHODS,
    InputRequired,
    InputRequiredResult,
    StateSigner,
    check_capabilities,
    scope_of,
)
from specactor.protocol.registry import Registry, check_prompt_arguments, prompt_result, resource_contents
from specactor.protocol.session import Session
from specactor.wire import mcp as w
from specactor.wire.codec import decoder_for

log = get_logger("specactor.protocol")

LEGACY_ONLY: Final = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe",
                                "resources/unsubscribe"})
MODERN_ONLY: Final = frozenset({"server/discover", "subscriptions/listen"})
# Long-lived by design: no request timeout applies.
OPEN_ENDED: Final = frozenset({"subscriptions/listen"})
SHARED: Final = frozenset({"tools/list", "tools/call", "resources/list", "resources/templates/list",
                           "resources/read", "prompts/list", "prompts/get", "completion/complete"})
KNOWN: Final = LEGACY_ONLY | MODERN_ONLY | SHARED
# Pure and cheap: answered in arrival order without a task of their own.
INLINE: Final = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe",
                           "resources/unsubscribe", "server/discover", "tools/list", "prompts/list",
                           "resources/templates/list"})

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

# Cache hints (2026-07-28): definitions change only when a toolset changes them, and then a
# list_changed notification follows; resource bodies are workspace files and change any time.
LIST_TTL_MS: Final = 60_000
READ_TTL_MS: Final = 0
MAX_COMPLETIONS: Final = 100


@dataclass
class Listener:
    """An open `subscriptions/listen` stream: its id, what it asked for, where it goes."""

    request_id: int | str
    filter: w.SubscriptionFilter
    peer: Peer


class ServerCore:
    """Routes admitted requests to the registry and shapes each result for the session's era.

    Args:
        registry: the tools, resources and prompts to serve.
        name, version: `serverInfo`.
        instructions: the text returned by `initialize` and `server/discover`.
        page_size: items per page of every list method.
    """

    def __init__(self, registry: Registry, *, name: str, version: str, instructions: str = "",
                 page_size: int = 100) -> None:
        self.registry = registry
        self.info = w.Implementation(name=name, version=version)
        self.info_meta: dict[str, Any] = {v.META_SERVER_INFO: {"name": name, "version": version}}
        self.instructions = instructions
        self.page_size = page_size
        self.signer = StateSigner()
        self.listeners: dict[tuple[str, int | str], Listener] = {}
        self._tool_cache: dict[str, list[w.Tool]] = {}
        registry.on_change(lambda _kind, _uri: self._tool_cache.clear())

    # ------------------------------------------------------------------ admission (in order)

    def accepts_batches(self, session: Session) -> bool:
        return session.era == "legacy" and v.accepts_batches(session.protocol_version or "")

    def admit(self, msg: Incoming, session: Session) -> bytes | None:
        """Decode params and apply the era rules. Returns an error reply, or None to go on."""
        method = msg.method
        if method not in KNOWN:
            return error_response(msg.id, METHOD_NOT_FOUND, f"Method not found: {method}")
        try:
            params = decoder_for(PARAMS[method]).decode(bytes(msg.frame.params) if msg.frame.params else b"{}")
        except msgspec.ValidationError as err:
            return error_response(msg.id, INVALID_PARAMS, f"Invalid params for {method}: {err}")
        msg.decoded = params
        meta = params.meta or {}
        enveloped = v.META_PROTOCOL_VERSION in meta
        if session.era == "new" and method != "initialize" and enveloped:
            refused = self._admit_modern(msg, method, meta)
            if refused is None:  # only an accepted request decides the era; a refused probe may fall back
                session.era = "modern"
            return refused
        if session.era == "modern":
            return self._admit_modern(msg, method, meta)
        if enveloped and method != "initialize":
            return error_response(msg.id, INVALID_REQUEST, "this connection serves the handshake protocol era; "
                                  "requests carrying the 2026-07-28 _meta envelope are not accepted on it")
        if method in MODERN_ONLY:
            return error_response(msg.id, INVALID_PARAMS, f"{method} needs the 2026-07-28 _meta envelope "
                                  f"('{v.META_PROTOCOL_VERSION}' and '{v.META_CLIENT_CAPABILITIES}')")
        if method == "initialize":
            assert isinstance(params, w.InitializeParams)
            if session.era == "legacy":
                return error_response(msg.id, INVALID_REQUEST, "Invalid Request: this session is already "
                                      f"initialized (protocol version {session.protocol_version})")
            session.era = "legacy"
            session.protocol_version = v.negotiate_legacy(params.protocolVersion)
            session.client_info = params.clientInfo
            session.client_capabilities = params.capabilities
            return None
        if session.era == "new" and method != "ping":
            return error_response(msg.id, INVALID_REQUEST, "Invalid Request: the session is not initialized; "
                                  "send initialize first, or a 2026-07-28 request with _meta")
        return None

    def _admit_modern(self, msg: Incoming, method: str, meta: dict[str, Any]) -> bytes | None:
        if method == "initialize":
            requested = msg.decoded.protocolVersion
            return error_response(msg.id, UNSUPPORTED_PROTOCOL_VERSION,
                                  "this connection serves the 2026-07-28 protocol; initialize is not accepted",
                                  {"supported": list(v.MODERN_VERSIONS), "requested": requested})
        if method in LEGACY_ONLY:
            return error_response(msg.id, METHOD_NOT_FOUND, f"Method not found: {method} "
                                  "(removed in protocol version 2026-07-28)")
        missing = [key for key in (v.META_PROTOCOL_VERSION, v.META_CLIENT_CAPABILITIES) if key not in meta]
        if missing:
            return error_response(msg.id, INVALID_PARAMS, "params._meta is missing the required envelope key(s): "
                                  + ", ".join(missing))
        version = meta[v.META_PROTOCOL_VERSION]
        if not isinstance(version, str):
            return error_response(msg.id, INVALID_PARAMS, f"_meta['{v.META_PROTOCOL_VERSION}'] must be a string")
        if version not in v.MODERN_VERSIONS:
            return error_response(msg.id, UNSUPPORTED_PROTOCOL_VERSION,
                                  f"unsupported protocol version {version!r}",
                                  {"supported": list(v.SUPPORTED_VERSIONS), "requested": version})
        if not isinstance(meta[v.META_CLIENT_CAPABILITIES], dict):
            return error_response(msg.id, INVALID_PARAMS,
                                  f"_meta['{v.META_CLIENT_CAPABILITIES}'] must be an object")
        level = meta.get(v.META_LOG_LEVEL)
        if level is not None and level not in LOG_LEVELS:
            return error_response(msg.id, INVALID_PARAMS, f"invalid _meta['{v.META_LOG_LEVEL}']: {level!r}")
        return None

    def notification(self, msg: Incoming, session: Session) -> int | str | None:
        """Apply a client notification; returns the request id it cancels, if any."""
        if msg.method == "notifications/initialized":
            session.initialized = True
        elif msg.method == "notifications/cancelled":
            try:
                params = decoder_for(w.CancelledParams).decode(bytes(msg.frame.params) or b"{}")
            except msgspec.ValidationError:
                return None
            return params.requestId
        return None

    # ------------------------------------------------------------------ responding

    def context(self, msg: Incoming, session: Session, peer: Peer, runtime: Runtime) -> RequestContext:
        meta = msg.decoded.meta or {}
        token = meta.get("progressToken")
        if session.era == "modern":
            level = meta.get(v.META_LOG_LEVEL)
            caps = meta.get(v.META_CLIENT_CAPABILITIES) or {}
        else:
            level, caps = session.log_level, session.client_capabilities
        assert msg.id is not None
        ctx = RequestContext(session=session, peer=peer, runtime=runtime, request_id=msg.id, method=msg.method,
                             progress_token=token if isinstance(token, (int, str)) else None,
                             log_level=level, client_capabilities=caps)
        if session.era == "modern" and msg.method in ALLOWED_METHODS:
            params = msg.decoded
            if isinstance(params.inputResponses, dict):
                ctx.input_responses = params.inputResponses
            if isinstance(params.requestState, str):
                ctx.request_state = self.signer.open(scope_of(msg.method, params), params.requestState)
        return ctx

    def runs_inline(self, msg: Incoming) -> bool:
        """Whether an admitted request is answered in the transport's task: the cheap methods of
        INLINE, and calls of tools whose handler cannot wait (`ToolEntry.inline`)."""
        if msg.method == "tools/call":
            entry = self.registry.tools.get(msg.decoded.name)
            return entry is not None and entry.inline
        return msg.method in INLINE

    async def respond(self, msg: Incoming, session: Session, peer: Peer, runtime: Runtime) -> bytes:
        """The reply to an admitted request: a result, or an error that never leaks a traceback."""
        assert msg.id is not None
        try:
            ctx = self.context(msg, session, peer, runtime)
            result = await self._route(msg, session, ctx)
        except InputRequired as need:
            if session.era != "modern" or msg.method not in ALLOWED_METHODS:
                log.error("input required outside a 2026-07-28 tools/call, prompts/get or resources/read",
                          method=msg.method)
                return error_response(msg.id, INTERNAL_ERROR, f"Internal error while handling {msg.method}")
            try:
                check_capabilities(need.requests, ctx.client_capabilities)
            except ProtocolError as err:
                return error_response(msg.id, err.code, err.message, err.data)
            result = InputRequiredResult(inputRequests=need.requests, resultType="input_required",
                                         meta=self.info_meta,
                                         requestState=self.signer.seal(scope_of(msg.method, msg.decoded), need.state))
            return result_response(msg.id, result)
        except ProtocolError as err:
            return error_response(msg.id, err.code, err.message, err.data)
        except ResourceNotFound as err:
            if session.era == "modern":
                return error_response(msg.id, INVALID_PARAMS, err.reason, {"uri": err.uri})
            return error_response(msg.id, RESOURCE_NOT_FOUND_LEGACY, err.reason, {"uri": err.uri})
        except Exception:
            log.exception("request handler raised", method=msg.method)
            return error_response(msg.id, INTERNAL_ERROR, f"Internal error while handling {msg.method}")
        if isinstance(result, w.CallToolResult) and result.isError is True:
            msg.tool_error = _tool_error_code(result)
        if session.era == "modern":
            result.resultType = "complete"
            result.meta = {**result.meta, **self.info_meta} if isinstance(result.meta, dict) else self.info_meta
            if isinstance(result, w.CacheableResult):
                public = msg.method not in ("resources/read",)
                result.ttlMs = LIST_TTL_MS if public else READ_TTL_MS
                result.cacheScope = "public" if public else "private"
        return result_response(msg.id, result)

    async def _route(self, msg: Incoming, session: Session, ctx: RequestContext) -> w.Result:
        p = msg.decoded
        match msg.method:
            case "tools/call":
                return await self.call_tool(p, session, ctx)
            case "resources/read":
                return await self.read_resource(p, ctx)
            case "prompts/get":
                return await self.get_prompt(p, ctx)
            case "completion/complete":
                return await self.complete(p, ctx)
            case "subscriptions/listen":
                return await self.listen(msg, p, session, ctx)
            case "resources/list":
                return await self.list_resources(p, ctx)
            case "tools/list":
                tools, cursor = self._page("tools", self._tools_for(session), p.cursor)
                return w.ListToolsResult(tools=tools, nextCursor=cursor)
            case "prompts/list":
                prompts = [e.prompt for e in self.registry.prompts.values()]
                page, cursor = self._page("prompts", prompts, p.cursor)
                return w.ListPromptsResult(prompts=page, nextCursor=cursor)
            case "resources/templates/list":
                templates = [t.template for t in self.registry.templates]
                page, cursor = self._page("templates", templates, p.cursor)
                return w.ListResourceTemplatesResult(resourceTemplates=page, nextCursor=cursor)
            case "initialize":
                return w.InitializeResult(protocolVersion=session.protocol_version or v.LATEST_LEGACY,
                                          capabilities=self.capabilities(session), serverInfo=self.info,
                                          instructions=self.instructions or UNSET)
            case "server/discover":
                return w.DiscoverResult(supportedVersions=list(v.SUPPORTED_VERSIONS),
                                        capabilities=self.capabilities(session),
                                        instructions=self.instructions or UNSET)
            case "logging/setLevel":
                session.log_level = p.level
                return w.EmptyResult()
            case "resources/subscribe":
                session.subscriptions.add(p.uri)
                return w.EmptyResult()
            case "resources/unsubscribe":
                session.subscriptions.discard(p.uri)
                return w.EmptyResult()
            case "ping":
                return w.EmptyResult()
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {msg.method}")  # pragma: no cover

    def capabilities(self, session: Session) -> dict[str, Any]:
        # Legacy: delivered on stdio or the session's GET stream; 2026-07-28: on listen streams.
        return {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "completions": {},
            "logging": {},
        }

    async def listen(self, msg: Incoming, p: w.ListenParams, session: Session, ctx: RequestContext) -> w.Result:
        """`subscriptions/listen`: acknowledge, then deliver matching notifications until cancelled."""
        assert msg.id is not None
        key = (session.id, msg.id)
        self.listeners[key] = Listener(msg.id, p.notifications, ctx.peer)
        try:
            await ctx.peer.notify("notifications/subscriptions/acknowledged", {
                "notifications": p.notifications, "_meta": {v.META_SUBSCRIPTION_ID: msg.id}})
            await ctx.runtime.sleep_forever()
        finally:
            self.listeners.pop(key, None)
        return w.EmptyResult()  # pragma: no cover - sleep_forever only ends by cancellation

    def deliveries(self, kind: str, uri: str | None) -> list[tuple[Peer, str, dict[str, Any]]]:
        """The notifications a change means for the open listen streams: (peer, method, params)."""
        out: list[tuple[Peer, str, dict[str, Any]]] = []
        for listener in self.listeners.values():
            wanted = listener.filter
            if kind == "resource":
                subs = wanted.resourceSubscriptions
                if isinstance(subs, list) and uri in subs:
                    out.append((listener.peer, "notifications/resources/updated",
                                {"uri": uri, "_meta": {v.META_SUBSCRIPTION_ID: listener.request_id}}))
                continue
            flag = {"tools": wanted.toolsListChanged, "prompts": wanted.promptsListChanged,
                    "resources": wanted.resourcesListChanged}.get(kind)
            if flag is True:
                out.append((listener.peer, f"notifications/{kind}/list_changed",
                            {"_meta": {v.META_SUBSCRIPTION_ID: listener.request_id}}))
        return out

    # ------------------------------------------------------------------ methods

    def _tools_for(self, session: Session) -> list[w.Tool]:
        version = session.protocol_version or v.LATEST_MODERN
        key = version if not v.has_structured_output(version) else "structured"
        cached = self._tool_cache.get(key)
        if cached is None:
            tools = [e.tool for e in self.registry.tools.values()]
            if key != "structured":  # 2025-03-26 knows neither outputSchema nor titles
                tools = [w.Tool(name=t.name, inputSchema=t.inputSchema, description=t.description,
                                annotations=t.annotations) for t in tools]
            cached = self._tool_cache[key] = tools
        return cached

    async def call_tool(self, p: w.CallToolParams, session: Session, ctx: RequestContext) -> w.CallToolResult:
        entry = self.registry.tools.get(p.name)
        if entry is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {p.name}", {"tool": p.name})
        try:
            result = await entry.handler(p.arguments, ctx)
        except ToolError as err:
            result = envelope_error(err)
        except (ProtocolError, InputRequired):
            raise
        except Exception:
            log.exception("tool handler raised", tool=p.name)
            result = envelope_error(ToolError("INTERNAL", f"tool '{p.name}' failed unexpectedly; "
                                              "the server log has the details"))
        if session.protocol_version is not None and not v.has_structured_output(session.protocol_version):
            result.structuredContent = UNSET
        return result

    async def read_resource(self, p: w.ReadResourceParams, ctx: RequestContext) -> w.ReadResourceResult:
        found = self.registry.find_resource(p.uri)
        if found is None:
            raise ResourceNotFound(p.uri)
        handler, params, mime = found
        body = await handler(p.uri, params, ctx)
        contents = resource_contents(p.uri, mime, body)
        if not contents:
            raise ResourceNotFound(p.uri)
        return w.ReadResourceResult(contents=contents)

    async def list_resources(self, p: w.PaginatedParams, ctx: RequestContext) -> w.ListResourcesResult:
        resources = [e.resource for e in self.registry.resources.values()]
        for tpl in self.registry.templates:
            if tpl.lister is not None:
                resources.extend(await tpl.lister(ctx))
        page, cursor = self._page("resources", resources, p.cursor)
        return w.ListResourcesResult(resources=page, nextCursor=cursor)

    async def get_prompt(self, p: w.GetPromptParams, ctx: RequestContext) -> w.GetPromptResult:
        entry = self.registry.prompts.get(p.name)
        if entry is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown prompt: {p.name}", {"prompt": p.name})
        args = p.arguments or {}
        check_prompt_arguments(entry.prompt, args)
        desc = entry.prompt.description
        return prompt_result(await entry.handler(args, ctx), desc if isinstance(desc, str) else None)

    async def complete(self, p: w.CompleteParams, ctx: RequestContext) -> w.CompleteResult:
        completions = None
        if p.ref.type == "ref/prompt":
            entry = self.registry.prompts.get(p.ref.name or "")
            if entry is None:
                raise ProtocolError(INVALID_PARAMS, f"Unknown prompt: {p.ref.name}", {"prompt": p.ref.name})
            completions = entry.completions
        else:
            tpl = next((t for t in self.registry.templates if t.template.uriTemplate == p.ref.uri), None)
            if tpl is None:
                raise ProtocolError(INVALID_PARAMS, f"Unknown resource template: {p.ref.uri}", {"uri": p.ref.uri})
            completions = tpl.completions
        completer = completions.get(p.argument.name)
        values: list[str] = []
        if completer is not None:
            context = (p.context.arguments if p.context else None) or {}
            values = await completer(p.argument.value, context, ctx)
        return w.CompleteResult(completion=w.Completion(values=values[:MAX_COMPLETIONS], total=len(values),
                                                        hasMore=len(values) > MAX_COMPLETIONS))

    # ------------------------------------------------------------------ pagination

    def _page(self, kind: str, items: list[Any], cursor: str | None) -> tuple[list[Any], Any]:
        start = 0 if cursor is None else _decode_cursor(kind, cursor)
        end = start + self.page_size
        return items[start:end], (_encode_cursor(kind, end) if end < len(items) else UNSET)


def _tool_error_code(result: w.CallToolResult) -> str:
    """The envelope code of an `isError` tool result (only failures pay for this decode)."""
    content: Any = result.structuredContent
    try:
        data: Any = msgspec.json.decode(bytes(content)) if isinstance(content, msgspec.Raw) else content
        code = data["error"]["code"]
    except (KeyError, TypeError, msgspec.DecodeError):
        return "TOOL_ERROR"
    return code if isinstance(code, str) else "TOOL_ERROR"


def _encode_cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode()


def _decode_cursor(kind: str, cursor: str) -> int:
    try:
        got_kind, _, offset = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        value = int(offset)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        value, got_kind = -1, ""
    if got_kind != kind or value < 0:
        raise ProtocolError(INVALID_PARAMS, f"Invalid cursor: {cursor!r}", {"cursor": cursor})
    return value
