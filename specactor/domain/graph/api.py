"""The `graph` toolset's arguments and results: graph_status, graph_sync, graph_search, graph_get.

Field names are camelCase like the other toolsets' results; every result goes out in the
envelope and is validated against these types' schemas.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from specactor.wire.arguments import ToolInput

Limit = Annotated[int, Meta(ge=1, le=200)]
Depth = Annotated[int, Meta(ge=0, le=3)]
TypeName = Annotated[str, Meta(min_length=1, max_length=64)]


class GraphStatusIn(ToolInput):
    pass


class GraphSyncIn(ToolInput):
    force: bool = False  # also list the graph's objects of this workspace and repair what differs


class GraphSearchIn(ToolInput):
    query: Annotated[str, Meta(min_length=1, max_length=2000)]
    types: list[TypeName] | None = None
    limit: Limit = 20
    workspaceOnly: bool = False  # only this repository's objects (default: every workspace in the project)


class GraphGetIn(ToolInput):
    key: Annotated[str, Meta(min_length=1, max_length=256)] | None = None
    id: Annotated[str, Meta(min_length=1, max_length=128)] | None = None
    depth: Depth = 1


class DeadLetter(msgspec.Struct):
    kind: str
    key: str
    op: str
    type: str
    code: str
    status: int | None
    message: str
    at: str


class Outbox(msgspec.Struct):
    pending: int
    oldestPendingSeconds: float | None
    deadLetters: int


class GraphStatusOut(msgspec.Struct):
    enabled: bool
    connected: bool | None  # None: no request made yet
    url: str
    projectId: str | None
    workspaceId: str
    lastSuccess: str | None
    lastError: str | None
    lastErrorAt: str | None
    consecutiveFailures: int
    nextAttemptInSeconds: float | None
    outbox: Outbox
    synced: int
    recentDeadLetters: list[DeadLetter]


class GraphSyncOut(msgspec.Struct):
    created: int
    updated: int
    deleted: int
    unchanged: int
    failed: int  # moved to the dead letters during this sync
    pending: int  # still waiting in the outbox when the sync returned
    seconds: float


class GraphObject(msgspec.Struct, omit_defaults=True):
    id: str
    canonicalId: str
    type: str
    key: str | None = None
    status: str | None = None
    workspace: str | None = None
    labels: list[str] = []
    properties: dict[str, Any] = {}


class SearchHit(msgspec.Struct, omit_defaults=True):
    object: GraphObject
    score: float | None = None


class GraphSearchOut(msgspec.Struct):
    query: str
    hits: list[SearchHit]


class Neighbour(msgspec.Struct):
    relationship: str
    direction: str  # "out" (object → neighbour) or "in"
    depth: int
    object: GraphObject
    via: str  # the canonical id of the object this neighbour hangs off


class GraphGetOut(msgspec.Struct):
    object: GraphObject
    neighbours: list[Neighbour]
    truncated: bool


def graph_object(raw: dict[str, Any]) -> GraphObject:
    """Our view of an Emergent GraphObject (its `workspace:` label named apart)."""
    labels = [str(label) for label in raw.get("labels") or []]
    workspace = next((label.removeprefix("workspace:") for label in labels if label.startswith("workspace:")), None)
    props = raw.get("properties")
    return GraphObject(id=str(raw.get("id", "")), canonicalId=str(raw.get("canonical_id") or raw.get("id", "")),
                       type=str(raw.get("type", "")), key=raw.get("key") if isinstance(raw.get("key"), str) else None,
                       status=raw.get("status") if isinstance(raw.get("status"), str) else None, workspace=workspace,
                       labels=labels, properties=props if isinstance(props, dict) else {})
