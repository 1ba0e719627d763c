"""LangChain 1.x: `create_agent` with a scripted fake model calls specactor's tools over MCP (a `specactor
serve` child) or in-process, and gets their envelopes; `SpecactorContext` puts the session context in the system
prompt, reports a written file's violations in the tool's result, and marks the session ended."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="LangChain is not installed: pip install 'specactor[langchain]'")
pytest.importorskip("mcp", reason="the MCP client is not installed: pip install 'specactor[langchain]'")

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from specactor.adapters import EcosystemAdapter
from specactor.adapters.langchain import LangChainAdapter, SpecactorContext, appended, system_with
from specactor.context.reader import get_session_context
from tests.context.workspace import MINE, THEIRS, Workspace

pytestmark = pytest.mark.slow  # each test starts a `specactor serve` child


class ScriptedModel(GenericFakeChatModel):
    """The fake chat model, taking tools as a real one does (it answers from its script regardless)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self


class Capture(AgentMiddleware):
    """Records the system prompt every model call is given (placed after SpecactorContext: it sees its work)."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str | None] = []

    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
                        ) -> Any:
        self.prompts.append(request.system_prompt)
        return handler(request)

    async def awrap_model_call(self, request: ModelRequest[Any],
                               handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]) -> Any:
        self.prompts.append(request.system_prompt)
        return await handler(request)


def script(*steps: AIMessage) -> ScriptedModel:
    messages: Iterator[AIMessage | str] = iter(steps)
    return ScriptedModel(messages=messages)


def calls(name: str, args: dict[str, Any], ident: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": ident, "type": "tool_call"}])


def tool_messages(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


@pytest.fixture(params=["stdio", "in-process"])
def adapter(ws: Workspace, request: pytest.FixtureRequest) -> Iterator[LangChainAdapter]:
    """The tools over MCP (a `specactor serve` child), or the server run in the test's process."""
    with LangChainAdapter(ws.root, in_process=request.param == "in-process") as adapter:
        yield adapter


def writer(root: Path) -> BaseTool:
    @tool
    def write_file(file_path: str, text: str) -> str:
        """Write `text` to the workspace file `file_path`."""
        target = root / file_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return f"wrote {file_path}"

    return write_file


def test_the_adapter_offers_the_seeds_tool_groups_and_session_context(adapter: LangChainAdapter, ws: Workspace) -> None:
    assert isinstance(adapter, EcosystemAdapter)
    assert [t.name for t in adapter.get_memory_tools()] == ["memory_add", "memory_search", "memory_delete"]
    assert [t.name for t in adapter.get_knowledge_tools()] == ["knowledge_query", "knowledge_show", "knowledge_check"]
    assert [t.name for t in adapter.get_sync_tools()] == ["sync_now", "sync_status"]
    add = adapter.get_memory_tools()[0]
    listed = next(t for t in adapter.link.list_tools() if t.name == "memory_add")
    assert add.args_schema == listed.input_schema and "content" in add.args
    context = adapter.get_session_context()
    assert context == get_session_context(ws.root) and context.startswith("<specactor-context>")


def test_an_agent_sees_the_context_in_its_system_prompt_and_gets_envelopes_from_memory_tools(
        adapter: LangChainAdapter, ws: Workspace) -> None:
    capture = Capture()
    model = script(calls("memory_add", {"content": "The shop's cache is Redis 7.", "layer": "project"}, "c1"),
                   calls("memory_search", {"query": "shop cache Redis", "threshold": 0.1}, "c2"),
                   AIMessage(content="Noted."))
    agent = create_agent(model, adapter.get_memory_tools(), system_prompt="You help with the shop.",
                         middleware=[SpecactorContext(ws.root), capture])
    state = agent.invoke({"messages": [{"role": "user", "content": "Remember our cache."}]})

    assert len(capture.prompts) == 3
    prompt = capture.prompts[0]
    assert prompt is not None and prompt.startswith("You help with the shop.\n\n<specactor-context>")
    assert "adr-042-database-selection" in prompt and "pol-eval" in prompt and MINE[0] in prompt
    assert THEIRS not in prompt and prompt.rstrip().endswith("</specactor-context>")
    results = tool_messages(state)
    added = json.loads(str(results["c1"].content))
    assert added["success"] is True and added["data"]["memoryId"].startswith("mem_")
    assert results["c1"].artifact == added
    found = json.loads(str(results["c2"].content))
    assert found["success"] is True
    assert added["data"]["memoryId"] in [r["memoryId"] for r in found["data"]["results"]]
    assert state["specactor_session"] == "ended" and state["specactor_context"] == prompt.split("\n\n", 1)[1]
    assert "Redis 7" not in prompt and "The shop's cache is Redis 7." in get_session_context(ws.root)  # next session


def test_an_async_agent_gets_the_violations_of_the_file_it_wrote_in_the_tool_result(
        adapter: LangChainAdapter, ws: Workspace) -> None:
    capture = Capture()
    model = script(calls("write_file", {"file_path": "src/app.py", "text": "x = 1\nresult = eval(data)\n"}, "w1"),
                   calls("write_file", {"file_path": "src/clean.py", "text": "x = 1\n"}, "w2"),
                   calls("memory_search", {"query": "deploy shop", "threshold": 0.1}, "s1"),
                   AIMessage(content="Done."))
    agent = create_agent(model, [writer(ws.root), *adapter.get_memory_tools()],
                         middleware=[SpecactorContext(ws.root), capture])
    state = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "Write the app."}]}))

    results = tool_messages(state)
    bad = str(results["w1"].content)
    assert bad.startswith("wrote src/app.py\n\n")
    assert "[block] (blocking) src/app.py:2 violates pol-eval" in bad and "eval is not allowed" in bad
    assert str(results["w2"].content) == "wrote src/clean.py"
    searched = json.loads(str(results["s1"].content))
    assert searched["success"] is True and MINE[0] in [r["content"] for r in searched["data"]["results"]]
    prompt = capture.prompts[0]
    assert prompt is not None and prompt.startswith("<specactor-context>")  # no system prompt of its own
    assert state["specactor_session"] == "ended"


def test_invalid_arguments_come_back_as_the_servers_invalid_input_envelope(adapter: LangChainAdapter) -> None:
    search = next(t for t in adapter.get_memory_tools() if t.name == "memory_search")
    message = search.invoke({"type": "tool_call", "id": "t1", "name": "memory_search", "args": {"query": 7}})
    envelope = json.loads(message.content)
    assert envelope["success"] is False and envelope["error"]["code"] == "INVALID_INPUT"
    assert envelope["error"]["details"]["field"] == "query"


def test_only_writing_tools_are_checked_and_named_writers_count(ws: Workspace) -> None:
    (ws.root / "src" / "bad.py").write_text("eval(x)\n")
    middleware = SpecactorContext(ws.root, writers=["save"])
    assert "pol-eval" in middleware.violations("write_file", {"file_path": "src/bad.py"})
    assert "pol-eval" in middleware.violations("save", {"path": "src/bad.py"})
    assert middleware.violations("memory_search", {"path": "src/bad.py"}) == ""
    failed = ToolMessage(content="disk full", tool_call_id="x", status="error")
    assert middleware.violations("write_file", {"file_path": "src/bad.py"}, failed) == ""


def test_context_and_reports_are_added_after_what_is_there() -> None:
    assert system_with(None, "ctx").content == "ctx"
    blocks = system_with(system_with(None, "a").model_copy(update={"content": [{"type": "text", "text": "a"}]}), "ctx")
    assert blocks.content == [{"type": "text", "text": "a"}, {"type": "text", "text": "ctx"}]
    message = ToolMessage(content="ok", tool_call_id="x")
    assert appended(message, "").content == "ok" and appended(message, "report").content == "ok\n\nreport"


async def test_tools_and_context_work_over_http_with_a_bearer_token(ws: Workspace) -> None:
    import trio

    from tests.http.support import server_env, subprocess_server

    env = server_env(SPECACTOR_HTTP_TOKEN="s3cret", SPECACTOR_MEMORY_DB=str(ws.db),
                     SPECACTOR_KNOWLEDGE_REPO=str(ws.knowledge))
    args = ["-m", "specactor", "serve", "--http", "--port", "0", "--root", str(ws.root), "--no-session-log"]
    async with subprocess_server(args, env, ws.root) as server:
        started = await server.record(lambda r: r.get("msg") == "specactor started")
        with LangChainAdapter(url=started["urls"][0], token="s3cret") as remote, trio.fail_after(60):
            add = next(t for t in await trio.to_thread.run_sync(remote.get_memory_tools) if t.name == "memory_add")
            message = await trio.to_thread.run_sync(add.invoke, {"type": "tool_call", "id": "h1", "name": "memory_add",
                                                                 "args": {"content": "HTTP works", "layer": "project"}})
            assert json.loads(message.content)["data"]["content"] == "HTTP works"
            context = await trio.to_thread.run_sync(remote.get_session_context)  # from specactor://context
        with LangChainAdapter(url=started["urls"][0], token="wrong", link=None) as refused, trio.fail_after(60):
            with pytest.raises(Exception, match="specactor could not be reached"):
                await trio.to_thread.run_sync(refused.get_tools)
    assert context.startswith("<specactor-context>") and "HTTP works" in context and "pol-eval" in context


def test_a_closed_link_connects_again_on_its_next_call(adapter: LangChainAdapter) -> None:
    assert adapter.link.call("sync_status", {})["success"] is True
    adapter.link.close()
    assert asyncio.run(adapter.link.acall("memory_search", {"query": "deploy"}))["success"] is True
    assert adapter.link.call("sync_status", {})["success"] is True
