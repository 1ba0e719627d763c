"""Hypothesis strategies for graph projection: workspaces as `{path: text}` dicts, and edits to them.

Valid documents are rendered with the domain's own writers (`openspec.render`, the AirsSpec file
modules), so they use the real formats; `junk` stands in for what a disk may also hold: empty
files, torn writes, binary bytes read as text, NULs and lone surrogates.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from specactor.domain.airsspec import planfile, specfile, statefile, vocab
from specactor.domain.airsspec.model import PlanDoc, PlanStep, SpecDoc, SpecMeta, WorkflowState
from specactor.domain.openspec.render import DeltaDoc, RequirementDoc, ScenarioDoc, render_delta, render_spec

Files = dict[str, str]

# Names that exercise the key escaping (`/ : # ~ % |`), duplicates (a small pool), non-ASCII and length.
NAMES = ["Login", "Session Expiry", "Login", "a/b", "x#2", "50% off", "pipe|name", "tilde~", "colon: yes",
         "Ünïcode naïve", "R" * 140]
CHANGE_NAMES = ["add-2fa", "fix-login", "x", "archive-notes", "2026-01-01-dated-looking", "n" * 120]
SPEC_IDS = ["1737734400-user-auth", "1737734500-billing", "1-a"]
DATES = ["2025-12-31", "2026-11-25", "2026-01-02"]
STAMP = "2026-11-25T10:00:00Z"

names = st.sampled_from(NAMES) | st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), min_size=1,
                                         max_size=20).map(str.strip).filter(bool)
capabilities = st.lists(st.sampled_from(["auth", "billing", "a", "inv-oices", "x.y"]), min_size=1, max_size=3).map(
    "/".join)
words = st.sampled_from(["user", "token", "session", "invoice", "order"])
sentence = st.lists(words, min_size=1, max_size=6).map(" ".join)


@st.composite
def statements(draw: st.DrawFn) -> str:
    keyword = draw(st.sampled_from(["SHALL", "MUST", "SHOULD", "MAY", "shall", "can"]))
    return f"The system {keyword} {draw(sentence)}."


@st.composite
def scenarios(draw: st.DrawFn) -> ScenarioDoc:
    steps = draw(st.lists(st.sampled_from(["GIVEN", "WHEN", "THEN", "AND"]), min_size=1, max_size=4))
    return ScenarioDoc(draw(names), [f"- **{word}** {draw(sentence)}" for word in steps])


@st.composite
def requirements(draw: st.DrawFn) -> RequirementDoc:
    return RequirementDoc(draw(names), [draw(statements())], draw(st.lists(scenarios(), max_size=3)))


main_specs = st.builds(lambda cap, purpose, reqs: render_spec(cap, purpose, reqs), capabilities, sentence,
                       st.lists(requirements(), max_size=4))
deltas = st.builds(lambda a, m, r, n: render_delta(DeltaDoc(added=a, modified=m, removed=r, renamed=n)),
                   st.lists(requirements(), max_size=2), st.lists(requirements(), max_size=2),
                   st.lists(names, max_size=2), st.lists(st.tuples(names, names), max_size=1))
proposals = st.builds(lambda why, what, impact: f"# Change: x\n\n## Why\n{why}\n\n## What Changes\n- {what}\n\n"
                                                f"## Impact\n- {impact}\n", sentence, sentence, sentence)
designs = st.builds(lambda a, d: f"# Design\n\n## Approach\n{a}\n\n## Decisions\n- {d}\n", sentence,
                    sentence) | sentence


@st.composite
def task_lists(draw: st.DrawFn) -> str:
    lines = ["## 1. Work"]
    for n in range(draw(st.integers(0, 5))):
        mark = draw(st.sampled_from([" ", "x", "X", "~", "-", "/", "!", ""]))
        ident = draw(st.sampled_from([f"1.{n + 1} ", "1.1 ", ""]))  # duplicate ids happen by hand too
        prefix = draw(st.sampled_from(["", "BLOCKED: ", "(blocked) "]))
        lines.append(f"- [{mark}] {ident}{prefix}{draw(sentence)}")
    return "\n".join(lines) + "\n"


@st.composite
def junk(draw: st.DrawFn, valid: st.SearchStrategy[str] = sentence) -> str:
    """What a disk may hold instead of a document."""
    kind = draw(st.sampled_from(["empty", "torn", "binary", "text", "nul"]))
    if kind == "empty":
        return ""
    if kind == "torn":
        text = draw(valid)
        return text[:draw(st.integers(0, len(text)))]
    if kind == "binary":
        return draw(st.binary(max_size=64)).decode("utf-8", errors="surrogateescape")
    if kind == "nul":
        return "## Why\n\x00\ud800 half\n---\n"
    return draw(st.text(max_size=60))


def maybe_junk(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(valid, valid, valid, junk(valid))


@st.composite
def airsspec_files(draw: st.DrawFn, spec_id: str) -> Files:
    folder = f".airsspec/specs/{spec_id}"
    lifecycle = draw(st.sampled_from(vocab.LIFECYCLES))
    meta = SpecMeta(title=draw(names), description=draw(sentence), category=draw(st.sampled_from(vocab.CATEGORIES)),
                    state=lifecycle, dependencies=(), created_at=STAMP, updated_at=STAMP)
    spec = specfile.render(SpecDoc(meta=meta, content=draw(sentence)))
    files = {f"{folder}/spec.md": draw(maybe_junk(st.just(spec)))}
    if draw(st.booleans()):
        steps = tuple(PlanStep(title=draw(names).replace("\n", " "), description=draw(sentence),
                               complexity=draw(st.sampled_from([None, *vocab.COMPLEXITIES])),
                               status=draw(st.sampled_from(vocab.STEP_STATUSES)))
                      for _ in range(draw(st.integers(0, 3))))
        plan = PlanDoc(spec_id=spec_id, approach=draw(sentence), steps=steps, created_at=STAMP, updated_at=STAMP)
        files[f"{folder}/plan.md"] = draw(maybe_junk(st.just(planfile.render(plan))))
    if draw(st.booleans()):
        state = WorkflowState(spec_id=spec_id, lifecycle=lifecycle, phase="build", updated_at=STAMP)
        files[f"{folder}/state.toon"] = draw(maybe_junk(st.just(statefile.render(state))))
    return files


@st.composite
def change_files(draw: st.DrawFn, folder: str) -> Files:
    files: Files = {}
    if draw(st.booleans()):
        files[f"{folder}/proposal.md"] = draw(maybe_junk(proposals))
    if draw(st.booleans()):
        files[f"{folder}/design.md"] = draw(maybe_junk(designs))
    if draw(st.booleans()):
        files[f"{folder}/tasks.md"] = draw(maybe_junk(task_lists()))
    for cap in draw(st.lists(capabilities, max_size=2, unique=True)):
        files[f"{folder}/specs/{cap}/spec.md"] = draw(maybe_junk(deltas))
    if not files:
        files[f"{folder}/.openspec.yaml"] = "schema: spec-driven\n"  # a change folder is never empty here
    return files


# Files that name no unit, or a hidden one: they must never change the graph.
NOISE: Files = {"openspec/project.md": "# Project\n", "openspec/config.yaml": "schema: spec-driven\n",
                "AGENTS.md": "# Agents\n", ".airsspec/config.toml": "[project]\nname = 'x'\n",
                "openspec/specs/.hidden/spec.md": "## Purpose\nhidden\n", "openspec/changes/.tmp/proposal.md": "x",
                "openspec/specs/spec.md": "## Purpose\nat the root, not a capability\n"}


@st.composite
def workspaces(draw: st.DrawFn) -> Files:
    files: Files = {}
    if draw(st.booleans()):
        files.update(NOISE)
    for cap in draw(st.lists(capabilities, max_size=3, unique=True)):
        files[f"openspec/specs/{cap}/spec.md"] = draw(maybe_junk(main_specs))
    for name in draw(st.lists(st.sampled_from(CHANGE_NAMES), max_size=3, unique=True)):
        if draw(st.booleans()):
            files.update(draw(change_files(f"openspec/changes/{name}")))
        for date in draw(st.lists(st.sampled_from([*DATES, None]), max_size=2, unique=True)):
            files.update(draw(change_files(f"openspec/changes/archive/{f'{date}-{name}' if date else name}")))
    for spec_id in draw(st.lists(st.sampled_from(SPEC_IDS), max_size=2, unique=True)):
        files.update(draw(airsspec_files(spec_id)))
    return files


# ---------------------------------------------------------------------- edits


@dataclass(frozen=True)
class Edit:
    """A set of writes (path -> text) and removals, as one change-feed event would name them."""

    written: Files
    removed: tuple[str, ...]

    def apply(self, files: Files) -> Files:
        out = {p: t for p, t in files.items() if p not in self.removed}
        out.update(self.written)
        return out

    @property
    def paths(self) -> list[str]:
        return [*self.written, *self.removed]


@st.composite
def edits(draw: st.DrawFn, files: Files) -> Edit:
    """Edit, remove or add files, or archive a change by moving its folder."""
    kind = draw(st.sampled_from(["edit", "remove", "add", "archive"] if files else ["add"]))
    existing = sorted(files)
    if kind == "edit":
        path = draw(st.sampled_from(existing))
        return Edit({path: draw(st.one_of(main_specs, deltas, proposals, task_lists(), junk()))}, ())
    if kind == "remove":
        return Edit({}, tuple(draw(st.lists(st.sampled_from(existing), min_size=1, max_size=3, unique=True))))
    if kind == "archive":
        active = sorted({p.split("/")[2] for p in existing if p.startswith("openspec/changes/")
                         and p.split("/")[2] not in ("archive", ".tmp")})
        if active:
            name = draw(st.sampled_from(active))
            source = f"openspec/changes/{name}/"
            moved = {p: t for p, t in files.items() if p.startswith(source)}
            target = f"openspec/changes/archive/2026-11-25-{name}/"
            return Edit({target + p[len(source):]: t for p, t in moved.items()}, tuple(moved))
    added: Files = draw(st.one_of(
        capabilities.map(lambda cap: f"openspec/specs/{cap}/spec.md").flatmap(
            lambda path: main_specs.map(lambda text: {path: text})),
        st.sampled_from(CHANGE_NAMES).flatmap(lambda n: change_files(f"openspec/changes/{n}")),
        st.tuples(st.sampled_from(DATES), st.sampled_from(CHANGE_NAMES)).flatmap(
            lambda dn: change_files(f"openspec/changes/archive/{dn[0]}-{dn[1]}")),
        st.sampled_from(SPEC_IDS).flatmap(airsspec_files),
        st.just(dict(NOISE)),
    ))
    return Edit(added, ())
