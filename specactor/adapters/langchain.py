"""specactor for LangChain 1.x (`pip install 'specactor[langchain]'`): tools, and the session hooks as middleware.

- `get_tools()`: a `StructuredTool` per tool the server lists, its `args_schema` the registry's JSON
  schema (LangChain does not validate a dict schema; the server does). Each call goes over MCP
  (`mcp_link`: a `specactor serve` child by stdio, or a running server by HTTP) or to the server
  run inside this process (`in_process`, `in_process=True`), sync or async; the
  result's content is specactor's envelope as JSON, and its artifact the envelope as a dict.
- `SpecactorContext`, an `AgentMiddleware` for `create_agent`: the seed's onSessionStart
  (`before_agent` reads the session context), context injection (`wrap_model_call` adds it to
  the system prompt), onToolUse (`wrap_tool_call` checks the files a writing tool changed against
  the binding constraints and appends the violations to its result) and onSessionEnd (`after_agent`).
- `LangChainAdapter`: the seed's `EcosystemAdapter` over both.

The context and the checks read the workspace's stores directly, as `specactor hook` does: no server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, NotRequired

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse, ToolCallRequest
    from langchain.agents.middleware.types import ExtendedModelResponse, OmitFromInput, ResponseT
    from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
    from langchain_core.tools import StructuredTool, ToolException
    from langgraph.runtime import Runtime
    from langgraph.types import Command
    from langgraph.typing import ContextT
    from mcp import MCPError
    from mcp.types import Tool
except ModuleNotFoundError as err:  # pragma: no cover - exercised without the extra installed
    raise ImportError(f"specactor.adapters.langchain needs LangChain and the MCP client ({err.name} is not "
                      "installed): pip install 'specactor[langchain]'") from err

from specactor.adapters import in_group
from specactor.adapters.mcp_link import Link, LinkError, SpecactorLink
from specactor.context.reader import Deadline, Sources, get_session_context
from specactor.domain.context import DEFAULT_BUDGET
from specactor.hooks.formats import HookInput, changed_paths
from specactor.hooks.run import forget, tool_use

CONTEXT_URI = "specactor://context"


def connect(root: str | Path | None = None, *, url: str | None = None, token: str | None = None,
            in_process: bool = False) -> Link:
    """A link to specactor: the server at `url` (with its bearer `token`); else, with `in_process`, the
    server run inside this process (`in_process.InProcessLink`); else `specactor serve --root root`."""
    if url:
        return SpecactorLink.http(url, token=token)
    if in_process:
        from specactor.adapters.in_process import InProcessLink

        return InProcessLink(root)
    return SpecactorLink.stdio(root)


def get_tools(link: Link | None = None, *, root: str | Path | None = None, url: str | None = None,
              token: str | None = None, names: Iterable[str] | None = None,
              in_process: bool = False) -> list[StructuredTool]:
    """specactor's tools as `StructuredTool`s, optionally only those in `names`.

    Args:
        link: the connection to use (default: `connect(root, url=url, token=token)`).
        names: the tools wanted; default every tool the server lists.

    Raises:
        LinkError: the server cannot be reached.
    """
    link = link or connect(root, url=url, token=token, in_process=in_process)
    wanted = None if names is None else set(names)
    return [structured_tool(link, t) for t in link.list_tools() if wanted is None or t.name in wanted]


def structured_tool(link: Link, tool: Tool) -> StructuredTool:
    """One specactor tool, called through `link`; a failure to reach the server is the tool's error text."""
    name = tool.name

    def call(**arguments: Any) -> tuple[str, dict[str, Any]]:
        try:
            return _content(link.call(name, arguments))
        except (LinkError, MCPError) as err:
            raise ToolException(f"specactor: {err}") from err

    async def acall(**arguments: Any) -> tuple[str, dict[str, Any]]:
        try:
            return _content(await link.acall(name, arguments))
        except (LinkError, MCPError) as err:
            raise ToolException(f"specactor: {err}") from err

    return StructuredTool(name=name, description=tool.description or name, args_schema=dict(tool.input_schema),
                          func=call, coroutine=acall, response_format="content_and_artifact",
                          handle_tool_error=True, metadata={"specactor": True})


def _content(envelope: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return json.dumps(envelope, ensure_ascii=False), envelope


# ---------------------------------------------------------------------- the middleware


class SpecactorState(AgentState[Any]):
    """The agent state the middleware adds: the session's context, and whether the session ended."""

    specactor_context: NotRequired[Annotated[str, OmitFromInput]]
    specactor_session: NotRequired[Annotated[str, OmitFromInput]]


class SpecactorContext(AgentMiddleware[SpecactorState, ContextT, ResponseT]):
    """The seed's session hooks for `create_agent(..., middleware=[SpecactorContext(root)])`.

    Args:
        root: the workspace the agent works in (default: the current directory).
        budget: the most characters of session context.
        writers: names of the agent's file-writing tools, beside those `specactor hook` knows
            (write_file, edit_file, create_file, apply_patch, …); their `file_path` or `path`
            argument names the file.
        seconds: the bound of one context read or one check.
    """

    state_schema = SpecactorState

    def __init__(self, root: str | Path | None = None, *, budget: int = DEFAULT_BUDGET,
                 writers: Iterable[str] = (), seconds: float = 5.0) -> None:
        super().__init__()
        self.root = Path(root) if root is not None else Path.cwd()
        self.budget = budget
        self.writers = frozenset(writers)
        self.seconds = seconds

    # onSessionStart
    def before_agent(self, state: SpecactorState, runtime: Runtime[ContextT]) -> dict[str, Any] | None:
        """Read the session context into the state (once per run; a new run sees new knowledge).

        Raises:
            ConfigError: the workspace's settings are invalid.
        """
        return {"specactor_context": get_session_context(self.root, self.budget, seconds=self.seconds),
                "specactor_session": "active"}

    async def abefore_agent(self, state: SpecactorState, runtime: Runtime[ContextT]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.before_agent, state, runtime)

    # context injection
    def wrap_model_call(self, request: ModelRequest[ContextT],
                        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
                        ) -> ModelResponse[ResponseT] | AIMessage | ExtendedModelResponse[ResponseT]:
        return handler(self._with_context(request))

    async def awrap_model_call(self, request: ModelRequest[ContextT],
                               handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
                               ) -> ModelResponse[ResponseT] | AIMessage | ExtendedModelResponse[ResponseT]:
        return await handler(self._with_context(request))

    def _with_context(self, request: ModelRequest[ContextT]) -> ModelRequest[ContextT]:
        context = request.state.get("specactor_context") if isinstance(request.state, dict) else None
        if not isinstance(context, str) or not context:
            return request
        return request.override(system_message=system_with(request.system_message, context))

    # onToolUse
    def wrap_tool_call(self, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]) -> ToolMessage | Command[Any]:
        result = handler(request)
        return appended(result, self.violations(request.tool_call["name"], request.tool_call["args"], result))

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
                              ) -> ToolMessage | Command[Any]:
        result = await handler(request)
        report = await asyncio.to_thread(self.violations, request.tool_call["name"], request.tool_call["args"], result)
        return appended(result, report)

    def violations(self, tool: str, args: Any, result: ToolMessage | Command[Any] | None = None) -> str:
        """The binding constraints' violations in the files the tool call `tool(args)` wrote ("" for none,
        for a tool that writes no file, and for a call that failed)."""
        if isinstance(result, ToolMessage) and result.status == "error":
            return ""
        name = "write" if tool in self.writers else tool  # a writer by the caller's word: its path arguments count
        if not changed_paths(name, args):
            return ""
        hook = HookInput(tool_name=name, tool_input=args, cwd=str(self.root))
        return tool_use("text", Sources.at(self.root), hook, Deadline(self.seconds))

    # onSessionEnd
    def after_agent(self, state: SpecactorState, runtime: Runtime[ContextT]) -> dict[str, Any] | None:
        """Mark the session ended, and forget it as `specactor hook session-end` does (by thread id)."""
        forget(self.root, _thread_id())
        return {"specactor_session": "ended"}

    async def aafter_agent(self, state: SpecactorState, runtime: Runtime[ContextT]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_agent, state, runtime)


def system_with(system: SystemMessage | None, context: str) -> SystemMessage:
    """The system message with `context` after what it says already."""
    if system is None:
        return SystemMessage(content=context)
    if isinstance(system.content, str):
        return SystemMessage(content=f"{system.content}\n\n{context}" if system.content else context)
    return SystemMessage(content=[*system.content, {"type": "text", "text": context}])


def appended(result: ToolMessage | Command[Any], report: str) -> ToolMessage | Command[Any]:
    """The tool's result with the violation `report` after its content."""
    if not report or not isinstance(result, ToolMessage):
        return result
    if isinstance(result.content, str):
        content: str | list[str | dict[Any, Any]] = f"{result.content}\n\n{report}"
    else:
        content = [*result.content, {"type": "text", "text": report}]
    return result.model_copy(update={"content": content})


def _thread_id() -> str | None:
    from langgraph.config import get_config

    try:
        thread = get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # outside a runnable context
        return None
    return str(thread) if thread is not None else None


# ---------------------------------------------------------------------- the seed's adapter


class LangChainAdapter:
    """The seed's `EcosystemAdapter` for LangChain: specactor's tools by group, the session context,
    and the middleware, over one link.

    Args:
        root: the workspace (default: the current directory); the stdio server's root, and where the
            context is read (unless only `url` is given: then it comes from the server).
        url, token: a running server to use instead of a child process.
        in_process: run the server inside this process instead of a child process.
        budget: the most characters of session context.
    """

    def __init__(self, root: str | Path | None = None, *, url: str | None = None, token: str | None = None,
                 budget: int = DEFAULT_BUDGET, link: Link | None = None, in_process: bool = False) -> None:
        self.root = Path(root) if root is not None else None
        self.url = url
        self.budget = budget
        self.link = link or connect(root, url=url, token=token, in_process=in_process)
        self._tools: list[StructuredTool] | None = None

    def get_tools(self) -> list[StructuredTool]:
        """Every tool the server lists (listed once)."""
        if self._tools is None:
            self._tools = get_tools(self.link)
        return list(self._tools)

    def get_memory_tools(self) -> list[StructuredTool]:
        return [t for t in self.get_tools() if in_group("memory", t.name)]

    def get_knowledge_tools(self) -> list[StructuredTool]:
        return [t for t in self.get_tools() if in_group("knowledge", t.name)]

    def get_sync_tools(self) -> list[StructuredTool]:
        return [t for t in self.get_tools() if in_group("sync", t.name)]

    def get_session_context(self) -> str:
        """The session context: read from the workspace's stores, or from the server's `specactor://context`
        when only a URL was given."""
        if self.root is None and self.url:
            return self.link.read_resource(CONTEXT_URI)
        return get_session_context(self.root or Path.cwd(), self.budget)

    def middleware(self, *, writers: Iterable[str] = ()) -> SpecactorContext:
        """`SpecactorContext` for this adapter's workspace and budget."""
        return SpecactorContext(self.root, budget=self.budget, writers=writers)

    def close(self) -> None:
        self.link.close()

    def __enter__(self) -> LangChainAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
