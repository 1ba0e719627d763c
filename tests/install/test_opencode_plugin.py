"""The OpenCode plugins `specactor install opencode` writes, loaded offline with Node >= 22 (its type
stripping runs the .ts as is) and driven through their hooks with a stand-in `specactor` that logs
its calls: the context is pushed once per session and the same on every call, subagents get none,
an edit's constraint findings reach the tool output, compaction keeps the context, and a missing
`specactor` adds nothing (fail open). Without a Node 22 here, the e2e clients' pinned one is
installed; skipped, saying so, only when npm cannot reach its registry."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specactor.install import install_main

REPO = Path(__file__).resolve().parents[2]
CONTEXT = "<specactor-context>Accepted constraint ADR-7: no print in library code.</specactor-context>"
FINDING = "knowledge_check: ADR-7 (block) at a.py:3"


def node22() -> str | None:
    """A Node >= 22.6 (type stripping): the conformance suite's or the e2e clients' private one, else the PATH's."""
    candidates = sorted([*REPO.glob(".conformance/*/node_modules/.bin/node"),
                         *REPO.glob(".e2e/*/node_modules/.bin/node")])
    found = shutil.which("node")
    for node in [*map(str, candidates), *([found] if found else [])]:
        try:
            version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        match = re.match(r"v(\d+)\.(\d+)", version)
        if match and (int(match.group(1)), int(match.group(2))) >= (22, 6):
            return node
    return None


INSTALL_TIMEOUT = 600.0  # the e2e clients' pinned install, Node 22 among them, when no Node 22 is here yet


@pytest.fixture(scope="session")
def node() -> str:
    """A Node >= 22.6; installs the e2e clients' pinned one (tests/e2e/clients.py) when none is found,
    and skips only when npm cannot reach its registry."""
    from tests.conformance.run import Unreachable
    from tests.e2e import clients

    found = node22()
    if found is None:
        try:
            found = str(clients.ensure(INSTALL_TIMEOUT) / "node")
        except Unreachable as err:
            pytest.skip(f"no Node >= 22.6 here and npm cannot install one: {err}")
    return found

FAKE = f"""#!{sys.executable}
import json, os, sys
data = sys.stdin.read()
with open(os.environ["SPECACTOR_FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "stdin": data, "cwd": os.getcwd()}}) + "\\n")
if sys.argv[1] == "context":
    print({CONTEXT!r})
elif sys.argv[1:3] == ["hook", "tool-use"]:
    print(json.dumps({{"hookSpecificOutput": {{"additionalContext": {FINDING!r}}}}}))
"""

DRIVE_V1 = """
const [file, directory] = process.argv.slice(2)
const mod = await import(file)
const parentOf = (id) => (id === "looked-up-child" ? "p" : undefined)
const client = { session: { get: async ({ path }) => ({ data: { parentID: parentOf(path.id) } }) } }
const hooks = await mod.SpecactorPlugin({ client, directory })
const result = {}
await hooks.event({ event: { type: "session.created", properties: { info: { id: "child", parentID: "s1" } } } })
for (const id of ["s1", "s1", "child", "looked-up-child"]) {
  const out = { system: ["base"] }
  await hooks["experimental.chat.system.transform"]({ sessionID: id, model: {} }, out)
  ;(result.system ??= []).push(out.system)
}
const edit = { title: "a.py", output: "edited a.py", metadata: {} }
await hooks["tool.execute.after"]({ tool: "edit", sessionID: "s1", callID: "c1", args: { filePath: "a.py" } }, edit)
const read = { title: "a.py", output: "contents", metadata: {} }
await hooks["tool.execute.after"]({ tool: "read", sessionID: "s1", callID: "c2", args: { filePath: "a.py" } }, read)
const compacting = { context: [] }
await hooks["experimental.session.compacting"]({ sessionID: "s1" }, compacting)
Object.assign(result, { edit: edit.output, read: read.output, compacting: compacting.context })
console.log(JSON.stringify(result))
"""

DRIVE_V2 = """
const [file, directory] = process.argv.slice(2)
const plugin = (await import(file)).default
const handlers = {}
const ctx = { directory, session: { hook: async (name, fn) => { handlers["session." + name] = fn } },
              tool: { hook: async (name, fn) => { handlers["tool." + name] = fn } } }
await plugin.setup(ctx)
const result = { id: plugin.id, system: [] }
for (const e of [{ sessionID: "s1" }, { sessionID: "s1" }, { session: { id: "c", parentID: "s1" } }]) {
  e.system = []
  await handlers["session.context"](e)
  result.system.push(e.system)
}
const edit = { tool: "write", sessionID: "s1", args: { filePath: "a.py" }, output: "wrote a.py" }
await handlers["tool.execute.after"](edit)
result.edit = edit.output
console.log(JSON.stringify(result))
"""


def drive(node: str, tmp_path: Path, variant: str, command: str) -> tuple[dict[str, object], list[dict[str, object]]]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    assert install_main(["opencode", "--root", str(project), "--opencode-plugin", variant, "--command", command]) == 0
    if variant == "v2":  # the V2 runtime provides @opencode/plugin; a stand-in with the same `define`
        stub = project / "node_modules/@opencode/plugin"
        stub.mkdir(parents=True, exist_ok=True)
        (stub / "package.json").write_text('{"name": "@opencode/plugin", "type": "module", "main": "index.js"}')
        (stub / "index.js").write_text("export const Plugin = { define: (plugin) => plugin }\n")
    script = tmp_path / "drive.mjs"
    script.write_text(DRIVE_V1 if variant == "v1" else DRIVE_V2)
    log = tmp_path / "calls.jsonl"
    plugin = project / ".opencode/plugins/specactor.ts"
    done = subprocess.run([node, "--experimental-strip-types", "--no-warnings", str(script), plugin.as_uri(),
                           str(project)], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "SPECACTOR_FAKE_LOG": str(log)})
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return json.loads(done.stdout), calls


@pytest.fixture
def fake(tmp_path: Path) -> str:
    program = tmp_path / "bin/specactor"
    program.parent.mkdir()
    program.write_text(FAKE)
    program.chmod(0o755)
    return str(program)


def test_v1_plugin_pushes_one_context_per_session_skips_subagents_and_reports_edits(
        node: str, tmp_path: Path, fake: str) -> None:
    result, calls = drive(node, tmp_path, "v1", fake)
    project = str(tmp_path / "project")
    assert result["system"] == [["base", CONTEXT], ["base", CONTEXT], ["base"], ["base"]]
    assert result["edit"] == f"edited a.py\n\n{FINDING}"
    assert result["read"] == "contents"
    assert result["compacting"] == [CONTEXT]
    assert [c["argv"] for c in calls] == [["context", "--root", project], ["hook", "tool-use", "--client", "opencode"]]
    sent = json.loads(str(calls[1]["stdin"]))
    assert sent["tool_name"] == "edit" and sent["tool_input"] == {"filePath": "a.py"} and sent["cwd"] == project
    assert all(c["cwd"] == project for c in calls)


def test_v2_plugin_adds_the_context_through_the_session_hook_and_reports_edits(
        node: str, tmp_path: Path, fake: str) -> None:
    result, calls = drive(node, tmp_path, "v2", fake)
    assert result["id"] == "specactor"
    assert result["system"] == [[{"type": "text", "text": CONTEXT}], [{"type": "text", "text": CONTEXT}], []]
    assert result["edit"] == f"wrote a.py\n\n{FINDING}"
    assert [c["argv"][0] for c in calls] == ["context", "hook"]


def test_the_plugin_adds_nothing_and_throws_nothing_when_specactor_is_missing(node: str, tmp_path: Path) -> None:
    result, calls = drive(node, tmp_path, "v1", str(tmp_path / "no-such-specactor"))
    assert result["system"] == [["base"], ["base"], ["base"], ["base"]]
    assert result["edit"] == "edited a.py" and result["compacting"] == [] and calls == []
