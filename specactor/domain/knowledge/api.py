"""The knowledge and sync tools' inputs and outputs (camelCase on the wire), and the item model.

Every input rule lives in these schemas, so schema-valid arguments are never INVALID_INPUT.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, get_args

import msgspec
from msgspec import Meta

from specactor.wire.arguments import ToolInput

KnowledgeType = Literal["adr", "policy", "pattern", "spec"]
KnowledgeLayer = Literal["company", "org", "team", "project"]
Status = Literal["draft", "proposed", "accepted", "deprecated", "superseded", "rejected"]
Severity = Literal["info", "warn", "block"]
Operator = Literal["must_use", "must_not_use", "must_match", "must_not_match", "must_exist", "must_not_exist"]
Target = Literal["file", "code", "dependency", "import", "config"]

TYPES: Final = get_args(KnowledgeType)
STATUSES: Final = get_args(Status)
SEVERITIES: Final[tuple[Severity, ...]] = get_args(Severity)
OPERATORS: Final = get_args(Operator)
TARGETS: Final = get_args(Target)
SEVERITY_RANK: Final[dict[str, int]] = {s: i for i, s in enumerate(SEVERITIES)}
# Knowledge precedence, most specific first (the reference: project > team > org > company).
LAYER_RANK: Final[dict[str, int]] = {"project": 0, "team": 1, "org": 2, "company": 3}

Text = Annotated[str, Meta(min_length=1, max_length=200)]
ItemId = Annotated[str, Meta(min_length=1, max_length=200, description="A knowledge item id, e.g. "
                                                                       "adr-042-database-selection")]


class _In(ToolInput, rename="camel"):
    pass


class _Out(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class Constraint(_Out):
    operator: Operator
    target: Target
    pattern: str
    severity: Severity
    applies_to: list[str] | None = None
    message: str | None = None


class Problem(_Out):
    """A knowledge file that could not be read as an item; it is skipped, the rest carry on."""

    file: str
    error: str


class ItemSummary(_Out):
    id: str
    type: KnowledgeType
    layer: KnowledgeLayer
    title: str
    summary: str
    status: Status
    tags: list[str]
    has_constraints: bool


class Item(_Out):
    """A parsed knowledge item (what knowledge_show returns, less what the caller left out)."""

    id: str
    type: KnowledgeType
    layer: KnowledgeLayer
    scope: str | None
    title: str
    summary: str
    content: str
    status: Status
    severity: Severity
    tags: list[str]
    metadata: dict[str, Any]
    path: str
    content_hash: str
    constraints: list[Constraint] | None = None
    created_at: str | None = None
    updated_at: str | None = None
    supersedes: str | None = None
    superseded_by: list[str] | None = None


class KnowledgeQueryIn(_In):
    query: Annotated[str, Meta(max_length=1000, description="Words to look for")] | None = None
    type: KnowledgeType | None = None
    layer: KnowledgeLayer | None = None
    tags: Annotated[list[Text], Meta(max_length=50, description="Items carrying every one of these")] = []
    status: Annotated[list[Status], Meta(max_length=6)] = msgspec.field(default_factory=lambda: ["accepted"])
    limit: Annotated[int, Meta(ge=1, le=100)] = 10


class KnowledgeQueryOut(_Out):
    items: list[ItemSummary]
    total_count: int
    problems: list[Problem] = []


class KnowledgeShowIn(_In):
    id: ItemId
    include_constraints: bool = True
    include_history: bool = False


class HistoryEntry(_Out):
    version: str
    timestamp: str
    author: str
    message: str


class KnowledgeShowOut(_Out):
    item: Item
    history: list[HistoryEntry] | None = None


class FileIn(_In):
    path: Annotated[str, Meta(min_length=1, max_length=1024)]
    content: str = ""  # bounded by the transport's message size


class DependencyIn(_In):
    name: Annotated[str, Meta(min_length=1, max_length=500)]
    version: Annotated[str, Meta(max_length=200)] | None = None


class KnowledgeCheckIn(_In):
    files: list[FileIn] | None = None  # bounded by the transport's message size
    dependencies: list[DependencyIn] | None = None
    min_severity: Severity = "warn"
    knowledge_item_ids: Annotated[list[ItemId], Meta(max_length=100)] | None = None


class ViolatedConstraint(_Out):
    operator: Operator
    target: Target
    pattern: str


class Location(_Out):
    file: str
    line: int | None = None


class Violation(_Out):
    knowledge_item_id: str
    knowledge_item_title: str
    constraint: ViolatedConstraint
    severity: Severity
    message: str
    location: Location | None = None


class InvalidConstraint(_Out):
    """A constraint that cannot be evaluated (RE2 refuses its regex, or a glob does not parse).

    It is skipped, with RE2's reason; the item's other constraints are still checked.
    """

    knowledge_item_id: str
    file: str
    constraint: ViolatedConstraint
    reason: str


class SeverityCounts(msgspec.Struct, kw_only=True):
    info: int = 0
    warn: int = 0
    block: int = 0


class KnowledgeCheckOut(_Out):
    passed: bool
    violations: list[Violation]
    summary: SeverityCounts
    problems: list[Problem] = []
    invalid_constraints: list[InvalidConstraint] = []


class SyncNowIn(_In):
    force: Annotated[bool, Meta(description="Rewrite every pointer, not only what changed")] = False


class SyncNowOut(_Out):
    added: int
    updated: int
    deleted: int
    unchanged: int
    failures: list[Problem]
    duration_ms: float
    last_knowledge_commit: str | None
    message: str


class SyncStatusIn(_In):
    pass


class SyncStats(msgspec.Struct, kw_only=True, rename="camel"):
    total_syncs: int = 0
    total_items_synced: int = 0
    total_conflicts: int = 0
    avg_sync_duration_ms: float = 0.0


class SyncStatusOut(msgspec.Struct, kw_only=True, rename="camel"):
    healthy: bool
    last_sync_at: str | None
    last_knowledge_commit: str | None
    head_commit: str | None
    time_since_sync: str | None
    failed_items: int
    failures: list[Problem]
    stats: SyncStats
    added: int
    updated: int
    deleted: int
    unchanged: int
