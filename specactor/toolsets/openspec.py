"""The `openspec` toolset: OpenSpec workspaces over MCP, answering like the OpenSpec CLI 1.13.2.

Workspace: `{root}/openspec/`, or `$OPENSPEC_ROOT/openspec/`, or with
`OPENSPEC_AUTO_PROJECT_ROOT=true` `$OPENSPEC_ROOT/<project path relative to $HOME>/openspec/`
(created on first use); `Config.openspec_project` resolves it. Reads go through the domain's
`CachedSource` over `OsFileSystem` (`fs/openspec_fs.py`: inotify-invalidated on Linux,
stat-keyed elsewhere), which never follows a symlink out of `openspec/`. Writes are transactions
of the project's storage actor (the parent of `openspec/`; started on demand,
`Services.storages`), each published on the change feed; archive is made all-or-nothing by a
redo journal (`apply_archives`, `recover`); archives queued together share one (`_Archives`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from msgspec import UNSET

from specactor.actors.storage import PathEscape, Tx
from specactor.domain.changes import Change, Kind
from specactor.domain.openspec import templates
from specactor.domain.openspec.cache import CachedSource
from specactor.domain.openspec.errors import Blocked, EditRefused, Missing
from specactor.domain.openspec.inputs import (
    CHANGE_ID,
    ITEM_ID,
    ArchiveIn,
    ChangeArgs,
    InitIn,
    ListIn,
    ProjectContextIn,
    ProposeArgs,
    ShowIn,
    TaskCompleteIn,
    ValidateIn,
)
from specactor.domain.openspec.model import (
    ArchiveOut,
    InitOut,
    ListOut,
    ProjectContextOut,
    Root,
    ShowOut,
    TaskCompleteOut,
    TickedTask,
    ValidateOut,
)
from specactor.domain.openspec.source import Source, Staged, active_change_ids, join, spec_ids
from specactor.fs.openspec_fs import (
    Archive,
    OsFileSystem,
    PendingJournal,
    apply_archives,
    ensure_workspace,
    journal_pending,
    recover,
)
from specactor.logsetup import get_logger
from specactor.protocol.context import RequestContext
from specactor.protocol.envelope import Encoded
from specactor.protocol.errors import INVALID_PARAMS, ProtocolError, ResourceNotFound, ToolError
from specactor.protocol.registry import Registry
from specactor.wire.mcp import Resource, ResourceContents, TextResourceContents

if TYPE_CHECKING:
    from specactor.domain.openspec.archive import ArchivePlan
    from specactor.domain.openspec.change_rules import Context
    from specactor.toolsets import Services

# The parsers, validator and merge compile ~100 regular expressions: they are imported by the
# first call that needs them (`from specactor.domain.openspec import ...` inside the handlers),
# so start-up and the first reply do not pay for them.
CHANGE_DOCS = ("proposal", "tasks", "design")

T = TypeVar("T")
log = get_logger("specactor.openspec")
TOOLSET = "openspec"
MD = "text/markdown"


# ---------------------------------------------------------------------- the disk


class Workspace:
    """One project's `openspec/` directory: its cached reader, its writer, its archive journal."""

    def __init__(self, project: Path, services: Services, *, create: bool = False) -> None:
        self.project = project
        self.openspec = project / "openspec"
        self.fs = OsFileSystem(self.openspec)
        self.source = CachedSource(self.fs)
        self.runtime = services.runtime
        self.storages = services.storages
        self.create = create  # make `openspec/` on first use (OPENSPEC_AUTO_PROJECT_ROOT)

    def changed(self, change: Change) -> None:
        """A change on the feed (this process's writes and edits seen on disk): forget what the
        cache holds of the paths it names. Blocking (the cache's lock): runs on a worker thread."""
        if Path(change.workspace) != self.project:
            return
        if change.kind == "rescan":
            self.source.clear()
        else:
            self.source.forget(p.removeprefix("openspec/") for p in change.paths if p.startswith("openspec/"))

    def root(self) -> Root:
        return Root(str(self.project), "nearest")

    def context(self, src: Source | None = None) -> Context:
        from specactor.domain.openspec.change_rules import context_for

        return context_for(src or self.source, str(self.openspec))

    def view(self, tx: Tx) -> Source:
        """The workspace as a transaction sees it: the (cached) disk, plus what the transactions
        before it in its group commit wrote, which is not on disk until the group commits."""
        staged: dict[str, bytes | None] = {}
        for layer in (tx.base, tx):
            for key, data in layer.writes.items() if layer is not None else ():
                if key.startswith("openspec/"):
                    staged[key[len("openspec/"):]] = data
        return Staged(self.source, staged) if staged else self.source

    def _created(self) -> None:
        if self.create:
            ensure_workspace(self.openspec)
            self.create = False

    async def read(self, fn: Callable[[], T]) -> T:
        """Run a read on a worker thread, first finishing any archive a crash interrupted."""
        def run() -> T:
            self._created()
            if journal_pending(self.project):
                raise PendingJournal
            self.source.refresh()
            with self.fs.operation():
                return fn()

        try:
            return await self.runtime.run_sync(run)
        except PendingJournal:
            return await self.write(lambda tx: fn())

    async def write(self, fn: Callable[[Tx], T], kind: Kind | None = None, *, defers: bool = False) -> T:
        """A read-modify-write under the workspace lock, published on the change feed as `kind`
        (else as its paths say); the journal is recovered first. `defers`: `fn` may defer work to
        its group commit (`Tx.defer`)."""
        def txn(tx: Tx) -> T:
            self._created()
            if journal_pending(self.project):  # redoing an archive moves files: settle first
                tx.settle()
                tx.changed(*recover(self.project))
            self.source.refresh()
            with self.fs.operation():  # (an archive moves a folder, then reads nothing more)
                return fn(tx)

        try:
            storage = await self.storages.get(self.project)
            return await storage.transact(txn, toolset=TOOLSET, kind=kind, defers=defers)
        except PathEscape as err:  # a symlink inside openspec/ leading out of it
            raise ToolError("INVALID_INPUT", str(err)) from None

    def flush(self, tx: Tx) -> None:
        """Do the work `tx`'s group deferred (archives), then read the disk afresh: the cache hears
        of what moved, and the operation's open folders are let go."""
        tx.flush()
        self.source.refresh()
        self.fs.reopen()

    def guard(self, *rels: str) -> None:
        """INVALID_INPUT when a schema-valid id still leads out of openspec/ through a symlink."""
        for rel in rels:
            if self.fs.escapes(rel):
                raise ToolError("INVALID_INPUT", f"'{rel}' leads outside the openspec directory", {"path": rel})


def _blocked(err: Blocked, root: Root, archive: bool = False) -> ToolError:
    """A CLI refusal as a tool error; `details` holds the CLI's own JSON (`status`, `archive`, `root`)."""
    diag = err.diagnostic
    details: dict[str, Any] = {"status": [msgspec.to_builtins(diag)]}
    if archive:
        details = {"archive": None, "root": msgspec.to_builtins(root), **details}
    if diag.code in ("unknown_item", "invalid_item", "archive_change_not_found") or " not found" in diag.message:
        return ToolError("NOT_FOUND", diag.message, details)
    return ToolError("CONFLICT", diag.message, details, retryable=False)


# Archive writes to disk at once, not into the group commit: when a transaction earlier in its group
# wrote a file the archive moves or rewrites, that write would land after the archive, so the archive
# waits for the next group (where it is on disk) instead; at most this many times.
REQUEUES = 8


class _Requeue(Exception):
    """The archive overlaps what its group commit has not yet written: run it in the next group."""


def _overlaps(staged: dict[str, bytes | None], writes: Mapping[str, bytes], deletes: list[str],
              move: tuple[str, str]) -> bool:
    moved = tuple(f"{m}/" for m in move)
    return any(rel in writes or rel in deletes or rel in move or rel.startswith(moved) for rel in staged)


def _folders_down_to(folder: str) -> list[str]:
    """"a/b/c/" -> ["a/", "a/b/", "a/b/c/"]: the folder and those above it, with trailing slashes."""
    parts = folder.split("/")[:-1]
    return ["/".join(parts[:i]) + "/" for i in range(1, len(parts) + 1)]


_ARCHIVES = "openspec-archives"  # the key of a group commit's archives (`Tx.defer`)


class _Archives:
    """The archives of one group commit, applied with one journal (`apply_archives`): one round of
    fsyncs for all of them. Each was planned on the disk as the group found it, so only archives
    that touch none of each other's files wait together (`touches`)."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.items: list[tuple[Tx, ArchivePlan]] = []
        self.paths: set[str] = set()  # the files they write or remove (under openspec/)
        self.folders: set[str] = set()  # the folders they move, from and to (with a trailing /)
        self.ancestors: set[str] = set()  # those folders and every folder above them

    def _touched(self, plan: ArchivePlan) -> tuple[set[str], list[str]]:
        read = {join("specs", spec.id, "spec.md") for spec in plan.specs}  # every spec it merged into
        return read | set(plan.writes) | set(plan.deletes), [f"{folder}/" for folder in plan.move]

    def touches(self, plan: ArchivePlan) -> bool:
        """Whether `plan` reads or changes a file or folder that a waiting archive changes (a
        folder it moves is, contains or lies in one they move): set lookups, so a group of n
        archives checks in O(n), not O(n^2)."""
        paths, folders = self._touched(plan)
        return bool(paths & self.paths) or any(
            folder in self.ancestors or not self.folders.isdisjoint(_folders_down_to(folder)) for folder in folders)

    def add(self, tx: Tx, plan: ArchivePlan) -> None:
        paths, folders = self._touched(plan)
        self.paths |= paths
        self.folders.update(folders)
        for folder in folders:
            self.ancestors.update(_folders_down_to(folder))
        self.items.append((tx, plan))

    def apply(self) -> None:
        done = apply_archives(self.project, [
            Archive({f"openspec/{rel}": data for rel, data in plan.writes.items()},
                    [f"openspec/{rel}" for rel in plan.deletes],
                    (f"openspec/{plan.move[0]}", f"openspec/{plan.move[1]}")) for _, plan in self.items])
        for (tx, _), archived in zip(self.items, done, strict=True):
            tx.changed(*archived)  # published with its transaction


def _refused(err: EditRefused) -> ToolError:
    return ToolError("NOT_FOUND" if err.code == "missing" else "CONFLICT", str(err), retryable=False)


def _checked(kind: str, value: str, uri: str) -> str:
    if not re.match(CHANGE_ID if kind == "changeId" else ITEM_ID, value):
        raise ProtocolError(INVALID_PARAMS, f"invalid {kind} {value!r} in {uri}: it must stay inside the openspec "
                            "directory (no absolute path, '..', backslash or NUL)", {"uri": uri})
    return value


def register(registry: Registry, services: Services) -> None:
    project, create = services.config.openspec_project
    ws = Workspace(project, services, create=create)
    services.caches.register(ws.changed)
    log.debug("openspec workspace", openspec=str(ws.openspec), create=create,
              openspec_root=services.config.openspec.root, auto=services.config.openspec.auto_project_root)
    _register_tools(registry, ws)
    _register_resources(registry, ws)
    _register_prompts(registry)


def _register_resources(registry: Registry, ws: Workspace) -> None:
    src = ws.source

    def body(name: str) -> Callable[[], Any]:
        from specactor.domain.openspec import resources

        fn = getattr(resources, {"specs": "specs_list", "changes": "changes_list", "archive": "archive_list"}
                     .get(name, name))
        # The rendered text, kept until any event: a warm read of a 500-spec index costs a lookup.
        return lambda: src.whole(f"resource:{name}", lambda: fn(src))

    async def read(uri: str, fn: Callable[[], T]) -> T:
        try:
            return await ws.read(fn)
        except Missing as err:
            raise ResourceNotFound(uri, str(err)) from None

    for name, description in (("instructions", "openspec/AGENTS.md, or the default OpenSpec instructions"),
                              ("project", "openspec/project.md, or config.yaml context: (1.x), or a template"),
                              ("specs", "Every capability in openspec/specs/, with links"),
                              ("changes", "Active changes (not archive/), with links and task progress"),
                              ("archive", "Archived changes, newest first")):
        async def document(uri: str, params: dict[str, str], ctx: RequestContext, name: str = name) -> str:
            return str(await read(uri, body(name)))

        registry.resource(f"openspec://{name}", name=f"openspec-{name}", description=description, mime_type=MD,
                          toolset=TOOLSET)(document)

    async def capabilities(value: str, args: dict[str, str], ctx: RequestContext) -> list[str]:
        return [s for s in await ws.read(lambda: spec_ids(src)) if s.startswith(value)][:100]

    async def change_ids(value: str, args: dict[str, str], ctx: RequestContext) -> list[str]:
        return [c for c in await ws.read(lambda: active_change_ids(src)) if c.startswith(value)][:100]

    async def spec_resources(ctx: RequestContext) -> list[Resource]:
        return [Resource(uri=f"openspec://specs/{s}", name=f"spec {s}", mimeType=MD)
                for s in await ws.read(lambda: spec_ids(src))]

    async def change_resources(ctx: RequestContext) -> list[Resource]:
        return [Resource(uri=f"openspec://changes/{c}", name=f"change {c}", mimeType=MD)
                for c in await ws.read(lambda: active_change_ids(src))]

    @registry.resource_template("openspec://specs/{+capability}", name="openspec-spec", mime_type=MD,
                                toolset=TOOLSET,
                                description="openspec/specs/<capability>/spec.md (capabilities may nest)",
                                completions={"capability": capabilities}, lister=spec_resources)
    async def spec(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        from specactor.domain.openspec import resources

        capability = _checked("capability", params["capability"], uri)
        return await read(uri, lambda: resources.spec(src, capability))

    @registry.resource_template("openspec://changes/{changeId}", name="openspec-change", mime_type=MD,
                                toolset=TOOLSET,
                                description="Every file of an active change, one content item each",
                                completions={"changeId": change_ids}, lister=change_resources)
    async def change(uri: str, params: dict[str, str], ctx: RequestContext) -> list[ResourceContents]:
        from specactor.domain.openspec import resources

        ident = _checked("changeId", params["changeId"], uri)
        files = await read(uri, lambda: resources.change_files(src, ident))
        return [TextResourceContents(uri=u, text=text, mimeType=mime) for u, mime, text in files]

    for doc in CHANGE_DOCS:
        async def document_of(uri: str, params: dict[str, str], ctx: RequestContext, doc: str = doc) -> str:
            from specactor.domain.openspec import resources

            ident = _checked("changeId", params["changeId"], uri)
            return await read(uri, lambda: resources.change_doc(src, ident, doc))

        registry.resource_template(f"openspec://changes/{{changeId}}/{doc}", name=f"openspec-change-{doc}",
                                   mime_type=MD, toolset=TOOLSET, completions={"changeId": change_ids},
                                   description=f"openspec/changes/<changeId>/{doc}.md")(document_of)

    # After the three above (templates match in order): any other file `openspec://changes/<id>` lists.
    @registry.resource_template("openspec://changes/{changeId}/{+path}", name="openspec-change-file", mime_type=MD,
                                toolset=TOOLSET, completions={"changeId": change_ids},
                                description="Any file of an active change by its path, as "
                                            "openspec://changes/<changeId> lists it: delta specs "
                                            "(specs/<capability>/spec.md) and the rest")
    async def change_file(uri: str, params: dict[str, str], ctx: RequestContext) -> list[ResourceContents]:
        from specactor.domain.openspec import resources

        ident = _checked("changeId", params["changeId"], uri)
        path = _checked("path", params["path"], uri)
        _, mime, text = await read(uri, lambda: resources.change_file(src, ident, path))
        return [TextResourceContents(uri=uri, text=text, mimeType=mime)]


def _register_prompts(registry: Registry) -> None:
    """The seed's three workflow prompts; each answers one user message."""

    @registry.prompt("openspec-propose", description="Guide the creation of an OpenSpec change proposal",
                     args=ProposeArgs, toolset=TOOLSET)
    async def propose(args: dict[str, str], ctx: RequestContext) -> str:
        return templates.propose(args.get("description", ""), args.get("scope") or None)

    @registry.prompt("openspec-apply", description="Guide implementing an OpenSpec change task by task",
                     args=ChangeArgs, toolset=TOOLSET)
    async def apply(args: dict[str, str], ctx: RequestContext) -> str:
        return templates.apply(args.get("changeId", ""))

    @registry.prompt("openspec-archive", description="Guide archiving a completed OpenSpec change",
                     args=ChangeArgs, toolset=TOOLSET)
    async def archive(args: dict[str, str], ctx: RequestContext) -> str:
        return templates.archive(args.get("changeId", ""))


def _register_tools(registry: Registry, ws: Workspace) -> None:
    src = ws.source
    read_only = {"readOnlyHint": True}

    @registry.tool("init", description="Create the OpenSpec directory structure (openspec/config.yaml, specs/, "
                   "changes/archive/); an error when it is already initialised.",
                   input=InitIn, output=InitOut, toolset=TOOLSET)
    async def init(args: InitIn, ctx: RequestContext) -> InitOut:
        def txn(tx: Tx) -> InitOut:
            from specactor.domain.openspec.edits import plan_init

            try:
                files = plan_init(ws.view(tx))
            except EditRefused as err:
                raise _refused(err) from None
            for rel, text in files.items():
                tx.write(f"openspec/{rel}", text.encode())
            return InitOut(str(ws.openspec), [f"openspec/{rel}" for rel in files], templates.NEXT_STEPS, ws.root())

        return await ws.write(txn)

    @registry.tool("list", description="Active changes with task progress (`openspec list --json`), or with "
                   "specs=true every capability with its requirement count (`openspec list --specs --json`).",
                   input=ListIn, output=ListOut, toolset=TOOLSET, annotations=read_only)
    async def list_items(args: ListIn, ctx: RequestContext) -> Encoded:
        from specactor.domain.openspec.workspace import list_changes, list_specs

        lister = list_specs if args.specs else list_changes
        # kept encoded until the disk changes (500 specs: ~40 KB, encoded twice a call before)
        return await ws.read(lambda: src.whole(f"list:{args.specs}", lambda: Encoded(lister(src, ws.root()))))

    @registry.tool("show", description="A change (title, deltas, task progress) or a spec (overview, requirements, "
                   "scenarios), as `openspec show <item> --json` prints it.",
                   input=ShowIn, output=ShowOut, toolset=TOOLSET, annotations=read_only)
    async def show_item(args: ShowIn, ctx: RequestContext) -> ShowOut:
        def run() -> ShowOut:
            from specactor.domain.openspec.workspace import show

            ws.guard(f"changes/{args.item}", f"specs/{args.item}")
            return src.whole(f"show:{args.type}:{args.item}",
                             lambda: show(src, ws.root(), args.item, args.type, str(ws.openspec)))

        try:
            return await ws.read(run)
        except Blocked as err:
            raise _blocked(err, ws.root()) from None

    @registry.tool("validate", description="Validate a change or spec, or every change and/or spec (the default "
                   "when no item is named), with the rules, levels and messages of `openspec validate --json` 1.x.",
                   input=ValidateIn, output=ValidateOut, toolset=TOOLSET, annotations=read_only)
    async def validate_items(args: ValidateIn, ctx: RequestContext) -> ValidateOut:
        item = None if args.all or args.changes or args.specs else args.item
        # Nothing named: everything, or everything of the given type.
        implicit = item is None and not (args.all or args.changes or args.specs)
        changes = args.all or args.changes or (implicit and args.type != "spec")
        specs = args.all or args.specs or (implicit and args.type != "change")

        def run() -> ValidateOut:
            from specactor.domain.openspec.workspace import validate

            if item is not None:
                ws.guard(f"changes/{item}", f"specs/{item}")
            return validate(src, ws.root(), ws.context(), item=item, kind=args.type, strict=args.strict,
                            include_changes=changes, include_specs=specs)

        try:
            return await ws.read(run)
        except Blocked as err:
            raise _blocked(err, ws.root()) from None

    @registry.tool("archive", description="Archive a finished change as `openspec archive --json --yes` does: "
                   "check tasks (force skips this), validate, merge the deltas into openspec/specs (updateSpecs), "
                   "move it to changes/archive/YYYY-MM-DD-<id>; all or nothing. dryRun reports and writes nothing.",
                   input=ArchiveIn, output=ArchiveOut, toolset=TOOLSET, annotations={"destructiveHint": True})
    async def archive(args: ArchiveIn, ctx: RequestContext) -> ArchiveOut:
        today = datetime.now().strftime("%Y-%m-%d")  # the CLI 1.x archives under the local date

        def run(view: Source = src, tx: Tx | None = None) -> ArchiveOut:
            from specactor.domain.openspec.archive import plan_archive

            ws.guard(f"changes/{args.changeId}")
            try:
                found = plan_archive(view, ws.context(view), args.changeId, today=today, force=args.force,
                                     update_specs=args.updateSpecs)
            except Blocked:
                if tx is None or tx.deferred(_ARCHIVES) is None:
                    raise
                ws.flush(tx)  # a refusal names what is on disk (the changes left): the waiting archives first
                return run(ws.view(tx), tx)
            if args.dryRun:
                return ArchiveOut(found.record, ws.root(), dryRun=True, specs=found.specs)
            assert tx is not None  # an archive that writes runs in a transaction
            if isinstance(view, Staged) and _overlaps(view.staged, found.writes, found.deletes, found.move):
                raise _Requeue
            waiting = tx.deferred(_ARCHIVES)
            if isinstance(waiting, _Archives) and waiting.touches(found):
                ws.flush(tx)  # it reads what an archive waiting in this group changes: that one first
                return run(ws.view(tx), tx)
            tx.defer(_ARCHIVES, lambda: _Archives(ws.project)).add(tx, found)
            return ArchiveOut(found.record, ws.root())

        try:
            if args.dryRun:
                return await ws.read(run)
            for _ in range(REQUEUES):
                try:
                    return await ws.write(lambda tx: run(ws.view(tx), tx), "change", defers=True)
                except _Requeue:
                    continue
            raise ToolError("CONFLICT", f"Change '{args.changeId}' kept being written by concurrent calls; archive "
                            "it again", retryable=True)
        except Blocked as err:
            raise _blocked(err, ws.root(), archive=True) from None

    @registry.tool("update_project_context", description="Replace the project context (openspec/project.md, or "
                   "`context:` of a 1.x config.yaml), append to it (merge), or rewrite one `## section`.",
                   input=ProjectContextIn, output=ProjectContextOut, toolset=TOOLSET)
    async def update_project_context(args: ProjectContextIn, ctx: RequestContext) -> ProjectContextOut:
        def txn(tx: Tx) -> ProjectContextOut:
            from specactor.domain.openspec.edits import plan_project_context
            from specactor.domain.openspec.project import section_title

            view = ws.view(tx)
            try:
                edit = plan_project_context(view, args.content, args.merge, args.section)
            except EditRefused as err:
                raise _refused(err) from None
            text = edit.text if edit.text is not None else view.text(edit.file) or ""
            if edit.text is not None:
                tx.write(f"openspec/{edit.file}", edit.text.encode())
            out = ProjectContextOut(f"openspec/{edit.file}", edit.mode, len(text.encode()))
            if args.section is not None:
                out.section = section_title(args.section)
            return out

        return await ws.write(txn)

    @registry.tool("task_complete", description="Tick one task of a change's tasks.md, named by its id (1.2) or its "
                   "1-based position; ticking a finished task changes nothing.",
                   input=TaskCompleteIn, output=TaskCompleteOut, toolset=TOOLSET)
    async def task_complete(args: TaskCompleteIn, ctx: RequestContext) -> TaskCompleteOut:
        def txn(tx: Tx) -> TaskCompleteOut:
            from specactor.domain.openspec.edits import plan_task_complete
            from specactor.domain.openspec.tasks import task_id

            ws.guard(f"changes/{args.changeId}")
            try:
                edit = plan_task_complete(ws.view(tx), args.changeId, args.task)
            except EditRefused as err:
                raise _refused(err) from None
            if not edit.already_done:
                tx.write(f"openspec/changes/{args.changeId}/tasks.md", edit.text.encode())
            ident = task_id(edit.task)
            ticked = TickedTask(edit.task.line, edit.task.description, ident if ident else UNSET)
            return TaskCompleteOut(args.changeId, ticked, edit.already_done, edit.completed, edit.total)

        return await ws.write(txn)
