"""Each client's hook output contract, and which tool calls name changed files (no process started)."""

from __future__ import annotations

import json

import msgspec
import pytest

from specactor.hooks.formats import changed_paths, parse_input, render


def test_claude_context_events_are_plain_text_and_tool_use_is_json() -> None:
    assert render("claude", "session-start", "ctx") == "ctx"
    assert render("claude", "prompt", "ctx") == "ctx"
    assert json.loads(render("claude", "tool-use", "ctx")) == {
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "ctx"}}


def test_a_block_is_a_decision_for_claude_and_codex_and_context_for_gemini() -> None:
    for client in ("claude", "codex"):
        doc = json.loads(render(client, "tool-use", "all", blocking="blocks"))
        assert doc["decision"] == "block" and doc["reason"] == "blocks"
    assert json.loads(render("gemini", "tool-use", "all", blocking="blocks")) == {
        "hookSpecificOutput": {"additionalContext": "all"}}


@pytest.mark.parametrize("client", ["claude", "codex", "gemini", "opencode", "text"])
def test_stop_session_end_and_empty_text_print_nothing(client: str) -> None:
    assert render(client, "stop", "x") == render(client, "session-end", "x") == render(client, "prompt", "") == ""  # type: ignore[arg-type]


def test_writing_tools_name_their_files_and_others_none() -> None:
    assert changed_paths("Write", {"file_path": "/w/a.py"}) == ["/w/a.py"]
    assert changed_paths("edit", {"filePath": "b.ts"}) == ["b.ts"]
    assert changed_paths("ApplyPatch", {"patchText": "*** Begin Patch\n*** Update File: c.go\n*** End Patch"}) == [
        "c.go"]
    assert changed_paths("Read", {"file_path": "a.py"}) == []
    assert changed_paths("Bash", {"command": "ls"}) == []


def test_a_patch_names_added_updated_and_moved_files_but_not_deleted_ones() -> None:
    patch = ("*** Begin Patch\n*** Add File: new.py\n+x\n*** Delete File: gone.py\n*** Update File: old.py\n"
             "*** Move to: moved.py\n@@\n-a\n+b\n*** End Patch\n")
    assert changed_paths("apply_patch", {"command": ["apply_patch", patch]}) == ["new.py", "old.py", "moved.py"]
    assert changed_paths("shell", {"command": ["bash", "-lc", f"apply_patch <<'EOF'\n{patch}EOF"]}) == [
        "new.py", "old.py", "moved.py"]


def test_hook_input_ignores_unknown_fields_and_refuses_wrong_types() -> None:
    assert parse_input(b'{"session_id": "s", "tool_response": {"x": 1}}').session_id == "s"
    assert parse_input(b"  ").session_id is None
    with pytest.raises(msgspec.ValidationError):
        parse_input(b'{"prompt": 7}')


def test_a_report_whose_findings_all_block_is_given_once_as_the_reason() -> None:
    for client in ("claude", "codex"):
        assert json.loads(render(client, "tool-use", "all blocks", blocking="all blocks")) == {
            "decision": "block", "reason": "all blocks"}
