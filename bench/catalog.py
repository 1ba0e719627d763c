"""The per-tool workload: a generated workspace and, for every tool, resource, template and prompt, its arguments.

`build(root, sizes)` writes one workspace holding all three toolsets' data: an AirsSpec workspace
(`bench.workloads.airsspec.workspace`), an OpenSpec one (`bench.workloads.openspec.workspace`, plus
unchecked "bench" tasks appended to every change, enough for the `task_complete` calls), a memory store
bulk-loaded with English-like memories (`bench.workloads.memory.Corpus`) and a git knowledge
repository (`bench.workloads.memory.knowledge_repo`). It returns the `Seeds`: the ids a client may
name. `Catalogue(root, seeds).ops()` lists the operations in the order they are measured (reads
first, then writes, then the consuming chains), each with a generator of realistic arguments for
its next call: reads pick random existing ids, writes use fresh titles or ids so that they succeed,
consuming writes draw from pools (some fed by earlier replies, e.g. `memory_delete` deletes what
`memory_add` created; `archive` gets changes written just before it runs). `init` on an initialised
workspace is measured as the error it answers (`expect_error`).
"""

from __future__ import annotations

import functools
import itertools
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.workloads import airsspec as airs
from bench.workloads import openspec as ospec
from bench.workloads.memory import Corpus, knowledge_repo, source_files
from specactor.domain.openspec.render import DeltaDoc, RequirementDoc, ScenarioDoc, render_delta

USER_ID = "bench"
KINDS = {"tool": "tools/call", "resource": "resources/read", "template": "resources/read", "prompt": "prompts/get"}


@dataclass(frozen=True)
class Sizes:
    """Workspace sizes: the toolset issues' at full size (`FULL`), small for `--quick`."""

    specs: int  # AirsSpec specs (quick: 400, so that 100 building specs can change state in one burst)
    openspec_specs: int
    changes: int
    memories: int
    knowledge_items: int  # every tenth carries 5 constraints
    check_files: int  # files per knowledge_check call

    def text(self) -> str:
        return (f"AirsSpec {self.specs:,} specs; OpenSpec {self.openspec_specs:,} specs + {self.changes:,} changes; "
                f"memory {self.memories:,} memories; knowledge {self.knowledge_items:,} items "
                f"({self.knowledge_items // 10 * 5:,} constraints)")


FULL = Sizes(specs=1000, openspec_specs=500, changes=200, memories=100_000, knowledge_items=1000, check_files=20)
QUICK = Sizes(specs=400, openspec_specs=50, changes=20, memories=5_000, knowledge_items=100, check_files=20)


class CatalogueError(RuntimeError):
    """The catalogue cannot produce arguments (a pool ran dry, a tool is not covered)."""


@dataclass
class Seeds:
    """What the generated workspace holds, by what a client may do with it."""

    roles: airs.Roles
    caps: list[str]
    changes: list[str]
    designed: list[str]  # changes with a design.md
    tasks: list[tuple[str, str]]  # (change, task id), unchecked, round-robin over changes
    knowledge_ids: list[str]
    queries: list[str]
    sizes: Sizes
    files: list[dict[str, str]] = field(default_factory=list)


def memory_env(root: Path) -> dict[str, str]:
    """The server's environment: where the memory store and the knowledge repository live."""
    return {"SPECACTOR_MEMORY_DB": str(root / ".bench" / "memory.db"),
            "SPECACTOR_KNOWLEDGE_REPO": str(root / ".bench" / "knowledge"), "SPECACTOR_MEMORY_USER_ID": USER_ID}


def _bench_tasks(root: Path, changes: list[str], calls: int) -> list[tuple[str, str]]:
    """Unchecked tasks appended to every change, enough for `calls` task_complete calls."""
    numbers = range(1, -(-calls // len(changes)) + 1)
    by_change = []
    for change in changes:
        path = root / "openspec" / "changes" / change / "tasks.md"
        path.write_text(path.read_text() + "\n## 9. Bench\n" + "".join(
            f"- [ ] 9.{k} Bench follow-up {k}\n" for k in numbers))
        by_change.append([(change, f"9.{k}") for k in numbers])
    return [t for row in zip(*by_change, strict=True) for t in row]  # consecutive tasks: different changes


def memories(db: Path, count: int, *, project: str | None = None) -> list[str]:
    """`count` English-like memories in the user layer (in `project`'s layer when given), loaded in
    one transaction; 500 queries drawn from them."""
    from specactor.domain.memory.layers import Identifiers, scope_key
    from specactor.domain.memory.records import NewMemory
    from specactor.sqlite.memory_db import connect, insert_memory

    corpus = Corpus()
    cum = list(itertools.accumulate(corpus.weights))  # Corpus.memory recomputes these per call: slow at 100,000
    texts = [" ".join(corpus.rng.choices(corpus.words, cum_weights=cum, k=corpus.rng.randint(10, 40)))
             for _ in range(count)]
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(db, writer=True)
    layer, ids, labels = (("project", Identifiers(project_id=project), {"projectId": project}) if project
                          else ("user", Identifiers(user_id=USER_ID), {"userId": USER_ID}))
    key = scope_key(layer, ids)
    conn.execute("BEGIN")
    for text in texts:
        insert_memory(conn, NewMemory(text, layer, key, labels, [], {}))
    conn.execute("COMMIT")
    conn.close()
    return [corpus.query(corpus.rng.choice(texts)) for _ in range(500)]


def build(root: Path, sizes: Sizes, calls: int) -> Seeds:
    """Write the whole workspace under `root` (which must not exist yet), with pools for `calls` calls per
    operation; the ids it holds."""
    root.mkdir(parents=True)
    roles = airs.workspace(root, sizes.specs)
    caps, changes = ospec.workspace(root, sizes.openspec_specs, sizes.changes)
    designed = [c for c in changes if (root / "openspec" / "changes" / c / "design.md").exists()]
    tasks = _bench_tasks(root, changes, calls)
    queries = memories(root / ".bench" / "memory.db", sizes.memories)
    knowledge_repo(root / ".bench" / "knowledge", sizes.knowledge_items)
    return Seeds(roles, caps, changes, designed, tasks, [f"pol-{i:04d}" for i in range(sizes.knowledge_items)],
                 queries, sizes, source_files(200))


def copy(src: Path, dst: Path) -> None:
    """A fresh copy of a built workspace (one per transport, so writes on one never reach another),
    flushed to disk like the original (`settle_on_disk`)."""
    shutil.copytree(src, dst, symlinks=True)
    airs.settle_on_disk()


@dataclass
class Op:
    """One operation: a tool, a static resource, a resource template or a prompt."""

    kind: str  # tool | resource | template | prompt
    name: str  # tool or prompt name, resource URI, or the template's uriTemplate
    params: Callable[[], dict[str, Any]]  # the request's params for the next call
    expect_error: bool = False  # measured as the error it answers (init on an initialised workspace)
    note: str = ""
    after: Callable[[dict[str, Any], dict[str, Any]], None] | None = None  # (params, result): feeds a pool
    prepare: Callable[[int], None] | None = None  # before the op: room for this many calls

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def method(self) -> str:
        return KINDS[self.kind]


class Rotor:
    """Ids in a shuffled cycle: any run of len(items) consecutive draws names each at most once."""

    def __init__(self, items: list[str], rng: random.Random) -> None:
        if not items:
            raise CatalogueError("an empty rotor")
        self.items = rng.sample(items, len(items))
        self._cycle: Iterator[str] = itertools.cycle(self.items)

    def __call__(self) -> str:
        return next(self._cycle)


class Pool:
    """Ids consumed one per call."""

    def __init__(self, name: str, items: list[Any] | None = None) -> None:
        self.name = name
        self.items: list[Any] = list(items or [])

    def __call__(self) -> Any:
        if not self.items:
            raise CatalogueError(f"{self.name}: the pool ran dry")
        return self.items.pop()


def _data(result: dict[str, Any]) -> dict[str, Any]:
    content = result.get("structuredContent") or {}
    return content.get("data", content) if isinstance(content, dict) else {}


class Catalogue:
    """The argument generators for one workspace copy (`root`), drawing from its `seeds`."""

    def __init__(self, root: Path, seeds: Seeds, seed: int = 5) -> None:
        self.root = root
        self.s = seeds
        self.rng = random.Random(seed)
        self.blocked: set[str] = set()
        self.created: list[str] = []  # spec_create -> plan_create
        self.planned: list[str] = []  # plan_create -> build_start
        self.started: list[str] = []  # build_start -> build_complete
        self.memories = Pool("memory_delete (ids memory_add returned)")
        self.archivable = Pool("archive (changes written before it runs)")
        self.tasks = Pool("task_complete (unchecked tasks)", list(reversed(seeds.tasks)))
        self._serial = itertools.count(1)
        self._archive_op: Op | None = None
        self._archive_probe: dict[str, Any] | None = None

    # -- helpers ---------------------------------------------------------------------------------------------
    def words(self, lo: int, hi: int) -> str:
        return " ".join(self.rng.choice(airs.WORDS) for _ in range(self.rng.randint(lo, hi)))

    def pick(self, items: list[str]) -> str:
        return self.rng.choice(items)

    def title(self) -> str:
        return f"{self.words(2, 4).capitalize()} bench {next(self._serial)}"

    def _write_archivable(self, count: int) -> None:
        """`count` complete changes, each adding one requirement to its own capability (no two alike in a row)."""
        base = self.root / "openspec" / "changes"
        first = len(self.archivable.items)
        for k in range(count):
            change = f"bench-archive-{first + k:04d}"
            cap = self.s.caps[(first + k) % len(self.s.caps)]
            folder = base / change
            (folder / "specs" / cap).mkdir(parents=True)
            (folder / "proposal.md").write_text(f"# Change: {change}\n\n## Why\nThe bench archives this change "
                                                f"to measure archive.\n\n## What Changes\n- {cap}\n\n## Impact\n- "
                                                f"{cap}\n")
            (folder / "tasks.md").write_text("## 1. Work\n- [x] 1.1 Write it\n- [x] 1.2 Test it\n")
            req = RequirementDoc(f"Bench requirement {change}", [f"The system SHALL keep {change}."],
                                 [ScenarioDoc("Archived", ["- **WHEN** archived", "- **THEN** merged"])])
            (folder / "specs" / cap / "spec.md").write_text(render_delta(DeltaDoc(added=[req])))
            self.archivable.items.insert(0, change)  # popped from the end: oldest first
        self._archive_probe = {"name": "show", "arguments": {"item": self.archivable.items[-1]}}

    def _toggle(self, rotor: Rotor) -> dict[str, Any]:
        spec_id = rotor()
        to = "active" if spec_id in self.blocked else "blocked"
        (self.blocked.add if to == "blocked" else self.blocked.discard)(spec_id)
        return {"spec_id": spec_id, "to_state": to, "reason": "bench"}

    # -- the catalogue ---------------------------------------------------------------------------------------
    def ops(self) -> list[Op]:
        s, r, pick = self.s, self.rng, self.pick
        roles = s.roles
        building = Rotor(roles.building, r)
        ready = Rotor(roles.ready, r)
        planned = sorted(roles.steps)
        anything = [*s.caps, *s.changes]

        def tool(name: str, args: Callable[[], dict[str, Any]], **kw: Any) -> Op:
            return Op("tool", name, lambda: {"name": name, "arguments": args()}, **kw)

        def read(kind: str, name: str, uri: Callable[[], str]) -> Op:
            return Op(kind, name, lambda: {"uri": uri()})

        def prompt(name: str, args: Callable[[], dict[str, str]]) -> Op:
            return Op("prompt", name, lambda: {"name": name, "arguments": args()})

        def unblocked() -> str:
            for _ in range(len(building.items)):
                spec_id = building()
                if spec_id not in self.blocked:
                    return spec_id
            raise CatalogueError("every building spec is blocked")

        def fed(pool: list[str]) -> Callable[[dict[str, Any], dict[str, Any]], None]:
            return lambda _params, result: pool.append(_data(result)["spec_id"])

        def step_complete() -> dict[str, Any]:
            spec_id = unblocked()
            return {"spec_id": spec_id, "step_index": r.randrange(roles.steps[spec_id]), "notes": "bench"}

        consuming: dict[str, Pool] = {}

        def drain(name: str, sources: Callable[[], list[str]]) -> Callable[[int], None]:
            def prepare(_count: int) -> None:
                consuming[name] = Pool(name, sources())
            return prepare

        def take(name: str) -> str:
            return str(consuming[name]())

        def knowledge_check() -> dict[str, Any]:
            return {"files": r.sample(s.files, s.sizes.check_files), "minSeverity": "info",
                    "dependencies": [{"name": "express"}, {"name": "pg"}, {"name": r.choice(["moment", "lodash"])}]}

        archive = tool("archive", lambda: {"changeId": self.archivable()},
                       prepare=self._write_archivable, note="complete changes written just before, one per call")
        self._archive_op = archive
        return [
            # reads: tools
            tool("spec_list", lambda: {}),
            tool("spec_status", lambda: {"spec_id": pick(roles.all)}),
            tool("spec_check_dependencies", lambda: {"spec_id": pick(roles.all)}),
            tool("list", lambda: {"specs": r.random() < 0.5}, note="changes or specs, half each"),
            tool("show", lambda: {"item": pick(anything)}, note="a spec or a change"),
            tool("validate", lambda: {"item": pick(anything)},
                 note="one item; validate {all: true} is timed by the toolsets stage"),
            tool("memory_search", lambda: {"query": pick(s.queries)}),
            tool("knowledge_query", lambda: {"query": f"policy area {r.randint(0, 50)}"}),
            tool("knowledge_show", lambda: {"id": pick(s.knowledge_ids)}),
            tool("knowledge_check", knowledge_check, note=f"{s.sizes.check_files} files"),
            tool("sync_status", lambda: {}),
            tool("sync_now", lambda: {}, note="nothing changed since the last sync"),
            # reads: resources, templates, prompts
            *(read("resource", uri, functools.partial(str, uri)) for uri in (
                "specactor://metrics", "specactor://context", "openspec://instructions", "openspec://project", "openspec://specs",
                "openspec://changes", "openspec://archive", "airsspec:///config", "airsspec:///specs")),
            read("template", "openspec://specs/{+capability}", lambda: f"openspec://specs/{pick(s.caps)}"),
            read("template", "openspec://changes/{changeId}", lambda: f"openspec://changes/{pick(s.changes)}"),
            read("template", "openspec://changes/{changeId}/proposal",
                 lambda: f"openspec://changes/{pick(s.changes)}/proposal"),
            read("template", "openspec://changes/{changeId}/tasks",
                 lambda: f"openspec://changes/{pick(s.changes)}/tasks"),
            read("template", "openspec://changes/{changeId}/design",
                 lambda: f"openspec://changes/{pick(s.designed)}/design"),
            read("template", "openspec://changes/{changeId}/{+path}",
                 lambda: f"openspec://changes/{pick(s.changes)}/tasks.md"),
            read("template", "airsspec:///{spec_id}", lambda: f"airsspec:///{pick(roles.all)}"),
            read("template", "airsspec:///{spec_id}/spec", lambda: f"airsspec:///{pick(roles.all)}/spec"),
            read("template", "airsspec:///{spec_id}/plan", lambda: f"airsspec:///{pick(planned)}/plan"),
            read("template", "airsspec:///{spec_id}/state", lambda: f"airsspec:///{pick(roles.all)}/state"),
            prompt("openspec-propose", lambda: {"description": self.words(6, 14),
                                                "scope": r.choice(["new-capability", "modify-existing", "fix"])}),
            prompt("openspec-apply", lambda: {"changeId": pick(s.changes)}),
            prompt("openspec-archive", lambda: {"changeId": pick(s.changes)}),
            prompt("write_spec", lambda: {"feature_description": self.words(6, 14)}),
            prompt("create_plan", lambda: {"spec_id": pick(roles.all)}),
            prompt("review_spec", lambda: {"spec_id": pick(roles.all)}),
            prompt("validate_plan", lambda: {"spec_id": pick(planned)}),
            prompt("check_progress", lambda: {"spec_id": pick(roles.building)}),
            prompt("session_context", dict),
            # writes
            tool("init", lambda: {}, expect_error=True, note="the workspace exists: measured as the error it answers"),
            tool("update_project_context", lambda: {"section": "Bench notes", "content": self.words(10, 30)}),
            tool("task_complete", lambda: dict(zip(("changeId", "task"), self.tasks(), strict=True)),
                 note="an unchecked task each"),
            archive,
            tool("spec_update", lambda: {"spec_id": building(), "description": self.words(5, 10)}),
            tool("plan_update", lambda: {"spec_id": ready(), "approach": self.words(5, 10)}),
            tool("plan_step_complete", step_complete),
            tool("build_update", lambda: {"spec_id": unblocked(), "current_step": self.words(2, 4)}),
            tool("spec_transition", lambda: self._toggle(building), note="active <-> blocked"),
            tool("spec_create", lambda: {"title": self.title(), "description": self.words(8, 20),
                                         "category": r.choice(["feature", "bugfix", "enhancement"]),
                                         "dependencies": [{"spec_id": pick(roles.all), "kind": "related_to"}]},
                 after=fed(self.created)),
            tool("plan_create", lambda: {"spec_id": take("plan_create"), "approach": self.words(5, 10),
                                         "steps": [{"title": f"Step {k}", "description": self.words(4, 8),
                                                    "complexity": "medium"} for k in range(5)]},
                 prepare=drain("plan_create", lambda: [*roles.unplanned, *self.created]),
                 after=fed(self.planned), note="drafts without a plan (spec_create's among them)"),
            tool("build_start", lambda: {"spec_id": take("build_start"), "plan_approved": True},
                 prepare=drain("build_start", lambda: [*roles.ready, *self.planned]), after=fed(self.started),
                 note="planned drafts (plan_create's among them)"),
            tool("build_complete", lambda: {"spec_id": take("build_complete"), "summary": self.words(5, 10)},
                 prepare=drain("build_complete", lambda: [*(b for b in roles.building if b not in self.blocked),
                                                          *self.started]),
                 note="specs being built (build_start's among them)"),
            tool("memory_add", lambda: {"content": pick(s.queries) + " " + self.words(5, 20),
                                        "tags": [r.choice(["bench", "note", "decision"])]},
                 after=lambda _p, result: self.memories.items.append(_data(result)["memoryId"])),
            tool("memory_delete", lambda: {"memoryId": self.memories()}, note="ids memory_add returned"),
        ]

    def probe_params(self, op: Op) -> dict[str, Any] | None:
        """A tools/call that must succeed before `op` is measured (its prepared files are visible)."""
        return self._archive_probe if op is self._archive_op else None
