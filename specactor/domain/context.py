"""The session context: what specactor knows that binds a project, as one bounded block of text.

`session_context(items, notes, budget)` turns the accepted knowledge items that bind a project
and that project's memories into text inside `<specactor-context>…</specactor-context>` (so a
capture can strip it before storing), never longer than `budget` characters. Constraints come
first (items whose strongest constraint is `block` first, then `warn`, then `info`; then the
more specific layer; then id), then memories, newest first. The text states facts ("Accepted
constraint …"), not commands; the same inputs give the same text, byte for byte, and a smaller
budget gives a prefix of the lines a larger one gives (plus a line saying how much was left out).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from specactor.domain.knowledge.api import LAYER_RANK, SEVERITY_RANK, Constraint, Item, Violation

DEFAULT_BUDGET: Final = 5000
INSTRUCTIONS_BUDGET: Final = 2048  # what Claude Code keeps of a server's `instructions`
OPEN: Final = "<specactor-context>"
CLOSE: Final = "</specactor-context>"
LINE_CHARS: Final = 400  # one constraint or memory: a long one must not crowd out the rest
_TAGS: Final = re.compile(r"</?specactor-context>", re.IGNORECASE)
_SPACE: Final = re.compile(r"\s+")


@dataclass(frozen=True)
class Note:
    """One memory as the context shows it; `rank` orders them, highest first (a rowid, a score)."""

    memory_id: str
    content: str
    rank: float
    score: float | None = None


def flat(text: str, limit: int = LINE_CHARS) -> str:
    """`text` on one line, without context tags (a recalled block cannot close the one it sits in),
    cut to `limit` characters with an ellipsis."""
    line = _SPACE.sub(" ", _TAGS.sub("", text)).strip()
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def strongest(item: Item) -> int:
    """The rank of the item's most severe constraint (block 2, warn 1, info 0)."""
    return max((SEVERITY_RANK[c.severity] for c in item.constraints or ()), default=SEVERITY_RANK[item.severity])


def ordered_items(items: Iterable[Item]) -> list[Item]:
    """Block-severity items first, then warn, then info; then project, team, org, company; then id."""
    return sorted(items, key=lambda i: (-strongest(i), LAYER_RANK[i.layer], i.id))


def _constraint(c: Constraint) -> str:
    where = f" in {', '.join(c.applies_to)}" if c.applies_to else ""
    rule = f"{c.operator} {c.target} `{c.pattern}`{where}"
    return f"{c.message} ({rule})" if c.message else rule


def constraint_lines(items: Iterable[Item]) -> list[str]:
    """One line per constraint, in `ordered_items` order, the most severe of an item first."""
    lines = []
    for item in ordered_items(items):
        kind = item.type.upper() if item.type == "adr" else item.type
        constraints = sorted(item.constraints or (), key=lambda c: -SEVERITY_RANK[c.severity])
        for c in constraints:
            lines.append(flat(f"- [{c.severity}] {kind} {item.id} \"{item.title}\": {_constraint(c)}"))
    return lines


def memory_lines(notes: Iterable[Note]) -> list[str]:
    """One line per memory, highest rank first (ties by id)."""
    return [flat(f"- {n.content} ({n.memory_id})") for n in sorted(notes, key=lambda n: (-n.rank, n.memory_id))]


def fit(sections: Sequence[tuple[str, Sequence[str]]], budget: int, *, lead: str = "") -> str:
    """`sections` (a heading and its lines, in order) inside the context tags, within `budget`.

    Lines are taken in order until the next would not fit; a final line then says how many were
    left out. A section with no line, or whose heading no longer fits, is dropped. "" when nothing
    fits or there is nothing to say.
    """
    total = sum(len(lines) for _, lines in sections)
    if total == 0:
        return ""
    head = [OPEN, *([lead] if lead else [])]
    tail_room = len(CLOSE) + len(_omitted(total)) + 2  # the closing tag and the longest omission line

    def size(lines: list[str]) -> int:
        return sum(len(line) + 1 for line in lines)

    out = list(head)
    shown = 0
    full = False
    for heading, lines in sections:
        if full or not lines:
            continue
        if size(out) + len(heading) + 1 + len(lines[0]) + 1 + tail_room > budget:
            full = True
            continue
        out.append(heading)
        for line in lines:
            if size(out) + len(line) + 1 + tail_room > budget:
                full = True
                break
            out.append(line)
            shown += 1
    if shown == 0:
        return ""
    if shown < total:
        out.append(_omitted(total - shown))
    out.append(CLOSE)
    return "\n".join(out)


def _omitted(count: int) -> str:
    return f"({count} more not shown: knowledge_query, knowledge_show and memory_search find them.)"


def session_context(items: Iterable[Item], notes: Iterable[Note], budget: int = DEFAULT_BUDGET, *,
                    project: str | None = None) -> str:
    """The session context of a project: its binding constraints, then its memories, within `budget`."""
    where = f" for project {project}" if project else ""
    return fit([("Accepted knowledge constraints that bind this project:", constraint_lines(items)),
                ("Memories of this project, newest first:", memory_lines(notes))], budget,
               lead=f"specactor context{where} (from the knowledge repository and the memory store).")


def relevant_memories(notes: Iterable[Note], budget: int) -> str:
    """The memories relevant to a prompt, best first, within `budget`."""
    lines = [flat(f"- {n.content} ({n.memory_id}, score {n.score:.2f})" if n.score is not None
                  else f"- {n.content} ({n.memory_id})")
             for n in sorted(notes, key=lambda n: (-n.rank, n.memory_id))]
    return fit([("Memories of this project related to the prompt:", lines)], budget)


def violation_report(violations: Sequence[Violation], budget: int) -> str:
    """The violations found in changed files, by file; in a file block first, then by line; each
    line names the severity, the file and line, the rule (item, operator, target, pattern) and its message."""
    by_file: dict[str, list[Violation]] = {}
    for v in violations:
        by_file.setdefault(v.location.file if v.location else "", []).append(v)
    sections = []
    for path in sorted(by_file):
        lines = []
        for v in sorted(by_file[path], key=lambda v: (-SEVERITY_RANK[v.severity], _line(v), v.knowledge_item_id)):
            where = f"{path}:{_line(v)}" if _line(v) else path
            blocking = " (blocking)" if v.severity == "block" else ""
            lines.append(flat(f"- [{v.severity}]{blocking} {where} violates {v.knowledge_item_id} "
                              f"\"{v.knowledge_item_title}\" ({v.constraint.operator} {v.constraint.target} "
                              f"`{v.constraint.pattern}`): {v.message}"))
        sections.append((f"{path or 'The change'} violates accepted knowledge constraints:", lines))
    return fit(sections, budget)


def _line(v: Violation) -> int:
    return v.location.line or 0 if v.location is not None else 0


def instructions_summary(items: Iterable[Item], budget: int = INSTRUCTIONS_BUDGET) -> str:
    """A short summary for a server's `instructions`: the binding items' ids and titles, strongest
    first, within `budget`, and where the full context is."""
    ordered = ordered_items(items)
    lead = ("The prompt session_context and the resource specactor://context hold this project's session "
            "context: the accepted knowledge constraints that bind it and its memories.")
    lines = [flat(f"- [{['info', 'warn', 'block'][strongest(i)]}] {i.id}: {i.title}", 160) for i in ordered]
    if not lines:
        return ""
    room = budget
    while True:  # `budget` is in UTF-8 bytes (what a client cuts at), `fit` counts characters
        out = fit([("Accepted knowledge items with constraints that bind this project:", lines)], room, lead=lead)
        if len(out.encode()) <= budget:
            return out
        room -= len(out.encode()) - budget
