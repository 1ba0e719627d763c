"""The MCP core: one coroutine per method, answering each admitted request with a `Reply`.

`respond` takes a request `admission.admit` accepted (in arrival order) and may run
concurrently with others. It is pure apart from awaiting handlers, which reach I/O only
through the actors they were given, and it never raises: a protocol error, a missing
resource or a crash becomes a JSON-RPC error, a tool's failure the seed's envelope (in
`call_tool`, the one place). `deliveries` says which notifications a registry change means.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any, Final

import msgspec
from msgspec import UNSET

from specactor.logsetup import get_logger
from specactor.protocol import versions as v
from specactor.protocol.admission import Admitted
from specactor.protocol.context import Peer, RequestContext, Runtime
from specactor.protocol.envelope import envelope_error
from specactor.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND_LEGACY,
    ProtocolError,
    ResourceNotFound,
    ToolError,
)
from specactor.protocol.frames import Incoming, Reply, error_reply, result_response
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

# Long-lived by design: no request timeout applies.
OPEN_ENDED: Final = frozenset({"subscriptions/listen"})
# Pure and cheap: answered in arrival order without a task of their own.
INLINE: Final = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe",
                           "resources/unsubscribe", "server/discover", "tools/list", "prompts/list",
                           "resources/templates/list"})

# Cache hints (2026-07-28): definitions change only when a toolset changes them, and then a
# list_changed notification follows; resource bodies are workspace files and change any time.
LIST_TTL_MS: Final = 60_000
READ_TTL_MS: Final = 0
MAX_COMPLETIONS: Final = 100


class Listener(msgspec.Struct):
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
        # Only a change of the tool list empties it (a resource update, every write, must not).
        registry.on_change(lambda kind, _uri: self._tool_cache.clear() if kind == "tools" else None)

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

    def context(self, req: Admitted, session: Session, peer: Peer, runtime: Runtime) -> RequestContext:
        meta = req.params.meta or {}
        token = meta.get("progressToken")
        if session.era == "modern":
            level = meta.get(v.META_LOG_LEVEL)
            caps = meta.get(v.META_CLIENT_CAPABILITIES) or {}
        else:
            level, caps = session.log_level, session.client_capabilities
        ctx = RequestContext(session=session, peer=peer, runtime=runtime, request_id=req.id, method=req.method,
                             progress_token=token if isinstance(token, (int, str)) else None,
                             log_level=level, client_capabilities=caps)
        if session.era == "modern" and req.method in ALLOWED_METHODS:
            params = req.params
            if isinstance(params.inputResponses, dict):
                ctx.input_responses = params.inputResponses
            if isinstance(params.requestState, str):
                ctx.request_state = self.signer.open(scope_of(req.method, params), params.requestState)
        return ctx

    def runs_inline(self, req: Admitted) -> bool:
        """Whether an admitted request is answered in the transport's task: the cheap methods of
        INLINE, and calls of tools whose handler cannot wait (`ToolEntry.inline`)."""
        if req.method == "tools/call":
            entry = self.registry.tools.get(req.tool)
            return entry is not None and entry.inline
        return req.method in INLINE

    async def respond(self, req: Admitted, session: Session, peer: Peer, runtime: Runtime) -> Reply:
        """The reply to an admitted request: a result, or an error that never leaks a traceback.

        Never raises an `Exception`: whatever a handler does becomes the reply (cancellation
        still propagates)."""
        ident, method = req.id, req.method
        result: w.Result
        tool_error: str | None = None
        try:
            ctx = self.context(req, session, peer, runtime)
            if method == "tools/call":
                result, tool_error = await self.call_tool(req.params, session, ctx)
            else:
                result = await self._route(req, session, ctx)
            if session.era == "modern":
                result.resultType = "complete"
                result.meta = {**result.meta, **self.info_meta} if isinstance(result.meta, dict) else self.info_meta
                if isinstance(result, w.CacheableResult):
                    public = method != "resources/read"
                    result.ttlMs = LIST_TTL_MS if public else READ_TTL_MS
                    result.cacheScope = "public" if public else "private"
            return Reply(result_response(ident, result), None, tool_error, req.tool)
        except InputRequired as need:
            return self._input_required(req, session, need)
        except ProtocolError as err:
            return error_reply(ident, err.code, err.message, err.data, tool=req.tool)
        except ResourceNotFound as err:
            code = INVALID_PARAMS if session.era == "modern" else RESOURCE_NOT_FOUND_LEGACY
            return error_reply(ident, code, err.reason, {"uri": err.uri})
        except Exception:
            log.exception("request handler raised", method=method)
            return error_reply(ident, INTERNAL_ERROR, f"Internal error while handling {method}", tool=req.tool)

    def _input_required(self, req: Admitted, session: Session, need: InputRequired) -> Reply:
        """A handler asked the client for input: an `input_required` result (2026-07-28 only)."""
        if session.era != "modern" or req.method not in ALLOWED_METHODS:
            log.error("input required outside a 2026-07-28 tools/call, prompts/get or resources/read",
                      method=req.method)
            return error_reply(req.id, INTERNAL_ERROR, f"Internal error while handling {req.method}", tool=req.tool)
        caps = req.params.meta.get(v.META_CLIENT_CAPABILITIES) or {}
        try:
            check_capabilities(need.requests, caps)
        except ProtocolError as err:
            return error_reply(req.id, err.code, err.message, err.data, tool=req.tool)
        result = InputRequiredResult(inputRequests=need.requests, resultType="input_required", meta=self.info_meta,
                                     requestState=self.signer.seal(scope_of(req.method, req.params), need.state))
        return Reply(result_response(req.id, result), tool=req.tool)

    async def _route(self, req: Admitted, session: Session, ctx: RequestContext) -> w.Result:
        p = req.params
        match req.method:
            case "resources/read":
                return await self.read_resource(p, ctx)
            case "prompts/get":
                return await self.get_prompt(p, ctx)
            case "completion/complete":
                return await self.complete(p, ctx)
            case "subscriptions/listen":
                return await self.listen(req.id, p, session, ctx)
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
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {req.method}")  # pragma: no cover

    def capabilities(self, session: Session) -> dict[str, Any]:
        # Legacy: delivered on stdio or the session's GET stream; 2026-07-28: on listen streams.
        return {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "completions": {},
            "logging": {},
        }

    async def listen(self, ident: int | str, p: w.ListenParams, session: Session, ctx: RequestContext) -> w.Result:
        """`subscriptions/listen`: acknowledge, then deliver matching notifications until cancelled."""
        key = (session.id, ident)
        self.listeners[key] = Listener(ident, p.notifications, ctx.peer)
        try:
            await ctx.peer.notify("notifications/subscriptions/acknowledged", {
                "notifications": p.notifications, "_meta": {v.META_SUBSCRIPTION_ID: ident}})
            await ctx.runtime.sleep_forever()
        finally:
            self.listeners.pop(key, None)
        return w.EmptyResult()  # pragma: no cover - sleep_forever only ends by cancellation

    def deliveries(self, kind: str, uri: str | None,
                   sessions: Iterable[tuple[Session, Peer]] = ()) -> list[tuple[Peer, str, dict[str, Any]]]:
        """The notifications a registry change means, as (peer, method, params): for the open
        listen streams (2026-07-28), and for the handshake-era `sessions` given with the peer
        that reaches each. `kind` and `uri` are `Registry.on_change`'s. Every transport fans
        changes out through this one function."""
        out: list[tuple[Peer, str, dict[str, Any]]] = []
        for session, peer in sessions:
            if session.era != "legacy" or not session.initialized:
                continue
            if kind != "resource":
                out.append((peer, f"notifications/{kind}/list_changed", {}))
            elif uri in session.subscriptions:
                out.append((peer, "notifications/resources/updated", {"uri": uri}))
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

    async def call_tool(self, p: w.CallToolParams, session: Session,
                        ctx: RequestContext) -> tuple[w.CallToolResult, str | None]:
        """Run a tool; its result and, when the result is an error, the envelope's code.

        The one place a handler's failure becomes the seed's envelope: a `ToolError` with its
        code, anything else as INTERNAL (logged, never shown). Protocol errors and input
        requests propagate, to become JSON-RPC errors or an `input_required` result."""
        entry = self.registry.tools.get(p.name)
        if entry is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {p.name}", {"tool": p.name})
        error: str | None = None
        try:
            result = await entry.handler(p.arguments, ctx)
            if result.isError is True:  # a raw handler's own error result: only failures pay for the decode
                error = _tool_error_code(result)
        except ToolError as err:
            result, error = envelope_error(err), err.code
        except (ProtocolError, InputRequired):
            raise
        except Exception:
            log.exception("tool handler raised", tool=p.name)
            result, error = envelope_error(ToolError("INTERNAL", f"tool '{p.name}' failed unexpectedly; "
                                                     "the server log has the details")), "INTERNAL"
        if session.protocol_version is not None and not v.has_structured_output(session.protocol_version):
            result.structuredContent = UNSET
        return result, error

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
