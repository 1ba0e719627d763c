"""OpenCode, for real: `specactor install opencode` in a project, then `opencode run` against a stand-in
OpenAI-compatible provider (chat completions, streamed) that records what the client sends.

The provider is the user's own config (`~/.config/opencode/opencode.json` under the isolated HOME),
so the project's `opencode.json` is exactly what install wrote. What it proves, with the pinned
client: the installed V1 plugin loads offline (its `@opencode-ai/plugin` import is a type only:
OpenCode's own install of it fails here, on purpose) and its `experimental.chat.system.transform`
puts the session context, the same text on every call of the session, into the system prompt; the
`instructions` file and the MCP server (started with SPECACTOR_ROOT from `{env:PWD}`) reach the
model; and `tool.execute.after` appends a violating write's report to the tool's output the model
reads next.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from specactor.adapters.opencode import OpenCodeAdapter
from tests.context.workspace import MINE, THEIRS, USERS, Workspace
from tests.e2e.conftest import PROMPT, VIOLATING, client_env, install
from tests.e2e.stand_in import Reply, StandIn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RUN_TIMEOUT = 180.0  # seconds for one `opencode run` (about 6 s here)
MODEL = "model-1"


def provide(home: Path, url: str) -> None:
    """The stand-in as the user's provider and default model."""
    folder = home / ".config" / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "Stand-in", "options": {"baseURL": f"{url}/v1",
                "apiKey": "stand-in"}, "models": {MODEL: {"name": "Stand-in model", "tool_call": True}}}
    config = {"$schema": "https://opencode.ai/config.json", "provider": {"standin": provider},
              "model": f"standin/{MODEL}", "small_model": f"standin/{MODEL}", "autoupdate": False, "share": "disabled"}
    (folder / "opencode.json").write_text(json.dumps(config, indent=2))


def tool_names(body: dict[str, Any]) -> set[str]:
    return {tool.get("function", {}).get("name") for tool in body.get("tools") or []}


def responder(ws: Workspace) -> Any:
    """A write of a file that calls eval() on the agent's first turn, then text; a title to side calls."""
    def reply(body: Any) -> Reply:
        if "write" not in tool_names(body):
            return Reply("Deploying the shop service")
        if any(m.get("role") == "tool" for m in body.get("messages") or []):
            return Reply("done")
        return Reply(tool="write", arguments={"filePath": str(ws.root / "src" / "calc.js"), "content": VIOLATING})
    return reply


def run_opencode(opencode: Path, ws: Workspace, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [str(opencode), "run", "--print-logs", "--log-level", "INFO", PROMPT]
    try:
        return subprocess.run(cmd, cwd=ws.root, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as err:
        log = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else str(err.stderr)
        pytest.fail(f"`opencode run` did not finish within {RUN_TIMEOUT:.0f} s; its log ends:\n{log[-3000:]}")


def system_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in body.get("messages") or [] if m.get("role") == "system"]


def test_opencode_plugin_puts_the_context_in_the_system_prompt_and_reports_a_violating_write(
        opencode: Path, client_bin: Path, ws: Workspace, tmp_path: Path, closed_port: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    env = client_env(ws, home, client_bin, closed_port) | {
        "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
    install(ws, env, "opencode")
    assert (ws.root / "opencode.json").exists() and (ws.root / ".opencode" / "plugins" / "specactor.ts").exists()
    with StandIn("openai", responder(ws)) as api:
        provide(home, api.url)
        done = run_opencode(opencode, ws, env)
        turns = [body for body in api.posts("/chat/completions") if "write" in tool_names(body)]
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(turns) == 2, f"{len(turns)} agent requests; log:\n{done.stderr[-3000:]}"
    first, second = turns

    # The plugin's context: one system part, facts of this project only, the same on both calls.
    contexts = [[s for s in system_texts(body) if s.startswith("<specactor-context>")] for body in turns]
    assert [len(c) for c in contexts] == [1, 1] and contexts[0] == contexts[1]
    context = contexts[0][0]
    assert "specactor context for project shop" in context
    assert '[block] policy pol-eval "No eval"' in context and "adr-042-database-selection" in context
    assert MINE[0] in context  # "We deploy the shop service with blue-green deployments."
    assert THEIRS not in context and USERS not in context and "pol-other" not in context

    # The instructions file and the MCP server with its summary of the binding constraints.
    system = "\n".join(system_texts(first))
    assert "This project is served by specactor" in system
    assert '<server name="specactor">' in system and "[block] pol-eval: No eval" in system
    assert "specactor_knowledge_check" in tool_names(first)

    # The Python side of the adapter names the tools as this OpenCode does, and gives the plugin's context.
    for name in [n for n in os.environ if n.startswith("SPECACTOR_")]:
        monkeypatch.delenv(name)
    for name, value in ws.env().items():
        if name.startswith("SPECACTOR_"):
            monkeypatch.setenv(name, value)
    adapter = OpenCodeAdapter(ws.root)
    assert {t.name for t in adapter.get_tools()} <= tool_names(first)
    assert adapter.get_session_context() == context

    # The write ran, and tool.execute.after put the violation into the output the model reads next.
    assert (ws.root / "src" / "calc.js").read_text() == VIOLATING
    results = [m["content"] for m in second["messages"] if m.get("role") == "tool"]
    assert len(results) == 1 and isinstance(results[0], str)
    assert 'src/calc.js:1 violates pol-eval "No eval"' in results[0] and "(blocking)" in results[0]
