"""The `airsspec` toolset: the AirsSpec workflow (seed 002) as 12 tools, 6 resources, 5 prompts.

Glue only: the rules live in `specactor.domain.airsspec`, the disk in `specactor.fs.airsspec_fs`.
Writes are transactions of the workspace root's storage actor (atomic, under the inter-process
workspace lock; started on demand, `Services.storages`), each published on the change feed;
reads go through the domain's `Catalog` on a worker thread, which re-parses a file only when its
stat changes. The workspace is the nearest directory, from the server root upwards, holding
`.airsspec/config.toml`; with none, the first write creates one at the server root.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from specactor.actors.storage import LockBusy, PathEscape, Tx
from specactor.domain.airsspec import api, layout, transactions, views, vocab, workflow
from specactor.domain.airsspec.catalog import Catalog, Summary
from specactor.domain.airsspec.configfile import render as render_config
from specactor.domain.airsspec.dependencies import DepState, check
from specactor.domain.airsspec.documents import Documents, decode
from specactor.domain.airsspec.errors import AirsSpecError, NotFoundError, StepOutOfRange
from specactor.domain.airsspec.ids import SPEC_ID_PATTERN, invalid_spec_id, is_spec_id
from specactor.domain.airsspec.model import Bundle, Dependency, ProjectConfig
from specactor.domain.airsspec.prompts import PROMPTS
from specactor.domain.airsspec.prompts import render as render_prompt
from specactor.domain.airsspec.statefile import render as render_state
from specactor.domain.airsspec.text import timestamp
from specactor.domain.changes import Kind
from specactor.fs.airsspec_fs import AirsSpecDisk, OsFiles
from specactor.protocol.context import Completer, RequestContext
from specactor.protocol.envelope import Encoded
from specactor.protocol.errors import INVALID_PARAMS, ProtocolError, ResourceNotFound, ToolError
from specactor.protocol.registry import Registry, encoded_contents
from specactor.wire.codec import encode
from specactor.wire.mcp import Resource, ResourceContents

if TYPE_CHECKING:
    from specactor.toolsets import Services

T = TypeVar("T")
TOOLSET = "airsspec"


def clock() -> float:
    """Unix seconds now; tests replace this module attribute to pin timestamps and ids."""
    return time.time()


class Workspace:
    """Where `.airsspec/` is (`AirsSpecDisk`), how to read it (on a worker thread) and how to
    write there (the storage actor of its root, started on demand)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.documents = Documents()  # parse memo, shared by reads and transactions
        self.disk = AirsSpecDisk(services.storage.root, self.documents)  # the storage root is resolved

    async def read(self, fn: Callable[[Catalog, OsFiles], T]) -> T:
        """Run `fn(catalog, files)` on a worker thread, holding the catalog lock."""
        return await self.services.runtime.run_sync(self.disk.read, fn)

    async def transact(self, fn: Callable[[Tx], T], kind: Kind) -> T:
        """A storage transaction on the workspace, published on the change feed as `kind`."""
        # Once found, the root is remembered: no trip to a worker thread to learn it again.
        root = self.disk.found
        if root is None:
            root = await self.services.runtime.run_sync(self.disk.root)
        storage = await self.services.storages.get(root)
        return await storage.transact(fn, toolset=TOOLSET, kind=kind)

    def cached(self, name: str, build: Callable[[], T]) -> T:
        """`build()`'s value, remembered until the catalog's index changes (call inside `read`)."""
        return self.disk.cached(name, build)

    def config(self, files: OsFiles) -> ProjectConfig:
        found = transactions.read_config(files.read, files.root.name)
        return found if found is not None else ProjectConfig(name=files.root.name)


# ---------------------------------------------------------------------- errors


def tool_error(err: AirsSpecError) -> ToolError:
    """The envelope error for a refusal; the seed's JSON-RPC domain code rides in `details`."""
    if isinstance(err, NotFoundError):
        return ToolError("NOT_FOUND", err.message, {**err.details, "jsonrpc_code": err.code})
    if isinstance(err, StepOutOfRange):
        return ToolError("INVALID_INPUT", err.message, err.details)
    return ToolError("CONFLICT", err.message, {**err.details, "jsonrpc_code": err.code}, retryable=False)


def _check_ids(args: Any) -> None:
    """msgspec's `pattern` lets a final newline through (Python's `$`); ids must match exactly."""
    ids = [getattr(args, "spec_id", None), *(d.spec_id for d in getattr(args, "dependencies", None) or ())]
    for value in ids:
        if isinstance(value, str) and not is_spec_id(value):
            raise ToolError("INVALID_INPUT", invalid_spec_id(value),
                            {"field": "spec_id", "rule": "pattern", "pattern": SPEC_ID_PATTERN, "actual": value[:200]})


def refusals(fn: Callable[[Any, RequestContext], Awaitable[T]]) -> Callable[[Any, RequestContext], Awaitable[T]]:
    """Turn domain refusals and storage failures into tool errors."""
    @functools.wraps(fn)
    async def handler(args: Any, ctx: RequestContext) -> T:
        _check_ids(args)
        try:
            return await fn(args, ctx)
        except AirsSpecError as err:
            raise tool_error(err) from None
        except PathEscape as err:  # a symlink on the way to the spec (it is never followed)
            raise ToolError("INVALID_INPUT", str(err)) from None
        except LockBusy as err:
            raise ToolError("TIMEOUT", str(err)) from None

    return handler


def resource_error(uri: str, err: AirsSpecError | PathEscape) -> Exception:
    if isinstance(err, PathEscape):  # a symlink on the way: the resource is not there for us
        return ResourceNotFound(uri, f"Resource not found: {uri} ({err})")
    if isinstance(err, NotFoundError):
        return ResourceNotFound(uri)
    return ProtocolError(err.code, err.message, {"uri": uri, **err.details})


def _now() -> tuple[int, str]:
    seconds = clock()
    return int(seconds), timestamp(dt.datetime.fromtimestamp(seconds, dt.UTC))


def _steps(steps: list[api.StepIn]) -> list[workflow.NewStep]:
    return [workflow.NewStep(title=s.title, description=s.description,
                             complexity=vocab.complexity(s.complexity) if isinstance(s.complexity, str) else None)
            for s in steps]


def _opt(value: T | msgspec.UnsetType) -> T | None:
    return None if value is msgspec.UNSET else value  # type: ignore[return-value]


def _category(value: str | msgspec.UnsetType) -> vocab.Category | None:
    return vocab.category(value) if isinstance(value, str) else None


# ---------------------------------------------------------------------- registration


def register(registry: Registry, services: Services) -> None:
    ws = Workspace(services)
    docs = ws.documents
    services.caches.register(ws.disk.changed)

    # Subscribers of the spec's resources hear of a write from the change feed (the resource
    # notifier reads it), as they hear of edits by hand or by another process.
    async def update(spec_id: str, operation: transactions.Operation, kind: Kind = "spec") -> tuple[Bundle, Bundle]:
        return await ws.transact(lambda tx: transactions.update(tx, docs, spec_id, operation), kind)

    def tool(name: str, description: str, input: type[Any], output: type[Any]) -> Callable[[Any], Any]:
        def wrap(fn: Any) -> Any:
            return registry.tool(name, description=description, input=input, output=output,
                                 toolset=TOOLSET)(refusals(fn))
        return wrap

    # ------------------------------------------------------------------ spec tools

    @tool("spec_create", "Create a new specification with metadata", api.SpecCreateIn, api.SpecCreateOut)
    async def spec_create(args: api.SpecCreateIn, ctx: RequestContext) -> api.SpecCreateOut:
        seconds, now = _now()
        deps = [Dependency(spec_id=d.spec_id, kind=vocab.dependency_kind(d.kind) or "hard")
                for d in _opt(args.dependencies) or []]
        b = await ws.transact(lambda tx: transactions.create(
            tx, docs, title=args.title, description=args.description, category=_category(args.category),
            content=_opt(args.content), dependencies=deps, unix_seconds=seconds, now=now,
            default_name=tx.root.name), "spec")
        return api.SpecCreateOut(spec_id=b.spec_id, created=True, path=layout.spec_dir(b.spec_id))

    @tool("spec_update", "Update spec content or metadata", api.SpecUpdateIn, api.SpecUpdateOut)
    async def spec_update(args: api.SpecUpdateIn, ctx: RequestContext) -> api.SpecUpdateOut:
        _, now = _now()
        _, new = await update(args.spec_id, lambda b: workflow.update_spec(
            b, title=_opt(args.title), description=_opt(args.description), content=_opt(args.content),
            category=_category(args.category), now=now))
        return api.SpecUpdateOut(spec_id=new.spec_id, updated=True, updated_at=new.spec.meta.updated_at)

    @tool("spec_transition", "Move spec to a different lifecycle state", api.SpecTransitionIn, api.SpecTransitionOut)
    async def spec_transition(args: api.SpecTransitionIn, ctx: RequestContext) -> api.SpecTransitionOut:
        _, now = _now()
        old, new = await update(args.spec_id, lambda b: workflow.transition(b, args.to_state, _opt(args.reason), now))
        return api.SpecTransitionOut(spec_id=new.spec_id, from_state=old.state.lifecycle,
                                     to_state=new.state.lifecycle, transitioned=True)

    @tool("spec_list", "List all specs with optional filtering", api.SpecListIn, api.SpecListOut)
    async def spec_list(args: api.SpecListIn, ctx: RequestContext) -> Encoded:
        state: vocab.Lifecycle | None = _opt(args.state)
        category = _category(args.category)

        def run(catalog: Catalog, files: OsFiles) -> Encoded:
            entries = catalog.entries(files)  # first: it brings the catalog up to date
            # the listing of 1,000 specs takes 0.2 ms to build and 0.3 ms to encode: built and
            # encoded again only when the index changed
            return ws.cached(f"spec_list/{state}/{category}",
                             lambda: Encoded(views.spec_list(entries, state, category)))

        return await ws.read(run)

    @tool("spec_status", "Get current workflow status for a spec", api.SpecIdIn, api.SpecStatusOut)
    async def spec_status(args: api.SpecIdIn, ctx: RequestContext) -> api.SpecStatusOut:
        def status(catalog: Catalog, files: OsFiles) -> api.SpecStatusOut:
            b = catalog.bundle(files, args.spec_id)
            return views.status(b, lambda other: catalog.dep_state(files, other))

        return await ws.read(status)

    @tool("spec_check_dependencies", "Check if spec dependencies are satisfied (and find missing ones, "
          "self-dependencies and cycles)", api.SpecIdIn, api.CheckDependenciesOut)
    async def spec_check_dependencies(args: api.SpecIdIn, ctx: RequestContext) -> api.CheckDependenciesOut:
        def report(catalog: Catalog, files: OsFiles) -> api.CheckDependenciesOut:
            b = catalog.bundle(files, args.spec_id)
            direct = {d.spec_id for d in b.spec.meta.dependencies}
            every = catalog.summaries(files)

            def lookup(other: str) -> DepState | None:
                if other in direct:
                    return catalog.dep_state(files, other)
                summary = every.get(other)
                return summary.dep_state() if isinstance(summary, Summary) else None

            return check(b.spec_id, b.spec.meta.dependencies, lookup)

        return await ws.read(report)

    # ------------------------------------------------------------------ plan tools

    @tool("plan_create", "Create an actionable plan from a spec", api.PlanCreateIn, api.PlanCreateOut)
    async def plan_create(args: api.PlanCreateIn, ctx: RequestContext) -> api.PlanCreateOut:
        _, now = _now()
        _, new = await update(args.spec_id, lambda b: workflow.create_plan(b, args.approach, _steps(args.steps), now),
                              "plan")
        total = len(new.plan.steps) if new.plan else 0
        return api.PlanCreateOut(spec_id=new.spec_id, plan_created=True, total_steps=total,
                                 path=layout.plan_file(new.spec_id))

    @tool("plan_update", "Modify plan approach or steps", api.PlanUpdateIn, api.PlanUpdateOut)
    async def plan_update(args: api.PlanUpdateIn, ctx: RequestContext) -> api.PlanUpdateOut:
        _, now = _now()
        steps = _steps(args.steps) if isinstance(args.steps, list) else None
        _, new = await update(args.spec_id, lambda b: workflow.update_plan(b, _opt(args.approach), steps, now), "plan")
        assert new.plan is not None
        return api.PlanUpdateOut(spec_id=new.spec_id, updated=True, total_steps=len(new.plan.steps),
                                 updated_at=new.plan.updated_at, path=layout.plan_file(new.spec_id))

    @tool("plan_step_complete", "Mark a plan step as completed", api.PlanStepCompleteIn, api.PlanStepCompleteOut)
    async def plan_step_complete(args: api.PlanStepCompleteIn, ctx: RequestContext) -> api.PlanStepCompleteOut:
        _, now = _now()
        _, new = await update(args.spec_id,
                              lambda b: workflow.complete_step(b, args.step_index, _opt(args.notes), now), "plan")
        assert new.plan is not None
        return api.PlanStepCompleteOut(spec_id=new.spec_id, step_index=args.step_index,
                                       step_title=new.plan.steps[args.step_index].title, completed=True,
                                       plan_progress=views.plan_progress(new.plan))

    # ------------------------------------------------------------------ build tools

    @tool("build_start", "Begin implementation phase (needs a plan and every hard dependency done)",
          api.BuildStartIn, api.BuildStartOut)
    async def build_start(args: api.BuildStartIn, ctx: RequestContext) -> api.BuildStartOut:
        _, now = _now()
        _, new = await ws.transact(lambda tx: transactions.start_build(tx, docs, args.spec_id, args.plan_approved,
                                                                        now), "spec")
        return api.BuildStartOut(spec_id=new.spec_id, build_started=True, phase="build",
                                 plan_steps=len(new.plan.steps) if new.plan else 0)

    @tool("build_update", "Update build progress and notes", api.BuildUpdateIn, api.BuildUpdateOut)
    async def build_update(args: api.BuildUpdateIn, ctx: RequestContext) -> api.BuildUpdateOut:
        _, now = _now()
        _, new = await update(args.spec_id, lambda b: workflow.update_build(
            b, _opt(args.progress_percentage), _opt(args.current_step), _opt(args.notes), now))
        progress = new.state.build_progress
        return api.BuildUpdateOut(spec_id=new.spec_id, updated=True, updated_at=new.state.updated_at,
                                  build_progress=api.BuildStatus(percentage=progress.percentage,
                                                                 current_step=progress.current_step,
                                                                 notes=progress.notes))

    @tool("build_complete", "Mark build phase as done (the spec moves to done)", api.BuildCompleteIn,
          api.BuildCompleteOut)
    async def build_complete(args: api.BuildCompleteIn, ctx: RequestContext) -> api.BuildCompleteOut:
        _, now = _now()
        _, new = await update(args.spec_id,
                              lambda b: workflow.complete_build(b, args.summary, _opt(args.deviations), now))
        return api.BuildCompleteOut(spec_id=new.spec_id, build_completed=True, lifecycle_state="done",
                                    completed_at=new.state.completed_at or now)

    _register_resources(registry, ws)
    _register_prompts(registry, ws)


# ---------------------------------------------------------------------- resources


def _completer(ws: Workspace) -> Completer:
    """Spec ids starting with what was typed, or whose slug contains it."""
    async def complete_ids(value: str, context: dict[str, str], ctx: RequestContext) -> list[str]:
        def matches(catalog: Catalog, files: OsFiles) -> list[str]:
            return [e.id for e in catalog.entries(files) if isinstance(e, Summary)
                    and (e.id.startswith(value) or value in e.id.partition("-")[2])]

        try:
            return await ws.read(matches)
        except PathEscape:  # `.airsspec/specs` is a symlink: nothing to offer
            return []

    return complete_ids


def _register_resources(registry: Registry, ws: Workspace) -> None:
    async def list_specs(ctx: RequestContext) -> list[Resource]:
        def build(catalog: Catalog, files: OsFiles) -> list[Resource]:
            entries = catalog.entries(files)
            return ws.cached("resources", lambda: [
                Resource(uri=f"airsspec:///{e.id}", name=e.id, title=e.title, mimeType="application/json",
                         description=f"{e.state} {e.category} spec, {e.phase} phase") for e in entries
                if isinstance(e, Summary)])

        try:
            return await ws.read(build)
        except PathEscape:  # `.airsspec/specs` is a symlink: listed as no specs, read as an error
            return []

    async def read_spec(uri: str, spec_id: str, fn: Callable[[Catalog, OsFiles], T]) -> T:
        if not is_spec_id(spec_id):
            raise ResourceNotFound(uri)
        try:
            return await ws.read(fn)
        except (AirsSpecError, PathEscape) as err:
            raise resource_error(uri, err) from None

    def raw(files: OsFiles, spec_id: str, rel: str, uri: str) -> str:
        """A file as it is on disk (broken or not: it is what one reads to fix it)."""
        data = files.read(rel) if files.stat(layout.spec_file(spec_id)) is not None else None
        if data is None:
            raise ResourceNotFound(uri)
        return decode(data, rel)

    ids = {"spec_id": _completer(ws)}

    @registry.resource("airsspec:///config", name="airsspec-config", mime_type="application/toml", toolset=TOOLSET,
                       description="Project configuration (.airsspec/config.toml); the defaults when there is none")
    async def config(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        def run(catalog: Catalog, files: OsFiles) -> str:
            config = ws.config(files)  # a broken file is a validation error naming the line
            text = files.read(layout.CONFIG)
            return decode(text, layout.CONFIG) if text is not None else render_config(config)

        try:
            return await ws.read(run)
        except (AirsSpecError, PathEscape) as err:
            raise resource_error(uri, err) from None

    @registry.resource("airsspec:///specs", name="airsspec-specs", mime_type="application/json", toolset=TOOLSET,
                       description="Index of all specs: id, title, state, category, phase, created_at, updated_at")
    async def specs(uri: str, params: dict[str, str], ctx: RequestContext) -> list[ResourceContents]:
        def run(catalog: Catalog, files: OsFiles) -> list[ResourceContents]:
            entries = catalog.entries(files)
            # 1,000 specs are ~200 KB of JSON: built, and encoded as the contents, once per index change
            return ws.cached("index", lambda: encoded_contents(uri, "application/json",
                                                                encode(views.index(entries)).decode()))

        try:
            return await ws.read(run)
        except PathEscape as err:
            raise resource_error(uri, err) from None

    @registry.resource_template("airsspec:///{spec_id}", name="airsspec-spec-bundle", mime_type="application/json",
                                toolset=TOOLSET, completions=ids, lister=list_specs,
                                description="Full spec bundle: spec (metadata, content), plan, state")
    async def bundle(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        spec_id = params["spec_id"]
        return await read_spec(uri, spec_id, lambda c, f: encode(views.bundle(c.bundle(f, spec_id))).decode())

    @registry.resource_template("airsspec:///{spec_id}/spec", name="airsspec-spec", mime_type="text/markdown",
                                toolset=TOOLSET, completions=ids,
                                description="Spec markdown with YAML front matter")
    async def spec(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        spec_id = params["spec_id"]
        return await read_spec(uri, spec_id, lambda c, f: raw(f, spec_id, layout.spec_file(spec_id), uri))

    @registry.resource_template("airsspec:///{spec_id}/plan", name="airsspec-plan", mime_type="text/markdown",
                                toolset=TOOLSET, completions=ids, description="Plan markdown (approach and steps)")
    async def plan(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        spec_id = params["spec_id"]
        return await read_spec(uri, spec_id, lambda c, f: raw(f, spec_id, layout.plan_file(spec_id), uri))

    @registry.resource_template("airsspec:///{spec_id}/state", name="airsspec-state", mime_type="application/toon",
                                toolset=TOOLSET, completions=ids, description="Workflow state in TOON")
    async def state(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        spec_id = params["spec_id"]

        def run(catalog: Catalog, files: OsFiles) -> str:
            if files.stat(layout.state_file(spec_id)) is not None:
                return raw(files, spec_id, layout.state_file(spec_id), uri)
            return render_state(catalog.bundle(files, spec_id).state)  # not written yet: the state it implies

        return await read_spec(uri, spec_id, run)


# ---------------------------------------------------------------------- prompts


def _register_prompts(registry: Registry, ws: Workspace) -> None:
    complete_ids = _completer(ws)
    for name, (description, args_type, template) in PROMPTS.items():
        def make(template: str) -> Callable[[dict[str, str], RequestContext], Awaitable[str]]:
            async def prompt(args: dict[str, str], ctx: RequestContext) -> str:
                spec_id = args.get("spec_id")
                if spec_id is not None and not is_spec_id(spec_id):
                    raise ProtocolError(INVALID_PARAMS, f"argument {invalid_spec_id(spec_id)}",
                                        {"argument": "spec_id", "pattern": SPEC_ID_PATTERN})
                return render_prompt(template, args)
            return prompt

        completions = {"spec_id": complete_ids} if "spec_id" in args_type.__struct_fields__ else None
        registry.prompt(name, description=description, args=args_type, toolset=TOOLSET,
                        completions=completions)(make(template))
