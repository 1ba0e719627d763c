"""One reply path, in the core alone: admission returns the admitted request or its refusal,
`respond` a `Reply` record (bytes, error code, tool) that nobody reads back, a tool's failure
becomes the envelope in `ServerCore.call_tool` only, and one function says which notifications
a registry change means for every transport."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from msgspec import Raw

from specactor.protocol import http_rules
from specactor.protocol.admission import Admitted, admit
from specactor.protocol.context import RequestContext
from specactor.protocol.envelope import Encoded
from specactor.protocol.errors import INVALID_PARAMS, INVALID_REQUEST, NotFound, ToolError
from specactor.protocol.frames import Incoming, Reply, parse
from specactor.protocol.registry import Registry, encoded_contents, resource_contents
from specactor.protocol.server import Listener, ServerCore
from specactor.protocol.session import Session
from specactor.protocol.versions import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from specactor.wire import mcp as w
from specactor.wire.arguments import ToolInput
from specactor.wire.mcp import CallToolResult, TextContent, Tool

ENVELOPE = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}


class TextIn(ToolInput):
    text: str


class TextOut(msgspec.Struct, omit_defaults=True):
    text: str
    number: float = 0.0


class Nothing:
    """A peer and a runtime that are never used by these handlers."""

    async def notify(self, method: str, params: Any) -> None:
        raise AssertionError("unused")

    async def request(self, method: str, params: Any, timeout: float) -> Any:
        raise AssertionError("unused")

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("unused")

    async def run_sync(self, fn: Any, *args: Any) -> Any:
        raise AssertionError("unused")

    async def sleep_forever(self) -> None:
        raise AssertionError("unused")


def core() -> ServerCore:
    registry = Registry()

    @registry.tool("echo", description="echo", input=TextIn, output=TextOut)
    async def echo(args: TextIn, ctx: RequestContext) -> TextOut:
        if args.text == "missing":
            raise NotFound("thing", "x")
        if args.text == "crash":
            raise RuntimeError("secret")
        return TextOut(args.text, float("inf") if args.text == "inf" else 0.0)

    async def own_error(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return CallToolResult(content=[TextContent(text="no")], isError=True)

    registry.add_tool(Tool(name="own_error", description="its own error result", inputSchema={"type": "object"}),
                      own_error)
    return ServerCore(registry, name="t", version="0")


def request(method: str, params: dict[str, Any], ident: int = 1) -> Incoming:
    (msg,) = parse(msgspec.json.encode({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}),
                   batches=False).messages
    return msg


def initialized() -> Session:
    session = Session()
    reply = admit(request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "c", "version": "0"}}), session)
    assert isinstance(reply, Admitted)
    return session


async def call(server: ServerCore, session: Session, name: str, arguments: dict[str, Any]) -> Reply:
    req = admit(request("tools/call", {"name": name, "arguments": arguments}), session)
    assert isinstance(req, Admitted)
    return await server.respond(req, session, Nothing(), Nothing())


async def test_respond_answers_with_the_bytes_the_error_code_and_the_tool() -> None:
    server, session = core(), initialized()
    ok = await call(server, session, "echo", {"text": "hi"})
    assert (ok.code, ok.tool_error, ok.error, ok.tool) == (None, None, None, "echo")
    assert msgspec.json.decode(ok.data)["result"]["structuredContent"]["data"] == {"text": "hi"}
    unknown = await call(server, session, "nope", {})
    assert (unknown.code, unknown.error, unknown.tool) == (INVALID_PARAMS, str(INVALID_PARAMS), "nope")
    assert msgspec.json.decode(unknown.data)["error"]["code"] == INVALID_PARAMS


@pytest.mark.parametrize(("text", "code"), [("missing", "NOT_FOUND"), ("crash", "INTERNAL"), ("inf", "INTERNAL"),
                                            ("", None)])
async def test_a_tool_failure_becomes_the_envelope_with_its_code_beside_it(text: str, code: str | None) -> None:
    reply = await call(core(), initialized(), "echo", {"text": text})
    assert (reply.code, reply.tool_error) == (None, code)
    envelope = msgspec.json.decode(reply.data)["result"]["structuredContent"]
    assert envelope["success"] is (code is None)
    if code is not None:
        assert envelope["error"]["code"] == code and "secret" not in envelope["error"]["message"]


async def test_invalid_arguments_and_a_raw_handlers_own_error_result_carry_their_codes() -> None:
    server, session = core(), initialized()
    assert (await call(server, session, "echo", {"text": 1})).tool_error == "INVALID_INPUT"
    assert (await call(server, session, "echo", {"text": "a", "extra": 1})).tool_error == "INVALID_INPUT"
    assert (await call(server, session, "own_error", {})).tool_error == "TOOL_ERROR"


async def test_a_typed_handler_lets_its_failure_propagate_for_the_core_to_wrap() -> None:
    server, session = core(), initialized()
    req = admit(request("tools/call", {"name": "echo"}), session)
    assert isinstance(req, Admitted)
    ctx = server.context(req, session, Nothing(), Nothing())
    handler = server.registry.tools["echo"].handler
    with pytest.raises(ToolError) as raised:
        await handler(Raw(b'{"text":"missing"}'), ctx)
    assert raised.value.code == "NOT_FOUND"
    with pytest.raises(ToolError, match="infinite or NaN"):
        await handler(Raw(b'{"text":"inf"}'), ctx)
    with pytest.raises(ToolError) as raised:
        await handler(Raw(b'{"text":2}'), ctx)
    assert raised.value.code == "INVALID_INPUT"


def test_admission_leaves_the_message_as_it_was_and_names_the_tool() -> None:
    msg = request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    before = msgspec.structs.asdict(msg.frame), msg.raw
    req = admit(msg, initialized())
    assert isinstance(req, Admitted) and (req.id, req.method, req.tool) == (1, "tools/call", "echo")
    assert isinstance(req.params, w.CallToolParams)
    assert (msgspec.structs.asdict(msg.frame), msg.raw) == before
    assert not hasattr(msg, "decoded") and not hasattr(msg, "tool_error")


def test_initialize_in_a_batch_is_refused_before_it_touches_the_session() -> None:
    session = Session()
    refused = admit(request("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                           "clientInfo": {"name": "c", "version": "0"}}), session, in_batch=True)
    assert isinstance(refused, Reply) and refused.code == INVALID_REQUEST
    assert (session.era, session.protocol_version) == ("new", None)


def test_a_refused_tools_call_still_names_its_tool() -> None:
    refused = admit(request("tools/call", {"name": "echo", "_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}),
                    Session())
    assert isinstance(refused, Reply) and (refused.code, refused.tool) == (INVALID_PARAMS, "echo")


def test_the_http_precheck_and_admission_refuse_a_missing_envelope_in_the_same_words() -> None:
    msg = request("tools/list", {"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}})
    by_http = http_rules.refuse_modern_post(msg, {"mcp-method": "tools/list"}, lambda tool: None)
    by_core = admit(msg, Session())
    assert isinstance(by_http, Reply) and isinstance(by_core, Reply)
    assert by_http.data == by_core.data and by_http.code == INVALID_PARAMS
    assert http_rules.modern_status(by_http) == 400
    assert http_rules.refuse_modern_post(request("tools/list", {"_meta": ENVELOPE}), {"mcp-method": "tools/list"},
                                         lambda tool: None) is None


def test_deliveries_reach_listen_streams_and_initialized_handshake_sessions_alike() -> None:
    server = core()
    listening, legacy, uninitialized, modern = Nothing(), Nothing(), Nothing(), Nothing()
    server.listeners[("s", "sub")] = Listener("sub", w.SubscriptionFilter(toolsListChanged=True,
                                                                          resourceSubscriptions=["r://a"]), listening)
    subscribed = initialized()
    subscribed.initialized = True
    subscribed.subscriptions.add("r://a")
    sessions = [(subscribed, legacy), (initialized(), uninitialized), (Session(era="modern"), modern)]
    assert server.deliveries("tools", None, sessions) == [
        (legacy, "notifications/tools/list_changed", {}),
        (listening, "notifications/tools/list_changed", {"_meta": {"io.modelcontextprotocol/subscriptionId": "sub"}}),
    ]
    assert server.deliveries("resource", "r://a", sessions) == [
        (legacy, "notifications/resources/updated", {"uri": "r://a"}),
        (listening, "notifications/resources/updated",
         {"uri": "r://a", "_meta": {"io.modelcontextprotocol/subscriptionId": "sub"}}),
    ]
    assert server.deliveries("prompts", None, sessions) == [(legacy, "notifications/prompts/list_changed", {})]
    assert server.deliveries("resource", "r://b", sessions) == []


def encoded_core(shared: Encoded) -> ServerCore:
    """A core whose tool `cached` answers the one pre-encoded output, as a cached listing does."""
    registry = Registry()

    @registry.tool("cached", description="a cached listing", input=TextIn, output=TextOut)
    async def cached(args: TextIn, ctx: RequestContext) -> Encoded | TextOut:
        return shared if args.text == "encoded" else TextOut("a \"quoted\" listing\n", 0.5)

    return ServerCore(registry, name="t", version="0")


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
async def test_an_output_encoded_once_answers_the_same_bytes_as_the_output_itself_in_every_era(
        version: str) -> None:
    shared = Encoded(TextOut("a \"quoted\" listing\n", 0.5))
    server, session = encoded_core(shared), Session()
    assert isinstance(admit(request("initialize", {"protocolVersion": version, "capabilities": {},
                                                   "clientInfo": {"name": "c", "version": "0"}}), session), Admitted)
    plain = await call(server, session, "cached", {"text": "plain"})
    for _ in range(2):  # served twice: the shared bytes are not consumed or changed by a call
        assert (await call(server, session, "cached", {"text": "encoded"})).data == plain.data
    result = msgspec.json.decode(plain.data)["result"]
    assert msgspec.json.decode(result["content"][0]["text"])["data"]["text"] == "a \"quoted\" listing\n"
    assert ("structuredContent" in result) is (version != "2025-03-26")


async def test_an_output_encoded_once_is_not_changed_by_a_modern_sessions_answer() -> None:
    shared = Encoded(TextOut("x"))
    server = encoded_core(shared)
    legacy = await call(server, initialized(), "cached", {"text": "encoded"})
    modern = admit(request("tools/call", {"name": "cached", "arguments": {"text": "encoded"}, "_meta": ENVELOPE}),
                   Session())
    assert isinstance(modern, Admitted)
    answer = msgspec.json.decode((await server.respond(modern, Session(era="modern"), Nothing(), Nothing())).data)
    assert answer["result"]["resultType"] == "complete"  # the modern era's fields, on its own answer
    again = await call(server, initialized(), "cached", {"text": "encoded"})
    assert again.data == legacy.data and "resultType" not in msgspec.json.decode(again.data)["result"]


def test_contents_encoded_once_are_the_bytes_of_the_contents_themselves() -> None:
    text = '{"specs": [{"id": "a \\"quoted\\" id"}]}\n'
    for mime in ("application/json", None):
        assert msgspec.json.encode(w.ReadResourceResult(contents=encoded_contents("airsspec:///specs", mime, text))) \
            == msgspec.json.encode(w.ReadResourceResult(contents=resource_contents("airsspec:///specs", mime, text)))
