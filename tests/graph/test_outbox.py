"""The outbox and state map (`sqlite/graph_outbox.py`): what is queued for a unit's projection, how
rows coalesce per key, why a row survives a newer projection while its older one was in flight,
and dead letters. Plain SQLite on a temporary file; no network."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from specactor.domain.graph.model import Edge, Graph, Node
from specactor.sqlite import graph_outbox as ob
from specactor.sqlite.graph_outbox import Done, Failed

UNIT = "openspec:change:add-2fa"


def node(key: str, text: str = "v1", unit: str = UNIT) -> Node:
    return Node(key=key, type="Task", unit=unit, properties={"description": text, "number": "1", "status": "pending",
                                                              "tags": []}, labels=("specactor", "workspace:w"))


def graph(*nodes: Node, edges: tuple[Edge, ...] = ()) -> Graph:
    return Graph(nodes={n.key: n for n in nodes}, edges={e.key: e for e in edges})


@pytest.fixture
def conn(tmp_path: Path):  # type: ignore[no-untyped-def]
    c = ob.connect(tmp_path / ".specactor" / "graph.db")
    yield c
    c.close()


def pending(conn) -> dict[tuple[str, str], str]:  # type: ignore[no-untyped-def]
    return {(k, key): op for k, key, op in conn.execute("SELECT kind, key, op FROM outbox")}


def test_a_new_unit_queues_each_object_and_relationship_once(conn) -> None:  # type: ignore[no-untyped-def]
    edge = Edge(type="has_task", src="w/change:a", dst="w/change:a/task:1", unit=UNIT)
    queued = ob.enqueue_units(conn, {UNIT: graph(node("w/change:a"), node("w/change:a/task:1"), edges=(edge,))})
    assert (queued.puts, queued.deletes, queued.unchanged) == (3, 0, 0)
    assert pending(conn) == {("node", "w/change:a"): "put", ("node", "w/change:a/task:1"): "put",
                             ("edge", edge.key): "put"}


def test_ten_edits_of_one_object_leave_one_row_with_the_last_content(conn) -> None:  # type: ignore[no-untyped-def]
    for i in range(10):
        ob.enqueue_units(conn, {UNIT: graph(node("w/t", f"edit {i}"))})
    rows = ob.take(conn, "node", "put", 100)
    assert len(rows) == 1 and rows[0].node().properties["description"] == "edit 9"
    assert ob.depth(conn).pending == 1


def test_what_the_graph_already_holds_is_not_queued_again(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/t"))})
    ob.settle(conn, [Done(ob.take(conn, "node", "put", 10)[0], "canon-1")])
    again = ob.enqueue_units(conn, {UNIT: graph(node("w/t"))})
    assert (again.puts, again.unchanged) == (0, 1) and pending(conn) == {}


def test_an_edit_undone_before_it_was_sent_is_dropped(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/t"))})
    ob.settle(conn, [Done(ob.take(conn, "node", "put", 10)[0], "canon-1")])
    ob.enqueue_units(conn, {UNIT: graph(node("w/t", "changed"))})
    assert pending(conn) == {("node", "w/t"): "put"}
    ob.enqueue_units(conn, {UNIT: graph(node("w/t"))})
    assert pending(conn) == {}


def test_a_key_the_unit_no_longer_projects_is_queued_for_deletion(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/a"), node("w/b"))})
    ob.settle(conn, [Done(row, f"c-{row.key}") for row in ob.take(conn, "node", "put", 10)])
    queued = ob.enqueue_units(conn, {UNIT: graph(node("w/a"))})
    assert (queued.deletes, queued.unchanged) == (1, 1) and pending(conn) == {("node", "w/b"): "delete"}


def test_a_row_never_sent_is_simply_dropped_when_its_key_goes(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/a"))})
    ob.enqueue_units(conn, {UNIT: Graph()})
    assert pending(conn) == {}


def test_a_row_tried_once_is_deleted_by_key_since_its_create_may_have_landed(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/a"))})
    ob.mark_sent(conn, ["w/a"])  # its create goes out ...
    row = ob.take(conn, "node", "put", 10)[0]
    assert row.sent
    ob.settle(conn, failed=[Failed(row, "PROVIDER_ERROR", "reset")])  # ... and the reply is lost
    ob.enqueue_units(conn, {UNIT: graph(node("w/a", "edited"))})  # a newer version keeps the mark
    assert ob.take(conn, "node", "put", 10)[0].sent
    ob.enqueue_units(conn, {UNIT: Graph()})
    assert pending(conn) == {("node", "w/a"): "delete"}


def test_a_newer_projection_queued_while_the_older_was_in_flight_stays_queued(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/t", "old"))})
    in_flight = ob.take(conn, "node", "put", 10)[0]
    ob.enqueue_units(conn, {UNIT: graph(node("w/t", "new"))})  # an edit lands while the request is out
    ob.settle(conn, [Done(in_flight, "canon-1")])
    rows = ob.take(conn, "node", "put", 10)
    assert len(rows) == 1 and rows[0].node().properties["description"] == "new"
    assert ob.known(conn, "node", ["w/t"])["w/t"].canonical_id == "canon-1"


def test_a_refused_row_becomes_a_dead_letter_and_a_new_version_gets_a_new_try(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/t"))})
    row = ob.take(conn, "node", "put", 10)[0]
    ob.settle(conn, failed=[Failed(row, "REFUSED", "property validation failed: status", 400, dead=True)])
    assert ob.depth(conn).pending == 0 and ob.depth(conn).dead == 1
    letter = ob.dead_letters(conn)[0]
    assert (letter["key"], letter["code"], letter["status"]) == ("w/t", "REFUSED", 400)
    ob.enqueue_units(conn, {UNIT: graph(node("w/t"))})  # the same content is not tried again by itself
    assert ob.depth(conn).pending == 0
    ob.enqueue_units(conn, {UNIT: graph(node("w/t", "fixed"))})
    assert ob.depth(conn) == ob.Depth(pending=1, oldest=ob.depth(conn).oldest, dead=0, synced=0)


def test_dead_letters_go_back_to_the_outbox_on_request(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/t"))})
    row = ob.take(conn, "node", "put", 10)[0]
    ob.settle(conn, failed=[Failed(row, "REFUSED", "no", 422, dead=True)])
    assert ob.requeue_dead(conn) == 1
    again = ob.take(conn, "node", "put", 10)
    assert [r.key for r in again] == ["w/t"] and msgspec.json.decode(again[0].body or b"") == msgspec.json.decode(
        row.body or b"")


def test_the_outbox_survives_closing_the_database(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    first = ob.connect(path)
    ob.enqueue_units(first, {UNIT: graph(node("w/t"))})
    first.close()  # as after kill -9: the transaction committed, nothing else happened
    second = ob.connect(path)
    try:
        assert [r.key for r in ob.take(second, "node", "put", 10)] == ["w/t"]
    finally:
        second.close()


def test_a_create_that_lands_after_its_unit_dropped_it_queues_its_removal(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/a"))})
    in_flight = ob.take(conn, "node", "put", 10)[0]  # taken by a round, not yet marked sent
    ob.enqueue_units(conn, {UNIT: Graph()})  # the change is removed meanwhile: the row is dropped
    assert pending(conn) == {}
    ob.settle(conn, [Done(in_flight, "canon-1")])  # ... and the round's create lands anyway
    assert pending(conn) == {("node", "w/a"): "delete"}
    assert ob.known(conn, "node", ["w/a"])["w/a"].canonical_id == "canon-1"


def test_a_removal_cut_short_by_a_crash_is_not_taken_for_the_object_still_in_the_graph(conn) -> None:  # type: ignore[no-untyped-def]
    ob.enqueue_units(conn, {UNIT: graph(node("w/a"))})
    ob.settle(conn, [Done(ob.take(conn, "node", "put", 10)[0], "canon-1")])
    ob.enqueue_units(conn, {UNIT: Graph()})  # the file is removed: its removal is queued ...
    ob.mark_deleting(conn, "node", ["w/a"])  # ... goes out, and the process dies before settling it
    again = ob.enqueue_units(conn, {UNIT: graph(node("w/a"))})  # the file is back after the restart
    assert (again.puts, again.unchanged) == (1, 0) and pending(conn) == {("node", "w/a"): "put"}
    assert ob.known(conn, "node", ["w/a"])["w/a"].deleting
    ob.enqueue_units(conn, {UNIT: Graph()})  # and gone again: a removal is queued, not forgotten
    assert pending(conn) == {("node", "w/a"): "delete"}


def test_two_servers_creating_one_new_outbox_at_once_both_open_it(tmp_path: Path) -> None:
    """Two connections switching a new database to WAL at once: SQLite fails one at once, without
    its busy timeout ("database is locked"); the loser waits for the other's switch instead (a CI
    run saw a second server's graph sync refuse `graph_sync` for it)."""
    import threading

    rounds = 40
    paths = [tmp_path / f"round-{n:02d}" / ".specactor" / "graph.db" for n in range(rounds)]
    barrier = threading.Barrier(2, timeout=60)
    errors: list[str] = []

    def open_each() -> None:
        for path in paths:
            barrier.wait()
            try:
                ob.connect(path).close()
            except Exception as err:  # every failure is the finding
                errors.append(f"{path.parent.parent.name}: {err}")

    threads = [threading.Thread(target=open_each) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    for path in paths:
        check = ob.connect(path)
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        check.close()
