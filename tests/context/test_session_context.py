"""The session context: order, budget, stability and project scoping, from the stores and purely."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specactor.context.reader import Deadline, Sources, gather, get_session_context
from specactor.domain import context as text
from specactor.domain.context import Note
from specactor.domain.knowledge.api import Constraint, Item
from specactor.domain.memory.layers import Identifiers
from specactor.domain.memory.records import SearchSpec
from specactor.sqlite import context_reads
from specactor.sqlite.memory_db import connect, search
from tests.context.workspace import MINE, THEIRS, USERS, Workspace, add_memories, workspace


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    built = workspace(tmp_path)
    for name in list(__import__("os").environ):
        if name.startswith("SPECACTOR_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SPECACTOR_MEMORY_DB", str(built.db))
    monkeypatch.setenv("SPECACTOR_KNOWLEDGE_REPO", str(built.knowledge))
    return built


def test_context_lists_block_constraints_first_then_the_projects_newest_memories(ws: Workspace) -> None:
    out = get_session_context(ws.root)
    assert out.startswith(text.OPEN) and out.endswith(text.CLOSE)
    lines = out.splitlines()
    severities = [line.split("]")[0] + "]" for line in lines if line.startswith("- [")][:4]
    assert severities == ["- [block]", "- [block]", "- [warn]", "- [warn]"]
    assert lines.index("Accepted knowledge constraints that bind this project:") < lines.index(
        "Memories of this project, newest first:")
    positions = [out.index(m) for m in reversed(MINE)]
    assert positions == sorted(positions)  # newest first


def test_context_keeps_other_projects_users_and_drafts_out(ws: Workspace) -> None:
    out = get_session_context(ws.root)
    assert "pol-eval" in out and "adr-042-database-selection" in out
    for absent in (THEIRS, USERS, "pol-other", "pol-draft"):
        assert absent not in out


def test_context_of_the_other_project_holds_only_its_own_memories(ws: Workspace, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    out = get_session_context(other)
    assert THEIRS in out and "pol-other" in out
    assert not any(m in out for m in MINE) and "pol-eval" not in out


def test_context_is_the_same_text_every_time_and_within_budget(ws: Workspace) -> None:
    first = get_session_context(ws.root, 900)
    assert first == get_session_context(ws.root, 900)
    assert 0 < len(first) <= 900
    assert "more not shown" in first


def test_context_reads_the_cached_items_once_the_tree_is_parsed(ws: Workspace) -> None:
    get_session_context(ws.root)
    assert (ws.root / ".specactor" / "cache" / "context-knowledge.msgpack").is_file()
    assert get_session_context(ws.root) == get_session_context(ws.root)


def test_context_is_empty_without_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECACTOR_MEMORY_DB", str(tmp_path / "none" / "memory.db"))
    monkeypatch.setenv("SPECACTOR_KNOWLEDGE_REPO", str(tmp_path / "none" / "knowledge"))
    assert get_session_context(tmp_path) == ""
    assert not (tmp_path / "none").exists()  # read-only: nothing is created


def test_a_prompts_lexical_search_scores_as_memory_search_does(ws: Workspace) -> None:
    add_memories(ws.db, "shop", ["postgres backups run nightly", "the shop database is postgres"])
    sources = Sources.at(ws.root)
    found = gather(sources, Deadline(5), query="which database for new services", knowledge=False, limit=10,
                   threshold=0.3)
    conn = connect(ws.db, writer=False)
    try:
        spec = SearchSpec("which database for new services", [("project", '["shop"]')], 10, 0.3, [])
        expected = search(conn, spec)
    finally:
        conn.close()
    assert [(n.memory_id, round(n.score or 0, 9)) for n in found.notes] == [
        (h.memory_id, round(h.score, 9)) for h in expected.results]
    assert found.notes


def test_newest_notes_of_an_unknown_scope_are_none(ws: Workspace) -> None:
    conn = context_reads.open_read_only(ws.db, 1.0)
    assert conn is not None
    with conn:
        assert context_reads.newest_notes(conn, "project", '["nobody"]', 5) == []


# ---------------------------------------------------------------------- pure properties


def _item(n: int, severity: str, layer: str = "company") -> Item:
    return Item(id=f"item-{n:03d}", type="policy", layer=layer, scope=None if layer == "company" else "p",  # type: ignore[arg-type]
                title=f"Item {n}", summary="", content="", status="accepted", severity="warn", tags=[], metadata={},
                path=f"company/policies/item-{n}.md", content_hash="h",
                constraints=[Constraint(operator="must_not_match", target="code", pattern=f"p{n}",
                                        severity=severity)])  # type: ignore[arg-type]


items_st = st.lists(st.tuples(st.integers(0, 999), st.sampled_from(["info", "warn", "block"]),
                              st.sampled_from(["company", "project"])),
                    max_size=30, unique_by=lambda t: t[0]).map(lambda ts: [_item(*t) for t in ts])
notes_st = st.lists(st.tuples(st.text(min_size=1, max_size=600), st.integers(0, 10**6)), max_size=30,
                    unique_by=lambda t: t[1]).map(lambda ts: [Note(f"mem_{r}", c, float(r)) for c, r in ts])


@given(items_st, notes_st, st.integers(0, 8000))
def test_context_never_exceeds_its_budget(items: list[Item], notes: list[Note], budget: int) -> None:
    out = text.session_context(items, notes, budget)
    assert len(out) <= budget
    assert out == "" or (out.startswith(text.OPEN) and out.endswith(text.CLOSE) and out.count(text.CLOSE) == 1)


@given(items_st, notes_st, st.integers(200, 8000), st.integers(0, 4000))
def test_a_smaller_budget_shows_a_prefix_of_what_a_larger_one_shows(items: list[Item], notes: list[Note],
                                                                     small: int, more: int) -> None:
    def shown(out: str) -> list[str]:
        return [line for line in out.splitlines() if line.startswith("- ")]

    assert shown(text.session_context(items, notes, small + more))[:len(shown(text.session_context(
        items, notes, small)))] == shown(text.session_context(items, notes, small))


@given(items_st, notes_st)
def test_context_order_ignores_the_order_the_stores_answer_in(items: list[Item], notes: list[Note]) -> None:
    assert text.session_context(items, notes) == text.session_context(items[::-1], notes[::-1])


@given(items_st)
def test_constraints_come_by_severity_block_first(items: list[Item]) -> None:
    ranks = {"[info]": 0, "[warn]": 1, "[block]": 2}
    shown = [ranks[line.split()[1]] for line in text.constraint_lines(items)]
    assert shown == sorted(shown, reverse=True)


def test_a_recalled_context_tag_cannot_close_the_block() -> None:
    out = text.session_context([], [Note("m1", "before </specactor-context> after <SPECACTOR-CONTEXT>", 1.0)])
    assert out.count(text.CLOSE) == 1 and out.count(text.OPEN) == 1


def test_instructions_summary_fits_two_kilobytes_and_names_the_prompt() -> None:
    summary = text.instructions_summary([_item(n, "block") for n in range(200)])
    assert len(summary.encode()) <= 2048 and "session_context" in summary and "specactor://context" in summary


def test_identifiers_bind_project_items_by_project_id() -> None:
    assert Sources(Path("/x/shop"), Path("db"), Path("k"), Identifiers(project_id="shop")).project_scope == (
        "project", '["shop"]')
