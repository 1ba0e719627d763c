"""MCP request params and result types as msgspec Structs (2025-03-26 through 2026-07-28).

Params structs are decoded from a frame's `Raw` params by one cached decoder each. Result
structs omit unset members, so one type serves every protocol version: the protocol layer
fills the 2026-07-28 members (`resultType`, cache hints, `_meta`) only for that era.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, Raw, UnsetType, field

LoggingLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
CacheScope = Literal["public", "private"]


# ---------------------------------------------------------------- params (client -> server)


class Params(msgspec.Struct, kw_only=True):
    meta: dict[str, Any] | None = field(default=None, name="_meta")


class Implementation(msgspec.Struct, omit_defaults=True):
    name: str
    version: str
    title: str | UnsetType = UNSET


class InitializeParams(Params, kw_only=True):
    protocolVersion: str
    capabilities: dict[str, Any] = {}
    clientInfo: dict[str, Any] | None = None


class PaginatedParams(Params, kw_only=True):
    cursor: str | None = None


class InputParams(Params, kw_only=True):
    """Members a 2026-07-28 client adds when it answers an input-required result."""

    inputResponses: dict[str, dict[str, Any]] | UnsetType = UNSET
    requestState: str | UnsetType = UNSET


class CallToolParams(InputParams, kw_only=True):
    name: str
    arguments: Raw = Raw()


class ReadResourceParams(InputParams, kw_only=True):
    uri: str


class GetPromptParams(InputParams, kw_only=True):
    name: str
    arguments: dict[str, str] | None = None


class CompletionRef(msgspec.Struct):
    type: Literal["ref/prompt", "ref/resource"]
    name: str | None = None
    uri: str | None = None


class CompletionArgument(msgspec.Struct):
    name: str
    value: str


class CompletionContext(msgspec.Struct):
    arguments: dict[str, str] | None = None


class CompleteParams(Params, kw_only=True):
    ref: CompletionRef
    argument: CompletionArgument
    context: CompletionContext | None = None


class SetLevelParams(Params, kw_only=True):
    level: LoggingLevel


class CancelledParams(Params, kw_only=True):
    requestId: int | str | None = None
    reason: str | None = None


class SubscriptionFilter(msgspec.Struct, omit_defaults=True):
    toolsListChanged: bool | UnsetType = UNSET
    promptsListChanged: bool | UnsetType = UNSET
    resourcesListChanged: bool | UnsetType = UNSET
    resourceSubscriptions: list[str] | UnsetType = UNSET


class ListenParams(Params, kw_only=True):
    notifications: SubscriptionFilter


class ProgressParams(Params, kw_only=True):
    progressToken: int | str
    progress: float
    total: float | None = None
    message: str | None = None


# ---------------------------------------------------------------- content blocks


class TextContent(msgspec.Struct, tag="text", tag_field="type", omit_defaults=True):
    text: str
    annotations: dict[str, Any] | UnsetType = UNSET


class ImageContent(msgspec.Struct, tag="image", tag_field="type", omit_defaults=True):
    data: str
    mimeType: str
    annotations: dict[str, Any] | UnsetType = UNSET


class AudioContent(msgspec.Struct, tag="audio", tag_field="type", omit_defaults=True):
    data: str
    mimeType: str
    annotations: dict[str, Any] | UnsetType = UNSET


class TextResourceContents(msgspec.Struct, omit_defaults=True):
    uri: str
    text: str
    mimeType: str | UnsetType = UNSET


class BlobResourceContents(msgspec.Struct, omit_defaults=True):
    uri: str
    blob: str
    mimeType: str | UnsetType = UNSET


ResourceContents = TextResourceContents | BlobResourceContents


class EmbeddedResource(msgspec.Struct, tag="resource", tag_field="type", omit_defaults=True):
    resource: TextResourceContents | BlobResourceContents
    annotations: dict[str, Any] | UnsetType = UNSET


class ResourceLink(msgspec.Struct, tag="resource_link", tag_field="type", omit_defaults=True):
    uri: str
    name: str
    mimeType: str | UnsetType = UNSET
    description: str | UnsetType = UNSET


ContentBlock = TextContent | ImageContent | AudioContent | EmbeddedResource | ResourceLink


# ---------------------------------------------------------------- definitions


class Tool(msgspec.Struct, omit_defaults=True):
    name: str
    inputSchema: dict[str, Any]
    description: str | UnsetType = UNSET
    title: str | UnsetType = UNSET
    outputSchema: dict[str, Any] | UnsetType = UNSET
    annotations: dict[str, Any] | UnsetType = UNSET


class Resource(msgspec.Struct, omit_defaults=True):
    uri: str
    name: str
    description: str | UnsetType = UNSET
    mimeType: str | UnsetType = UNSET
    title: str | UnsetType = UNSET


class ResourceTemplate(msgspec.Struct, omit_defaults=True):
    uriTemplate: str
    name: str
    description: str | UnsetType = UNSET
    mimeType: str | UnsetType = UNSET
    title: str | UnsetType = UNSET


class PromptArgument(msgspec.Struct, omit_defaults=True):
    name: str
    description: str | UnsetType = UNSET
    required: bool = False


class Prompt(msgspec.Struct, omit_defaults=True):
    name: str
    description: str | UnsetType = UNSET
    title: str | UnsetType = UNSET
    arguments: list[PromptArgument] | UnsetType = UNSET


class PromptMessage(msgspec.Struct):
    role: Literal["user", "assistant"]
    content: ContentBlock


# ---------------------------------------------------------------- results (server -> client)


class Result(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Members every result may carry; the 2026-07-28 era sets them, older eras leave them unset."""

    resultType: str | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = field(default=UNSET, name="_meta")


class CacheableResult(Result, kw_only=True, omit_defaults=True):
    ttlMs: int | UnsetType = UNSET
    cacheScope: CacheScope | UnsetType = UNSET


class EmptyResult(Result, kw_only=True, omit_defaults=True):
    pass


class InitializeResult(Result, kw_only=True, omit_defaults=True):
    protocolVersion: str
    capabilities: dict[str, Any]
    serverInfo: Implementation
    instructions: str | UnsetType = UNSET


class DiscoverResult(CacheableResult, kw_only=True, omit_defaults=True):
    supportedVersions: list[str]
    capabilities: dict[str, Any]
    instructions: str | UnsetType = UNSET


class ListToolsResult(CacheableResult, kw_only=True, omit_defaults=True):
    tools: list[Tool]
    nextCursor: str | UnsetType = UNSET


class CallToolResult(Result, kw_only=True, omit_defaults=True):
    content: list[ContentBlock]
    structuredContent: Any | UnsetType = UNSET
    isError: bool | UnsetType = UNSET


class ListResourcesResult(CacheableResult, kw_only=True, omit_defaults=True):
    resources: list[Resource]
    nextCursor: str | UnsetType = UNSET


class ListResourceTemplatesResult(CacheableResult, kw_only=True, omit_defaults=True):
    resourceTemplates: list[ResourceTemplate]
    nextCursor: str | UnsetType = UNSET


class ReadResourceResult(CacheableResult, kw_only=True, omit_defaults=True):
    contents: list[ResourceContents]


class ListPromptsResult(CacheableResult, kw_only=True, omit_defaults=True):
    prompts: list[Prompt]
    nextCursor: str | UnsetType = UNSET


class GetPromptResult(Result, kw_only=True, omit_defaults=True):
    messages: list[PromptMessage]
    description: str | UnsetType = UNSET


class Completion(msgspec.Struct, omit_defaults=True):
    values: list[str]
    total: int | UnsetType = UNSET
    hasMore: bool | UnsetType = UNSET


class CompleteResult(Result, kw_only=True, omit_defaults=True):
    completion: Completion
