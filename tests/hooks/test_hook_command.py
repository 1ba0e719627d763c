"""`specactor hook`, run as the clients run it: fixture stdin in, then stdout, exit status and time.

Each run is a real process (`python -m specactor.hooks`), so the imports, the deadline and the
fail-open exits are the ones a client meets. The time bound is the hook's own deadline plus a
generous allowance for interpreter start on a loaded machine: what is asserted is that the hook
keeps a deadline, not how fast it is (that is `just bench`).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specactor.hooks.run import DEADLINES
from tests.context.workspace import MINE, THEIRS, Workspace, workspace

pytestmark = pytest.mark.slow
SLACK = 3.0  # seconds: interpreter start and imports on a busy machine


def run_hook(ws: Workspace, event: str, client: str, stdin: bytes | dict[str, Any],
             *extra: str) -> tuple[str, int, float]:
    data = json.dumps(stdin).encode() if isinstance(stdin, dict) else stdin
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "specactor.hooks", event, "--client", client, *extra], input=data,
                          capture_output=True, env=ws.env(), cwd=ws.root, timeout=30)
    elapsed = time.monotonic() - start
    assert elapsed < DEADLINES[event] + SLACK
    return done.stdout.decode(), done.returncode, elapsed


def start_input(ws: Workspace, session: str = "s-1") -> dict[str, Any]:
    return {"session_id": session, "cwd": str(ws.root), "hook_event_name": "SessionStart", "source": "startup",
            "transcript_path": "/dev/null", "permission_mode": "default"}


def prompt_input(ws: Workspace, prompt: str, session: str = "s-1") -> dict[str, Any]:
    return {"session_id": session, "cwd": str(ws.root), "hook_event_name": "UserPromptSubmit", "prompt": prompt}


def write_input(ws: Workspace, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"session_id": "s-1", "cwd": str(ws.root), "hook_event_name": "PostToolUse", "tool_name": tool,
            "tool_input": tool_input, "tool_response": {"success": True}}


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return workspace(tmp_path)


# ---------------------------------------------------------------------- session-start, per client


def test_claude_session_start_prints_the_context_as_plain_text(ws: Workspace) -> None:
    out, code, _ = run_hook(ws, "session-start", "claude", start_input(ws))
    assert code == 0 and out.startswith("<specactor-context>") and out.endswith("</specactor-context>\n")
    assert "[block] ADR adr-042-database-selection" in out and MINE[0] in out and THEIRS not in out


@pytest.mark.parametrize("client", ["codex", "gemini"])
def test_json_clients_get_the_context_as_additional_context_json_only(ws: Workspace, client: str) -> None:
    out, code, _ = run_hook(ws, "session-start", client, start_input(ws))
    doc = json.loads(out)  # stdout is the JSON and nothing else
    context = doc["hookSpecificOutput"]["additionalContext"]
    assert code == 0 and context.startswith("<specactor-context>") and "pol-eval" in context
    assert ("hookEventName" in doc["hookSpecificOutput"]) == (client == "codex")


@pytest.mark.parametrize("client", ["opencode", "text"])
def test_text_clients_get_plain_text_even_with_empty_stdin(ws: Workspace, client: str) -> None:
    out, code, _ = run_hook(ws, "session-start", client, b"", "--root", str(ws.root))
    assert code == 0 and out.startswith("<specactor-context>")


def test_session_start_respects_the_budget(ws: Workspace) -> None:
    out, _, _ = run_hook(ws, "session-start", "text", start_input(ws), "--budget", "600")
    assert 0 < len(out.rstrip("\n")) <= 600


def test_the_context_budget_setting_sizes_the_hook_and_the_command(ws: Workspace) -> None:
    """`context.budget` (here from SPECACTOR_CONTEXT_BUDGET) is the default of both; --budget overrides it."""
    env = ws.env() | {"SPECACTOR_CONTEXT_BUDGET": "600"}
    data = json.dumps(start_input(ws)).encode()
    hook = subprocess.run([sys.executable, "-m", "specactor.hooks", "session-start", "--client", "text"], input=data,
                          capture_output=True, env=env, cwd=ws.root, timeout=30)
    command = subprocess.run([sys.executable, "-m", "specactor.context"], capture_output=True, env=env, cwd=ws.root,
                             timeout=30)
    wider = subprocess.run([sys.executable, "-m", "specactor.context", "--budget", "5000"], capture_output=True,
                           env=env, cwd=ws.root, timeout=30)
    said = hook.stdout.decode().rstrip("\n")
    assert said == command.stdout.decode().rstrip("\n") and 0 < len(said) <= 600
    assert len(wider.stdout.decode().rstrip("\n")) > 600


# ---------------------------------------------------------------------- prompt


def test_prompt_injects_the_full_context_once_per_session_then_relevant_memories(ws: Workspace) -> None:
    first, _, _ = run_hook(ws, "prompt", "claude", prompt_input(ws, "how do we deploy the shop service?"))
    second, _, _ = run_hook(ws, "prompt", "claude", prompt_input(ws, "how do we deploy the shop service?"))
    assert "Accepted knowledge constraints" in first
    assert "Accepted knowledge constraints" not in second
    assert "related to the prompt" in second and MINE[0] in second and MINE[2] not in second
    other, _, _ = run_hook(ws, "prompt", "claude", prompt_input(ws, "hello", session="s-2"))
    assert "Accepted knowledge constraints" in other


def test_an_oh_my_opencode_session_gets_the_context_as_plain_text_with_its_first_hooked_prompt(ws: Workspace) -> None:
    """oh-my-opencode runs the Claude hooks with its quirks: no SessionStart, the session's first message
    not hooked, UserPromptSubmit stdout injected as plain text (JSON not parsed), outputs cut at ~50k tokens."""
    second, code, _ = run_hook(ws, "prompt", "claude", prompt_input(ws, "how do we deploy the shop service?", "omo"))
    third, _, _ = run_hook(ws, "prompt", "claude", prompt_input(ws, "how do we deploy the shop service?", "omo"))
    assert code == 0 and second.startswith("<specactor-context>") and not second.lstrip().startswith("{")
    assert "[block]" in second and "pol-eval" in second and MINE[0] in second
    assert "Accepted knowledge constraints" not in third and MINE[0] in third and not third.startswith("{")
    assert len(second) <= 5000 + 2000 + 2 and len(third) <= 2000 + 1  # the context's and the memories' budgets


def test_a_session_that_got_the_context_at_its_start_does_not_get_it_again_with_its_first_prompt(
        ws: Workspace) -> None:
    started, _, _ = run_hook(ws, "session-start", "claude", start_input(ws, session="s-9"))
    assert "Accepted knowledge constraints" in started
    first, _, _ = run_hook(ws, "prompt", "claude", prompt_input(ws, "how do we deploy the shop service?", "s-9"))
    assert "Accepted knowledge constraints" not in first and MINE[0] in first


def test_prompt_for_codex_is_user_prompt_submit_json(ws: Workspace) -> None:
    run_hook(ws, "prompt", "codex", prompt_input(ws, "warm up"))
    out, code, _ = run_hook(ws, "prompt", "codex", prompt_input(ws, "which database do new services use"))
    doc = json.loads(out)
    assert code == 0 and doc["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert MINE[1] in doc["hookSpecificOutput"]["additionalContext"]


def test_prompt_with_nothing_relevant_says_nothing_after_the_first(ws: Workspace) -> None:
    run_hook(ws, "prompt", "gemini", prompt_input(ws, "first"))
    out, code, _ = run_hook(ws, "prompt", "gemini", prompt_input(ws, "zebra quantum marmalade"))
    assert (out, code) == ("", 0)


def test_session_end_forgets_the_session_so_a_resume_gets_the_context_again(ws: Workspace) -> None:
    run_hook(ws, "prompt", "claude", prompt_input(ws, "first"))
    out, code, elapsed = run_hook(ws, "session-end", "claude", {"session_id": "s-1", "cwd": str(ws.root),
                                                                "reason": "other"})
    assert (out, code) == ("", 0) and elapsed < 1.0 + SLACK
    again, _, _ = run_hook(ws, "prompt", "claude", prompt_input(ws, "first"))
    assert "Accepted knowledge constraints" in again


def test_stop_says_nothing(ws: Workspace) -> None:
    assert run_hook(ws, "stop", "claude", {"session_id": "s-1", "stop_hook_active": False})[:2] == ("", 0)


# ---------------------------------------------------------------------- tool-use


def test_claude_write_of_a_blocked_pattern_is_reported_as_blocking(ws: Workspace) -> None:
    (ws.root / "src" / "a.ts").write_text("const a = 1;\nconsole.log(a)\nconst b = eval('2');\n")
    out, code, _ = run_hook(ws, "tool-use", "claude", write_input(ws, "Write", {
        "file_path": str(ws.root / "src" / "a.ts"), "content": "…"}))
    doc = json.loads(out)
    assert code == 0 and doc["decision"] == "block" and "src/a.ts:3" in doc["reason"] and "pol-eval" in doc["reason"]
    context = doc["hookSpecificOutput"]["additionalContext"]
    assert doc["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert "src/a.ts:2 violates pol-console" in context and "README.md" not in context  # must_exist: not per file


def test_a_warning_is_context_without_a_block(ws: Workspace) -> None:
    (ws.root / "src" / "b.ts").write_text("console.log(1)\n")
    out, _, _ = run_hook(ws, "tool-use", "claude", write_input(ws, "Edit", {"file_path": "src/b.ts"}))
    doc = json.loads(out)
    assert "decision" not in doc and "src/b.ts:1" in doc["hookSpecificOutput"]["additionalContext"]


def test_codex_apply_patch_checks_each_added_or_updated_file(ws: Workspace) -> None:
    (ws.root / "src" / "c.ts").write_text("eval('x')\n")
    (ws.root / "src" / "d.ts").write_text("fine\n")
    patch = ("*** Begin Patch\n*** Add File: src/c.ts\n+eval('x')\n*** Update File: src/d.ts\n@@\n-old\n+fine\n"
             "*** End Patch\n")
    out, _, _ = run_hook(ws, "tool-use", "codex", write_input(ws, "apply_patch", {"command": patch}))
    doc = json.loads(out)
    assert doc["decision"] == "block" and "src/c.ts:1" in doc["reason"]
    assert "hookSpecificOutput" not in doc  # every finding blocks: said once, in the reason


def test_gemini_write_file_gets_json_context_without_a_decision(ws: Workspace) -> None:
    (ws.root / "src" / "e.ts").write_text("eval(1)\n")
    out, _, _ = run_hook(ws, "tool-use", "gemini", write_input(ws, "write_file", {"file_path": "src/e.ts"}))
    doc = json.loads(out)
    assert set(doc) == {"hookSpecificOutput"} and "(blocking)" in doc["hookSpecificOutput"]["additionalContext"]


def test_opencode_edit_gets_plain_text(ws: Workspace) -> None:
    (ws.root / "src" / "f.ts").write_text("eval(1)\n")
    out, _, _ = run_hook(ws, "tool-use", "opencode", write_input(ws, "edit", {"filePath": str(ws.root / "src/f.ts")}))
    assert out.startswith("<specactor-context>") and "src/f.ts:1" in out


def test_a_path_outside_the_workspace_is_not_read(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside.ts"
    outside.write_text("eval(1)\n")
    (ws.root / "src" / "link.ts").symlink_to(outside)
    for path in (str(outside), "../outside.ts", "src/link.ts"):
        assert run_hook(ws, "tool-use", "claude", write_input(ws, "Write", {"file_path": path}))[:2] == ("", 0)


def test_reading_tools_and_clean_files_say_nothing(ws: Workspace) -> None:
    (ws.root / "src" / "g.ts").write_text("const fine = true;\n")
    assert run_hook(ws, "tool-use", "claude", write_input(ws, "Read", {"file_path": "src/g.ts"}))[:2] == ("", 0)
    assert run_hook(ws, "tool-use", "claude", write_input(ws, "Write", {"file_path": "src/g.ts"}))[:2] == ("", 0)


# ---------------------------------------------------------------------- failing open


@pytest.mark.parametrize("client", ["claude", "codex", "gemini", "opencode", "text"])
@pytest.mark.parametrize("stdin", [b"{not json", b"[1, 2]", b'{"prompt": 7}', b"\xff\xfe"])
def test_broken_stdin_gives_no_output_and_exit_0(ws: Workspace, client: str, stdin: bytes) -> None:
    assert run_hook(ws, "prompt", client, stdin)[:2] == ("", 0)


def test_missing_stores_give_no_output_and_exit_0(tmp_path: Path) -> None:
    ws = workspace(tmp_path, knowledge=False, memories=False)
    for event in ("session-start", "prompt", "tool-use"):
        assert run_hook(ws, event, "claude", prompt_input(ws, "anything"))[:2] == ("", 0)
    assert not ws.db.exists()  # read-only: the store is not created


def test_a_huge_prompt_gives_no_output_and_exit_0(ws: Workspace) -> None:
    huge = prompt_input(ws, "deploy " * 1_500_000)
    assert run_hook(ws, "prompt", "claude", huge)[:2] == ("", 0)


def test_a_bad_command_line_gives_no_output_and_exit_0(ws: Workspace) -> None:
    done = subprocess.run([sys.executable, "-m", "specactor.hooks", "no-such-event"], input=b"{}",
                          capture_output=True, env=ws.env(), timeout=30)
    assert (done.stdout, done.returncode) == (b"", 0)


def _locked(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO counters VALUES ('held', 1)")
    return conn


def test_a_locked_database_without_knowledge_gives_no_output_and_exit_0(tmp_path: Path) -> None:
    ws = workspace(tmp_path, knowledge=False)
    conn = _locked(ws.db)
    try:
        for event in ("session-start", "prompt"):
            assert run_hook(ws, event, "claude", prompt_input(ws, "deploy shop"))[:2] == ("", 0)
    finally:
        conn.close()


def test_a_locked_database_leaves_the_constraints_in_the_context(ws: Workspace) -> None:
    conn = _locked(ws.db)
    try:
        out, code, _ = run_hook(ws, "session-start", "claude", start_input(ws))
    finally:
        conn.close()
    assert code == 0 and "adr-042-database-selection" in out and MINE[0] not in out


@pytest.mark.parametrize("entry", ["specactor.hooks", "specactor"], ids=["module", "specactor-hook-command"])
def test_the_hook_imports_neither_trio_nor_the_server(ws: Workspace, entry: str) -> None:
    argv = ["specactor", *(["hook"] if entry == "specactor" else []), "session-start", "--client", "claude"]
    code = (f"import sys, runpy; sys.argv = {argv!r}\n"
            f"try:\n    runpy.run_module({entry!r}, run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in sys.modules if m == 'trio' or m.startswith(('specactor.actors', 'specactor.app'))]\n"
            "print(bad, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(start_input(ws)).encode(),
                          capture_output=True, env=ws.env(), timeout=30)
    assert done.stdout.startswith(b"<specactor-context>")
    assert done.stderr.decode().strip().splitlines()[-1] == "[]"
