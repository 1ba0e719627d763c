"""`specactor hook <event> --client <client>`: the seed's onSessionStart, onMessage, onToolUse and
onSessionEnd as a short process a client runs, reading its hook JSON on stdin.

- `session-start`: the session context (`domain/context.py`), and the session's marker.
- `prompt`: the project's memories relevant to the prompt (lexical score at least 0.7, at most 5,
  2,000 characters); and, the first time a session id is seen (a marker file created with
  O_EXCL under `<root>/.specactor/sessions/`, also by session-start), the full session context:
  clients that run no SessionStart hook (oh-my-opencode) still get it once, and a client that
  ran it does not get it twice.
- `tool-use`: after a file-writing tool, the changed files (read inside the workspace only) are
  checked against the binding constraints; violations come back naming rule, file and line.
- `stop`: nothing. `session-end`: forgets the session's marker, and markers older than a week.

It fails open: on any error, or past its own deadline (a watchdog thread ends the process), it
prints nothing and exits 0. It imports neither trio nor the server.
"""

from __future__ import annotations

import argparse
import hashlib
import os  # noqa: TID251 - a command of its own, like cli.py: stdin, marker files, the watchdog's exit
import select
import threading  # noqa: TID251 - the watchdog that keeps the deadline whatever blocks
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final, cast

from specactor.context.reader import PROMPT_BUDGET, PROMPT_LIMIT, Deadline, Sources, binding_items, gather
from specactor.domain import context as text
from specactor.domain.knowledge.api import Item
from specactor.hooks.formats import CLIENTS, EVENTS, Client, Event, HookInput, changed_paths, parse_input, render

# Each well inside its client's limits: SessionStart <= 2 s, UserPromptSubmit <= 1 s, SessionEnd <= 1 s
# (Claude Code shares 1.5 s between all SessionEnd hooks).
DEADLINES: Final[dict[str, float]] = {"session-start": 1.5, "prompt": 0.8, "tool-use": 1.5, "stop": 0.5,
                                      "session-end": 0.5}
STDIN_SECONDS: Final = 0.5  # a client writes its JSON at once; a stdin left open is not waited on
STDIN_CAP: Final = 1 << 20  # more is read and dropped (the client is not left with a broken pipe): no answer
FILE_CAP: Final = 1 << 20  # a changed file larger than this is not checked
VIOLATION_BUDGET: Final = 3000
MARKER_AGE: Final = 7 * 86400.0
MARKERS_SWEPT: Final = 1000  # markers looked at by one session-end, oldest or not
# Must-use and must-exist ask whether *anything* in the workspace matches: one changed file cannot answer.
PER_FILE: Final = frozenset({"must_not_use", "must_not_exist", "must_not_match", "must_match"})


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specactor hook", description="Answer a client's hook: session context, "
                                "relevant memories, constraint checks of written files. Reads the hook JSON on "
                                "stdin; prints nothing and exits 0 on any error.")
    p.add_argument("event", choices=EVENTS)
    p.add_argument("--client", choices=CLIENTS, default="text")
    p.add_argument("--root", help="the workspace (default: SPECACTOR_ROOT, the client's project directory, the "
                   "hook's cwd)")
    p.add_argument("--budget", type=int, help="most characters of session context (default: the context.budget "
                   f"setting, {text.DEFAULT_BUDGET} unless set)")
    return p


def hook_main(argv: Sequence[str] | None = None) -> int:
    """Run one hook; always 0 (fail open)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit:
        return 0  # argparse said why on stderr
    deadline = Deadline(DEADLINES[args.event])
    printing = threading.Lock()
    watchdog = threading.Timer(DEADLINES[args.event], _expire, (printing,))
    watchdog.daemon = True
    watchdog.start()
    try:
        budget = None if args.budget is None else max(1, args.budget)
        out = answer(cast(Event, args.event), cast(Client, args.client), args.root, budget, deadline)
    except Exception:
        return 0
    if out and printing.acquire(blocking=False):  # from here on, the watchdog lets the answer finish
        data = (out + "\n").encode()
        while data:
            data = data[os.write(1, data):]
    return 0


def _expire(printing: threading.Lock) -> None:
    if printing.acquire(blocking=False):
        os._exit(0)  # past the deadline, before anything was printed: nothing is printed


def answer(event: Event, client: Client, root: str | None, budget: int | None, deadline: Deadline) -> str:
    """The hook's stdout for `event` (without the final newline); "" for none. `budget`: characters
    of session context, None for the workspace's `context.budget` setting.

    Raises:
        Exception: anything; the caller prints nothing.
    """
    hook = parse_input(read_stdin(deadline))
    if event == "stop":
        return ""
    sources = Sources.at(workspace(root, hook))
    if budget is None:
        budget = sources.budget
    if event == "session-end":
        forget(sources.root, hook.session_id)
        return ""
    if event == "session-start":
        found = gather(sources, deadline)
        full = text.session_context(found.items, found.notes, budget, project=sources.ids.project_id)
        if full and hook.session_id:  # delivered: the prompt hook's once-per-session fallback need not repeat it
            _mark(_marker(sources.root, hook.session_id))
        return render(client, event, full)
    if event == "prompt":
        return render(client, event, prompt_context(sources, hook, budget, deadline))
    return tool_use(client, sources, hook, deadline)


def read_stdin(deadline: Deadline) -> bytes:
    """The client's JSON: until end of file, within `STDIN_SECONDS`.

    Raises:
        TimeoutError: stdin stayed open. ValueError: more than `STDIN_CAP` bytes.
    """
    end = min(time.monotonic() + STDIN_SECONDS, deadline.end)
    chunks: list[bytes] = []
    size = 0
    while True:
        left = end - time.monotonic()
        if left <= 0 or not select.select([0], [], [], left)[0]:
            raise TimeoutError("stdin was not closed in time")
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        size += len(chunk)
        if size <= STDIN_CAP:
            chunks.append(chunk)
    if size > STDIN_CAP:
        raise ValueError(f"the hook input is larger than {STDIN_CAP} bytes")
    return b"".join(chunks)


def workspace(root: str | None, hook: HookInput) -> str:
    """--root, else SPECACTOR_ROOT, else the client's project directory, else the hook's cwd, else ours."""
    for candidate in (root, os.environ.get("SPECACTOR_ROOT"), os.environ.get("CLAUDE_PROJECT_DIR"),
                      os.environ.get("GEMINI_PROJECT_DIR"), hook.cwd):
        if candidate:
            return candidate
    return os.getcwd()


# ---------------------------------------------------------------------- prompt


def _marker(root: Path, session_id: str) -> Path:
    return root / ".specactor" / "sessions" / hashlib.sha256(session_id.encode()).hexdigest()[:32]


def prompt_context(sources: Sources, hook: HookInput, budget: int, deadline: Deadline) -> str:
    """The session context the first time this session is seen here, then the relevant memories."""
    parts: list[str] = []
    shown: set[str] = set()
    if hook.session_id and not _marker(sources.root, hook.session_id).exists():
        found = gather(sources, deadline)
        full = text.session_context(found.items, found.notes, budget, project=sources.ids.project_id)
        if full and _mark(_marker(sources.root, hook.session_id)):
            parts.append(full)
            shown = {n.memory_id for n in found.notes if n.memory_id in full}
    if hook.prompt and hook.prompt.strip():
        found = gather(sources, deadline, query=hook.prompt, knowledge=False, limit=PROMPT_LIMIT + len(shown))
        fresh = [n for n in found.notes if n.memory_id not in shown][:PROMPT_LIMIT]
        related = text.relevant_memories(fresh, PROMPT_BUDGET)
        if related:
            parts.append(related)
    return "\n".join(parts)


def _mark(marker: Path) -> bool:
    """Create the marker; False when it exists already (another prompt of the session was first) or
    cannot be written (then the context is not repeated on every prompt either)."""
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
    except OSError:
        return False
    return True


def forget(root: Path, session_id: str | None) -> None:
    """Remove the session's marker and markers older than `MARKER_AGE` (a bounded sweep)."""
    folder = root / ".specactor" / "sessions"
    if session_id:
        _marker(root, session_id).unlink(missing_ok=True)
    try:
        with os.scandir(folder) as entries:
            old = time.time() - MARKER_AGE
            for n, entry in enumerate(entries):
                if n >= MARKERS_SWEPT:
                    break
                if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < old:
                    Path(entry.path).unlink(missing_ok=True)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------------- tool-use


def tool_use(client: Client, sources: Sources, hook: HookInput, deadline: Deadline) -> str:
    """The violations of the binding constraints in the files a writing tool changed."""
    paths = [rel for raw in changed_paths(hook.tool_name, hook.tool_input)
             for rel in [inside(sources.root, hook.cwd, raw)] if rel is not None]
    if not paths:
        return ""
    files = [(rel, content) for rel in paths for content in [read_text(sources.root, rel)] if content is not None]
    items = per_file(binding_items(sources, deadline))
    if not files or not items:
        return ""
    from specactor.domain.knowledge.check import check  # RE2 and the glob engine: only for this event

    found = check(items, files, None, "warn")
    report = text.violation_report(found.violations, VIOLATION_BUDGET)
    blocks = [v for v in found.violations if v.severity == "block"]
    return render(client, "tool-use", report,
                  blocking=text.violation_report(blocks, VIOLATION_BUDGET) if blocks else None)


def per_file(items: list[Item]) -> list[Item]:
    """The items with only the constraints one changed file can violate (`PER_FILE`)."""
    import msgspec

    out = []
    for item in items:
        kept = [c for c in item.constraints or () if c.operator in PER_FILE]
        if kept:
            out.append(msgspec.structs.replace(item, constraints=kept))
    return out


def inside(root: Path, cwd: str | None, raw: str) -> str | None:
    """`raw` (absolute, or relative to the hook's cwd) as a path relative to `root`; None outside it."""
    base = cwd if cwd and os.path.isabs(cwd) else str(root)
    full = os.path.normpath(os.path.join(base, raw))
    for top in dict.fromkeys((str(root), os.path.realpath(root))):
        if full.startswith(top.rstrip("/") + "/"):
            return full[len(top.rstrip("/")) + 1:]
    real = os.path.realpath(os.path.dirname(full))  # the root reached through a symlinked parent (/tmp on macOS)
    top = os.path.realpath(root).rstrip("/") + "/"
    if (real + "/").startswith(top):
        return os.path.join(real[len(top):], os.path.basename(full)).lstrip("/")
    return None


def read_text(root: Path, rel: str) -> str | None:
    """The file's text, read without leaving the workspace; None when missing, too large, binary or escaping."""
    from specactor.fs.confined import Confined
    from specactor.fs.files import PathEscape

    try:
        with Confined(root) as files:
            info = files.stat(rel)
            if info is None or info.st_size > FILE_CAP:
                return None
            data = files.read(rel)
    except (PathEscape, OSError):
        return None
    if data is None or b"\0" in data:
        return None
    return data.decode("utf-8", "replace")
