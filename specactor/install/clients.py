"""What `specactor install <client>` writes for each client, at project or user scope: pure data.

A `Plan` names its base folder (the project, or HOME) and its targets: members set in JSON(C)
files, Claude-style hook groups, a marked TOML block, and whole files specactor owns. How the
installed entries find the workspace: Claude Code, oh-my-opencode, Codex and Gemini start a stdio
server in the folder they run in, and specactor's root defaults to the current directory, so their
entries carry no path and a committed project file stays right in every clone; Cursor and VS Code
expand `${workspaceFolder}`, OpenCode `{env:PWD}` (it takes its project from $PWD). Hook commands
carry no path either: each client passes its `cwd` on the hook's stdin.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from specactor.adapters.opencode import SERVER_KEY as OPENCODE_KEY
from specactor.install.jsonc import JsonPath

CLIENTS = ("claude-code", "opencode", "cursor", "codex", "gemini", "vscode")
SCOPES = ("project", "user")


@dataclass(frozen=True)
class Setting:
    """A member install sets (replacing specactor's older value) and uninstall removes."""

    path: JsonPath
    value: Any


@dataclass(frozen=True)
class ListItem:
    """A value install adds to the array at `path` once, and uninstall removes."""

    path: JsonPath
    item: Any


@dataclass(frozen=True)
class HookGroup:
    """One matcher group in the array `hooks.<event>`. A group is specactor's when every handler
    in it runs `specactor hook …`; install keeps exactly one such group per event."""

    event: str
    group: dict[str, Any]


JsonEdit = Setting | ListItem | HookGroup


@dataclass(frozen=True)
class JsonTarget:
    rel: str
    edits: tuple[JsonEdit, ...]
    skeleton: dict[str, Any] = field(default_factory=dict)  # what a file install creates starts with


@dataclass(frozen=True)
class TomlTarget:
    rel: str
    body: str


@dataclass(frozen=True)
class OwnedTarget:
    """A whole file specactor writes (the OpenCode plugin); `variants` are every content an
    unedited install of this version may have left, so uninstall knows what it may remove."""

    rel: str
    content: str
    variants: tuple[str, ...] = ()


Target = JsonTarget | TomlTarget | OwnedTarget


@dataclass(frozen=True)
class Plan:
    client: str
    scope: str
    base: Path
    targets: tuple[Target, ...]
    todo: tuple[str, ...]  # what the user must still do after install


def is_specactor_hook(command: object) -> bool:
    """Whether a hook handler's command is `specactor hook …` (the program given by any path)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) >= 2 and Path(words[0]).name == "specactor" and words[1] == "hook"


def asset(name: str) -> str:
    return resources.files("specactor.install").joinpath("assets", name).read_text(encoding="utf-8")


def _hook(command: str, event: str, client: str, timeout: int, matcher: str | None = None) -> dict[str, Any]:
    handler = {"type": "command", "command": f"{shlex.quote(command)} hook {event} --client {client}",
               "timeout": timeout}
    return ({"matcher": matcher} if matcher is not None else {}) | {"hooks": [handler]}


# Claude Code's file-writing tools, and OpenCode's as oh-my-opencode names them for Claude hooks
# (PascalCase: edit -> Edit, apply_patch -> ApplyPatch). Only letters and `|`: a list of exact names.
CLAUDE_WRITE_TOOLS = "Edit|MultiEdit|Write|NotebookEdit|Patch|ApplyPatch"


def claude_hooks(command: str) -> tuple[HookGroup, ...]:
    """The seed's four hooks as Claude Code events. Timeouts are seconds; SessionEnd's 2 s also
    sets Claude's shared SessionEnd budget (1.5 s by default). oh-my-opencode runs the same file's
    UserPromptSubmit, PostToolUse and Stop (not SessionStart/SessionEnd): `--client claude` prints
    plain text for prompts, which is what it injects."""
    return (
        HookGroup("SessionStart", _hook(command, "session-start", "claude", 5, "startup|resume|clear|compact")),
        HookGroup("UserPromptSubmit", _hook(command, "prompt", "claude", 5)),
        HookGroup("PostToolUse", _hook(command, "tool-use", "claude", 10, CLAUDE_WRITE_TOOLS)),
        HookGroup("Stop", _hook(command, "stop", "claude", 5)),
        HookGroup("SessionEnd", _hook(command, "session-end", "claude", 2)),
    )


def gemini_hooks(command: str) -> tuple[HookGroup, ...]:
    """Gemini CLI's events; timeouts in milliseconds. BeforeAgent runs once per prompt."""
    return (
        HookGroup("SessionStart", _hook(command, "session-start", "gemini", 5000, "startup|resume|clear")),
        HookGroup("BeforeAgent", _hook(command, "prompt", "gemini", 5000)),
        HookGroup("AfterTool", _hook(command, "tool-use", "gemini", 10000, "write_file|replace")),
        HookGroup("SessionEnd", _hook(command, "session-end", "gemini", 2000)),
    )


def codex_block(command: str) -> str:
    """The TOML body of Codex's block: the MCP server, then its hooks as `[[hooks.<Event>]]` tables
    (seconds). PostToolUse has no matcher: Codex's tool names vary by version (Bash, apply_patch),
    and the hook itself looks at `tool_name`. Codex has no SessionEnd."""
    quoted = _toml_string(command)
    lines = ["[mcp_servers.specactor]", f"command = {quoted}", 'args = ["serve"]', "startup_timeout_sec = 20", ""]
    events = (("SessionStart", "session-start", 5, "startup|resume|clear"), ("UserPromptSubmit", "prompt", 5, None),
              ("PostToolUse", "tool-use", 10, None), ("Stop", "stop", 5, None))
    for event, name, timeout, matcher in events:
        lines.append(f"[[hooks.{event}]]")
        if matcher:
            lines.append(f"matcher = {_toml_string(matcher)}")
        lines += [f"[[hooks.{event}.hooks]]", 'type = "command"',
                  f"command = {_toml_string(f'{shlex.quote(command)} hook {name} --client codex')}",
                  f"timeout = {timeout}", ""]
    return "\n".join(lines[:-1]) + "\n"


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def opencode_plugin(command: str, variant: str) -> str:
    source = asset(f"opencode_{variant}.ts")
    return source.replace('const SPECACTOR_COMMAND = "specactor"',
                          f"const SPECACTOR_COMMAND = {_json_string(command)}", 1)


def _json_string(text: str) -> str:
    return json.dumps(text)


def _opencode_config(base: Path, folder: str) -> str:
    """`opencode.jsonc` when only that one exists, else `opencode.json`."""
    json_rel, jsonc_rel = f"{folder}opencode.json", f"{folder}opencode.jsonc"
    return jsonc_rel if (base / jsonc_rel).exists() and not (base / json_rel).exists() else json_rel


def vscode_user_dir() -> str:
    """VS Code's user settings folder, relative to HOME."""
    if sys.platform == "darwin":
        return "Library/Application Support/Code/User"
    return ".config/Code/User"


def plan(client: str, scope: str, base: Path, *, command: str = "specactor",
         opencode_plugin_variant: str = "v1") -> Plan:
    """What installing `client` at `scope` writes under `base` (the project, or HOME for user scope)."""
    user = scope == "user"
    server: dict[str, Any]
    todo: tuple[str, ...]
    if client == "claude-code":
        server = {"type": "stdio", "command": command, "args": ["serve"]}
        mcp = JsonTarget(".claude.json" if user else ".mcp.json", (Setting(("mcpServers", "specactor"), server),))
        hooks = JsonTarget(".claude/settings.json", claude_hooks(command))
        todo = ("start Claude Code in this project and approve the `specactor` server from .mcp.json when asked "
                "(`claude mcp list` shows it pending until then), and review the new hooks (`/hooks`)",) if not user \
            else ("restart Claude Code (a running one may write ~/.claude.json back over the new entry: if "
                  "`claude mcp list` lacks specactor, install again with Claude Code closed)",)
        return Plan(client, scope, base, (mcp, hooks), (
            *todo, "oh-my-opencode reads the same .mcp.json and .claude/settings.json hooks (no SessionStart "
            "there: the prompt hook brings the context, from a session's second message)"))
    if client == "opencode":
        folder = ".config/opencode/" if user else ""
        plugin_dir = ".config/opencode/plugins/" if user else ".opencode/plugins/"
        notes_rel = ".config/opencode/specactor.md" if user else ".opencode/specactor.md"
        notes_ref = str(base / notes_rel) if user else notes_rel
        server = {"type": "local", "command": [command, "serve"], "environment": {"SPECACTOR_ROOT": "{env:PWD}"},
                  "enabled": True, "timeout": 10000}
        config = JsonTarget(_opencode_config(base, folder),
                            (Setting(("mcp", OPENCODE_KEY), server), ListItem(("instructions",), notes_ref)),
                            skeleton={"$schema": "https://opencode.ai/config.json"})
        variants = tuple(opencode_plugin(command, v) for v in ("v1", "v2"))
        plugin = OwnedTarget(plugin_dir + "specactor.ts", opencode_plugin(command, opencode_plugin_variant), variants)
        notes = OwnedTarget(notes_rel, asset("opencode_instructions.md"))
        return Plan(client, scope, base, (config, plugin, notes), (
            "restart OpenCode; `opencode mcp list` should show specactor connected",))
    if client == "cursor":
        server = {"command": command, "args": ["serve", "--root", "${workspaceFolder}"]}
        target = JsonTarget(".cursor/mcp.json", (Setting(("mcpServers", "specactor"), server),))
        return Plan(client, scope, base, (target,), (
            "enable the specactor server in Cursor's Settings > MCP (Cursor asks once per new server); "
            "Cursor gets the session summary from the server's MCP instructions",))
    if client == "vscode":
        server = {"type": "stdio", "command": command, "args": ["serve", "--root", "${workspaceFolder}"]}
        rel = f"{vscode_user_dir()}/mcp.json" if user else ".vscode/mcp.json"
        target = JsonTarget(rel, (Setting(("servers", "specactor"), server),))
        return Plan(client, scope, base, (target,), (
            "start the server from VS Code's MCP view (or the `Start` lens in mcp.json) and trust it when asked; "
            "Copilot gets the session summary from the server's MCP instructions",))
    if client == "codex":
        block = TomlTarget(".codex/config.toml", codex_block(command))
        todo = ("trust the new hooks once when Codex asks (a Codex from before hooks were on by default also "
                "needs `[features] codex_hooks = true`); `codex mcp list` shows the server",)
        if not user:
            todo += ("Codex reads a project's .codex/config.toml only once the project is trusted",)
        return Plan(client, scope, base, (block,), todo)
    if client == "gemini":
        server = {"command": command, "args": ["serve"], "timeout": 30000}
        target = JsonTarget(".gemini/settings.json", (Setting(("mcpServers", "specactor"), server),
                                                       *gemini_hooks(command)))
        return Plan(client, scope, base, (target,), (
            "restart Gemini CLI and trust the project's hooks when asked; `gemini mcp list` shows the server",))
    raise ValueError(f"unknown client {client!r}; one of {', '.join(CLIENTS)}")
