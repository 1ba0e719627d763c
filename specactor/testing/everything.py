"""The conformance fixture server: specactor plus the tools, resources and prompts that the
official MCP conformance suite exercises (`../shared/reference/mcp.md` lists them).

    python -m specactor.testing.everything            # stdio
    python -m specactor.testing.everything --http --port 3001

It also carries `echo` and `add`, typed tools mirrored by the SDK peer in `bench/`.
"""

from __future__ import annotations

import argparse
import base64
import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Raw

from specactor.protocol.context import RequestContext
from specactor.protocol.errors import ProtocolError
from specactor.protocol.registry import RawToolHandler, Registry
from specactor.testing import input_fixtures
from specactor.wire.arguments import ToolInput
from specactor.wire.mcp import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    Prompt,
    PromptArgument,
    PromptMessage,
    TextContent,
    TextResourceContents,
    Tool,
)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
STEP = 0.05  # seconds between the logging/progress fixture's notifications

EMPTY: dict[str, Any] = {"type": "object", "properties": {}}


def _compact(value: Any) -> str:
    """`value` as compact JSON, ASCII-escaped as the reference server's fixtures answer."""
    import json  # here: the fixture server's first reply must not pay for it (~2 ms)

    return json.dumps(value, separators=(",", ":"))


def _text(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], isError=True if error else msgspec.UNSET)


class EchoIn(ToolInput):
    text: Annotated[str, Meta(description="Text to echo back")]


class EchoOut(msgspec.Struct):
    text: str


class AddIn(ToolInput):
    a: Annotated[float, Meta(description="First addend")]
    b: Annotated[float, Meta(description="Second addend")]


class AddOut(msgspec.Struct):
    result: float


class SleepIn(ToolInput):
    seconds: Annotated[float, Meta(ge=0, le=60, description="How long to wait")]


class SleepOut(msgspec.Struct):
    slept: float


class SamplingIn(ToolInput):
    prompt: Annotated[str, Meta(description="The prompt to send to the client's model")]


class ElicitIn(ToolInput):
    message: Annotated[str, Meta(description="The message to show the user")]


class RegionIn(ToolInput):
    region: Annotated[str, Meta(description="A region, mirrored into the Mcp-Param-Region header",
                                extra_json_schema={"x-mcp-header": "Region"})]


def register(registry: Registry, _services: Any = None) -> None:
    """Add the fixtures to `registry` (the signature of a toolset's `register`)."""

    def raw_tool(name: str, description: str,
                 schema: dict[str, Any] | None = None) -> Callable[[RawToolHandler], RawToolHandler]:
        def deco(fn: RawToolHandler) -> RawToolHandler:
            registry.add_tool(Tool(name=name, description=description, inputSchema=schema or EMPTY), fn,
                              toolset="fixtures")
            return fn
        return deco

    @registry.tool("echo", description="Echo the text back.", input=EchoIn, output=EchoOut, toolset="fixtures")
    async def echo(args: EchoIn, ctx: RequestContext) -> EchoOut:
        return EchoOut(args.text)

    @registry.tool("add", description="Add two numbers.", input=AddIn, output=AddOut, toolset="fixtures")
    async def add(args: AddIn, ctx: RequestContext) -> AddOut:
        return AddOut(args.a + args.b)

    @registry.tool("sleep", description="Wait, then answer: a request that waits on I/O.", input=SleepIn,
                   output=SleepOut, toolset="fixtures")
    async def sleep(args: SleepIn, ctx: RequestContext) -> SleepOut:
        await ctx.runtime.sleep(args.seconds)
        return SleepOut(args.seconds)

    @raw_tool("test_simple_text", "Tests simple text content response")
    async def simple_text(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return _text("This is a simple text response for testing.")

    @raw_tool("test_image_content", "Tests image content response")
    async def image(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return CallToolResult(content=[ImageContent(data=PNG, mimeType="image/png")])

    @raw_tool("test_audio_content", "Tests audio content response")
    async def audio(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return CallToolResult(content=[AudioContent(data=WAV, mimeType="audio/wav")])

    @raw_tool("test_embedded_resource", "Tests embedded resource content response")
    async def embedded(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return CallToolResult(content=[EmbeddedResource(resource=TextResourceContents(
            uri="test://embedded-resource", mimeType="text/plain", text="This is an embedded resource content."))])

    @raw_tool("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)")
    async def multiple(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return CallToolResult(content=[
            TextContent(text="Multiple content types test:"),
            ImageContent(data=PNG, mimeType="image/png"),
            EmbeddedResource(resource=TextResourceContents(uri="test://mixed-content-resource",
                                                           mimeType="application/json",
                                                           text='{"test":"data","value":123}')),
        ])

    @raw_tool("test_tool_with_logging", "Tests tool that emits log messages during execution")
    async def with_logging(raw: Raw, ctx: RequestContext) -> CallToolResult:
        for i, text in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            if i:
                await ctx.runtime.sleep(STEP)
            await ctx.log("info", text)
        return _text("Tool with logging executed successfully")

    @raw_tool("test_tool_with_progress", "Tests tool that reports progress notifications")
    async def with_progress(raw: Raw, ctx: RequestContext) -> CallToolResult:
        for i, step in enumerate((0, 50, 100)):
            if i:
                await ctx.runtime.sleep(STEP)
            await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        return _text(str(ctx.progress_token if ctx.progress_token is not None else 0))

    @raw_tool("test_error_handling", "Tests error response handling")
    async def error_handling(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return _text("This tool intentionally returns an error for testing", error=True)

    @registry.tool("test_sampling", description="Tests server-initiated sampling (LLM completion request)",
                   input=SamplingIn, envelope=False, toolset="fixtures")
    async def sampling(args: SamplingIn, ctx: RequestContext) -> CallToolResult:
        ctx.require_client_capability("sampling")
        answers = await ctx.ask({"answer": ("sampling/createMessage", {
            "messages": [{"role": "user", "content": {"type": "text", "text": args.prompt}}], "maxTokens": 100})})
        content = answers["answer"].get("content") if isinstance(answers["answer"], dict) else None
        text = content.get("text") if isinstance(content, dict) else None
        return _text(f"LLM response: {text if isinstance(text, str) else 'No response'}")

    async def elicit(ctx: RequestContext, message: str, schema: dict[str, Any], label: str) -> CallToolResult:
        ctx.require_client_capability("elicitation")
        answers = await ctx.ask({"answer": ("elicitation/create", {"message": message, "requestedSchema": schema})})
        result = answers["answer"]
        action = result.get("action") if isinstance(result, dict) else None
        content = result.get("content") if isinstance(result, dict) and action == "accept" else {}
        return _text(f"{label}: action={action}, content={_compact(content)}")

    @registry.tool("test_elicitation", description="Tests server-initiated elicitation (user input request)",
                   input=ElicitIn, envelope=False, toolset="fixtures")
    async def elicitation(args: ElicitIn, ctx: RequestContext) -> CallToolResult:
        return await elicit(ctx, args.message, {
            "type": "object",
            "properties": {"username": {"type": "string", "description": "User's username"},
                           "email": {"type": "string", "description": "User's email address"}},
            "required": ["username", "email"]}, "User response")

    @raw_tool("test_elicitation_sep1034_defaults", "Tests elicitation with default values (SEP-1034)")
    async def defaults(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return await elicit(ctx, "Please provide user information", {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                           "default": "active"},
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            }}, "Elicitation result")

    @raw_tool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema variations (SEP-1330)")
    async def enums(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return await elicit(ctx, "Please select values using different enum schema types", {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "description": "Simple enum without titles",
                                   "enum": ["active", "inactive", "pending"]},
                "titledSingle": {"type": "string", "description": "Enum with titled options (oneOf)",
                                 "oneOf": [{"const": "low", "title": "Low Priority"},
                                           {"const": "medium", "title": "Medium Priority"},
                                           {"const": "high", "title": "High Priority"}]},
                "legacyEnum": {"type": "string", "description": "Legacy enum with enumNames",
                               "enum": ["small", "medium", "large"],
                               "enumNames": ["Small Size", "Medium Size", "Large Size"]},
                "untitledMulti": {"type": "array", "description": "Multi-select without titles",
                                  "items": {"type": "string", "enum": ["read", "write", "execute"]}},
                "titledMulti": {"type": "array", "description": "Multi-select with titled options",
                                "items": {"anyOf": [{"const": "feature", "title": "New Feature"},
                                                    {"const": "bug", "title": "Bug Fix"},
                                                    {"const": "docs", "title": "Documentation"}]}},
            },
            "required": ["untitledSingle", "titledSingle", "legacyEnum", "untitledMulti", "titledMulti"],
        }, "Elicitation completed")

    @raw_tool("json_schema_2020_12_tool", "Tool whose input schema uses JSON Schema 2020-12 keywords", {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "address", "type": "object",
                              "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contact": {"anyOf": [{"type": "string", "format": "email"}, {"type": "string", "pattern": "^\\+"}]},
            "kind": {"type": "string"},
        },
        "allOf": [{"required": ["name"]}, {"anyOf": [{"required": ["contact"]}, {"required": ["name"]}]}],
        "if": {"properties": {"kind": {"const": "company"}}},
        "then": {"required": ["address"]},
        "else": {},
        "additionalProperties": False,
    })
    async def schema_2020(raw: Raw, ctx: RequestContext) -> CallToolResult:
        return _text(f"Received: {bytes(raw).decode() if raw else '{}'}")

    @registry.tool("test_x_mcp_header", description="Tool with a parameter mirrored into an HTTP header",
                   input=RegionIn, envelope=False, toolset="fixtures")
    async def x_header(args: RegionIn, ctx: RequestContext) -> CallToolResult:
        return _text(f"region={args.region}")

    @raw_tool("test_missing_capability", "Needs the client's sampling capability")
    async def missing_capability(raw: Raw, ctx: RequestContext) -> CallToolResult:
        ctx.require_client_capability("sampling")
        return _text("the client declared sampling")

    @raw_tool("test_trigger_tool_change", "Adds or removes a temporary tool, so the tool list changes")
    async def tool_change(raw: Raw, ctx: RequestContext) -> CallToolResult:
        if "test_temporary_tool" in registry.tools:
            registry.remove_tool("test_temporary_tool")
            return _text("removed test_temporary_tool")

        async def temporary(raw: Raw, ctx: RequestContext) -> CallToolResult:
            return _text("temporary")

        registry.add_tool(Tool(name="test_temporary_tool", description="Temporary", inputSchema=EMPTY), temporary,
                          toolset="fixtures")
        return _text("added test_temporary_tool")

    @raw_tool("test_trigger_prompt_change", "Adds or removes a temporary prompt, so the prompt list changes")
    async def prompt_change(raw: Raw, ctx: RequestContext) -> CallToolResult:
        if "test_temporary_prompt" in registry.prompts:
            registry.remove_prompt("test_temporary_prompt")
            return _text("removed test_temporary_prompt")
        registry.add_prompt(Prompt(name="test_temporary_prompt", description="Temporary"),
                            _static_prompt("temporary"), toolset="fixtures")
        return _text("added test_temporary_prompt")

    input_fixtures.register(registry)

    # -------------------------------------------------------------- resources

    @registry.resource("test://static-text", name="static-text", mime_type="text/plain",
                       description="A static text resource for testing", toolset="fixtures")
    async def static_text(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        return "This is the content of the static text resource."

    @registry.resource("test://static-binary", name="static-binary", mime_type="image/png",
                       description="A static binary resource (image) for testing", toolset="fixtures")
    async def static_binary(uri: str, params: dict[str, str], ctx: RequestContext) -> bytes:
        return base64.b64decode(PNG)

    @registry.resource("test://watched-resource", name="watched-resource", mime_type="text/plain",
                       description="A resource that can be subscribed to for updates", toolset="fixtures")
    async def watched(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        return "Watched resource content"

    @registry.resource_template("test://template/{id}/data", name="template", mime_type="application/json",
                                description="A resource template with parameter substitution", toolset="fixtures",
                                completions={"id": _complete_from(["123", "456", "789"])})
    async def template(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        return _compact({"id": params["id"], "templateTest": True, "data": f"Data for ID: {params['id']}"})

    # -------------------------------------------------------------- prompts

    registry.add_prompt(Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
                        _static_prompt("This is a simple prompt for testing."), toolset="fixtures")

    async def with_arguments(args: dict[str, str], ctx: RequestContext) -> str:
        return f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"

    registry.add_prompt(Prompt(name="test_prompt_with_arguments", description="A prompt with required arguments",
                               arguments=[PromptArgument("arg1", "First test argument", True),
                                          PromptArgument("arg2", "Second test argument", True)]),
                        with_arguments, toolset="fixtures",
                        completions={"arg1": _complete_from(["hello", "help", "world"])})

    async def with_resource(args: dict[str, str], ctx: RequestContext) -> list[PromptMessage]:
        uri = args.get("resourceUri", "")
        if not uri:
            raise ProtocolError(-32602, "prompt needs the argument 'resourceUri'")
        return [PromptMessage("user", EmbeddedResource(resource=TextResourceContents(
                    uri=uri, mimeType="text/plain", text="Embedded resource content for testing."))),
                PromptMessage("user", TextContent(text="Please process the embedded resource above."))]

    registry.add_prompt(Prompt(name="test_prompt_with_embedded_resource",
                               description="A prompt that includes an embedded resource",
                               arguments=[PromptArgument("resourceUri", "URI of the resource to embed", True)]),
                        with_resource, toolset="fixtures")

    async def with_image(args: dict[str, str], ctx: RequestContext) -> list[PromptMessage]:
        return [PromptMessage("user", ImageContent(data=PNG, mimeType="image/png")),
                PromptMessage("user", TextContent(text="Please analyze the image above."))]

    registry.add_prompt(Prompt(name="test_prompt_with_image", description="A prompt that includes image content"),
                        with_image, toolset="fixtures")


def _static_prompt(text: str) -> Any:
    async def handler(args: dict[str, str], ctx: RequestContext) -> str:
        return text
    return handler


def _complete_from(options: Sequence[str]) -> Any:
    async def complete(value: str, context: dict[str, str], ctx: RequestContext) -> list[str]:
        return [o for o in options if o.startswith(value)]
    return complete


def main(argv: Sequence[str] | None = None) -> int:
    from specactor import cli

    parser = argparse.ArgumentParser(prog="python -m specactor.testing.everything")
    cli.add_server_flags(parser)
    args = parser.parse_args(argv)
    config = cli.resolve(args)
    if config is None:
        return 2
    toolsets = [*config.toolsets, "fixtures"]
    config = msgspec.structs.replace(config, toolsets=toolsets)
    return cli.run_server(config, bool(args.http), register, name="specactor-everything")


if __name__ == "__main__":
    sys.exit(main())
