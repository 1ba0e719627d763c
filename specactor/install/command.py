"""`specactor install <client>` and `specactor uninstall <client>`: plan, merge, show, write.

Every target is read, merged (`merge.py`) and checked before anything is written; one file that
cannot be merged safely stops the whole command with nothing written (exit 1). Writes are atomic
(`fs.files.commit`: temp file, fsync, rename) and confined to the project or HOME: no `..`, and
no symlink leading out (a symlink inside is written through, so a dotfiles link stays a link).
`--dry-run` prints the unified diff and writes nothing. Exit 0 when done (or nothing to do).
"""

from __future__ import annotations

import argparse
import difflib
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specactor.fs.files import PathEscape, commit, resolve_inside
from specactor.install import merge
from specactor.install.clients import CLIENTS, SCOPES, Plan, plan


@dataclass(frozen=True)
class Change:
    rel: str
    path: Path
    old: str | None
    new: str | None

    @property
    def verb(self) -> str:
        if self.old == self.new:
            return "unchanged"
        if self.new is None:
            return "removed"
        return "created" if self.old is None else "updated"

    def diff(self) -> str:
        lines = difflib.unified_diff((self.old or "").splitlines(keepends=True),
                                     (self.new or "").splitlines(keepends=True),
                                     "/dev/null" if self.old is None else f"a/{self.rel}",
                                     "/dev/null" if self.new is None else f"b/{self.rel}")
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


class Refused(Exception):
    """A target that cannot be merged safely; nothing is written."""


def _parser(action: str) -> argparse.ArgumentParser:
    verb = "Install" if action == "install" else "Remove"
    parser = argparse.ArgumentParser(
        prog=f"specactor {action}",
        description=f"{verb} specactor's MCP server entry, hooks and plugin for an assistant. "
        + ("Merges into the client's configuration files, keeping your other entries and comments; "
           "installing twice changes nothing." if action == "install" else
           "Removes only what `specactor install` added; your own entries stay."))
    parser.add_argument("client", choices=CLIENTS)
    parser.add_argument("--scope", choices=SCOPES, default="project",
                        help="project: the files in the project folder (default); user: the files under $HOME")
    parser.add_argument("--root", metavar="DIR", help="the project folder (default: the current directory)")
    parser.add_argument("--dry-run", action="store_true", help="print the diff and write nothing")
    parser.add_argument("--command", default="specactor", metavar="PROGRAM",
                        help="how the client starts specactor (default: `specactor` from PATH; give an absolute "
                        "path when the client's PATH lacks it)")
    if action == "install":
        parser.add_argument("--opencode-plugin", choices=("auto", "v1", "v2"), default="auto",
                            help="the OpenCode plugin API (default auto: v2 when `opencode --version` says 2.x, "
                            "else v1)")
    return parser


def opencode_variant() -> str:
    """"v2" when the `opencode` on PATH reports version 2 or later, else "v1"."""
    program = shutil.which("opencode")
    if program is None:
        return "v1"
    try:
        done = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return "v1"
    match = re.search(r"(\d+)\.\d+", done.stdout)
    return "v2" if match and int(match.group(1)) >= 2 else "v1"


def _base(args: argparse.Namespace) -> Path:
    if args.scope == "user":
        return Path.home().resolve()
    root = Path(args.root or ".").expanduser().resolve()
    if not root.is_dir():
        raise Refused(f"{root} is not a folder")
    return root


def _path(base: Path, rel: str) -> Path:
    try:
        path = resolve_inside(base, rel)
    except PathEscape as err:
        raise Refused(str(err)) from None
    return path.resolve() if path.is_symlink() else path


def changes(the_plan: Plan, action: str) -> list[Change]:
    """Every target's change; raises Refused naming each file that cannot be merged."""
    found: list[Change] = []
    problems: list[str] = []
    for target in the_plan.targets:
        try:
            path = _path(the_plan.base, target.rel)
            old = path.read_text(encoding="utf-8") if path.is_file() else None
            new = merge.install(target, old) if action == "install" else merge.uninstall(target, old)
        except (Refused, merge.MergeError, OSError, UnicodeDecodeError) as err:
            problems.append(f"{target.rel}: {err}")
            continue
        found.append(Change(target.rel, path, old, new))
    if problems:
        raise Refused("\n".join(problems))
    return found


def apply(found: list[Change], base: Path) -> None:
    writes = [(c.path, c.new.encode()) for c in found if c.new is not None and c.new != c.old]
    deletes = [c.path for c in found if c.new is None and c.old is not None]
    commit(writes, deletes)
    for path in deletes:  # folders install made for its files, left empty (.opencode/plugins, .cursor)
        folder = path.parent
        while folder != base and base in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                break
            folder = folder.parent


def run(action: str, argv: Sequence[str]) -> int:
    try:
        args = _parser(action).parse_args(list(argv))
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2
    out = sys.stdout
    try:
        base = _base(args)
        variant = getattr(args, "opencode_plugin", "v1")
        if variant == "auto":
            variant = opencode_variant() if args.client == "opencode" else "v1"
        the_plan = plan(args.client, args.scope, base, command=args.command, opencode_plugin_variant=variant)
        found = changes(the_plan, action)
    except Refused as err:
        print(f"specactor {action} {args.client}: nothing written; cannot merge safely:\n{err}", file=sys.stderr)
        return 1
    where = "HOME" if args.scope == "user" else str(base)
    if args.dry_run:
        diffs = [c.diff() for c in found if c.old != c.new]
        out.write("".join(diffs) if diffs else f"specactor {action} {args.client}: nothing to change\n")
        if diffs:
            out.write(f"(dry run: nothing written; {len(diffs)} file(s) under {where} would change)\n")
        return 0
    apply(found, base)
    for change in found:
        if action == "uninstall" and change.old is None:
            continue
        print(f"{change.verb:9} {change.rel}", file=out)
    if action == "install":
        if args.client == "opencode":
            print(f"(OpenCode plugin API {variant})", file=out)
        if shutil.which(args.command) is None:
            print(f"warning: `{args.command}` is not on PATH here; the client will not find it unless its PATH "
                  "has it (give --command /absolute/path/to/specactor)", file=out)
        print("Still to do:", file=out)
        for step in the_plan.todo:
            print(f"  - {step}", file=out)
    elif any(c.old is not None for c in found):
        print(f"Restart {args.client} so it lets go of the specactor server.", file=out)
    else:
        print(f"specactor uninstall {args.client}: nothing was installed under {where}", file=out)
    return 0


def install_main(argv: list[str]) -> int:
    """`specactor install <client> [--scope project|user] [--dry-run] …`; the exit status."""
    return run("install", argv)


def uninstall_main(argv: list[str]) -> int:
    """`specactor uninstall <client> [--scope project|user] [--dry-run] …`; the exit status."""
    return run("uninstall", argv)
