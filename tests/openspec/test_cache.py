"""The workspace cache: cheap when nothing changed, never stale when something did."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from specactor.domain.openspec.cache import RACY_NS, CachedSource, Stat
from specactor.domain.openspec.model import Root
from specactor.domain.openspec.source import Entry
from specactor.domain.openspec.workspace import list_specs
from specactor.fs.openspec_fs import OsFileSystem
from tests.openspec.support import call_tool
from tests.openspec.workspaces import basic, materialise

NOW = 10**18


class FakeFs:
    """Files in a dict, stats counted, watching optional, events queued by hand."""

    def __init__(self, files: dict[str, str], *, watchable: bool) -> None:
        self.files = dict(files)
        self.watchable = watchable
        self.pending: list[str] = []
        self.calls = {"stat": 0, "read": 0, "scandir": 0}
        self.mtime = {p: NOW - 10 * RACY_NS for p in files}

    def _dirs(self) -> set[str]:
        out = {""}
        for path in self.files:
            parts = path.split("/")
            out |= {"/".join(parts[:i]) for i in range(1, len(parts))}
        return out

    def _stat(self, rel: str) -> Stat | None:
        self.calls["stat"] += 1
        if rel in self._dirs():
            return Stat("dir", hash(rel), 0, 0, 0)
        if rel in self.files:
            return Stat("file", hash(rel), len(self.files[rel]), self.mtime[rel], self.mtime[rel])
        return None

    stat = lstat = _stat

    def scandir(self, rel: str) -> list[Entry]:
        self.calls["scandir"] += 1
        prefix = f"{rel}/" if rel else ""
        names = {p[len(prefix):].split("/")[0] for p in [*self.files, *self._dirs()]
                 if p.startswith(prefix) and p != rel}
        return [Entry(n, f"{prefix}{n}" in self._dirs(), f"{prefix}{n}" in self.files, False) for n in names if n]

    def read(self, rel: str) -> bytes | None:
        self.calls["read"] += 1
        return self.files[rel].encode() if rel in self.files else None

    def watch(self, rel: str) -> bool:
        return self.watchable

    def events(self) -> Iterable[str] | None:
        out, self.pending = self.pending, []
        return out

    def now_ns(self) -> int:
        return NOW

    def write(self, rel: str, text: str, *, same_size_and_time: bool = False) -> None:
        self.files[rel] = text
        if not same_size_and_time:
            self.mtime[rel] = self.mtime.get(rel, NOW - 10 * RACY_NS) + 1
        self.pending.append(rel)


SPEC = "# a\n\n## Purpose\nA purpose that is long enough to be one.\n\n## Requirements\n"
ONE = SPEC + "### Requirement: A\nThe system SHALL a.\n\n#### Scenario: s\n- a\n"


def counts(src: CachedSource) -> list[int]:
    return [s.requirementCount for s in list_specs(src, Root("/p", "nearest")).specs or []]


def test_with_events_a_warm_listing_needs_no_syscalls() -> None:
    fs = FakeFs({"specs/a/spec.md": SPEC, "specs/b/spec.md": ONE}, watchable=True)
    src = CachedSource(fs)
    assert counts(src) == [0, 1]
    before = dict(fs.calls)
    src.refresh()
    assert counts(src) == [0, 1] and fs.calls == before


def test_an_event_makes_exactly_the_named_file_read_again() -> None:
    fs = FakeFs({"specs/a/spec.md": SPEC, "specs/b/spec.md": ONE}, watchable=True)
    src = CachedSource(fs)
    counts(src)
    fs.write("specs/a/spec.md", ONE, same_size_and_time=True)  # only the event tells
    reads = fs.calls["read"]
    src.refresh()
    assert counts(src) == [1, 1] and fs.calls["read"] == reads + 1


def test_without_events_answers_are_keyed_by_size_and_mtime() -> None:
    fs = FakeFs({"specs/a/spec.md": SPEC}, watchable=False)
    src = CachedSource(fs)
    assert counts(src) == [0]
    reads = fs.calls["read"]
    assert counts(src) == [0] and fs.calls["read"] == reads  # unchanged: not read again
    fs.write("specs/a/spec.md", ONE)
    assert counts(src) == [1] and fs.calls["read"] == reads + 1


def test_a_file_changed_within_the_racy_window_is_never_cached() -> None:
    fs = FakeFs({"specs/a/spec.md": SPEC}, watchable=False)
    fs.mtime["specs/a/spec.md"] = NOW - RACY_NS // 2
    src = CachedSource(fs)
    counts(src)
    counts(src)
    assert fs.calls["read"] == 2


def test_whole_operations_are_remembered_only_until_an_event() -> None:
    fs = FakeFs({"specs/a/spec.md": SPEC}, watchable=True)
    src = CachedSource(fs)
    calls: list[int] = []

    def op() -> int:
        calls.append(1)
        return len(calls)

    assert [src.whole("op", op) for _ in range(3)] == [1, 1, 1]
    fs.write("specs/b/spec.md", ONE)
    src.refresh()
    assert src.whole("op", op) == 2


def test_the_real_file_system_sees_edits_made_between_calls(tmp_path: Path) -> None:
    materialise(basic(), tmp_path)
    tasks = tmp_path / "openspec/changes/add-two-factor-auth/tasks.md"
    first = call_tool(tmp_path, "list", {})
    tasks.write_text(tasks.read_text().replace("[ ]", "[x]"))  # in place, same second
    second = call_tool(tmp_path, "list", {})
    done = {c["name"]: c["completedTasks"] for c in second["data"]["changes"]}
    assert {c["name"]: c["completedTasks"] for c in first["data"]["changes"]}["add-two-factor-auth"] == 2
    assert done["add-two-factor-auth"] == 4


def test_os_file_system_watches_and_reports_changed_paths(tmp_path: Path) -> None:
    root = tmp_path / "openspec"
    (root / "specs" / "a").mkdir(parents=True)
    fs = OsFileSystem(root)
    if not fs.watch(""):
        return  # not Linux: the stat-keyed path is covered above
    assert fs.watch("specs/a")
    (root / "specs" / "a" / "spec.md").write_text(SPEC)
    os.rename(root / "specs" / "a", root / "specs" / "b")
    changed = fs.events() or []
    assert {"specs/a/spec.md", "specs/a"} <= set(changed)


def test_a_path_the_change_feed_names_is_read_again_before_any_event_arrives() -> None:
    fs = FakeFs({"specs/a/spec.md": SPEC, "specs/b/spec.md": ONE}, watchable=True)
    src = CachedSource(fs)
    counts(src)
    fs.files["specs/a/spec.md"] = ONE  # written, same size and time, and no event queued
    reads = fs.calls["read"]
    src.forget(["specs/a/spec.md"])
    assert counts(src) == [1, 1] and fs.calls["read"] == reads + 1


def test_listings_leave_out_the_temp_files_of_writes_in_progress(tmp_path: Path) -> None:
    # A staged write, or the old bytes an install swapped out before it unlinks them, is named
    # `.<name>.<8 characters>.tmp`: never a document, and gone soon, so never listed (a cached
    # listing would name it after it went). The rule hides every dot-name ending in .tmp; other
    # dot-names and other .tmp files are listed.
    from specactor.fs.workspace_reader import WorkspaceReader

    folder = tmp_path / "openspec" / "changes" / "c"
    folder.mkdir(parents=True)
    for name in ("tasks.md", ".tasks.md.3f6d0008.tmp", ".notes", "draft.tmp"):
        (folder / name).write_text("x")
    listed = sorted(e.name for e in OsFileSystem(tmp_path / "openspec").scandir("changes/c"))
    assert listed == [".notes", "draft.tmp", "tasks.md"]
    assert WorkspaceReader(tmp_path, tmp_path).listdir("openspec/changes/c") == [
        (".notes", False), ("draft.tmp", False), ("tasks.md", False)]
