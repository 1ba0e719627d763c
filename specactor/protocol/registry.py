"""The registry: the one place tools, resources and prompts are declared.

Two levels, as in the Go SDK: `add_tool` takes a wire `Tool` and a raw handler; `tool()` takes
msgspec input and output Structs, derives both schemas, validates arguments before the
handler runs, retries provider failures, and wraps a result in the seed's envelope (a failure
propagates: `ServerCore.call_tool` wraps it). Resources and prompts work the same way.
Toolsets are filtered at registration time.
"""

from __future__ import annotations

import base64
import dis
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, Raw

from specactor.protocol.context import Completer, RequestContext
from specactor.protocol.envelope import Encoded, envelope_ok, envelope_schema
from specactor.protocol.errors import INVALID_PARAMS, ProtocolError, ProviderError, RateLimited, ToolError
from specactor.protocol.finite import checker
from specactor.protocol.schema import check_input_type, find_issue, issue_from_msgspec, json_type, schema_of
from specactor.protocol.uritemplate import UriTemplate
from specactor.wire.codec import any_decoder, decoder_for, encode
from specactor.wire.mcp import (
    BlobResourceContents,
    CallToolResult,
    GetPromptResult,
    Prompt,
    PromptArgument,
    PromptMessage,
    Resource,
    ResourceContents,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
)

In = TypeVar("In", bound=msgspec.Struct)
Out = TypeVar("Out")

RawToolHandler = Callable[[Raw, RequestContext], Awaitable[CallToolResult]]
ToolHandler = Callable[[In, RequestContext], Awaitable[Out]]
ResourceBody = str | bytes | list[ResourceContents]
ResourceHandler = Callable[[str, dict[str, str], RequestContext], Awaitable[ResourceBody]]
ResourceLister = Callable[[RequestContext], Awaitable[list[Resource]]]
PromptHandler = Callable[[dict[str, str], RequestContext], Awaitable[GetPromptResult | list[PromptMessage] | str]]

MAX_PROVIDER_RETRIES = 3
MAX_RATE_LIMIT_WAIT = 30.0


class ToolEntry(msgspec.Struct):
    tool: Tool
    handler: RawToolHandler
    toolset: str
    input_type: type[msgspec.Struct] | None = None
    inline: bool = False  # the handler cannot wait: the dispatcher runs it without a task of its own


# Every suspension point of a coroutine (await, async for, async with) compiles to one of these.
_SUSPENDING_OPS = frozenset({"YIELD_VALUE", "YIELD_FROM", "SEND", "GET_AWAITABLE", "GET_AITER", "GET_ANEXT",
                             "BEFORE_ASYNC_WITH"})


def await_free(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is an `async def` whose own body has no await, `async for` or `async with`:
    calling it runs to the end in one step, so it can never wait on anything (nor be cancelled
    midway). Anything else (a wrapper, a partial, an object with `__call__`) counts as waiting."""
    if not inspect.iscoroutinefunction(fn) or not hasattr(fn, "__code__"):
        return False
    return not any(ins.opname in _SUSPENDING_OPS for ins in dis.get_instructions(fn.__code__))


class ResourceEntry(msgspec.Struct):
    resource: Resource
    handler: ResourceHandler
    toolset: str


class TemplateEntry(msgspec.Struct):
    template: ResourceTemplate
    matcher: UriTemplate
    handler: ResourceHandler
    toolset: str
    lister: ResourceLister | None = None
    completions: dict[str, Completer] = msgspec.field(default_factory=dict)


class PromptEntry(msgspec.Struct):
    prompt: Prompt
    handler: PromptHandler
    toolset: str
    completions: dict[str, Completer] = msgspec.field(default_factory=dict)


class Registry:
    """Tools, resources, templates and prompts, by name, in registration order.

    Args:
        toolsets: the enabled toolsets; a definition in any other toolset is skipped.
            None enables every toolset.
    """

    def __init__(self, toolsets: Iterable[str] | None = None) -> None:
        self.enabled = None if toolsets is None else frozenset(toolsets) | {"core"}
        self.tools: dict[str, ToolEntry] = {}
        self.resources: dict[str, ResourceEntry] = {}
        self.templates: list[TemplateEntry] = []
        self.prompts: dict[str, PromptEntry] = {}
        self._listeners: list[Callable[[str, str | None], None]] = []

    # ------------------------------------------------------------------ change notification

    def on_change(self, listener: Callable[[str, str | None], None]) -> None:
        """Call `listener(kind, uri)` after every later change: kind "tools", "resources" or
        "prompts" when a list changes, or "resource" with the URI when one resource's content does."""
        self._listeners.append(listener)

    def _changed(self, kind: str, uri: str | None = None) -> None:
        for listener in self._listeners:
            listener(kind, uri)

    def resource_updated(self, uri: str) -> None:
        """Tell subscribers that the content behind `uri` changed."""
        self._changed("resource", uri)

    def wants(self, toolset: str) -> bool:
        return self.enabled is None or toolset in self.enabled

    # ------------------------------------------------------------------ tools

    def add_tool(self, tool: Tool, handler: RawToolHandler, *, toolset: str = "core",
                 input_type: type[msgspec.Struct] | None = None, inline: bool | None = None) -> None:
        """Low level: register a wire `Tool` with a handler that gets the raw arguments.

        `inline` (default: whether `handler` is `await_free`) says the call cannot wait, so the
        dispatcher may run it in the transport's task instead of a task and cancel scope of its own.
        """
        if not self.wants(toolset):
            return
        if tool.name in self.tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self.tools[tool.name] = ToolEntry(tool, handler, toolset, input_type,
                                          await_free(handler) if inline is None else inline)
        self._changed("tools")

    def remove_tool(self, name: str) -> None:
        if self.tools.pop(name, None) is not None:
            self._changed("tools")

    def tool(
        self,
        name: str,
        *,
        description: str,
        input: type[In],
        output: type[Out] | None = None,
        toolset: str = "core",
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
        envelope: bool = True,
    ) -> Callable[[ToolHandler[In, Any]], ToolHandler[In, Any]]:
        """Typed registration: `input`/`output` Structs give the schemas; results use the envelope.

        With `envelope=False` the handler returns its own `CallToolResult` (content blocks), and
        only the input side is typed: the fixtures that must answer exact content use this. A
        handler may return its `output` already encoded, as `msgspec.Raw` JSON (knowledge_check,
        whose large answer is encoded in the worker process that computed it): embedded as is.
        """
        check_input_type(input)
        input_schema = schema_of(input)
        decoder = decoder_for(input)
        check_finite = checker(output) if output is not None and _has_numbers(schema_of(output)) else None

        def register(fn: ToolHandler[In, Any]) -> ToolHandler[In, Any]:
            async def handle(raw: Raw, ctx: RequestContext) -> CallToolResult:
                # A failure propagates: the core turns it into the envelope (ServerCore.call_tool).
                out = await call_with_retries(fn, decode_arguments(raw, decoder, input_schema), ctx)
                if not envelope:
                    assert isinstance(out, CallToolResult)
                    return out
                if check_finite is not None and not check_finite(out.data if type(out) is Encoded else out):
                    raise ToolError("INTERNAL", f"tool '{name}' produced a number JSON cannot carry (infinite or NaN)")
                return envelope_ok(out)

            tool = Tool(
                name=name,
                description=description,
                inputSchema=input_schema,
                outputSchema=envelope_schema(schema_of(output) if output is not None else {}) if envelope else UNSET,
                title=title if title is not None else UNSET,
                annotations=annotations if annotations is not None else UNSET,
            )
            # `handle` awaits only `fn` (and, after a provider failure, the retry backoff): it
            # cannot wait when `fn` cannot.
            self.add_tool(tool, handle, toolset=toolset, input_type=input, inline=await_free(fn))
            return fn

        return register

    # ------------------------------------------------------------------ resources

    def add_resource(self, resource: Resource, handler: ResourceHandler, *, toolset: str = "core") -> None:
        if not self.wants(toolset):
            return
        self.resources[resource.uri] = ResourceEntry(resource, handler, toolset)
        self._changed("resources")

    def resource(self, uri: str, *, name: str, description: str, mime_type: str, toolset: str = "core",
                 title: str | None = None) -> Callable[[ResourceHandler], ResourceHandler]:
        def register(fn: ResourceHandler) -> ResourceHandler:
            self.add_resource(Resource(uri=uri, name=name, description=description, mimeType=mime_type,
                                       title=title if title is not None else UNSET), fn, toolset=toolset)
            return fn

        return register

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str,
        description: str,
        mime_type: str,
        toolset: str = "core",
        completions: dict[str, Completer] | None = None,
        lister: ResourceLister | None = None,
    ) -> Callable[[ResourceHandler], ResourceHandler]:
        def register(fn: ResourceHandler) -> ResourceHandler:
            if not self.wants(toolset):
                return fn
            tpl = ResourceTemplate(uriTemplate=uri_template, name=name, description=description, mimeType=mime_type)
            self.templates.append(TemplateEntry(tpl, UriTemplate(uri_template), fn, toolset, lister,
                                                dict(completions or {})))
            self._changed("resources")
            return fn

        return register

    def find_resource(self, uri: str) -> tuple[ResourceHandler, dict[str, str], str | None] | None:
        """The handler for `uri`, its template variables and its MIME type; static URIs first."""
        entry = self.resources.get(uri)
        if entry is not None:
            mime = entry.resource.mimeType
            return entry.handler, {}, mime if isinstance(mime, str) else None
        for tpl in self.templates:
            params = tpl.matcher.match(uri)
            if params is not None:
                mime = tpl.template.mimeType
                return tpl.handler, params, mime if isinstance(mime, str) else None
        return None

    # ------------------------------------------------------------------ prompts

    def add_prompt(self, prompt: Prompt, handler: PromptHandler, *, toolset: str = "core",
                   completions: dict[str, Completer] | None = None) -> None:
        if not self.wants(toolset):
            return
        self.prompts[prompt.name] = PromptEntry(prompt, handler, toolset, dict(completions or {}))
        self._changed("prompts")

    def remove_prompt(self, name: str) -> None:
        if self.prompts.pop(name, None) is not None:
            self._changed("prompts")

    def prompt(self, name: str, *, description: str, args: type[msgspec.Struct] | None = None,
               toolset: str = "core", title: str | None = None,
               completions: dict[str, Completer] | None = None) -> Callable[[PromptHandler], PromptHandler]:
        """Typed registration: the prompt's arguments are the (string) fields of `args`."""
        arguments = prompt_arguments(args) if args is not None else []

        def register(fn: PromptHandler) -> PromptHandler:
            self.add_prompt(Prompt(name=name, description=description, title=title if title else UNSET,
                                   arguments=arguments or UNSET), fn, toolset=toolset, completions=completions)
            return fn

        return register


def _has_numbers(schema: Any) -> bool:
    if isinstance(schema, dict):
        return schema.get("type") == "number" or any(_has_numbers(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_numbers(v) for v in schema)
    return False


def prompt_arguments(args: type[msgspec.Struct]) -> list[PromptArgument]:
    schema = schema_of(args)
    required = set(schema.get("required", []))
    out = []
    for prop, spec in schema.get("properties", {}).items():
        desc = spec.get("description")
        out.append(PromptArgument(name=prop, description=desc if desc else UNSET, required=prop in required))
    return out


def check_prompt_arguments(prompt: Prompt, given: dict[str, str]) -> None:
    """-32602 naming the first missing required argument."""
    if isinstance(prompt.arguments, list):
        for arg in prompt.arguments:
            if arg.required and arg.name not in given:
                raise ProtocolError(INVALID_PARAMS, f"prompt '{prompt.name}' needs the argument '{arg.name}'",
                                    {"argument": arg.name})


def decode_arguments(raw: Raw, decoder: msgspec.json.Decoder[In], schema: dict[str, Any]) -> In:
    """Decode tool arguments straight from their JSON bytes; explain a failure as INVALID_INPUT."""
    data = bytes(raw) if raw else b"{}"
    if data == b"null":
        data = b"{}"
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as err:
        value = any_decoder.decode(data)
        if not isinstance(value, dict):
            raise ToolError("INVALID_INPUT", f"arguments must be an object, got {json_type(value)}",
                            {"field": "", "expected": "object", "actual": json_type(value)}) from None
        issue = find_issue(schema, value) or issue_from_msgspec(err)
        raise ToolError("INVALID_INPUT", issue.message, {"rule": issue.rule, **issue.details}) from None


async def call_with_retries(fn: Callable[[In, RequestContext], Awaitable[Out]], args: In,
                            ctx: RequestContext) -> Out:
    """Run `fn`; retry PROVIDER_ERROR 3 times with exponential backoff and RATE_LIMITED after its delay.

    The first attempt runs bare: building a tenacity loop for every call cost 14 % of a call's
    time (docs/decisions.md), so tenacity takes over only once a provider has failed.
    """
    try:
        return await fn(args, ctx)
    except (ProviderError, RateLimited) as exc:
        if not _retryable(exc):
            raise
        first: ToolError = exc
    from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

    backoff = wait_exponential(multiplier=0.05, max=2.0)

    def wait(state: Any) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimited):
            return float(exc.retry_after)
        return float(backoff(state))

    await ctx.runtime.sleep(first.retry_after if isinstance(first, RateLimited) else 0.05)
    retrying = AsyncRetrying(stop=stop_after_attempt(MAX_PROVIDER_RETRIES), wait=wait,
                             retry=retry_if_exception(_retryable), sleep=ctx.runtime.sleep, reraise=True)
    async for attempt in retrying:
        with attempt:
            return await fn(args, ctx)
    raise AssertionError("unreachable")  # pragma: no cover


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, RateLimited):
        return exc.retry_after <= MAX_RATE_LIMIT_WAIT
    return isinstance(exc, ProviderError)


def resource_contents(uri: str, mime: str | None, body: ResourceBody) -> list[ResourceContents]:
    """A handler's return value as wire contents: text, base64 blob, or as given."""
    if isinstance(body, str):
        return [TextResourceContents(uri=uri, text=body, mimeType=mime if mime else UNSET)]
    if isinstance(body, bytes):
        return [BlobResourceContents(uri=uri, blob=base64.b64encode(body).decode("ascii"),
                                     mimeType=mime if mime else UNSET)]
    return body


def encoded_contents(uri: str, mime: str | None, text: str) -> list[ResourceContents]:
    """`resource_contents(uri, mime, text)` encoded once, for contents served many times unchanged
    (a listing cached until the workspace changes): each read then copies the bytes where it would
    encode (and escape) the text again."""
    raw: Any = Raw(encode(resource_contents(uri, mime, text)[0]))
    return [raw]


def prompt_result(value: GetPromptResult | list[PromptMessage] | str, description: str | None) -> GetPromptResult:
    if isinstance(value, GetPromptResult):
        return value
    if isinstance(value, str):
        value = [PromptMessage(role="user", content=TextContent(text=value))]
    return GetPromptResult(messages=value, description=description if description else UNSET)
