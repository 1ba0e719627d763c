"""Shared pieces of the graph-sync tests: a workspace with one OpenSpec change, the settings of a
server syncing into a contract double, and the comparison of the double's graph with the
projection of the workspace on disk."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from specactor.config import Config, EmergentConfig, GraphConfig, SessionLogConfig
from specactor.domain.graph.model import Graph
from specactor.domain.graph.projection import project
from specactor.domain.openspec.render import RequirementDoc, ScenarioDoc, render_spec
from specactor.fs.workspace_reader import WorkspaceReader
from specactor.testing.emergent import PROJECT_ID, EmergentDouble
from tests.graph.test_projection import DELTA, PROPOSAL, TASKS

KEY = "standalone-key"


def write_change(root: Path, name: str = "add-2fa", tasks: str = TASKS) -> None:
    folder = root / "openspec" / "changes" / name
    (folder / "specs" / "user-auth").mkdir(parents=True, exist_ok=True)
    (folder / "proposal.md").write_text(PROPOSAL)
    (folder / "tasks.md").write_text(tasks)
    (folder / "specs" / "user-auth" / "spec.md").write_text(DELTA)
    (root / "openspec" / "specs").mkdir(parents=True, exist_ok=True)


def graph_config(root: Path, url: str, *, workspace: str = "acme/auth-svc", **graph: Any) -> Config:
    base = Config(root=str(root))
    return msgspec.structs.replace(
        base, toolsets=[*base.toolsets, "graph"], session_log=SessionLogConfig(enabled=False),
        emergent=EmergentConfig(url=url, api_key=KEY, project_id=PROJECT_ID, max_retries=1),
        graph=GraphConfig(enabled=True, workspace_id=workspace, retry_max_seconds=0.2, **graph))


def projected(root: Path, workspace: str = "acme/auth-svc") -> Graph:
    reader = WorkspaceReader(root, root)
    try:
        return project(workspace, reader)
    finally:
        reader.close()


def mirror_matches(double: EmergentDouble, root: Path, workspace: str = "acme/auth-svc") -> None:
    """The double's live objects of `workspace` are exactly the projection of `root`: the same keys,
    types, properties, labels and statuses, the same relationships, and no key twice."""
    want = projected(root, workspace)
    label = f"workspace:{workspace}"
    objects = [o for o in double.objects(PROJECT_ID) if label in (o.get("labels") or [])]
    keys = [o["key"] for o in objects]
    assert len(keys) == len(set(keys)), f"duplicate keys: {sorted(k for k in keys if keys.count(k) > 1)[:5]}"
    got = {o["key"]: o for o in objects}
    assert set(got) == set(want.nodes), (sorted(set(got) ^ set(want.nodes))[:10])
    for key, node in want.nodes.items():
        obj = got[key]
        assert (obj["type"], obj.get("properties") or {}, sorted(obj.get("labels") or []), obj.get("status")) == (
            node.type, node.properties, sorted(node.labels), node.status), key
    by_id = {o["canonical_id"]: o["key"] for o in objects}
    rels = {(r["type"], by_id.get(r["src_id"]), by_id.get(r["dst_id"])) for r in double.relationships(PROJECT_ID)
            if r["src_id"] in by_id and r["dst_id"] in by_id}  # a relationship to a deleted object is not live
    assert rels == {(e.type, e.src, e.dst) for e in want.edges.values()}


def write_spec(root: Path, capability: str = "user-auth") -> None:
    """A main spec holding the requirements `write_change`'s delta removes and renames, so that
    archiving the change with `updateSpecs` merges cleanly."""
    folder = root / "openspec" / "specs" / capability
    folder.mkdir(parents=True, exist_ok=True)
    scenario = ScenarioDoc("Logged", ["- **WHEN** a user logs in", "- **THEN** the login is recorded"])
    (folder / "spec.md").write_text(render_spec(capability, "How users sign in.", [
        RequirementDoc("Remember Me", ["The system SHALL keep a session for 30 days."], [scenario]),
        RequirementDoc("Login Audit", ["The system MUST record every login."], [scenario])]))


def graph_keys(double: EmergentDouble, workspace: str) -> dict[str, dict[str, Any]]:
    """The live objects carrying `workspace`'s label, by key."""
    label = f"workspace:{workspace}"
    return {o["key"]: o for o in double.objects(PROJECT_ID) if label in (o.get("labels") or [])}


def eventually(check: Callable[[], None], timeout: float, what: str, interval: float = 0.05) -> None:
    """Run `check` until it passes; past `timeout` seconds, fail with its last AssertionError.

    Raises:
        AssertionError: `check` still failed at the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            check()
            return
        except AssertionError as err:
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what}: not within {timeout:g} s: {err}") from err
        time.sleep(interval)  # a poll between checks, bounded by the deadline above
