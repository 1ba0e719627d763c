"""Conformance fixtures that need the client's input: elicitation, sampling and roots, asked
through `RequestContext.ask` (real requests in the legacy era; input-required results with a
signed `requestState` in the 2026-07-28 era)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from msgspec import Raw

from specactor.protocol.context import RequestContext
from specactor.protocol.registry import RawToolHandler, Registry
from specactor.wire.mcp import CallToolResult, Prompt, PromptMessage, TextContent, Tool

EMPTY: dict[str, Any] = {"type": "object", "properties": {}}


def _elicit(message: str, prop: str, kind: str = "string") -> tuple[str, dict[str, Any]]:
    return "elicitation/create", {"message": message, "requestedSchema": {
        "type": "object", "properties": {prop: {"type": kind}}, "required": [prop]}}


def _sample(text: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
    return "sampling/createMessage", {"messages": [{"role": "user", "content": {"type": "text", "text": text}}],
                                      "maxTokens": max_tokens}


ROOTS: tuple[str, dict[str, Any]] = ("roots/list", {})


def _field(answer: Any, name: str) -> Any:
    content = answer.get("content") if isinstance(answer, dict) else None
    return content.get(name) if isinstance(content, dict) else None


def _sampled(answer: Any) -> str:
    content = answer.get("content") if isinstance(answer, dict) else None
    text = content.get("text") if isinstance(content, dict) else None
    return text if isinstance(text, str) else "(no text)"


def _roots(answer: Any) -> str:
    roots = answer.get("roots") if isinstance(answer, dict) else None
    uris = [r.get("uri", "?") for r in roots if isinstance(r, dict)] if isinstance(roots, list) else []
    return ", ".join(uris) or "(none)"


def _text(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)])


def register(registry: Registry) -> None:
    def tool(name: str, description: str) -> Callable[[RawToolHandler], RawToolHandler]:
        def deco(fn: RawToolHandler) -> RawToolHandler:
            registry.add_tool(Tool(name=name, description=description, inputSchema=EMPTY), fn, toolset="fixtures")
            return fn
        return deco

    @tool("test_input_required_result_elicitation", "Asks the client for the user's name (SEP-2322)")
    async def elicitation(raw: Raw, ctx: RequestContext) -> CallToolResult:
        answers = await ctx.ask({"user_name": _elicit("What is your name?", "name")})
        return _text(f"Hello, {_field(answers['user_name'], 'name')}!")

    @tool("test_input_required_result_sampling", "Asks the client's model a question (SEP-2322)")
    async def sampling(raw: Raw, ctx: RequestContext) -> CallToolResult:
        answers = await ctx.ask({"capital_question": _sample("What is the capital of France?", 100)})
        return _text(f"LLM response: {_sampled(answers['capital_question'])}")

    @tool("test_input_required_result_list_roots", "Asks the client for its roots (SEP-2322)")
    async def list_roots(raw: Raw, ctx: RequestContext) -> CallToolResult:
        answers = await ctx.ask({"client_roots": ROOTS})
        return _text(f"Client roots: {_roots(answers['client_roots'])}")

    async def with_state(ctx: RequestContext, label: str) -> CallToolResult:
        expected = {"fixture": label}
        answers = await ctx.ask({"confirm": _elicit("Please confirm", "ok", "boolean")}, state=expected)
        if ctx.modern and ctx.request_state != expected:
            return CallToolResult(content=[TextContent(text="requestState missing or wrong")], isError=True)
        return _text(f"state-ok: confirmed={_field(answers['confirm'], 'ok')}")

    @tool("test_input_required_result_request_state", "Round-trips a requestState (SEP-2322)")
    async def request_state(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return await with_state(ctx, "request_state")

    @tool("test_input_required_result_tampered_state", "Rejects an altered requestState (SEP-2322)")
    async def tampered(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return await with_state(ctx, "tampered_state")

    @tool("test_input_required_result_multiple_inputs", "Asks for three inputs at once (SEP-2322)")
    async def multiple(raw: Raw, ctx: RequestContext) -> CallToolResult:
        answers = await ctx.ask({"user_name": _elicit("What is your name?", "name"),
                                 "greeting": _sample("Generate a greeting", 50),
                                 "client_roots": ROOTS}, state={"fixture": "multiple"})
        return _text(f"{_sampled(answers['greeting'])} {_field(answers['user_name'], 'name')}; "
                     f"roots: {_roots(answers['client_roots'])}")

    @tool("test_input_required_result_multi_round", "Asks twice, carrying state between rounds (SEP-2322)")
    async def multi_round(raw: Raw, ctx: RequestContext) -> CallToolResult:
        state = ctx.request_state if isinstance(ctx.request_state, dict) else {}
        name = state.get("name")
        if state.get("round") != 2:
            first = await ctx.ask({"step1": _elicit("Step 1: What is your name?", "name")}, state={"round": 1})
            name = _field(first["step1"], "name")
        second = await ctx.ask({"step2": _elicit("Step 2: What is your favorite color?", "color")},
                               state={"round": 2, "name": name})
        return _text(f"{name} likes {_field(second['step2'], 'color')}")

    @tool("test_input_required_result_capabilities", "Asks only for what the client can answer (SEP-2322)")
    async def capabilities(raw: Raw, ctx: RequestContext) -> CallToolResult:
        wanted = {"user_name": _elicit("What is your name?", "name"), "greeting": _sample("Say hello", 50),
                  "client_roots": ROOTS}
        needs = {"user_name": "elicitation", "greeting": "sampling", "client_roots": "roots"}
        usable = {key: req for key, req in wanted.items() if needs[key] in ctx.client_capabilities}
        if not usable:
            return _text("the client declared no input capabilities")
        answers = await ctx.ask(usable, state={"fixture": "capabilities"})
        return _text(f"answered: {', '.join(sorted(answers))}")

    @tool("test_streaming_elicitation", "Needs elicitation; never sends an independent request on a 2026 stream")
    async def streaming(raw: Raw, ctx: RequestContext) -> CallToolResult:
        answers = await ctx.ask({"user_name": _elicit("What is your name?", "name")})
        return _text(f"Hello, {_field(answers['user_name'], 'name')}!")

    @tool("test_logging_tool", "Logs three messages, only at the level the request asked for")
    async def logging_tool(raw: Raw, ctx: RequestContext) -> CallToolResult:
        for text in ("Logging tool started", "Logging tool working", "Logging tool finished"):
            await ctx.log("info", text)
        return _text("logged")

    async def prompt(args: dict[str, str], ctx: RequestContext) -> list[PromptMessage]:
        answers = await ctx.ask({"user_context": _elicit("What context should the prompt use?", "context")})
        context = _field(answers["user_context"], "context")
        return [PromptMessage("user", TextContent(text=f"Use this context: {context}"))]

    registry.add_prompt(Prompt(name="test_input_required_result_prompt",
                               description="A prompt that asks the client for context first (SEP-2322)"),
                        prompt, toolset="fixtures")
