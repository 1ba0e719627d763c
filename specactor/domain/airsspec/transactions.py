"""What one write does inside a storage transaction (under the workspace lock, on a worker
thread): read the current files, run a workflow operation, stage the changed files, advance
the change journal. Reads here always go to the files (never a cache), so two processes never
decide on stale state; parsing is still memoised by content.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specactor.domain.airsspec import configfile, journal, layout, workflow
from specactor.domain.airsspec.dependencies import DependencyReport, DepState, check
from specactor.domain.airsspec.documents import Documents, Writer, decode, save
from specactor.domain.airsspec.errors import NotFoundError
from specactor.domain.airsspec.ids import is_spec_id, new_spec_id
from specactor.domain.airsspec.model import Bundle, Dependency, ProjectConfig
from specactor.domain.airsspec.vocab import BLOCKING_KINDS, Category

Operation = Callable[[Bundle], Bundle]


def read_config(read: Callable[[str], bytes | None], default_name: str) -> ProjectConfig | None:
    """The workspace's config.toml, or None when there is none.

    Raises:
        ValidationFailed: the file does not parse.
    """
    data = read(layout.CONFIG)
    if data is None:
        return None
    return configfile.parse(decode(data, layout.CONFIG), layout.CONFIG, default_name)


def ensure_workspace(tx: Writer, default_name: str) -> ProjectConfig:
    """The config, writing a default one (and `.airsspec/.gitignore`) when the workspace is new."""
    config = read_config(tx.read, default_name)
    if config is None:
        config = ProjectConfig(name=default_name)
        tx.write(layout.CONFIG, configfile.render(config).encode())
        if tx.read(layout.GITIGNORE) is None:
            tx.write(layout.GITIGNORE, layout.GITIGNORE_TEXT.encode())
    return config


def advance_journal(tx: Writer, spec_ids: Sequence[str]) -> None:
    current = journal.parse(tx.read(layout.JOURNAL)) or journal.Journal()
    # An index of what changed, rebuilt by a rescan if lost: atomic, but not worth an fsync.
    tx.write(layout.JOURNAL, journal.render(current.advance(spec_ids)), durable=False)


def update(tx: Writer, docs: Documents, spec_id: str, operation: Operation) -> tuple[Bundle, Bundle]:
    """Apply `operation` to the spec's current bundle; the bundles before and after.

    Raises:
        NotFoundError, ValidationFailed, and whatever the operation refuses with.
    """
    old = docs.bundle(spec_id, tx.read)
    new = operation(old)
    if new != old:
        save(tx, old, new)
        advance_journal(tx, [spec_id])
    return old, new


def dependency_state(tx: Writer, docs: Documents, spec_id: str) -> DepState | None:
    """A spec's state as a dependency, read in the transaction; None when it does not exist."""
    if not is_spec_id(spec_id):  # a hand-edited dependency that cannot name a spec directory
        return None
    try:
        b = docs.bundle(spec_id, tx.read)
    except NotFoundError:
        return None
    hard = tuple(d.spec_id for d in b.spec.meta.dependencies if d.kind in BLOCKING_KINDS)
    return DepState(b.state.lifecycle, b.state.completed_at is not None, hard)


def dependency_report(tx: Writer, docs: Documents, b: Bundle) -> DependencyReport:
    """The spec's direct dependencies, read fresh (no cycle search: that needs every spec)."""
    return check(b.spec_id, b.spec.meta.dependencies, lambda other: dependency_state(tx, docs, other), cycles=False)


def start_build(tx: Writer, docs: Documents, spec_id: str, plan_approved: bool, now: str) -> tuple[Bundle, Bundle]:
    return update(tx, docs, spec_id,
                  lambda b: workflow.start_build(b, plan_approved, dependency_report(tx, docs, b), now))


def create(tx: Writer, docs: Documents, *, title: str, description: str, category: Category | None,
           content: str | None, dependencies: Sequence[Dependency], unix_seconds: int, now: str,
           default_name: str) -> Bundle:
    """Create a spec (and the workspace, the first time). Every dependency must exist.

    Raises:
        NotFoundError: naming the first dependency that does not exist.
    """
    config = ensure_workspace(tx, default_name)
    for dep in dependencies:
        if tx.read(layout.spec_file(dep.spec_id)) is None:
            raise NotFoundError("spec", dep.spec_id)

    def taken(candidate: str) -> bool:
        return tx.read(layout.spec_file(candidate)) is not None or tx.read(layout.state_file(candidate)) is not None

    spec_id = new_spec_id(title, unix_seconds, taken)
    b = workflow.create_spec(spec_id, title=title, description=description,
                             category=category or config.default_category, content=content,
                             dependencies=dependencies, now=now)
    save(tx, None, b)
    advance_journal(tx, [spec_id])
    return b
