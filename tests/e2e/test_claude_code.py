"""Claude Code, for real: `specactor install claude-code` in a project, then `claude -p` against a
stand-in Anthropic Messages API that records what the client sends.

What it proves, with the pinned client and nothing mocked on specactor's side: the installed
SessionStart and UserPromptSubmit hooks put the accepted constraints and this project's memories
(and no other project's) into the conversation; the `.mcp.json` server connects and its tools and
instructions reach the model (tool search off); and when the model writes a file that breaks an
accepted `block` constraint, the PostToolUse hook's report (rule, file, line, blocking) is in the
very next request. The stand-in answers the first turn with a `Write` call and the next with text.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.context.workspace import MINE, THEIRS, USERS, Workspace
from tests.e2e.conftest import PROMPT, VIOLATING, client_env, install
from tests.e2e.stand_in import Reply, StandIn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RUN_TIMEOUT = 120.0  # seconds for one `claude -p` (about 2 s here)


def wrote_before(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("role") == "assistant" and isinstance(m.get("content"), list)
               and any(block.get("type") == "tool_use" for block in m["content"]) for m in messages)


def responder(ws: Workspace) -> Any:
    """A Write of a file that calls eval() on the main loop's first turn, then text; "ok" to any side call."""
    def reply(body: Any) -> Reply:
        tools = {tool.get("name") for tool in body.get("tools") or []}
        if "Write" not in tools:
            return Reply("ok")
        if wrote_before(body.get("messages") or []):
            return Reply("done")
        return Reply(tool="Write", arguments={"file_path": str(ws.root / "src" / "calc.js"), "content": VIOLATING})
    return reply


def run_claude(claude: Path, ws: Workspace, env: dict[str, str], debug: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(claude), "-p", PROMPT, "--permission-mode", "acceptEdits", "--output-format", "json",
           "--debug-file", str(debug)]
    try:
        return subprocess.run(cmd, cwd=ws.root, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`claude -p` did not finish within {RUN_TIMEOUT:.0f} s; its log ends:\n{tail(debug)}")


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def texts(value: Any) -> str:
    """Every string in a decoded JSON value (messages, blocks, tool results), one per line."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(texts(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(texts(v) for v in value)
    return ""


def test_claude_code_sessions_carry_the_context_and_a_violating_write_comes_back_blocking(
        claude: Path, client_bin: Path, ws: Workspace, tmp_path: Path, closed_port: int) -> None:
    env = client_env(ws, tmp_path / "home", client_bin, closed_port)
    install(ws, env, "claude-code")
    assert (ws.root / ".mcp.json").exists() and (ws.root / ".claude" / "settings.json").exists()
    debug = tmp_path / "claude-debug.log"
    with StandIn("anthropic", responder(ws)) as api:
        env |= {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-ant-stand-in", "ENABLE_TOOL_SEARCH": "false",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
        done = run_claude(claude, ws, env, debug)
        turns = [body for body in api.posts("/messages") if "Write" in {t.get("name") for t in body.get("tools") or []}]
    assert done.returncode == 0, f"{done.stderr[-2000:]}\n{tail(debug)}"
    assert json.loads(done.stdout)["result"] == "done"
    assert len(turns) == 2, f"{len(turns)} main-loop requests; log:\n{tail(debug)}"
    first, second = turns

    # The session's first request: the hooks' context, facts of this project only.
    said = texts(first["messages"])
    assert "<specactor-context>" in said and "specactor context for project shop" in said
    assert '[block] policy pol-eval "No eval"' in said and "adr-042-database-selection" in said
    assert MINE[0] in said  # "We deploy the shop service with blue-green deployments."
    assert THEIRS not in said and USERS not in said and "pol-other" not in said
    assert "src/calc.js:1" not in said

    # The .mcp.json server: connected, its tools offered up front, its instructions (the binding
    # constraints' summary) in the request.
    assert "mcp__specactor__knowledge_check" in {t["name"] for t in first["tools"]}
    sent = texts(first)
    assert "## specactor\nspecactor serves a spec-driven workflow" in sent and "[block] pol-eval: No eval" in sent

    # The Write ran, and the PostToolUse report is in the next request, after the tool's result.
    assert (ws.root / "src" / "calc.js").read_text() == VIOLATING
    messages = second["messages"]
    at = next(i for i, m in enumerate(messages)
              if isinstance(m["content"], list) and any(b.get("type") == "tool_result" for b in m["content"]))
    after = texts(messages[at:])
    assert 'src/calc.js:1 violates pol-eval "No eval"' in after
    assert "(blocking)" in after and "eval is not allowed in this project" in after

    # SessionEnd ran: the prompt hook's once-per-session marker is gone.
    assert not any((ws.root / ".specactor" / "sessions").iterdir())
