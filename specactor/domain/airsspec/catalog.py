"""The read model: parsed specs kept between calls, re-read only when their files change.

Sans-I/O: the caller passes a `Files` port (stat, read, list) and the catalog decides what to
look at. A single spec is always checked against its files (a few stats), so a hand edit shows
at once. The index of all specs (lists, completions, cycles) is kept fresh without a directory
scan per call: every write advances the change journal, and the catalog re-reads just the ids
written since the generation it last saw; a full scan happens at start, when the journal cannot
tell, and every `sweep_interval` seconds (which also picks up edits made by hand).

Not thread-safe: the caller serialises calls (the toolset holds a lock around each).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

import msgspec

from specactor.domain.airsspec import journal, layout
from specactor.domain.airsspec.api import InvalidSpec
from specactor.domain.airsspec.dependencies import DepState
from specactor.domain.airsspec.documents import Documents
from specactor.domain.airsspec.errors import NotFoundError, ValidationFailed
from specactor.domain.airsspec.ids import is_spec_id
from specactor.domain.airsspec.model import Bundle, Dependency, initial_state
from specactor.domain.airsspec.vocab import BLOCKING_KINDS, Category, Lifecycle, Phase

T = TypeVar("T")
StatKey = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns: a rename changes the inode


class Files(Protocol):
    def stat(self, rel: str) -> StatKey | None:
        """The key of a regular file (not a symlink), None when there is none."""

    def read(self, rel: str) -> bytes | None: ...

    def spec_dirs(self) -> list[str]:
        """The names of the real directories (no symlinks) under `.airsspec/specs`."""

    def is_dir(self, rel: str) -> bool:
        """True for a real directory (not a symlink)."""

    def monotonic(self) -> float: ...


class Summary(msgspec.Struct, frozen=True, gc=False):
    """What lists and dependency checks need of a spec."""

    id: str
    title: str
    state: Lifecycle
    category: Category
    phase: Phase
    created_at: str
    updated_at: str
    dependencies: tuple[Dependency, ...]
    completed: bool

    def dep_state(self) -> DepState:
        return DepState(self.state, self.completed, tuple(d.spec_id for d in self.dependencies
                                                           if d.kind in BLOCKING_KINDS))


def summarize(b: Bundle) -> Summary:
    meta, state = b.spec.meta, b.state
    return Summary(id=b.spec_id, title=meta.title, state=state.lifecycle, category=meta.category, phase=state.phase,
                   created_at=meta.created_at, updated_at=max(meta.updated_at, state.updated_at),
                   dependencies=meta.dependencies, completed=state.completed_at is not None)


Entry = Summary | InvalidSpec


class Catalog:
    def __init__(self, documents: Documents | None = None, *, sweep_interval: float = 2.0) -> None:
        self.documents = documents or Documents()
        self.sweep_interval = sweep_interval
        self.version = 0  # bumped whenever an index entry changes: a key for derived caches
        self._files: dict[str, tuple[StatKey, object]] = {}
        self._entries: dict[str, tuple[tuple[StatKey | None, ...], Entry]] = {}
        self._sorted: list[Entry] | None = None
        self._journal_key: StatKey | None = None
        self._generation: int | None = None
        self._last_sweep: float | None = None
        self._stale: set[str] = set()  # specs a change named since the last read: refreshed first

    # ------------------------------------------------------------------ one spec, always fresh

    def bundle(self, files: Files, spec_id: str) -> Bundle:
        """Raises:
            NotFoundError: no such spec. ValidationFailed: one of its files does not parse.
        """
        try:
            b = self._bundle(files, spec_id)
        except NotFoundError:
            if spec_id in self._entries:
                self._drop(spec_id)
            raise
        except ValidationFailed as err:
            if spec_id in self._entries:
                self._put(spec_id, self._keys(spec_id), InvalidSpec(id=spec_id, file=err.file, line=err.line,
                                                                    reason=err.reason))
            raise
        if self._last_sweep is not None:  # what one spec's reader just saw, the index shows too
            self._put(spec_id, self._keys(spec_id), summarize(b))
        return b

    def _keys(self, spec_id: str) -> tuple[StatKey | None, ...]:
        """The stat keys behind the index entry, as the last `_cached` calls saw them."""
        return tuple(self._files[rel][0] if rel in self._files else None
                     for rel in (layout.spec_file(spec_id), layout.state_file(spec_id)))

    def _bundle(self, files: Files, spec_id: str) -> Bundle:
        if not is_spec_id(spec_id) or not files.is_dir(layout.spec_dir(spec_id).rstrip("/")):
            raise NotFoundError("spec", spec_id)
        docs = self.documents
        spec = self._cached(files, layout.spec_file(spec_id), lambda d: docs.spec(spec_id, d))
        if spec is None:
            raise NotFoundError("spec", spec_id)
        plan = self._cached(files, layout.plan_file(spec_id), lambda d: docs.plan(spec_id, d))
        state = self._cached(files, layout.state_file(spec_id), lambda d: docs.state(spec_id, d))
        return Bundle(spec_id=spec_id, spec=spec, plan=plan,
                      state=state if state is not None else initial_state(spec_id, spec.meta, plan))

    def dep_state(self, files: Files, spec_id: str) -> DepState | None:
        """A dependency's state, read fresh; None when missing or unreadable."""
        entry = self._refresh(files, spec_id)
        return entry.dep_state() if isinstance(entry, Summary) else None

    def _cached(self, files: Files, rel: str, parse: Callable[[bytes], T]) -> T | None:
        key = files.stat(rel)
        if key is None:
            self._files.pop(rel, None)
            return None
        seen = self._files.get(rel)
        if seen is not None and seen[0] == key:
            result = seen[1]
        else:
            data = files.read(rel)
            if data is None:
                return None
            try:
                result = parse(data)
            except ValidationFailed as err:
                result = err
            self._files[rel] = (key, result)
        if isinstance(result, ValidationFailed):  # a fresh exception: threads may raise it at once
            raise ValidationFailed(result.file, result.line, result.reason)
        return result  # type: ignore[return-value]

    # ------------------------------------------------------------------ the index

    def entries(self, files: Files) -> list[Entry]:
        """Every spec (valid ones as Summary, broken ones as InvalidSpec), sorted by id."""
        self._sync(files)
        if self._sorted is None:
            self._sorted = [entry for _, (_, entry) in sorted(self._entries.items())]
        return self._sorted

    def summaries(self, files: Files) -> dict[str, Summary]:
        return {e.id: e for e in self.entries(files) if isinstance(e, Summary)}

    def mark_stale(self, spec_ids: Iterable[str] | None) -> None:
        """Refresh these specs at the next read (a change on the feed named them); None: sweep
        everything at the next read."""
        if spec_ids is None:
            self._last_sweep = None
        else:
            self._stale.update(spec_ids)

    def _sync(self, files: Files) -> None:
        if self._stale:
            stale, self._stale = self._stale, set()
            for spec_id in sorted(stale):
                self._refresh(files, spec_id)
        now = files.monotonic()
        if self._last_sweep is None or now - self._last_sweep >= self.sweep_interval:
            self._sweep(files, now)
            return
        key = files.stat(layout.JOURNAL)
        if key == self._journal_key:
            return
        current = journal.parse(files.read(layout.JOURNAL))
        changed = current.changed_since(self._generation) if current and self._generation is not None else None
        if changed is None:
            self._sweep(files, now)
            return
        for spec_id in changed:
            self._refresh(files, spec_id)
        self._journal_key, self._generation = key, current.generation if current else None

    def _sweep(self, files: Files, now: float) -> None:
        # The journal is looked at before the scan: a write landing during the scan shows up
        # as a newer generation next time, never as one we think we saw.
        key = files.stat(layout.JOURNAL)
        current = journal.parse(files.read(layout.JOURNAL)) if key is not None else None
        names = files.spec_dirs()
        present = set(names)
        for gone in [s for s in self._entries if s not in present]:
            self._drop(gone)
        for name in names:
            if not name.startswith("."):
                self._refresh(files, name)
        self._journal_key, self._generation = key, current.generation if current else 0
        self._last_sweep = now

    def _refresh(self, files: Files, spec_id: str) -> Entry | None:
        if not is_spec_id(spec_id):
            if not files.is_dir(layout.spec_dir(spec_id).rstrip("/")):
                self._drop(spec_id)
                return None
            bad = InvalidSpec(id=spec_id, file=layout.spec_dir(spec_id), line=1,
                              reason="the directory name is not a spec id ({unix seconds}-{slug})")
            return self._put(spec_id, (), bad)
        keys = (files.stat(layout.spec_file(spec_id)), files.stat(layout.state_file(spec_id)))
        known = self._entries.get(spec_id)
        if known is not None and known[0] == keys:
            return known[1]
        if keys[0] is None:
            self._drop(spec_id)
            return None
        try:
            entry: Entry = summarize(self._bundle(files, spec_id))
        except NotFoundError:
            self._drop(spec_id)
            return None
        except ValidationFailed as err:
            entry = InvalidSpec(id=spec_id, file=err.file, line=err.line, reason=err.reason)
        return self._put(spec_id, keys, entry)

    def _put(self, spec_id: str, keys: tuple[StatKey | None, ...], entry: Entry) -> Entry:
        known = self._entries.get(spec_id)
        if known is None or known[1] != entry:
            self.version += 1
            self._sorted = None
        self._entries[spec_id] = (keys, entry)
        return entry

    def _drop(self, spec_id: str) -> None:
        for rel in (layout.spec_file(spec_id), layout.plan_file(spec_id), layout.state_file(spec_id)):
            self._files.pop(rel, None)
            self.documents.forget(rel)
        if self._entries.pop(spec_id, None) is not None:
            self.version += 1
            self._sorted = None
