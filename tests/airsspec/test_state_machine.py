"""A hypothesis state machine drives the 12 tools against a reference model of the workflow.

After every step the server and the model agree on every spec (lifecycle, phase, plan and build
progress), no invalid state is reachable, progress never goes backwards, and every file on disk
parses. The server runs in its own thread's trio loop; each call is bounded by a timeout.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, precondition, rule

from specactor.domain.airsspec import layout
from specactor.toolsets import airsspec as toolset
from tests.airsspec import model as m
from tests.airsspec.support import FIXED_SECONDS, Client, airsspec_server, bundle_on_disk, spec_ids_on_disk

T = TypeVar("T")
STATES = list(m.TABLE)
KINDS = {"hard": "hard", "blocked_by": "hard", "soft": "soft", "related_to": "soft", "child_of": "child_of"}


class ServerThread:
    """A memory server on a trio loop in a thread; `run` calls into it from the test thread."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(20), "the server did not start"
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to the test thread in close()
            self.error = exc
            self._ready.set()

    async def _main(self) -> None:
        async with airsspec_server(self.root) as client:
            self.client = client
            self.token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            self._ready.set()
            await self._stop.wait()

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        async def bounded() -> T:
            with trio.fail_after(20):
                return await fn(*args)

        return trio.from_thread.run(bounded, trio_token=self.token)

    def close(self) -> None:
        trio.from_thread.run_sync(self._stop.set, trio_token=self.token)
        self._thread.join(20)
        assert not self._thread.is_alive(), "the server did not stop"
        if self.error is not None:
            raise self.error


class Workflow(RuleBasedStateMachine):
    specs = Bundle("specs")

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="airsspec-sm-"))
        self.seconds = FIXED_SECONDS
        self._old_clock = toolset.clock
        toolset.clock = lambda: self.seconds
        self.server = ServerThread(self.root)
        self.model: dict[str, m.ModelSpec] = {}
        self.seen_percentage: dict[str, float] = {}
        self.seen_completed: dict[str, int] = {}

    def teardown(self) -> None:
        try:
            self.server.close()
        finally:
            toolset.clock = self._old_clock
            shutil.rmtree(self.root, ignore_errors=True)

    def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        self.seconds += 1
        client: Client = self.server.client
        return self.server.run(lambda: client.call(name, **arguments))

    def check(self, reply: dict[str, Any], expect: m.Expect) -> dict[str, Any]:
        if expect.ok:
            assert reply["success"], reply
            return dict(reply["data"])
        assert not reply["success"], (reply, expect)
        error = reply["error"]
        assert error["code"] == expect.code, (error, expect)
        if expect.tag is not None:
            assert error["details"]["error"] == expect.tag, (error, expect)
        for key, value in expect.extra.items():
            assert error["details"][key] == value, (error, expect)
        return {}

    # ------------------------------------------------------------------ rules

    @precondition(lambda self: len(self.model) < 4)
    @rule(target=specs, title=st.sampled_from(["Auth", "Payments", "Search", "日本語", "Fix #1!"]), data=st.data())
    def create(self, title: str, data: st.DataObject) -> str:
        existing = sorted(self.model)
        deps = data.draw(st.lists(st.tuples(st.sampled_from(existing), st.sampled_from(sorted(KINDS))),
                                  max_size=2, unique_by=lambda d: d[0]) if existing else st.just([]))
        reply = self.call("spec_create", title=title, description="d",
                          dependencies=[{"spec_id": d, "kind": k} for d, k in deps])
        spec_id = str(self.check(reply, m.OK)["spec_id"])
        assert spec_id not in self.model
        self.model[spec_id] = m.ModelSpec(title=title, deps=[(d, KINDS[k]) for d, k in deps])
        return spec_id

    @rule(spec_id=specs, to=st.sampled_from(STATES))
    def transition(self, spec_id: str, to: str) -> None:
        spec = self.model[spec_id]
        before = spec.lifecycle
        data = self.check(self.call("spec_transition", spec_id=spec_id, to_state=to), m.transition(spec, to))
        if data:
            assert (data["from_state"], data["to_state"]) == (before, to)

    @rule(spec_id=specs, title=st.sampled_from(["Renamed", "Again"]))
    def update(self, spec_id: str, title: str) -> None:
        self.check(self.call("spec_update", spec_id=spec_id, title=title), m.update(self.model[spec_id], title))

    @rule(spec_id=specs, steps=st.integers(0, 3))
    def plan_create(self, spec_id: str, steps: int) -> None:
        reply = self.call("plan_create", spec_id=spec_id, approach="a",
                          steps=[{"title": f"s{i}", "description": "x"} for i in range(steps)])
        self.check(reply, m.plan_create(self.model[spec_id], steps))

    @rule(spec_id=specs, steps=st.none() | st.integers(0, 3))
    def plan_update(self, spec_id: str, steps: int | None) -> None:
        args: dict[str, Any] = {"approach": "b"}
        if steps is not None:
            args["steps"] = [{"title": f"t{i}", "description": "y", "complexity": "medium"} for i in range(steps)]
        self.check(self.call("plan_update", spec_id=spec_id, **args), m.plan_update(self.model[spec_id], steps))

    @rule(spec_id=specs, index=st.integers(0, 3))
    def step_complete(self, spec_id: str, index: int) -> None:
        reply = self.call("plan_step_complete", spec_id=spec_id, step_index=index, notes="n")
        data = self.check(reply, m.step_complete(self.model[spec_id], index))
        if data:
            total, done, pct = self.model[spec_id].plan_progress()
            assert data["plan_progress"] == {"total_steps": total, "completed_steps": done, "percentage": pct}

    @rule(spec_id=specs, approved=st.booleans())
    def build_start(self, spec_id: str, approved: bool) -> None:
        reply = self.call("build_start", spec_id=spec_id, plan_approved=approved)
        self.check(reply, m.build_start(self.model[spec_id], self.model))

    @rule(spec_id=specs, delta=st.none() | st.sampled_from([-100, -10, -0.5, 0, 0.5, 25, 100]))
    def build_update_by(self, spec_id: str, delta: float | None) -> None:
        """Report progress relative to the current one: backwards must be refused."""
        current = self.model[spec_id].percentage
        self.build_update(spec_id, None if delta is None else min(100.0, max(0.0, current + delta)))

    def build_update(self, spec_id: str, percentage: float | None) -> None:
        args: dict[str, Any] = {"current_step": "c"}
        if percentage is not None:
            args["progress_percentage"] = percentage
        self.check(self.call("build_update", spec_id=spec_id, **args),
                   m.build_update(self.model[spec_id], percentage))

    @rule(spec_id=specs)
    def build_complete(self, spec_id: str) -> None:
        self.check(self.call("build_complete", spec_id=spec_id, summary="s"), m.build_complete(self.model[spec_id]))

    @rule(spec_id=specs, data=st.data())
    def advance(self, spec_id: str, data: st.DataObject) -> None:
        """The next step on the happy path (random rules alone rarely get deep into a build)."""
        spec = self.model[spec_id]
        if spec.steps is None:
            self.plan_create(spec_id, data.draw(st.integers(0, 3)))
        elif spec.phase != "build":
            if spec.lifecycle == "blocked":
                self.transition(spec_id, "active")
            else:
                self.build_start(spec_id, True)
        elif not all(spec.steps):
            self.step_complete(spec_id, spec.steps.index(False))
        elif data.draw(st.booleans()):
            self.build_update(spec_id, min(100.0, spec.percentage + 25))
        else:
            self.build_complete(spec_id)

    @rule(spec_id=specs, data=st.data())
    def advance_further(self, spec_id: str, data: st.DataObject) -> None:
        """The same again: twice the weight, so runs reach finished builds."""
        self.advance(spec_id, data)

    @rule(spec_id=specs)
    def check_dependencies(self, spec_id: str) -> None:
        data = self.check(self.call("spec_check_dependencies", spec_id=spec_id), m.OK)
        spec = self.model[spec_id]
        blocking = [d for d, kind in spec.deps if kind == "hard" and not self.model[d].done_enough]
        assert data["blocking"] == blocking and data["missing"] == [] and data["cycle"] is None
        assert data["all_satisfied"] == (not blocking)

    @rule(name=st.sampled_from(["spec_status", "spec_transition", "plan_step_complete", "build_start"]))
    def unknown_id(self, name: str) -> None:
        args: dict[str, Any] = {"spec_id": "1-no-such-spec", "to_state": "active", "step_index": 0}
        keep = {"spec_status": ["spec_id"], "spec_transition": ["spec_id", "to_state"],
                "plan_step_complete": ["spec_id", "step_index"], "build_start": ["spec_id"]}[name]
        reply = self.call(name, **{k: args[k] for k in keep})
        assert reply["error"]["code"] == "NOT_FOUND" and reply["error"]["details"]["id"] == "1-no-such-spec"

    @rule(spec_id=consumes(specs))
    def forget(self, spec_id: str) -> None:
        """Stop drawing this spec (it stays in the model and on disk): keeps the pool varied."""

    # ------------------------------------------------------------------ invariants

    @invariant()
    def server_model_and_disk_agree(self) -> None:
        listed = self.check(self.call("spec_list"), m.OK)
        assert listed["total"] == len(self.model) and "invalid" not in listed
        assert {s["id"]: s["state"] for s in listed["specs"]} == {i: s.lifecycle for i, s in self.model.items()}
        assert spec_ids_on_disk(self.root) == sorted(self.model)
        for spec_id, spec in self.model.items():
            status = self.check(self.call("spec_status", spec_id=spec_id), m.OK)
            total, done, pct = spec.plan_progress()
            assert (status["lifecycle_state"], status["phase"], status["title"]) == (spec.lifecycle, spec.phase,
                                                                                  spec.title)
            assert status["plan_progress"] == {"total_steps": total, "completed_steps": done, "percentage": pct}
            assert status["build_progress"]["percentage"] == spec.percentage
            # no invalid state, and progress never goes backwards
            assert spec.phase != "build" or spec.steps is not None
            assert 0 <= status["build_progress"]["percentage"] <= 100 and done <= total
            assert status["build_progress"]["percentage"] >= self.seen_percentage.get(spec_id, 0)
            assert done >= self.seen_completed.get(spec_id, 0)
            self.seen_percentage[spec_id] = status["build_progress"]["percentage"]
            self.seen_completed[spec_id] = done
            # every file parses, and the mirrors agree with the state
            b = bundle_on_disk(self.root, spec_id)
            assert b.spec.meta.state == b.state.lifecycle == spec.lifecycle
            assert (b.state.completed_at is not None) == spec.completed
            assert (b.plan is None) == (spec.steps is None)
            if b.plan is not None:
                assert [s.status == "completed" for s in b.plan.steps] == spec.steps
                assert (b.state.build_progress.total_steps, b.state.build_progress.completed_steps) == (total, done)
            history = b.state.history
            assert all(t.to_state in m.TABLE[t.from_state] for t in history)
            assert [t.to_state for t in history][-1:] in ([], [spec.lifecycle])
        assert (self.root / layout.CONFIG).exists() == bool(self.model)


Workflow.TestCase.settings = settings(max_examples=30, stateful_step_count=40, deadline=None)
TestWorkflow = Workflow.TestCase
