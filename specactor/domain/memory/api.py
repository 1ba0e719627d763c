"""The memory tools' inputs and outputs (camelCase on the wire), with every input rule in the schema.

Inputs forbid unknown fields (their base is the registry's `wire.arguments.ToolInput`); they are
defined here, not in the toolset, so the actor and the bench can build them too.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from specactor.domain.memory.layers import Identifiers, Layer
from specactor.wire.arguments import ToolInput

Tag = Annotated[str, Meta(min_length=1, max_length=100)]
Tags = Annotated[list[Tag], Meta(max_length=50, description="Tags; a search keeps memories that carry every one")]
MemoryId = Annotated[str, Meta(min_length=1, max_length=200, description="The memoryId memory_add returned")]

# Bounds stay under 8192: the property tests must be able to build a value one past each bound.
MAX_CONTENT = 4000
MAX_QUERY = 1000


class _In(ToolInput, rename="camel"):
    pass


class _Out(msgspec.Struct, kw_only=True, rename="camel"):
    pass


class MemoryAddIn(_In):
    content: Annotated[str, Meta(min_length=1, max_length=MAX_CONTENT, description="What to remember")]
    layer: Annotated[Layer, Meta(description="Which layer the memory belongs to")] = "user"
    tags: Tags = []
    metadata: Annotated[dict[str, Any], Meta(description="Free-form JSON kept with the memory")] = {}
    identifiers: Annotated[Identifiers | None, Meta(description="Overrides the session's identifiers")] = None


class MemoryEntry(_Out):
    memory_id: str
    content: str
    layer: Layer
    identifiers: dict[str, str]
    tags: list[str]
    metadata: dict[str, Any]
    created_at: str
    updated_at: str


class MemorySearchIn(_In):
    query: Annotated[str, Meta(min_length=1, max_length=MAX_QUERY, description="Words to look for")]
    layers: Annotated[list[Layer], Meta(max_length=7, description="Default: every layer the identifiers "
                                                                  "reach")] | None = None
    limit: Annotated[int, Meta(ge=1, le=100, description="Most results returned")] = 10
    threshold: Annotated[float, Meta(ge=0.0, le=1.0, description="Lowest score returned (see the score "
                                                                 "formula in the docs)")] = 0.7
    tags: Tags = []
    identifiers: Annotated[Identifiers | None, Meta(description="Overrides the session's identifiers")] = None


class SearchHit(_Out):
    memory_id: str
    content: str
    layer: Layer
    score: float
    tags: list[str]


class MemorySearchOut(_Out):
    results: list[SearchHit]
    total_count: Annotated[int, Meta(description="Matches at or above the threshold, before the limit")]
    searched_layers: list[Layer]


class MemoryDeleteIn(_In):
    memory_id: MemoryId


class MemoryDeleteOut(_Out):
    memory_id: str
    deleted: bool
    message: str
