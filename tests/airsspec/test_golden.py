"""Golden files: a fixed session at a fixed clock writes exactly these bytes to disk (front matter,
plan rendering, TOON). Rewrite them with `SPECACTOR_UPDATE_GOLDEN=1 pytest tests/airsspec/test_golden.py`
and review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specactor.domain.airsspec import layout
from specactor.toolsets import airsspec as toolset
from tests.airsspec.support import FIXED_SECONDS, airsspec_server

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("SPECACTOR_UPDATE_GOLDEN") == "1"


async def test_a_fixed_session_writes_the_golden_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seconds = [FIXED_SECONDS]
    monkeypatch.setattr(toolset, "clock", lambda: seconds[0])
    root = tmp_path / "demo"
    root.mkdir()
    async with airsspec_server(root) as c:
        db = (await c.ok("spec_create", title="Database setup", description="Tables and migrations.",
                         category="infrastructure"))["spec_id"]
        seconds[0] += 3600
        auth = (await c.ok("spec_create", title="User Authentication System", category="feature",
                           description="Implement secure user login/logout.\nSessions expire after 30 minutes.",
                           dependencies=[{"spec_id": db, "kind": "hard"}],
                           content="# User Authentication System\n\n## Overview\n\nLogin with email and password.\n"))[
            "spec_id"]
        await c.ok("spec_transition", spec_id=db, to_state="active", reason="scheduled: sprint 4")
        await c.ok("spec_transition", spec_id=db, to_state="done")
        seconds[0] += 3600
        await c.ok("plan_create", spec_id=auth, approach="Use JWT tokens with bcrypt password hashing", steps=[
            {"title": "Set up auth database schema", "description": "users(email, password_hash)",
             "complexity": "simple"},
            {"title": "Implement password hashing", "description": "# bcrypt\n\\ cost 12\n\n- salted",
             "complexity": "medium"},
            {"title": "Issue JWT tokens", "description": ""}])
        seconds[0] += 3600
        await c.ok("build_start", spec_id=auth, plan_approved=True)
        await c.ok("plan_step_complete", spec_id=auth, step_index=0,
                   notes="Created users table with email, password_hash columns\n  and an index on email")
        await c.ok("build_update", spec_id=auth, progress_percentage=40, current_step="Implement password hashing",
                   notes="bcrypt: cost 12")
    files = [layout.CONFIG, layout.GITIGNORE,
             *(f for spec_id in (db, auth) for f in (layout.spec_file(spec_id), layout.plan_file(spec_id),
                                                     layout.state_file(spec_id)))]
    for rel in files:
        path = root / rel
        golden = GOLDEN / rel.replace("/", "__").lstrip(".")
        if not path.exists():
            assert not golden.exists(), f"{rel} was not written but has a golden file"
            continue
        if UPDATE:
            golden.parent.mkdir(exist_ok=True)
            golden.write_bytes(path.read_bytes())
        assert golden.exists(), f"no golden file for {rel}; run with SPECACTOR_UPDATE_GOLDEN=1"
        assert path.read_text(encoding="utf-8") == golden.read_text(encoding="utf-8"), rel
