"""Plain records the memory store passes around: a memory to write, a planned search, an endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specactor.domain.memory.embeddings import Encoding
from specactor.domain.memory.layers import Layer
from specactor.domain.memory.scoring import Mode


@dataclass(frozen=True)
class NewMemory:
    content: str
    layer: Layer
    scope_key: str
    identifiers: dict[str, str]
    tags: list[str]
    metadata: dict[str, Any]
    embedding: bytes | None = None
    knowledge_id: str | None = None
    memory_id: str | None = None
    created_at: str | None = None


@dataclass(frozen=True)
class SearchSpec:
    """A planned search: the scopes to visit in precedence order, and how to score."""

    query: str
    scopes: list[tuple[Layer, str]]
    limit: int
    threshold: float
    tags: list[str]
    mode: Mode = "lexical"
    query_vector: list[float] | None = None


@dataclass(frozen=True)
class EmbeddingsEndpoint:
    url: str  # the API base, e.g. http://127.0.0.1:8080/v1; we POST <url>/embeddings
    model: str = "text-embedding-3-small"
    api_key: str | None = None
    timeout: float = 30.0
    encoding: Encoding = "base64"  # how vectors are asked for (`encoding_format`)
