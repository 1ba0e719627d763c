"""What the stores hold, read for the session context without trio: the binding knowledge items
at the knowledge repository's HEAD (git, as the knowledge reader actor runs it) and the project's
memories (a read-only SQLite connection, `sqlite/context_reads.py`).

Every read is bounded by a `Deadline`; a store that is missing, locked or broken contributes
nothing (`Gathered.problems` says why) and the other still does. The items of a knowledge tree
are kept in `<root>/.specactor/cache/` (written atomically), so a hook parses the repository's
YAML once per commit that changes it, not once per prompt.
"""

from __future__ import annotations

import os  # noqa: TID251 - git's environment, and the cache's atomic rename
import sqlite3  # noqa: TID251 - only for its error type; the reads live in sqlite/context_reads.py
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from specactor.config import Config, load
from specactor.domain import context as text
from specactor.domain.knowledge import gitout
from specactor.domain.knowledge.api import Item
from specactor.domain.knowledge.parse import item_scope, parse_or_problem
from specactor.domain.knowledge.query import binds
from specactor.domain.memory.layers import Identifiers, scope_key
from specactor.sqlite import context_reads

CACHE_VERSION: Final = 1  # bump when what parse_item makes of a file changes
NEWEST: Final = 50  # memories read for the session context; the budget shows what fits
PROMPT_LIMIT: Final = 5
PROMPT_THRESHOLD: Final = 0.7  # memory_search's default
PROMPT_BUDGET: Final = 2000
_items = msgspec.msgpack.Decoder(tuple[int, str, list[Item]])


class Deadline:
    """A point in time every read must finish by."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        """Seconds left (at least a millisecond, so a timeout argument stays valid), at most `cap`."""
        remaining = max(0.001, self.end - time.monotonic())
        return min(remaining, cap) if cap is not None else remaining


@dataclass(frozen=True)
class Sources:
    """Where a workspace's stores are, and who its project is (as the memory toolset resolves them)."""

    root: Path
    memory_db: Path
    knowledge: Path
    ids: Identifiers
    budget: int = text.DEFAULT_BUDGET  # the `context.budget` setting: characters of session context

    @classmethod
    def from_config(cls, config: Config) -> Sources:
        mem = config.memory
        ids = Identifiers(project_id=mem.project_id or config.root_path.name or None, team_id=mem.team_id,
                          org_id=mem.org_id, company_id=mem.company_id)
        return cls(config.root_path, config.memory_db_path, config.knowledge_repo_path, ids, config.context.budget)

    @classmethod
    def at(cls, root: str | Path) -> Sources:
        """The sources of the workspace `root`, by the settings `specactor serve --root root` would use.

        Raises:
            ConfigError: as `config.load`.
        """
        return cls.from_config(load({"root": str(root)}))

    @property
    def project_scope(self) -> tuple[str, str] | None:
        """The project layer's scope key, None without a project id."""
        return ("project", scope_key("project", self.ids)) if self.ids.project_id else None


@dataclass
class Gathered:
    items: list[Item] = field(default_factory=list)
    notes: list[text.Note] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------- knowledge


def git(repo: Path, *args: str, deadline: Deadline, stdin: bytes | None = None) -> bytes:
    """git's stdout in `repo`.

    Raises:
        subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError: git failed, ran late, is missing.
    """
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(["git", *args], cwd=repo, input=stdin, capture_output=True, check=True, env=env,
                          timeout=deadline.left())
    return done.stdout


def binding_items(sources: Sources, deadline: Deadline, *, cache: bool = True) -> list[Item]:
    """The accepted items with constraints at HEAD that bind the project; [] when there is no repository.

    Raises:
        subprocess.SubprocessError, OSError: git failed or ran past the deadline.
    """
    repo = sources.knowledge
    if not repo.is_dir():
        return []
    try:
        commit, tree = git(repo, "rev-parse", "HEAD", "HEAD:./", deadline=deadline).decode().split()
    except subprocess.CalledProcessError:
        return []  # not a repository, no commit yet, or nothing committed in this folder
    where = sources.root / ".specactor" / "cache" / "context-knowledge.msgpack"
    constrained = _cached(where, tree) if cache else None
    if constrained is None:
        constrained = _parse_tree(repo, commit, deadline)
        if cache:
            _store(where, tree, constrained)
    return [i for i in constrained if binds(i, sources.ids)]


def _parse_tree(repo: Path, commit: str, deadline: Deadline) -> list[Item]:
    listing = gitout.ls_tree(git(repo, "ls-tree", "-r", "-z", commit, "--", ".", deadline=deadline))
    paths = sorted(p for p in listing if item_scope(p) is not None)
    ids = sorted({listing[p] for p in paths})
    blobs = gitout.cat_file_batch(git(repo, "cat-file", "--batch", stdin="\n".join(ids).encode(),
                                      deadline=deadline)) if ids else {}
    seen: set[str] = set()
    out: list[Item] = []
    for path in paths:  # the first of a duplicate id wins, as in the knowledge reader's snapshot
        found = parse_or_problem(path, blobs.get(listing[path], b""))
        if isinstance(found, Item) and found.id not in seen:
            seen.add(found.id)
            if found.status == "accepted" and found.constraints:
                out.append(found)
    return out


def _cached(where: Path, tree: str) -> list[Item] | None:
    try:
        version, known, items = _items.decode(where.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    return items if version == CACHE_VERSION and known == tree else None


def _store(where: Path, tree: str, items: list[Item]) -> None:
    """Best effort: a workspace that cannot be written just parses again next time."""
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where.parent, prefix=".context-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(msgspec.msgpack.encode((CACHE_VERSION, tree, items)))
            os.replace(tmp, where)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


# ---------------------------------------------------------------------- memories


def _notes(sources: Sources, deadline: Deadline, query: str | None, limit: int,
           threshold: float) -> list[text.Note]:
    scope = sources.project_scope
    if scope is None:
        return []
    conn = context_reads.open_read_only(sources.memory_db, deadline.left(0.25))
    if conn is None:
        return []
    try:
        # A statement still running at the deadline is interrupted (a lock wait is bounded by the timeout).
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline.end), 1000)
        conn.execute("BEGIN")  # one snapshot for every statement
        if query is None:
            return context_reads.newest_notes(conn, *scope, limit)
        return context_reads.lexical_notes(conn, *scope, query, threshold, limit)
    finally:
        conn.close()


def gather(sources: Sources, deadline: Deadline, *, query: str | None = None, knowledge: bool = True,
           memories: bool = True, limit: int = NEWEST, threshold: float = PROMPT_THRESHOLD) -> Gathered:
    """What each store holds for the context; a store that fails adds a problem, not an exception."""
    out = Gathered()
    if knowledge:
        try:
            out.items = binding_items(sources, deadline)
        except (subprocess.SubprocessError, OSError, ValueError) as err:
            out.problems.append(f"knowledge repository {sources.knowledge}: {type(err).__name__}: {err}")
    if memories:
        try:
            out.notes = _notes(sources, deadline, query, limit, threshold)
        except (sqlite3.Error, OSError) as err:
            out.problems.append(f"memory store {sources.memory_db}: {type(err).__name__}: {err}")
    return out


def get_session_context(root: str | Path, budget: int | None = None, *, seconds: float = 5.0) -> str:
    """The session context of the workspace `root`: its binding constraints, then its newest
    memories, inside `<specactor-context>` tags, at most `budget` characters (default: the
    workspace's `context.budget` setting; "" when there is none).

    Raises:
        ConfigError: the workspace's settings are invalid.
    """
    sources = Sources.at(root)
    found = gather(sources, Deadline(seconds))
    size = sources.budget if budget is None else budget
    return text.session_context(found.items, found.notes, size, project=sources.ids.project_id)


def instructions_summary(config: Config, base: str, *, seconds: float = 0.5) -> str:
    """`base` (the server's `instructions`) and, when the workspace's knowledge binds it, the short
    summary of `domain/context.instructions_summary`, together at most 2 KB. Read once, at start-up,
    within `seconds`; any failure leaves `base` alone."""
    room = text.INSTRUCTIONS_BUDGET - len(base.encode()) - 2
    try:
        sources = Sources.from_config(config)
        summary = text.instructions_summary(binding_items(sources, Deadline(seconds)), room) if room > 0 else ""
    except Exception:
        return base
    return f"{base}\n\n{summary}" if summary else base
