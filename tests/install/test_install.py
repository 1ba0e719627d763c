"""`specactor install` / `uninstall`: merges beside the user's entries, is idempotent, undoes only
its own part, writes nothing on a dry run or a refusal, and every file it writes parses."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

from specactor.install import install_main, uninstall_main
from specactor.install.clients import CLIENTS
from specactor.install.jsonc import strip_comments

# Each client's files holding the user's own entries, comments and odd formatting.
EXISTING: dict[str, dict[str, str]] = {
    "claude-code": {
        ".mcp.json": '{\n    "mcpServers": {\n        "github": {"command": "gh-mcp", "args": []}\n    }\n}\n',
        ".claude/settings.json": (
            '{\n  "permissions": {"allow": ["Bash(ls:*)"]},\n  "hooks": {\n    "Stop": [\n      {\n'
            '        "hooks": [{"type": "command", "command": "notify-send done"}]\n      }\n    ],\n'
            '    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}]\n  }\n}\n'),
    },
    "opencode": {
        "opencode.json": (
            '{\n  // my model\n  "$schema": "https://opencode.ai/config.json",\n  "model": "local/qwen",\n'
            '  "mcp": {\n    "context7": {"type": "remote", "url": "https://mcp.context7.com/mcp"}, // docs\n  },\n'
            '  "instructions": ["AGENTS.md"],\n}\n'),
    },
    "cursor": {".cursor/mcp.json": '{"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse"}}}'},
    "vscode": {
        ".vscode/mcp.json": '{\n\t// VS Code servers\n\t"inputs": [],\n\t"servers": {\n\t\t"fetch": {"type": "stdio", '
                            '"command": "uvx", "args": ["mcp-server-fetch"]}\n\t}\n}\n',
    },
    "codex": {
        ".codex/config.toml": ('model = "o4-mini"  # mine\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n\n'
                               '[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = "command"\ncommand = "say bye"\n'),
    },
    "gemini": {
        ".gemini/settings.json": ('{\n  "theme": "GitHub",\n  "mcpServers": {"search": {"command": "search-mcp"}},\n'
                                  '  "hooks": {"AfterTool": [{"matcher": "run_shell_command", "hooks": '
                                  '[{"type": "command", "command": "audit", "timeout": 1000}]}]}\n}\n'),
    },
}
WRITTEN: dict[str, set[str]] = {
    "claude-code": {".mcp.json", ".claude/settings.json"},
    "opencode": {"opencode.json", ".opencode/plugins/specactor.ts", ".opencode/specactor.md"},
    "cursor": {".cursor/mcp.json"},
    "vscode": {".vscode/mcp.json"},
    "codex": {".codex/config.toml"},
    "gemini": {".gemini/settings.json"},
}


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def seed(root: Path, client: str) -> None:
    for rel, text in EXISTING[client].items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def install(root: Path, client: str, *extra: str) -> int:
    return install_main([client, "--root", str(root), "--opencode-plugin", "v1", *extra])


def parsed(rel: str, data: bytes) -> object:
    text = data.decode()
    return tomllib.loads(text) if rel.endswith(".toml") else strip_comments(text)


def kept(old: object, new: object) -> bool:
    """Whether `new` holds all of `old`: its members (recursively), its arrays' items first."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and kept(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) >= len(old) and all(map(kept, old, new))
    return old == new


@pytest.mark.parametrize("client", CLIENTS)
def test_install_adds_specactor_beside_the_users_entries_and_keeps_them_intact(tmp_path: Path, client: str) -> None:
    seed(tmp_path, client)
    before = {rel: parsed(rel, data) for rel, data in files(tmp_path).items()}
    assert install(tmp_path, client) == 0
    after = files(tmp_path)
    assert set(after) == WRITTEN[client]
    for rel, old in before.items():
        new = parsed(rel, after[rel])
        assert isinstance(old, dict) and isinstance(new, dict)
        assert kept(old, new), rel  # every one of the user's entries is still there, unchanged


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("existing", [True, False], ids=["existing-config", "empty-project"])
def test_installing_twice_changes_no_byte(tmp_path: Path, client: str, existing: bool) -> None:
    if existing:
        seed(tmp_path, client)
    assert install(tmp_path, client) == 0
    once = files(tmp_path)
    assert install(tmp_path, client) == 0
    assert files(tmp_path) == once


@pytest.mark.parametrize("client", CLIENTS)
def test_uninstall_gives_back_the_users_files_byte_for_byte(tmp_path: Path, client: str) -> None:
    seed(tmp_path, client)
    original = files(tmp_path)
    assert install(tmp_path, client) == 0
    assert uninstall_main([client, "--root", str(tmp_path)]) == 0
    assert files(tmp_path) == original


@pytest.mark.parametrize("client", CLIENTS)
def test_uninstall_removes_the_files_and_folders_install_created(tmp_path: Path, client: str) -> None:
    assert install(tmp_path, client) == 0
    assert uninstall_main([client, "--root", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("client", CLIENTS)
def test_every_file_install_writes_parses(tmp_path: Path, client: str) -> None:
    seed(tmp_path, client)
    install(tmp_path, client)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    install(fresh, client)
    for root in (tmp_path, fresh):
        for rel, data in files(root).items():
            if rel.endswith(".toml"):
                tomllib.loads(data.decode())
            elif rel.endswith(".json") and root == fresh:
                json.loads(data)  # a file install creates is plain JSON, comments or not allowed
            elif rel.endswith(".json"):
                strip_comments(data.decode())


def test_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed(tmp_path, "claude-code")
    before = files(tmp_path)
    assert install(tmp_path, "claude-code", "--dry-run") == 0
    out = capsys.readouterr().out
    assert files(tmp_path) == before
    assert "--- a/.mcp.json\n+++ b/.mcp.json\n" in out
    assert '+        "specactor": {' in out
    assert "+++ b/.claude/settings.json" in out and "dry run: nothing written" in out
    install(tmp_path, "claude-code")
    capsys.readouterr()
    assert uninstall_main(["claude-code", "--root", str(tmp_path), "--dry-run"]) == 0
    assert '-        "specactor": {' in capsys.readouterr().out
    assert (tmp_path / ".mcp.json").read_text().count("specactor") > 0


def test_install_says_what_it_did_and_what_is_left_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install(tmp_path, "claude-code")
    out = capsys.readouterr().out
    assert "created   .mcp.json" in out and "created   .claude/settings.json" in out
    assert "approve the `specactor` server" in out
    install(tmp_path, "claude-code")
    assert "unchanged .mcp.json" in capsys.readouterr().out


# Claude Code's hook settings, as adapters.md describes them.
CLAUDE_HOOKS_SCHEMA = {
    "type": "object",
    "properties": {"hooks": {
        "type": "object",
        "propertyNames": {"enum": ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
                                   "PreCompact", "SessionEnd"]},
        "additionalProperties": {"type": "array", "items": {
            "type": "object", "required": ["hooks"], "additionalProperties": False,
            "properties": {
                "matcher": {"type": "string"},
                "hooks": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["type", "command"], "additionalProperties": False,
                    "properties": {"type": {"const": "command"}, "command": {"type": "string"},
                                   "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
                                   "async": {"type": "boolean"}}}}}}},
    }},
}


def test_claude_hooks_follow_claude_codes_schema_and_map_the_seeds_four_hooks(tmp_path: Path) -> None:
    install(tmp_path, "claude-code")
    settings = json.loads((tmp_path / ".claude/settings.json").read_text())
    jsonschema.validate(settings, CLAUDE_HOOKS_SCHEMA)
    commands = {event: [h["command"] for g in groups for h in g["hooks"]]
                for event, groups in settings["hooks"].items()}
    assert commands == {
        "SessionStart": ["specactor hook session-start --client claude"],
        "UserPromptSubmit": ["specactor hook prompt --client claude"],
        "PostToolUse": ["specactor hook tool-use --client claude"],
        "Stop": ["specactor hook stop --client claude"],
        "SessionEnd": ["specactor hook session-end --client claude"],
    }
    start = settings["hooks"]["SessionStart"][0]
    assert set(start["matcher"].split("|")) >= {"startup", "resume", "clear", "compact"}
    tool = settings["hooks"]["PostToolUse"][0]["matcher"]
    assert set(tool.split("|")) >= {"Edit", "Write", "MultiEdit"} and tool.replace("|", "").isalpha()
    assert settings["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] <= 2  # inside Claude's SessionEnd budget


def test_an_older_specactor_hook_is_updated_in_place_not_duplicated(tmp_path: Path) -> None:
    old = {"hooks": {"UserPromptSubmit": [
        {"hooks": [{"type": "command", "command": "mine"}]},
        {"hooks": [{"type": "command", "command": "/opt/bin/specactor hook prompt --client claude", "timeout": 30}]},
    ]}}
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude/settings.json").write_text(json.dumps(old, indent=2))
    install(tmp_path, "claude-code")
    groups = json.loads((tmp_path / ".claude/settings.json").read_text())["hooks"]["UserPromptSubmit"]
    ours = {"type": "command", "command": "specactor hook prompt --client claude", "timeout": 5}
    assert groups == [{"hooks": [{"type": "command", "command": "mine"}]}, {"hooks": [ours]}]


def test_the_command_flag_names_the_program_in_every_entry(tmp_path: Path) -> None:
    install(tmp_path, "claude-code", "--command", "/opt/my tools/specactor")
    server = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["specactor"]
    assert server["command"] == "/opt/my tools/specactor"
    hook = json.loads((tmp_path / ".claude/settings.json").read_text())["hooks"]["Stop"][0]["hooks"][0]
    assert hook["command"] == "'/opt/my tools/specactor' hook stop --client claude"
    assert uninstall_main(["claude-code", "--root", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []


def test_entries_find_the_workspace_the_way_each_client_allows(tmp_path: Path) -> None:
    for client in CLIENTS:
        install(tmp_path, client)
    mcp = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["specactor"]
    assert mcp == {"type": "stdio", "command": "specactor", "args": ["serve"]}  # Claude starts it in the project
    assert json.loads((tmp_path / ".vscode/mcp.json").read_text())["servers"]["specactor"]["args"] == [
        "serve", "--root", "${workspaceFolder}"]
    assert json.loads((tmp_path / ".cursor/mcp.json").read_text())["mcpServers"]["specactor"]["args"] == [
        "serve", "--root", "${workspaceFolder}"]
    opencode = json.loads((tmp_path / "opencode.json").read_text())
    assert opencode["mcp"]["specactor"]["environment"] == {"SPECACTOR_ROOT": "{env:PWD}"}
    assert opencode["instructions"] == [".opencode/specactor.md"]
    codex = tomllib.loads((tmp_path / ".codex/config.toml").read_text())
    assert codex["mcp_servers"]["specactor"] == {"command": "specactor", "args": ["serve"], "startup_timeout_sec": 20}
    assert codex["hooks"]["SessionStart"][0]["hooks"][0]["command"] == "specactor hook session-start --client codex"
    gemini = json.loads((tmp_path / ".gemini/settings.json").read_text())
    assert gemini["hooks"]["BeforeAgent"][0]["hooks"][0]["command"] == "specactor hook prompt --client gemini"


def test_user_scope_writes_under_home_and_nothing_in_the_project(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (home / ".claude.json").write_text('{"numStartups": 3, "mcpServers": {}}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    for client in CLIENTS:
        assert install_main([client, "--scope", "user", "--opencode-plugin", "v2"]) == 0
    assert list(project.iterdir()) == []
    written = set(files(home))
    assert {".claude.json", ".claude/settings.json", ".config/opencode/opencode.json",
            ".config/opencode/plugins/specactor.ts", ".cursor/mcp.json", ".codex/config.toml",
            ".gemini/settings.json"} <= written
    assert any(rel.endswith("Code/User/mcp.json") for rel in written)
    assert json.loads((home / ".claude.json").read_text())["numStartups"] == 3
    opencode = json.loads((home / ".config/opencode/opencode.json").read_text())
    assert opencode["instructions"] == [str(home.resolve() / ".config/opencode/specactor.md")]
    assert "Plugin.define" in (home / ".config/opencode/plugins/specactor.ts").read_text()
    for client in CLIENTS:
        assert uninstall_main([client, "--scope", "user"]) == 0
    assert files(home) == {".claude.json": b'{"numStartups": 3}'}


def test_a_file_that_does_not_parse_stops_the_install_with_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude/settings.json").write_text('{"hooks": {,}}')
    assert install(tmp_path, "claude-code") == 1
    assert not (tmp_path / ".mcp.json").exists()
    err = capsys.readouterr().err
    assert "nothing written" in err and ".claude/settings.json: not valid JSON" in err and "line 1" in err


def test_a_codex_config_with_its_own_specactor_server_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex/config.toml").write_text('[mcp_servers.specactor]\ncommand = "mine"\n')
    assert install(tmp_path, "codex") == 1
    assert (tmp_path / ".codex/config.toml").read_text() == '[mcp_servers.specactor]\ncommand = "mine"\n'


def test_a_codex_hooks_table_that_cannot_take_more_entries_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    text = '[hooks]\nStop = [{hooks = [{type = "command", command = "x"}]}]\n'
    (tmp_path / ".codex/config.toml").write_text(text)
    assert install(tmp_path, "codex") == 1
    assert (tmp_path / ".codex/config.toml").read_text() == text


def test_a_symlink_leading_out_of_the_project_is_refused(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / ".cursor").symlink_to(outside)
    assert install(project, "cursor") == 1
    assert list(outside.iterdir()) == []


def test_a_symlinked_config_inside_the_base_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "dotfiles").mkdir()
    (tmp_path / "dotfiles/mcp.json").write_text('{"mcpServers": {}}\n')
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor/mcp.json").symlink_to(tmp_path / "dotfiles/mcp.json")
    assert install(tmp_path, "cursor") == 0
    assert (tmp_path / ".cursor/mcp.json").is_symlink()
    assert "specactor" in json.loads((tmp_path / "dotfiles/mcp.json").read_text())["mcpServers"]


def test_a_plugin_file_that_is_not_specactors_is_never_overwritten(tmp_path: Path) -> None:
    plugin = tmp_path / ".opencode/plugins/specactor.ts"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("export const Mine = async () => ({})\n")
    assert install(tmp_path, "opencode") == 1
    assert plugin.read_text() == "export const Mine = async () => ({})\n"
    assert not (tmp_path / "opencode.json").exists()


def test_an_edited_plugin_is_left_in_place_by_uninstall(tmp_path: Path) -> None:
    install(tmp_path, "opencode")
    plugin = tmp_path / ".opencode/plugins/specactor.ts"
    plugin.write_text(plugin.read_text() + "// my tweak\n")
    assert uninstall_main(["opencode", "--root", str(tmp_path)]) == 1
    assert plugin.exists() and (tmp_path / "opencode.json").exists()


def test_the_opencode_plugin_variant_follows_the_flag_and_upgrades_in_place(tmp_path: Path) -> None:
    install(tmp_path, "opencode")
    plugin = tmp_path / ".opencode/plugins/specactor.ts"
    assert '"experimental.chat.system.transform"' in plugin.read_text()
    install_main(["opencode", "--root", str(tmp_path), "--opencode-plugin", "v2"])
    assert "Plugin.define" in plugin.read_text() and 'ctx.session.hook("context"' in plugin.read_text()
    assert uninstall_main(["opencode", "--root", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []


def test_opencode_jsonc_is_used_when_it_is_the_projects_config(tmp_path: Path) -> None:
    (tmp_path / "opencode.jsonc").write_text('{\n  // mine\n  "model": "x"\n}\n')
    install(tmp_path, "opencode")
    assert not (tmp_path / "opencode.json").exists()
    assert "specactor" in strip_comments((tmp_path / "opencode.jsonc").read_text())["mcp"]


def test_python_dash_m_specactor_install_runs_the_command(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "specactor.install", "install", "vscode", "--root", str(tmp_path),
                           "--dry-run"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "+++ b/.vscode/mcp.json" in done.stdout
    usage = subprocess.run([sys.executable, "-m", "specactor.install"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_an_unknown_client_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert install_main(["emacs", "--root", str(tmp_path)]) == 2
    assert "invalid choice" in capsys.readouterr().err
