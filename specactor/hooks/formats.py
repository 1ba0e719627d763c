"""What `specactor hook` reads from each client and what it answers, purely.

The input is the client's hook JSON (Claude Code, Codex and Gemini CLI send the same core fields:
`session_id`, `cwd`, `prompt`, `tool_name`, `tool_input`; the OpenCode plugin and `text` send the
same shape). The answer follows the client's output contract (`reference/adapters.md`):

| client | session-start, prompt | tool-use |
|---|---|---|
| claude | plain text | `hookSpecificOutput.additionalContext` JSON; a block violation adds `decision: "block"` |
| codex | `hookSpecificOutput` JSON with `hookEventName` | the same; a block violation adds `decision: "block"` |
| gemini | `{"hookSpecificOutput":{"additionalContext":…}}`, stdout JSON only | the same (`deny` hides the output) |
| opencode, text | plain text | plain text |

`stop` and `session-end` answer nothing on any client.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal, get_args

import msgspec

Event = Literal["session-start", "prompt", "tool-use", "stop", "session-end"]
Client = Literal["claude", "codex", "gemini", "opencode", "text"]
EVENTS: Final[tuple[str, ...]] = get_args(Event)
CLIENTS: Final[tuple[str, ...]] = get_args(Client)

# The client's event name for `hookEventName` (Claude Code and Codex use the same names).
EVENT_NAMES: Final[dict[str, str]] = {"session-start": "SessionStart", "prompt": "UserPromptSubmit",
                                      "tool-use": "PostToolUse", "stop": "Stop", "session-end": "SessionEnd"}

# Tools that write files, lower-cased, over the clients: Claude Code (Write, Edit, MultiEdit,
# NotebookEdit), Codex (apply_patch), Gemini CLI (write_file, replace), OpenCode (write, edit,
# patch, multiedit; ApplyPatch as oh-my-opencode names it), and the usual names of editor tools elsewhere.
WRITERS: Final = frozenset({"write", "edit", "multiedit", "notebookedit", "apply_patch", "applypatch", "patch",
                            "write_file", "replace", "edit_file", "create_file", "str_replace_editor",
                            "str_replace_based_edit_tool"})
# Shells: Codex may run apply_patch through one; only a patch envelope in the command counts.
SHELLS: Final = frozenset({"bash", "shell", "local_shell", "exec_command"})
_PATH_KEYS: Final = ("file_path", "filePath", "path", "notebook_path", "absolute_path", "target_file")
_PATCH_KEYS: Final = ("command", "patch", "input", "patchText", "patch_text")
# apply_patch's envelope (`*** Update File: a/b.py`) and a unified diff's `+++ b/a/b.py`.
_PATCH_FILE: Final = re.compile(r"^\*\*\* (?:Add|Update) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$"
                                r"|^\+\+\+ (?:b/)?(.+?)\s*$", re.MULTILINE)
MAX_FILES: Final = 8  # files one tool call is checked for; a patch touching more is checked in part


class HookInput(msgspec.Struct, kw_only=True):
    """The fields specactor reads of any client's hook input; the others are ignored."""

    session_id: str | None = None
    cwd: str | None = None
    prompt: str | None = None
    source: str | None = None
    tool_name: str | None = None
    tool_input: Any = None
    hook_event_name: str | None = None


_decoder = msgspec.json.Decoder(HookInput)


def parse_input(data: bytes) -> HookInput:
    """The hook input; empty stdin is an empty input.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError: not a JSON object of the expected field types.
    """
    return _decoder.decode(data) if data.strip() else HookInput()


def changed_paths(tool_name: str | None, tool_input: Any) -> list[str]:
    """The paths a file-writing tool call names (as given: absolute or relative), at most `MAX_FILES`;
    [] for any other tool."""
    name = (tool_name or "").lower()
    if name in SHELLS and isinstance(tool_input, dict):
        command = tool_input.get("command")
        command = "\n".join(c for c in command if isinstance(c, str)) if isinstance(command, list) else command
        return patch_paths(command)[:MAX_FILES] if isinstance(command, str) and "*** Begin Patch" in command else []
    if name not in WRITERS:
        return []
    found: list[str] = []
    if isinstance(tool_input, dict):
        for key in _PATH_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                found.append(value)
                break
        for key in _PATCH_KEYS:
            value = tool_input.get(key)
            if isinstance(value, list):  # Codex may pass argv: ["apply_patch", "<patch>"]
                value = "\n".join(v for v in value if isinstance(v, str))
            if isinstance(value, str) and ("*** " in value or "+++ " in value):
                found += patch_paths(value)
    elif isinstance(tool_input, str):
        found += patch_paths(tool_input)
    return list(dict.fromkeys(found))[:MAX_FILES]


def patch_paths(patch: str) -> list[str]:
    """The files a patch adds or updates (where a moved file lands), in order; deleted ones are left out."""
    paths = []
    for m in _PATCH_FILE.finditer(patch):
        path = m.group(1) or m.group(2) or m.group(3)
        if path and path != "/dev/null":
            paths.append(path)
    return list(dict.fromkeys(paths))


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def render(client: Client, event: Event, text: str, *, blocking: str | None = None) -> str:
    """`text` as `client` takes it for `event`; "" when there is nothing to say.

    `blocking` (tool-use only) is the reason a block-severity violation gives, on clients that
    can report it as blocking.
    """
    if not text or event in ("stop", "session-end"):
        return ""
    if client in ("opencode", "text"):
        return text
    if client == "claude" and event != "tool-use":
        return text  # Claude Code adds plain stdout of SessionStart and UserPromptSubmit as context
    if client == "gemini":
        return _json({"hookSpecificOutput": {"additionalContext": text}})
    out: dict[str, Any] = {}
    if blocking and event == "tool-use":  # claude and codex: the model is shown `reason`
        out = {"decision": "block", "reason": blocking}
        if blocking.strip() == text.strip():  # every finding blocks: the reason says it all, once
            return _json(out)
    out["hookSpecificOutput"] = {"hookEventName": EVENT_NAMES[event], "additionalContext": text}
    return _json(out)
