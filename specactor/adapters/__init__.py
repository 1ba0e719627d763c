"""Ecosystem adapters: specactor's tools and session context for agent frameworks that are not MCP clients.

`EcosystemAdapter` is the memory seed's adapter interface (`get_memory_tools`, `get_knowledge_tools`,
`get_sync_tools`, `get_session_context`), generic over the framework's tool type. Adapters live in
their own modules and import their framework lazily: importing this package costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol, TypeVar, runtime_checkable

ToolT_co = TypeVar("ToolT_co", covariant=True)

# The seed's tool groups, by name prefix: what get_memory_tools, get_knowledge_tools and get_sync_tools return.
GROUPS: Final[dict[str, str]] = {"memory": "memory_", "knowledge": "knowledge_", "sync": "sync_"}


@runtime_checkable
class EcosystemAdapter(Protocol[ToolT_co]):
    """What an adapter for an agent framework offers (the seed's "Ecosystem adapter trait methods")."""

    def get_memory_tools(self) -> Sequence[ToolT_co]:
        """The memory tools (memory_add, memory_search, memory_delete) in the framework's tool type."""
        ...

    def get_knowledge_tools(self) -> Sequence[ToolT_co]:
        """The knowledge tools (knowledge_query, knowledge_check, knowledge_show)."""
        ...

    def get_sync_tools(self) -> Sequence[ToolT_co]:
        """The sync tools (sync_now, sync_status)."""
        ...

    def get_session_context(self) -> str:
        """The session context: binding constraints, then this project's memories, in
        `<specactor-context>` tags ("" when there is none)."""
        ...


def in_group(group: str, name: str) -> bool:
    """Whether the tool `name` belongs to the seed's tool group `group` (a key of `GROUPS`)."""
    return name.startswith(GROUPS[group])
