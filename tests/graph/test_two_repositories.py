"""Two repositories, two real servers, one Emergent project: a change and a main spec of the same names in
both never collide, because every key starts with its own workspace's id (one from a git remote, one
from a folder's name), and an edit, an archive or a forced sync in one changes nothing of the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specactor.testing.emergent import PROJECT_ID, EmergentDouble
from tests.graph.stdio_server import StdioServer, server_env, write_settings
from tests.graph.support import graph_keys, mirror_matches, write_change, write_spec

pytestmark = pytest.mark.slow

BILLING = "acme/billing"  # from the git remote
PAYMENTS = "payments"  # from the folder's name


def synced(server: StdioServer, force: bool = False) -> dict[str, Any]:
    out = server.call("graph_sync", timeout=90, force=force)
    assert out["success"] is True and out["data"]["pending"] == 0, f"{out}{server.tail()}"
    return out["data"]  # type: ignore[no-any-return]


def snapshot(double: EmergentDouble, workspace: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every field of the workspace's objects (versions and times too) and of the relationships between them."""
    objects = graph_keys(double, workspace)
    ids = {o["canonical_id"] for o in objects.values()}
    rels = [r for r in double.relationships(PROJECT_ID) if r["src_id"] in ids or r["dst_id"] in ids]
    return objects, rels


def test_two_repositories_with_the_same_change_and_capability_share_a_project_without_colliding(
        tmp_path: Path) -> None:
    billing, payments = tmp_path / "billing-checkout", tmp_path / PAYMENTS
    (billing / ".git").mkdir(parents=True)
    (billing / ".git" / "config").write_text('[core]\n\tbare = false\n[remote "origin"]\n'
                                             "\turl = git@github.com:acme/billing.git\n")
    for root in (billing, payments):
        write_change(root, "add-auth")
        write_spec(root, "user-auth")
    settings = write_settings(tmp_path / "settings.toml")
    double = EmergentDouble()
    with double.running_in_thread() as url, \
            StdioServer(billing, server_env(url, settings)) as a, StdioServer(payments, server_env(url, settings)) as b:
        assert a.call("graph_status")["data"]["workspaceId"] == BILLING
        assert b.call("graph_status")["data"]["workspaceId"] == PAYMENTS
        synced(a)
        synced(b)

        ours, theirs = graph_keys(double, BILLING), graph_keys(double, PAYMENTS)
        assert ours and theirs and not ours.keys() & theirs.keys()
        assert all(k.startswith(f"{BILLING}/") for k in ours) and all(k.startswith(f"{PAYMENTS}/") for k in theirs)
        # the same files under both roots: without the prefix every key would collide
        assert {k.removeprefix(f"{BILLING}/") for k in ours} == {k.removeprefix(f"{PAYMENTS}/") for k in theirs}
        assert f"{BILLING}/change:add-auth" in ours and f"{PAYMENTS}/spec:user-auth" in theirs
        labels = [[x for x in o["labels"] if x.startswith("workspace:")] for o in double.objects(PROJECT_ID)]
        assert all(len(found) == 1 for found in labels), labels
        assert double.duplicate_keys(PROJECT_ID) == []
        mirror_matches(double, billing, BILLING)
        mirror_matches(double, payments, PAYMENTS)
        workspace_of = {o["canonical_id"]: o["labels"] for o in double.objects(PROJECT_ID)}
        for rel in double.relationships(PROJECT_ID):  # no relationship crosses from one workspace to the other
            assert workspace_of[rel["src_id"]] == workspace_of[rel["dst_id"]], rel

        before = snapshot(double, PAYMENTS)
        assert a.call("task_complete", changeId="add-auth", task="1.5")["success"] is True
        with (billing / "openspec" / "changes" / "add-auth" / "proposal.md").open("a") as f:
            f.write("- and a recovery code\n")
        archived = a.call("archive", changeId="add-auth", force=True, updateSpecs=True)  # rewrites spec:user-auth
        assert archived["success"] is True, archived
        done = synced(a)
        assert done["created"] + done["updated"] + done["deleted"] > 0, done
        synced(a, force=True)  # a repair lists by workspace label: the other's objects are no strays
        mirror_matches(double, billing, BILLING)

        assert snapshot(double, PAYMENTS) == before
        quiet = synced(b)
        assert (quiet["created"], quiet["updated"], quiet["deleted"]) == (0, 0, 0), quiet
        mirror_matches(double, payments, PAYMENTS)
        assert double.duplicate_keys(PROJECT_ID) == []
