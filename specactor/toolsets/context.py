"""The session context over MCP: the prompt `session_context` and the resource `specactor://context`.

Both answer `domain/context.py`'s text for the server's workspace: the accepted constraints that
bind it (the knowledge reader actor's snapshot at HEAD), then its newest project memories (the
memory store actor's reader connections). They belong to the memory toolset, whose actors they
use and start on first use. The server's static `instructions` summary is built by
`specactor.context.reader.instructions_summary`, once, at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec
from msgspec import Meta

from specactor.actors.knowledge_reader import GitFailed, RepoMissing
from specactor.context.reader import NEWEST, Sources
from specactor.domain import context as text
from specactor.domain.knowledge.api import Item
from specactor.domain.knowledge.sync import Snapshot
from specactor.protocol.context import RequestContext
from specactor.protocol.errors import ToolError
from specactor.protocol.registry import Registry
from specactor.sqlite.context_reads import newest_notes

if TYPE_CHECKING:
    from specactor.toolsets import Services

TOOLSET = "memory"
URI = "specactor://context"
MAX_BUDGET = 100_000
MADE = 16  # budgets whose text is kept (the setting's, and a few a prompt asked for)


class ContextArgs(msgspec.Struct):
    budget: Annotated[str, Meta(description=f"Most characters (default {text.DEFAULT_BUDGET})")] = ""


def budget_of(value: str | None, default: int) -> int:
    """A prompt argument's budget (prompt arguments are strings).

    Raises:
        ToolError: INVALID_INPUT, not a whole number from 1 to MAX_BUDGET.
    """
    if not value:
        return default
    try:
        budget = int(value)
    except ValueError:
        budget = 0
    if not 1 <= budget <= MAX_BUDGET:
        raise ToolError("INVALID_INPUT", f"budget must be a whole number from 1 to {MAX_BUDGET}, not {value!r}",
                        {"field": "budget"})
    return budget


def register(registry: Registry, services: Services, *, budget: int = text.DEFAULT_BUDGET) -> None:
    """Register the prompt and the resource; `budget` is the default size (the `context.budget` setting)."""
    if not registry.wants(TOOLSET):
        return
    sources = Sources.from_config(services.config)
    # The text last made for each budget, with the snapshot and the memories it was made of: the
    # same snapshot (HEAD unchanged) and equal memories give the same text, made again only when
    # either changes (formatting 500 constraints costs ~1.5 ms; the memories' read ~0.1 ms).
    made: dict[int, tuple[Snapshot | None, list[text.Note], str]] = {}

    async def context(size: int) -> str:
        actors = services.memory
        await actors.up(services.supervisor, actors.store.spec, actors.reader.spec)
        snap: Snapshot | None = None
        items: list[Item] = []
        try:
            snap = await actors.reader.snapshot()
            items = snap.binding(sources.ids)
        except (RepoMissing, GitFailed):
            pass  # no knowledge repository: the memories alone
        scope = sources.project_scope
        notes = await actors.store.read(lambda conn: newest_notes(conn, *scope, NEWEST)) if scope else []
        known = made.get(size)
        if known is not None and known[0] is snap and known[1] == notes:
            return known[2]
        out = text.session_context(items, notes, size, project=sources.ids.project_id)
        if len(made) >= MADE:
            made.clear()
        made[size] = (snap, notes, out)
        return out

    @registry.prompt("session_context", description="This project's session context: the accepted knowledge "
                     "constraints that bind it (block severity first), then its newest memories, as facts inside "
                     "<specactor-context> tags.", args=ContextArgs, toolset=TOOLSET)
    async def session_context(args: dict[str, str], ctx: RequestContext) -> str:
        return await context(budget_of(args.get("budget"), budget))

    @registry.resource(URI, name="context", mime_type="text/plain", toolset=TOOLSET,
                       description="This project's session context (the session_context prompt's text).")
    async def resource(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        return await context(budget)
