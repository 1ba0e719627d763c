"""The memory store actor: it owns the memory database and reads the knowledge repository.

SQLite in WAL mode with `synchronous=FULL`: one writer connection, on which queued writes are
group-committed (one transaction, one fsync, each write in its own savepoint so one failure
spoils no other), and a pool of reader connections that serve searches concurrently. Every
database call runs on a worker thread; a reply is sent only after its transaction committed.
The knowledge repository is read with `git` through `trio.run_process`; parsed items are cached
by blob id, the snapshot (items, query index) and the listing by commit. Which commit HEAD names is
read from git's own files (`HEAD`, the branch's ref, `packed-refs`) on every call, so a commit is
seen by the very next call without a git process; when those files say anything unusual, git is
asked. A sync plans from git, then applies its whole delta and the new sync state in one
transaction, so a sync that dies half way leaves the previous state, and the next run redoes it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import outcome
import trio

from specactor.actors.mailbox import Letter, Mailbox
from specactor.actors.storage import atomic_write
from specactor.domain.knowledge import gitout, gitrefs
from specactor.domain.knowledge import sync as plans
from specactor.domain.knowledge.api import HistoryEntry, Item, Problem
from specactor.domain.knowledge.parse import item_scope, parse_or_problem
from specactor.domain.knowledge.sync import Snapshot, SyncApply
from specactor.domain.memory import embeddings as emb
from specactor.domain.memory.records import EmbeddingsEndpoint
from specactor.domain.memory.schema import SCOPE_SHIFT
from specactor.logsetup import get_logger
from specactor.protocol.errors import ProviderError, RateLimited, ToolError
from specactor.sqlite.memory_db import (
    EntriesAt,
    ItemsAt,
    SyncConflict,
    apply_sync,
    close_all,
    connect,
    group_commit,
    in_read_tx,
    load_sync,
    now_iso,
)

log = get_logger("specactor.memory_store")
T = TypeVar("T")
EMBED_BATCH = 256  # texts per embeddings request at most (OpenAI takes 2,048)
READERS = 4  # concurrent searches; SQLite releases the GIL while it steps, so readers overlap
CALL_TIMEOUT = 60.0
SCOPE_SPAN = (1 << SCOPE_SHIFT) - 1


# ---------------------------------------------------------------------- the actor


@dataclass(frozen=True)
class Write:
    fn: Callable[[sqlite3.Connection], Any]


@dataclass(frozen=True)
class Read:
    fn: Callable[[sqlite3.Connection], Any]


class RepoMissing(Exception):
    pass


class GitFailed(Exception):
    def __init__(self, args: Sequence[str], stderr: bytes) -> None:
        super().__init__(f"git {' '.join(args)} failed: {stderr.decode('utf-8', 'replace').strip()[:500]}")


SyncResult = tuple[plans.Plan, str | None, float, dict[str, Any]]
# Variables with which git looks for the repository elsewhere than the folders say: git decides.
_GIT_LOCATORS = ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE")


@dataclass(frozen=True)
class GitDirs:
    """Where the knowledge folder's repository keeps HEAD (`git_dir`) and the branches (`common_dir`,
    the same folder unless this is a linked worktree), as `git rev-parse` found them once.

    The finding stays true while `top` (the work tree's `.git`) exists and no folder between the
    knowledge folder and the work tree's top grows a `.git` of its own (`between`): those are
    what git's own search looks at.
    """

    git_dir: Path
    common_dir: Path
    top: Path
    between: tuple[Path, ...]


class _Flight(Generic[T]):
    """One piece of work that any number of callers wait for: its inputs (an embedding batch's texts),
    then its value or its error, the same for every caller."""

    def __init__(self) -> None:
        self.inputs: list[str] = []
        self._done = trio.Event()
        self._result: outcome.Outcome[T] | None = None

    async def fly(self, work: Awaitable[T]) -> None:
        try:
            self._result = outcome.Value(await work)
        except Exception as exc:
            self._result = outcome.Error(exc)
        finally:
            self._done.set()

    def settle(self) -> None:
        self._done.set()

    async def outcome(self) -> T:
        await self._done.wait()
        if isinstance(self._result, outcome.Value):
            value: T = self._result.value
            return value
        if isinstance(self._result, outcome.Error):
            raise self._result.error  # the same error for every caller of the flight
        raise ProviderError("the memory store stopped before this request was answered")


class MemoryStoreActor:
    """Args:
        db_path: the SQLite file (created with its directory).
        knowledge_root: the knowledge repository (or a folder inside a git repository).
        embeddings: an OpenAI-compatible endpoint for semantic scores, or None.
        git: the git executable.
    """

    def __init__(self, db_path: Path, knowledge_root: Path, *, embeddings: EmbeddingsEndpoint | None = None,
                 git: str = "git", readers: int = READERS) -> None:
        self.db_path = db_path
        self.knowledge_root = knowledge_root
        self.embeddings = embeddings
        self.git_exe = git
        self.readers = readers
        # Callers wait for their answer, so the queue holds about one letter per request in flight;
        # 256 lets a burst of adds queue up (and be group-committed) without blocking the senders.
        self.mailbox: Mailbox[Read | Write] = Mailbox("memory-store", 256)
        self.commits = 0
        self._token: trio.lowlevel.TrioToken | None = None
        self._ready = trio.Event()
        self._failure: BaseException | None = None
        self._sync_lock = trio.Lock()
        self._snapshot_lock = trio.Lock()
        self._snapshot: Snapshot | None = None
        self._parsed: dict[tuple[str, str], Item | Problem] = {}  # (path, blob id) -> parse result
        self._dirs: GitDirs | bool = False  # False: not found yet; True: git must be asked every time
        self._packed: tuple[bytes, dict[str, str]] = (b"", {})  # packed-refs as last read, parsed
        self._listed: tuple[str, dict[str, str]] | None = None  # (commit, its listing): a commit never changes
        self._items_at: ItemsAt | None = None  # what the last sync state read or written said (committed)
        self._entries_at: EntriesAt | None = None
        self._manifest: tuple[dict[str, Any], str | None, dict[str, Any]] | None = None  # (entries, commit, it)
        self._http: Any = None
        self._nursery: trio.Nursery | None = None  # the actor's own tasks: embedding requests, syncs
        self._filling: _Flight[list[list[float]]] | None = None  # the embedding batch still taking texts
        self._next_sync: dict[tuple[bool, str], _Flight[SyncResult]] = {}  # (force, company) -> sync not begun

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the database (migrating it), then serve the mailbox until cancelled."""
        self._token = trio.lowlevel.current_trio_token()
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        writer = await trio.to_thread.run_sync(lambda: connect(self.db_path, writer=True))
        conns = [writer]
        try:
            pool_send, pool_recv = trio.open_memory_channel[sqlite3.Connection](self.readers)
            for _ in range(self.readers):
                conn = await trio.to_thread.run_sync(lambda: connect(self.db_path, writer=False))
                conns.append(conn)
                pool_send.send_nowait(conn)
            # The writer drains what is queued into one transaction; 256 matches the mailbox.
            write_send, write_recv = trio.open_memory_channel[Letter[Read | Write]](256)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_loop, writer, write_recv)
                self._nursery = nursery
                task_status.started()
                self._ready.set()
                async for letter in self.mailbox:
                    if isinstance(letter.body, Write):
                        await write_send.send(letter)
                    else:
                        nursery.start_soon(self._read, letter, pool_send, pool_recv)
        finally:
            self._nursery, self._filling = None, None
            self._next_sync.clear()
            with trio.CancelScope(shield=True):
                if self._http is not None:
                    await self._http.aclose()
                    self._http = None
                await trio.to_thread.run_sync(close_all, conns)

    async def ensure_started(self) -> None:
        """Start the actor as a system task of this trio run unless it already runs here.

        Raises:
            ToolError: the database could not be opened.
        """
        token = trio.lowlevel.current_trio_token()
        if self._token is not token:
            self._token, self._ready, self._failure = token, trio.Event(), None
            self.mailbox = Mailbox("memory-store", 256)
            trio.lowlevel.spawn_system_task(self._run_detached)
        await self._ready.wait()
        if self._failure is not None:
            raise ToolError("INTERNAL", f"the memory database {self.db_path} cannot be opened: {self._failure}")

    async def _run_detached(self) -> None:
        try:
            await self.run()
        except Exception as exc:  # a system task must not raise; the next call tries again
            log.error("memory store stopped", error=f"{type(exc).__name__}: {exc}", db=str(self.db_path))
            self._failure, self._token = exc, None
            self._ready.set()

    async def _read(self, letter: Letter[Read | Write], pool_send: trio.MemorySendChannel[sqlite3.Connection],
                    pool_recv: trio.MemoryReceiveChannel[sqlite3.Connection]) -> None:
        with letter:
            conn = await pool_recv.receive()
            try:
                result = await trio.to_thread.run_sync(in_read_tx, conn, letter.body.fn)
            except Exception as exc:
                letter.fail(exc)
            else:
                letter.reply(result)
            finally:
                pool_send.send_nowait(conn)

    async def _write_loop(self, conn: sqlite3.Connection,
                          inbox: trio.MemoryReceiveChannel[Letter[Read | Write]]) -> None:
        async for first in inbox:
            batch = [first]
            while len(batch) < 256:
                try:
                    batch.append(inbox.receive_nowait())
                except trio.WouldBlock:
                    break
            results = await trio.to_thread.run_sync(group_commit, conn, [ltr.body.fn for ltr in batch])
            self.commits += 1
            for ltr, res in zip(batch, results, strict=True):
                with ltr:
                    if isinstance(res, outcome.Error):
                        ltr.fail(res.error)
                    else:
                        ltr.reply(res.unwrap())

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        await self.ensure_started()
        result: T = await self.mailbox.call(Read(fn), CALL_TIMEOUT)
        return result

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` in a write transaction; returns once that transaction is committed."""
        await self.ensure_started()
        result: T = await self.mailbox.call(Write(fn), CALL_TIMEOUT)
        return result

    # ------------------------------------------------------------------ embeddings

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors from the embeddings endpoint, one per text.

        Texts asked for in the same scheduler tick (a burst of searches) share one request: the
        request is sent by a task of the actor that starts on the next tick, so a lone call waits
        no longer, and a hundred concurrent ones cost one POST instead of a hundred.

        Raises:
            RateLimited: a 429 (with Retry-After). ProviderError: a transient failure.
            ToolError: PROVIDER_ERROR, not retryable: the endpoint refused or answered nonsense.
        """
        await self.ensure_started()
        batch = self._filling
        if batch is None or len(batch.inputs) + len(texts) > EMBED_BATCH:
            assert self._nursery is not None
            batch = self._filling = _Flight()
            self._nursery.start_soon(self._embed_batch, batch)
        start = len(batch.inputs)
        batch.inputs.extend(texts)
        vectors = await batch.outcome()
        return vectors[start:start + len(texts)]

    async def _embed_batch(self, batch: _Flight[list[list[float]]]) -> None:
        if self._filling is batch:
            self._filling = None  # texts asked for from now on go into the next request
        try:
            await batch.fly(self._embed_request(batch.inputs))
        finally:
            batch.settle()

    async def _embed_request(self, texts: Sequence[str]) -> list[list[float]]:
        import httpx

        assert self.embeddings is not None
        cfg = self.embeddings
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=cfg.timeout)
        headers = {"content-type": "application/json"}
        if cfg.api_key:
            headers["authorization"] = f"Bearer {cfg.api_key}"
        try:
            reply = await self._http.post(cfg.url.rstrip("/") + "/embeddings", headers=headers,
                                          content=emb.request_body(cfg.model, texts))
        except httpx.HTTPError as err:
            raise ProviderError(f"the embeddings endpoint is unreachable: {type(err).__name__}: {err}",
                                {"url": cfg.url}) from None
        failure: emb.Failure | list[list[float]]
        if reply.status_code >= 400:
            failure = emb.classify(reply.status_code, reply.headers, reply.content, time.time())
        else:
            failure = emb.parse_reply(reply.content, len(texts))
        if not isinstance(failure, emb.Failure):
            return failure
        details = {"url": cfg.url, "status": failure.status}
        if failure.kind == "rate_limited":
            raise RateLimited(failure.message, failure.retry_after, details)
        if failure.kind == "transient":
            raise ProviderError(failure.message, details)
        raise ToolError("PROVIDER_ERROR", failure.message, details, retryable=False)

    # ------------------------------------------------------------------ the knowledge repository

    async def git(self, *args: str, stdin: bytes | None = None) -> bytes:
        """Run git in the knowledge folder; its stdout. Raises GitFailed, or RepoMissing if there is no folder."""
        if not self.knowledge_root.is_dir():
            raise RepoMissing(f"the knowledge repository {self.knowledge_root} does not exist")
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
        try:
            done = await trio.run_process([self.git_exe, *args], cwd=self.knowledge_root, stdin=stdin,
                                          capture_stdout=True, capture_stderr=True, check=False, env=env)
        except FileNotFoundError:
            raise ToolError("PROVIDER_ERROR", f"git ({self.git_exe}) is not installed", retryable=False) from None
        if done.returncode != 0:
            raise GitFailed(args, done.stderr)
        return bytes(done.stdout)

    async def head(self) -> tuple[str | None, str | None]:
        """The HEAD commit and the tree of the knowledge folder in it; (None, None) before the first commit."""
        try:
            out = await self.git("rev-parse", "HEAD", "HEAD:./")
        except GitFailed:
            try:
                await self.git("rev-parse", "--show-prefix")
            except GitFailed as err:
                self._dirs = False
                raise RepoMissing(f"{self.knowledge_root} is not in a git repository ({err})") from None
            except RepoMissing:
                self._dirs = False
                raise
            try:
                commit = (await self.git("rev-parse", "--verify", "-q", "HEAD")).decode().strip()
            except GitFailed:
                return None, None
            return commit, None  # the folder has no committed files yet
        if self._dirs is False:
            self._dirs = await self._find_dirs()
        commit, tree = out.decode().split()
        return commit, tree

    async def head_commit(self) -> str | None:
        """HEAD's commit: from git's files when they are plain, else from git.

        Raises:
            RepoMissing, GitFailed: as `head`.
        """
        return self.head_from_files() or (await self.head())[0]

    async def _find_dirs(self) -> GitDirs | bool:
        """Where HEAD and the refs are, or True when git must always be asked (a bare repository, a
        reftable, GIT_DIR in the environment, a knowledge folder outside its work tree)."""
        if any(name in os.environ for name in _GIT_LOCATORS):
            return True
        try:
            out = (await self.git("rev-parse", "--show-toplevel", "--git-dir", "--git-common-dir")).decode()
            top, git_dir, common_dir = out.splitlines()
        except (GitFailed, RepoMissing, ValueError):
            return True
        return await trio.to_thread.run_sync(_git_dirs, self.knowledge_root, top, git_dir, common_dir)

    def head_from_files(self) -> str | None:
        """HEAD's commit read from `HEAD` and the branch's ref (loose, else in `packed-refs`), or None
        when git must be asked (not found yet, anything unusual, a branch without commits).

        A few small reads, done right here: they take microseconds, less than a hop to a worker
        thread. Git replaces these files by renaming a finished one over them, so a read sees the
        old contents or the new, never half; and once `git commit` returned, the new.
        """
        dirs = self._dirs
        if not isinstance(dirs, GitDirs):
            return None
        try:
            if not os.path.isdir(self.knowledge_root):
                return None  # git says why
            if not os.path.lexists(dirs.top) or any(os.path.lexists(p) for p in dirs.between):
                self._dirs = False  # the repository moved: find it again
                return None
            target = gitrefs.head_target((dirs.git_dir / "HEAD").read_bytes())
            if target is None or target.commit is not None:
                return target.commit if target else None
            assert target.branch is not None
            try:
                return gitrefs.object_id((dirs.common_dir / target.branch).read_bytes())
            except FileNotFoundError:
                pass  # packed (after gc), or not born yet
            data = (dirs.common_dir / "packed-refs").read_bytes()
        except OSError:
            return None
        if data != self._packed[0]:
            self._packed = (data, gitrefs.packed_refs(data))
        return self._packed[1].get(target.branch)

    async def listing(self, commit: str | None) -> dict[str, str]:
        """{path: blob id} of the knowledge folder at `commit` (the last one listed is kept)."""
        if not commit:
            return {}
        listed = self._listed
        if listed is not None and listed[0] == commit:
            return listed[1]
        listing = gitout.ls_tree(await self.git("ls-tree", "-r", "-z", commit, "--", "."))
        self._listed = (commit, listing)
        return listing

    async def parse(self, listing: dict[str, str], paths: Sequence[str]) -> dict[str, Item | Problem]:
        """Parse the items at `paths`, reading only (path, blob) pairs not parsed before."""
        known = self._parsed  # a concurrent snapshot may replace the cache; this call keeps its view
        wanted = sorted({(p, listing[p]) for p in paths} - known.keys())
        fresh: dict[tuple[str, str], Item | Problem] = {}
        if wanted:
            ids = sorted({b for _, b in wanted})
            blobs = gitout.cat_file_batch(await self.git("cat-file", "--batch", stdin="\n".join(ids).encode()))
            parsed = await trio.to_thread.run_sync(
                lambda: [parse_or_problem(p, blobs.get(b, b"")) for p, b in wanted])
            fresh = dict(zip(wanted, parsed, strict=True))
            self._parsed.update(fresh)
        return {p: fresh[k] if k in fresh else known[k] for p in paths for k in [(p, listing[p])]}

    async def snapshot(self) -> Snapshot:
        """The committed items (cached per tree, its query index built); duplicate ids after the first are
        problems. While HEAD names the snapshot's commit, no git process runs."""
        known = self._snapshot
        if known is not None and known.commit is not None and self.head_from_files() == known.commit:
            return known
        async with self._snapshot_lock:
            commit, tree = await self.head()
            if self._snapshot is not None and self._snapshot.tree == tree and self._snapshot.commit is not None:
                if self._snapshot.commit != commit:
                    self._snapshot.commit = commit
                return self._snapshot
            listing = await self.listing(commit if tree else None)
            paths = sorted(p for p in listing if item_scope(p) is not None)
            parsed = await self.parse(listing, paths)
            snap = Snapshot(commit, tree)
            for path in paths:
                result = parsed[path]
                if isinstance(result, Problem):
                    snap.problems.append(result)
                elif result.id in snap.items:
                    snap.problems.append(Problem(file=path, error=f"duplicate id '{result.id}': "
                                                                  f"{snap.items[result.id].path} has it too"))
                else:
                    snap.items[result.id] = result
            live = set(listing.items())
            self._parsed = {k: r for k, r in self._parsed.items() if k in live}
            await trio.to_thread.run_sync(snap.index)  # once per tree, off the event loop
            self._snapshot = snap
            return snap

    async def history(self, path: str) -> list[HistoryEntry]:
        return gitout.log(await self.git("log", "--follow", f"--format={gitout.LOG_FORMAT}", "--", path))

    async def changed_since(self, base: str, commit: str) -> set[str] | None:
        """Paths changed between two commits, or None when `base` is unknown here (history rewritten)."""
        if base == commit:
            return set()
        try:
            await self.git("cat-file", "-e", f"{base}^{{commit}}")
        except GitFailed:
            return None
        return gitout.name_status(await self.git("diff", "--name-status", "-z", "--no-renames", "--relative",
                                                 base, commit))

    async def sync(self, *, force: bool, company_id: str,
                   publish: Callable[[dict[str, Any]], Awaitable[None]] | None = None) -> SyncResult:
        """One sync: plan from git, apply in one transaction, then `publish` the new manifest (write it
        where it belongs), still in turn with other syncs. Returns the plan, the commit synced, the
        milliseconds taken and the manifest.

        Single flight: syncs run one at a time, and callers that arrive while one runs share the
        next, which reads git and the database only once it starts (after every one of them
        arrived), so each caller gets a sync that saw every commit made before its call. A hundred
        concurrent calls cost at most two syncs and two manifest writes, not a hundred of each.
        The flight's `publish` is its first caller's.
        """
        await self.ensure_started()
        key = (force, company_id)
        flight = self._next_sync.get(key)
        if flight is None:
            assert self._nursery is not None
            flight = self._next_sync[key] = _Flight()
            self._nursery.start_soon(self._sync_flight, key, flight, publish)
        return await flight.outcome()

    async def _sync_flight(self, key: tuple[bool, str], flight: _Flight[SyncResult],
                           publish: Callable[[dict[str, Any]], Awaitable[None]] | None) -> None:
        async def once() -> SyncResult:
            result = await self._sync_once(force=key[0], company_id=key[1])
            if publish is not None:
                await publish(result[3])
            return result

        try:
            async with self._sync_lock:
                if self._next_sync.get(key) is flight:
                    del self._next_sync[key]  # callers from now on wait for the next sync
                await flight.fly(once())
        finally:
            flight.settle()  # cancelled (shutdown) before it flew: its callers must not wait forever

    async def _sync_once(self, *, force: bool, company_id: str) -> SyncResult:
        started = time.perf_counter()
        known = self._items_at
        record = await self.read(lambda conn: load_sync(conn, known=known))
        self._items_at = (record.revision, record.items)
        commit = self.head_from_files()
        listed = self._listed
        if commit is None or listed is None or listed[0] != commit:
            commit, tree = await self.head()  # a new commit: its tree tells whether the folder has files
            listing = await self.listing(commit if tree else None)
        else:
            listing = listed[1]  # listed at this very commit, so the folder had files in it
        changed = None
        if not force and record.last_commit and commit:
            changed = await self.changed_since(record.last_commit, commit)
        examine = plans.to_examine(listing, changed, [f.file for f in record.failures])
        parsed = await self.parse(listing, examine)
        examined = {p: (parsed[p], plans.sync_hash(p, listing[p].encode())) for p in examine}
        plan = plans.plan(record.items, listing, examined, force=force)
        job = SyncApply(plan, record.revision, commit, company_id, (time.perf_counter() - started) * 1000)
        entries_at = self._entries_at
        try:
            revision, entries = await self.write(lambda conn: apply_sync(conn, job, entries_at))
        except SyncConflict as err:
            raise ToolError("CONFLICT", str(err)) from None
        # Committed: what this sync wrote is the state at `revision` (read again when another writes).
        self._entries_at = (revision, entries)
        if not plan.upserts and not plan.orphans:
            self._items_at = (revision, record.items)
        last = self._manifest
        if last is not None and last[0] is entries and last[1] == commit:  # the same entries at the same commit
            manifest = {**last[2], "generatedAt": now_iso()}
        else:
            manifest = plans.manifest(entries, commit, now_iso())
            self._manifest = (entries, commit, manifest)
        return plan, commit, (time.perf_counter() - started) * 1000, manifest

    async def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Write `manifest.json` into the knowledge folder (atomically, and only when it changed)."""
        path = self.knowledge_root / plans.MANIFEST

        def write() -> None:
            try:
                old: bytes | None = path.read_bytes()
            except FileNotFoundError:
                old = None
            data = plans.manifest_bytes(manifest, old)
            if data is not None:
                atomic_write(path, data)

        await trio.to_thread.run_sync(write)


def _git_dirs(root: Path, top_text: str, git_text: str, common_text: str) -> GitDirs | bool:
    """`GitDirs` from what `git rev-parse` printed in `root` (paths relative to it), or True when the
    files cannot be trusted to say what git would: a reftable, a folder outside its work tree."""
    folder = root.resolve()
    top = Path(top_text).resolve()
    common = (root / common_text).resolve()
    if (common / "reftable").exists() or not folder.is_relative_to(top):
        return True
    between = tuple(f / ".git" for f in (folder, *folder.parents) if f != top and f.is_relative_to(top))
    return GitDirs((root / git_text).resolve(), common, top / ".git", between)
