"""The knowledge reader actor: what is committed in the knowledge repository, read with git.

Git runs through `trio.run_process`. Which commit HEAD names is read from git's own files
(`HEAD`, the branch's ref, `packed-refs`) on every call, so a commit is seen by the very next call
without a git process; when those files say anything unusual, git is asked. Parsed items are
cached by blob id, the listing by commit, the snapshot (items, problems, query index) by tree.
A snapshot is built by the actor's own task, one at a time, so a caller that gives up does not
waste a build others wait for; while HEAD names the cached snapshot's commit, callers get it
without a hop to the actor. Git queries (`head`, `listing`, `parse`, `history`, ...) run in the
caller's task. A restarted reader starts from empty caches.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from specactor.actors.mailbox import Mailbox
from specactor.actors.supervisor import ChildSpec
from specactor.domain.knowledge import gitout, gitrefs
from specactor.domain.knowledge.api import HistoryEntry, Item, Problem
from specactor.domain.knowledge.parse import item_scope, parse_or_problem
from specactor.domain.knowledge.sync import Snapshot
from specactor.protocol.errors import ToolError

QUEUE = 256  # one letter per knowledge call that found HEAD moved, each waiting for a build
CALL_TIMEOUT = 60.0
# Variables with which git looks for the repository elsewhere than the folders say: git decides.
_GIT_LOCATORS = ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE")


class RepoMissing(Exception):
    pass


class GitFailed(Exception):
    def __init__(self, args: Sequence[str], stderr: bytes) -> None:
        super().__init__(f"git {' '.join(args)} failed: {stderr.decode('utf-8', 'replace').strip()[:500]}")


@dataclass(frozen=True)
class Build:
    """Ask for the snapshot at HEAD."""


@dataclass(frozen=True)
class GitDirs:
    """Where the knowledge folder's repository keeps HEAD (`git_dir`) and the branches (`common_dir`,
    the same folder unless this is a linked worktree), as `git rev-parse` found them once. True while
    `top` (the work tree's `.git`) exists and no folder between the knowledge folder and the top grows
    a `.git` of its own (`between`): what git's own search looks at."""

    git_dir: Path
    common_dir: Path
    top: Path
    between: tuple[Path, ...]


class KnowledgeReader:
    """Args:
        root: the knowledge repository (or a folder inside a git repository).
        git: the git executable.
    """

    def __init__(self, root: Path, *, git: str = "git") -> None:
        self.root = root
        self.git_exe = git
        self.mailbox: Mailbox[Build] = Mailbox("knowledge-reader", QUEUE)
        # Permanent: it serves as long as the app runs; a restart costs one cold snapshot.
        self.spec = ChildSpec("knowledge-reader", self.run, restart="permanent")
        self._forget()

    def _forget(self) -> None:
        self._snapshot: Snapshot | None = None
        self._parsed: dict[tuple[str, str], Item | Problem] = {}  # (path, blob id) -> parse result
        self._dirs: GitDirs | bool = False  # False: not found yet; True: git must be asked every time
        self._packed: tuple[bytes, dict[str, str]] = (b"", {})  # packed-refs as last read, parsed
        self._listed: tuple[str, dict[str, str]] | None = None  # (commit, its listing): a commit never changes

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Build snapshots for the calls that ask, one at a time, until cancelled."""
        self._forget()  # what a crashed instance cached is not trusted
        task_status.started()
        async for letter in self.mailbox:
            with letter:
                if not isinstance(letter.body, Build):  # a sender's bug: crash, and be restarted clean
                    raise TypeError(f"the knowledge reader got a message it does not know: {letter.body!r}")
                try:
                    snap = self._fresh()
                    if snap is None:  # HEAD moved since the call looked, or nothing is built yet
                        snap = await self._build()
                except Exception as exc:
                    letter.fail(exc)
                else:
                    letter.reply(snap)

    async def snapshot(self) -> Snapshot:
        """The committed items at HEAD, duplicate ids after the first as problems.

        Raises:
            RepoMissing, GitFailed: as `git`. ActorError: the reader crashed or did not answer in time.
        """
        snap = self._fresh()
        if snap is not None:
            return snap
        built: Snapshot = await self.mailbox.call(Build(), CALL_TIMEOUT)
        return built

    def _fresh(self) -> Snapshot | None:
        """The cached snapshot if HEAD, read from git's files, still names its commit."""
        known = self._snapshot
        if known is not None and known.commit is not None and self.head_from_files() == known.commit:
            return known
        return None

    async def _build(self) -> Snapshot:
        commit, tree = await self.head()
        known = self._snapshot
        if known is not None and known.tree == tree and known.commit is not None:
            known.commit = commit  # another commit, the same files here
            return known
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

    # ------------------------------------------------------------------ git, in the caller's task

    async def git(self, *args: str, stdin: bytes | None = None) -> bytes:
        """Run git in the knowledge folder; its stdout.

        Raises:
            RepoMissing: there is no folder. GitFailed: git said no.
            ToolError: PROVIDER_ERROR, git is not installed.
        """
        if not self.root.is_dir():
            raise RepoMissing(f"the knowledge repository {self.root} does not exist")
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
        try:
            done = await trio.run_process([self.git_exe, *args], cwd=self.root, stdin=stdin,
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
                raise RepoMissing(f"{self.root} is not in a git repository ({err})") from None
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
        return await trio.to_thread.run_sync(_git_dirs, self.root, top, git_dir, common_dir)

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
            if not os.path.isdir(self.root):
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

    def listed(self, commit: str | None) -> dict[str, str] | None:
        """The listing at `commit` if it is the one kept (no git process), else None."""
        return self._listed[1] if self._listed is not None and commit and self._listed[0] == commit else None

    async def parse(self, listing: dict[str, str], paths: Sequence[str]) -> dict[str, Item | Problem]:
        """Parse the items at `paths`, reading only (path, blob) pairs not parsed before."""
        known = self._parsed  # a concurrent build may replace the cache; this call keeps its view
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
