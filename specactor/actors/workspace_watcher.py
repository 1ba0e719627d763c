"""The workspace watcher: edits made by hand or by another process, published on the change feed.

It watches a workspace's `openspec/` and `.airsspec/` trees (inotify on Linux, every folder of
them; elsewhere, or when the kernel refuses a watch, a stat scan every `poll_interval` seconds)
and publishes what changed as one `Change(origin="external")` per batch. A batch is what
arrived within `debounce` seconds of its first event, so a `git checkout` of fifty files is one
event, not fifty; while requests are in flight it waits for a gap between them (at most
MAX_DEFER), as the graph sync does.

Writes this server made itself are already on the feed, published by the storage actor that
committed them, so the watcher leaves them out: it reads the feed too, and remembers each path
this process wrote with the file's identity (inode, size, mtime) right after. An event for a
path whose file still has that identity is ours; any other is someone else's. (A hand edit in
the instant between our commit and that stat would be taken for ours: the window is the hop
from the worker thread to the event loop.) Temp files of atomic writes are never published.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

import trio

from specactor.actors.change_feed import ChangeFeed, Subscription
from specactor.concurrency.quiet import gap_between_requests
from specactor.domain.changes import Change, kind_of
from specactor.fs.files import is_staged_temp
from specactor.fs.inotify import Inotify
from specactor.logsetup import get_logger

log = get_logger("specactor.workspace_watcher")

TREES = ("openspec", ".airsspec")
# (inode, size, mtime_ns) of a regular file; None for a path that is gone; OTHER for a folder,
# a symlink or a fifo (not a document: never published as written).
Identity = tuple[int, int, int] | None
OTHER: Identity = (-1, -1, -1)
OWN_TTL = 10.0  # seconds an own write is remembered: far longer than any event takes to arrive
# Events are read once no request has been in flight for QUIET seconds, or MAX_DEFER after they
# came: mostly this server's own writes, whose bookkeeping (walking and watching each moved-in
# folder, a stat per file) would otherwise compete with the requests making them: its thread
# contends for the GIL with the storage actor's and the event loop's. Measured with bursts of 100
# archives (`python -m bench.pertool --only 'tool:archive$' --transport stdio --bursts 3`, runs
# alternating on a noisy machine): server CPU an archive at c=100 2.17-3.30 ms -> 1.87-2.00 ms,
# P95 222-333 -> 199-219 ms; with no watcher at all 1.73-2.37 ms. Under constant load a hand edit
# is still published within MAX_DEFER; the kernel queues the events meanwhile (an overflow rescans).
QUIET = 0.02
MAX_DEFER = 1.0


def identity(path: str) -> Identity:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return OTHER
    return st.st_ino, st.st_size, st.st_mtime_ns


def is_temp(rel: str) -> bool:
    """An atomic write's staged file (`.<name>.<tag>.tmp`): never a change of its own."""
    return is_staged_temp(rel.rsplit("/", 1)[-1])


def walk(root: str, rel: str) -> Iterator[tuple[str, bool]]:
    """(relative path, is a folder) of everything under `root/rel`, not following symlinks."""
    try:
        with os.scandir(os.path.join(root, rel)) as entries:
            for entry in entries:
                child = f"{rel}/{entry.name}"
                is_dir = entry.is_dir(follow_symlinks=False)
                yield child, is_dir
                if is_dir:
                    yield from walk(root, child)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return


class WorkspaceWatcher:
    def __init__(self, root: Path, feed: ChangeFeed, *, poll_interval: float = 2.0, debounce: float = 0.05,
                 use_inotify: bool = True, after: trio.Event | None = None,
                 quiet_for: Callable[[], float] | None = None) -> None:
        self.root = str(root)
        self.feed = feed
        self.poll_interval = poll_interval
        self.debounce = debounce
        self.use_inotify = use_inotify
        self.own: dict[str, tuple[Identity, float]] = {}
        self._expiring: deque[tuple[float, str]] = deque()  # (until, path) of `own`, oldest first
        self.published = 0
        self.ready = trio.Event()  # set once the watches (or the first scan) are in place
        self.after = after  # the server's first reply: watching starts after it (or a second of quiet)
        # Seconds since the last request was answered, 0 while any is in flight (the dispatcher's).
        self.quiet_for = quiet_for
        # Made once and kept across restarts: what is published while the watcher restarts waits.
        self.sub = feed.subscribe(f"workspace-watcher:{self.root}")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # Started at once: setting up watches walks the trees, which must not delay the first reply.
        task_status.started()
        if self.after is not None:
            with trio.move_on_after(1.0):
                await self.after.wait()
        inotify = Inotify() if self.use_inotify else None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._learn_own, self.sub)
                if inotify is not None and await trio.to_thread.run_sync(self._watch_all, inotify):
                    self.ready.set()
                    await self._follow(inotify)
                else:
                    if inotify is not None:  # a refused watch: give back the ones already made
                        inotify.close()
                    seen = await trio.to_thread.run_sync(self._scan)
                    self.ready.set()
                    await self._poll(seen)
        finally:
            if inotify is not None:
                inotify.close()

    # ------------------------------------------------------------------ inotify

    def _watch_all(self, inotify: Inotify) -> bool:
        """Watch the root (for the trees appearing) and every folder of the trees; False when the
        kernel refuses any of them (no inotify, the watch limit): then the watcher polls."""
        if not inotify.watch(self.root, ""):
            return False
        for tree in TREES:
            if os.path.isdir(os.path.join(self.root, tree)) and not self._watch_tree(inotify, tree):
                return False
        return True

    def _watch_tree(self, inotify: Inotify, rel: str, files: list[str] | None = None) -> bool:
        """Watch `rel` and every folder under it; the files met on the way go into `files`."""
        ok = inotify.watch(os.path.join(self.root, rel), rel)
        for child, is_dir in walk(self.root, rel):
            if is_dir:
                ok = inotify.watch(os.path.join(self.root, child), child) and ok
            elif files is not None:
                files.append(child)
        return ok

    async def _follow(self, inotify: Inotify) -> None:
        while True:
            await trio.lowlevel.wait_readable(inotify.fd)
            await trio.sleep(self.debounce)
            await self._yield_to_requests()
            # Draining, watching new folders and reading the files' identities touch the disk:
            # on a worker thread, never on the event loop.
            batch = await trio.to_thread.run_sync(self._batch, inotify)
            if batch is None:  # the kernel dropped events: anything may have changed
                self.feed.publish(Change(workspace=self.root, toolset="", kind="rescan", origin="external"))
                continue
            self._publish(batch)

    async def _yield_to_requests(self) -> None:
        """Wait until no request has been in flight for QUIET seconds, at most MAX_DEFER."""
        if self.quiet_for is not None:
            await gap_between_requests(self.quiet_for, QUIET, MAX_DEFER)

    def _batch(self, inotify: Inotify) -> list[tuple[str, Identity]] | None:
        events = inotify.drain_events()
        if events is None:
            self._watch_all(inotify)  # folders made while events were dropped are watched too
            return None
        paths: dict[str, None] = {}
        for rel, mask in events:
            if not rel or rel.split("/", 1)[0] not in TREES:
                continue
            if mask & Inotify.ISDIR and mask & Inotify.CREATED_DIR:
                # A new folder: watch it, and count what is already in it (made before the watch).
                found: list[str] = []
                self._watch_tree(inotify, rel, found)
                paths.update(dict.fromkeys(found))
            elif not mask & Inotify.ISDIR:
                paths[rel] = None
        return [(rel, identity(os.path.join(self.root, rel))) for rel in paths if not is_temp(rel)]

    # ------------------------------------------------------------------ polling

    def _scan(self) -> dict[str, Identity]:
        files: dict[str, Identity] = {}
        for tree in TREES:
            for rel, is_dir in walk(self.root, tree):
                if not is_dir:
                    files[rel] = identity(os.path.join(self.root, rel))
        return files

    async def _poll(self, seen: dict[str, Identity]) -> None:
        while True:
            await trio.sleep(self.poll_interval)
            await self._yield_to_requests()
            now = await trio.to_thread.run_sync(self._scan)
            changed = [rel for rel in now.keys() | seen.keys() if now.get(rel) != seen.get(rel)]
            seen = now
            self._publish([(rel, now.get(rel)) for rel in sorted(changed) if not is_temp(rel)])

    # ------------------------------------------------------------------ publishing

    async def _learn_own(self, sub: Subscription) -> None:
        """Remember the files this server's own writes left, as their events arrive on the feed
        (right after each commit, so a hand edit made later has another identity)."""
        async for change in sub:
            if change.origin != "self" or change.workspace != self.root:
                continue
            now = trio.current_time()
            until = now + OWN_TTL
            for rel in change.paths:
                self.own[rel] = (identity(os.path.join(self.root, rel)), until)
                self._expiring.append((until, rel))
            self._forget_expired(now)

    def _forget_expired(self, now: float) -> None:
        """Drop the own writes remembered past their time, oldest first: a path written again
        since keeps its later entry. Each path is queued once per write and dropped once, so a
        busy server pays per write, never a sweep of everything it wrote in the last OWN_TTL."""
        expiring, own = self._expiring, self.own
        while expiring and expiring[0][0] < now:
            until, rel = expiring.popleft()
            entry = own.get(rel)
            if entry is not None and entry[1] == until:
                del own[rel]

    def _publish(self, batch: list[tuple[str, Identity]]) -> None:
        """Publish what someone else changed: (path, the file's identity now) of each changed path."""
        written: list[str] = []
        removed: list[str] = []
        deadline = trio.current_time()
        for rel, now in batch:
            own = self.own.get(rel)
            if (own is not None and own[0] == now and own[1] >= deadline) or now == OTHER:
                continue
            (removed if now is None else written).append(rel)
        if written or removed:
            every = tuple(written + removed)
            self.feed.publish(Change(workspace=self.root, toolset="", kind=kind_of("", every),
                                     written=tuple(written), removed=tuple(removed), origin="external"))
            self.published += 1
