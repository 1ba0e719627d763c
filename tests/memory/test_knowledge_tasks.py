"""The knowledge tools' pool tasks (`toolsets/knowledge_tasks.py`) answer exactly what the same
work answers in-process: the snapshot shipped as msgpack and rebuilt in a worker, the answer
shipped back and decoded. `perform` is the function a worker process runs; the last test runs
it in real worker processes."""

from __future__ import annotations

import itertools

import trio
from hypothesis import given
from hypothesis import strategies as st

from specactor.actors.runtime import TrioRuntime
from specactor.actors.worker_pool import WorkerPool
from specactor.concurrency.tasks import Task, perform
from specactor.domain.knowledge.api import STATUSES, TYPES, Item, KnowledgeQueryIn
from specactor.domain.knowledge.sync import Snapshot
from specactor.toolsets.knowledge_tasks import CHECK, QUERY, snapshot_key
from tests.memory.test_constraints import GOLDEN, holder, rule
from tests.memory.test_query_index import items as item_rows
from tests.memory.test_query_index import make, queries

LINES = ["import os", "from requests import get", "print('hello')", "password = 'x'", "debug: true",
         "log_level: info", "# SPDX-License-Identifier: MIT", "const m = require('moment')",
         "import lodash from 'lodash'", "", "naïve Straße ✓"]
PATHS = ["src/app.py", "src/util.ts", "config/app.yaml", "README.md", "src/x/deep.py", "docs/a.md"]
files = st.lists(st.tuples(st.sampled_from(PATHS), st.lists(st.sampled_from(LINES), max_size=6).map("\n".join)),
                 max_size=5, unique_by=lambda f: f[0])
deps = st.one_of(st.none(), st.lists(st.tuples(st.sampled_from(["mysql2", "express", "pg", "lodash"]),
                                               st.one_of(st.none(), st.just("1.0.0"))), max_size=3))
rules = st.lists(st.sampled_from(GOLDEN), min_size=1, max_size=8)
severities = st.sampled_from(["info", "warn", "block"])
KEYS = itertools.count()


def snapshot_of(items: list[Item]) -> Snapshot:
    return Snapshot(commit="c0", tree="t0", items={item.id: item for item in items})


def worker_answer(task: Task[Snapshot, object], snap: Snapshot, *args: object) -> object:
    """What a worker that did not hold the snapshot answers, decoded as the pool decodes it (a
    key of its own each time: a key names one state for good, as a git tree does)."""
    return task.decode(perform(task, f"test:{next(KEYS)}", task.dump(snap), args))


@given(groups=st.lists(st.tuples(rules, severities), min_size=1, max_size=4), given_files=files,
       dependencies=deps, floor=severities)
def test_a_check_in_a_worker_answers_what_the_check_in_process_answers(
        groups: list[tuple[list[tuple[object, ...]], str]], given_files: list[tuple[str, str]],
        dependencies: list[tuple[str, str | None]] | None, floor: str) -> None:
    items = [holder(*(rule(op, target, pattern, applies, severity)  # type: ignore[arg-type]
                      for op, target, pattern, applies, _ in chosen), item_id=f"pol-{k}")
             for k, (chosen, severity) in enumerate(groups)]
    snap = snapshot_of(items)
    ids = [item.id for item in reversed(items)]  # the caller's order, not the snapshot's
    here = CHECK.inline(snap, ids, given_files, dependencies, floor)
    assert worker_answer(CHECK, snap, ids, given_files, dependencies, floor) == here


@given(rows=item_rows, asked=st.lists(queries, min_size=1, max_size=3))
def test_a_query_in_a_worker_answers_what_the_query_in_process_answers(
        rows: list[tuple[str, str, str, list[str], str, str, str]], asked: list[KnowledgeQueryIn]) -> None:
    snap = snapshot_of([make(k, *row) for k, row in enumerate(rows)])
    for args in asked:
        assert worker_answer(QUERY, snap, args) == QUERY.inline(snap, args)


def test_a_snapshot_of_no_tree_is_never_shipped() -> None:
    assert snapshot_key("/w", Snapshot(commit=None, tree=None)) is None
    assert snapshot_key("/w", Snapshot(commit="c", tree="t")) == "knowledge:/w:t"


async def test_checks_and_queries_through_real_worker_processes_equal_the_in_process_answers() -> None:
    items = [holder(*(rule(op, target, pattern, applies) for op, target, pattern, applies, _ in GOLDEN[k::5]),
                    item_id=f"pol-{k}") for k in range(5)]
    snap = snapshot_of(items)
    key = snapshot_key("/w", snap)
    sample = [("src/app.py", "\n".join(LINES)), ("config/app.yaml", "debug: true\n")]
    args = KnowledgeQueryIn(query="rules", status=list(STATUSES), type=TYPES[0], limit=5)
    pool = WorkerPool(2, TrioRuntime(), alone_in_process=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(pool.run)
        await pool.wait_started(60)
        with trio.fail_after(60):
            for _ in range(3):  # the second and third find the snapshot in the worker's cache
                ids = [i.id for i in items]
                assert await pool.call(CHECK, key, snap, ids, sample, [("mysql2", None)], "info") == CHECK.inline(
                    snap, ids, sample, [("mysql2", None)], "info")
                assert await pool.call(QUERY, key, snap, args) == QUERY.inline(snap, args)
        stats = pool.statistics()
        assert stats.pooled == 6 and stats.inline == 0 and stats.resent == 0
        nursery.cancel_scope.cancel()
