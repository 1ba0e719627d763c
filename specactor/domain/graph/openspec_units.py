"""OpenSpec units as graphs: a main spec (Spec → Requirements → Scenarios) and a change (Change →
Proposal, Design, delta Specs → Requirements → Scenarios, Tasks), its archived copies included.

Text is read with the CLI's own parsers (`markdown`, `blocks`, `tasks`), so a requirement's
description is what `openspec show --json` calls its text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from specactor.domain.graph.builder import Ref, UnitBuilder, guarded, put, read
from specactor.domain.graph.keys import Siblings, escape
from specactor.domain.graph.model import Graph
from specactor.domain.graph.reader import Reader
from specactor.domain.graph.units import (
    ARCHIVE,
    CHANGES,
    OPENSPEC_CHANGE,
    OPENSPEC_SPEC,
    SPECS,
    archived_folders,
    archived_name,
    capabilities,
    is_active_change,
    is_capability,
)
from specactor.domain.openspec.blocks import (
    REQUIREMENT_HEADER,
    Block,
    DeltaPlan,
    normalize_name,
    parse_delta,
    scenario_names,
)
from specactor.domain.openspec.markdown import (
    Section,
    find_section,
    has_scenario_body,
    normalize_content,
    parse_sections,
    section_requirements,
)
from specactor.domain.openspec.tasks import TASK_LINE, parse_tasks, task_id
from specactor.domain.openspec.text import rx, trim

_STRENGTH: Final = re.compile(r"\b(SHALL|MUST|SHOULD|MAY)\b")  # RFC 2119 words are upper case
_CLAUSE: Final = re.compile(r"^\s*(?:[-*+]\s*)?\*\*(given|when|then|and)\s*:?\s*\*\*\s*:?\s*(.*?)\s*$", re.I)
_BLOCKED: Final = re.compile(r"\Ablocked\b|\(blocked\)", re.I)
_HEADER_PREFIX: Final = rx(r"^###\s*")
_IN_PROGRESS: Final = frozenset("~-/")
_APPROACH: Final = ("Approach", "Technical Approach", "Implementation Approach")
_DECISIONS: Final = ("Decisions", "Key Decisions", "Design Decisions")
_DATA_FLOW: Final = ("Data Flow", "Dataflow")


@dataclass(frozen=True)
class ScenarioPart:
    name: str
    body: str


@dataclass(frozen=True)
class RequirementPart:
    name: str
    text: str
    scenarios: list[ScenarioPart] = field(default_factory=list)
    delta_type: str | None = None


# ---------------------------------------------------------------------- reading


def _scenario_name(title: str) -> str:
    # the name archive compares scenarios by: `Scenario:` prefix and a closing `###` run dropped
    names = scenario_names(f"#### {title}")
    return names[0] if names else title


def _requirement_name(title: str) -> str:
    m = REQUIREMENT_HEADER.match(f"### {title}")
    return normalize_name(m.group(1) if m else title)


def _from_section(section: Section, name: str, delta_type: str | None) -> RequirementPart:
    # the CLI's own text and scenarios (`parseRequirements`); names come from the same children
    parsed = section_requirements(Section(2, "", "", [section]))[0]
    titled = [s for s in section.children if has_scenario_body(s.content)]
    scenarios = [ScenarioPart(_scenario_name(s.title), raw.rawText)
                 for s, raw in zip(titled, parsed.scenarios, strict=True)]
    return RequirementPart(name, parsed.text, scenarios, delta_type)


def _from_block(block: Block, delta_type: str) -> RequirementPart:
    # a delta block read as `show` reads it (change._requirements): its header as a `###` section
    header, *body = block.raw.split("\n")
    title = trim(_HEADER_PREFIX.sub("", header, count=1))
    sections = parse_sections(normalize_content("\n".join([f"### {title}", *body])).split("\n"))
    if not sections:
        return RequirementPart(block.name, "", [], delta_type)
    return _from_section(sections[0], block.name, delta_type)


def _main_spec(text: str) -> tuple[str, list[RequirementPart]]:
    """(purpose, requirements) as `parse_spec` reads them, without its refusals: a spec missing
    its Purpose still shows its requirements."""
    sections = parse_sections(normalize_content(text).split("\n"))
    purpose = find_section(sections, "Purpose")
    found = find_section(sections, "Requirements")
    requirements = [_from_section(child, _requirement_name(child.title), None)
                    for child in (found.children if found else [])]
    return (trim(purpose.content) if purpose else ""), requirements


def _delta(text: str) -> tuple[str, str, list[RequirementPart]]:
    """(delta type, purpose, requirements) of a delta spec; a rename is a modification."""
    plan: DeltaPlan = parse_delta(text)
    parts = [_from_block(b, "added") for b in plan.added] + [_from_block(b, "modified") for b in plan.modified]
    pool = list(plan.removed_blocks)
    for name in plan.removed:  # a bullet names a removal without a block: its text is the header (as show)
        index = next((i for i, b in enumerate(pool) if b.name == name), -1)
        header = f"### Requirement: {name}"
        parts.append(_from_block(pool.pop(index) if index != -1 else Block(header, name, header), "removed"))
    parts += [RequirementPart(r.to, f'Rename requirement from "{r.from_}" to "{r.to}"', [], "modified")
              for r in plan.renamed]
    others = plan.modified or plan.renamed
    kind = ("added" if plan.added and not (others or plan.removed) else
            "removed" if plan.removed and not (others or plan.added) else "modified")
    purpose = ""
    if "purpose" in text.lower():  # 1.x lets a delta carry the Purpose of a new spec
        found = find_section(parse_sections(normalize_content(text).split("\n")), "Purpose")
        purpose = trim(found.content) if found else ""
    return kind, purpose, parts


def _proposal(text: str) -> dict[str, Any]:
    sections = parse_sections(normalize_content(text).split("\n"))
    why, what, impact = (find_section(sections, t) for t in ("Why", "What Changes", "Impact"))
    props: dict[str, Any] = {"intent": trim(why.content) if why else "", "tags": []}
    if why is None and what is None and impact is None:  # free prose: keep it all as the intent
        props["intent"] = trim(normalize_content(text))
    put(props, "scope", trim(what.content) if what else "")
    put(props, "impact", trim(impact.content) if impact else "")
    return props


def _first(sections: list[Section], titles: Iterable[str]) -> str:
    for title in titles:
        found = find_section(sections, title)
        if found is not None and found.content:
            return trim(found.content)
    return ""


def _design(text: str) -> dict[str, Any]:
    sections = parse_sections(normalize_content(text).split("\n"))
    props: dict[str, Any] = {"tags": []}
    put(props, "approach", _first(sections, _APPROACH) or trim(normalize_content(text)))
    put(props, "decisions", _first(sections, _DECISIONS))
    put(props, "data_flow", _first(sections, _DATA_FLOW))
    return props


def task_status(mark: str, description: str) -> str:
    """The pack's task status from the checkbox character and the task's words."""
    if mark in ("x", "X"):
        return "completed"
    if mark == "!" or _BLOCKED.search(description):
        return "blocked"
    return "in_progress" if mark in _IN_PROGRESS else "pending"


def _tasks(text: str) -> list[dict[str, Any]]:
    lines = text.split("\n")  # as parse_tasks splits it, so `line` indexes the same list
    out = []
    for position, task in enumerate(parse_tasks(text), start=1):
        m = TASK_LINE.match(lines[task.line - 1])
        mark = (m.group(1) or "") if m else ""
        ident = task_id(task)
        description = (trim(task.description[len(ident):]) or task.description) if ident else task.description
        status = task_status(mark, description)
        out.append({"number": ident or str(position), "description": description, "status": status, "tags": []})
    return out


def strength(text: str) -> str:
    m = _STRENGTH.search(text)
    return m.group(1) if m else ""


def _scenario(part: ScenarioPart) -> dict[str, Any]:
    clauses: dict[str, list[str]] = {"given": [], "when": [], "then": [], "and": []}
    for line in part.body.split("\n"):
        m = _CLAUSE.match(line)
        if m and m.group(2):
            clauses[m.group(1).lower()].append(m.group(2))
    props: dict[str, Any] = {"name": part.name, "title": part.name, "tags": []}
    for word in ("given", "when", "then"):
        put(props, word, "\n".join(clauses[word]))
    put(props, "and_also", clauses["and"])
    return props


# ---------------------------------------------------------------------- emitting


def _domain(cap: str) -> str:
    return cap.rpartition("/")[0]  # a nested capability's area: `billing` of `billing/invoices`


def _spec(b: UnitBuilder, path: str, cap: str, purpose: str, delta_type: str | None,
          requirements: list[RequirementPart], parent: Ref | None) -> None:
    props: dict[str, Any] = {"name": cap, "tags": []}
    put(props, "domain", _domain(cap))
    put(props, "purpose", purpose)
    put(props, "delta_type", delta_type)
    spec = b.node(path, "Spec", props, parent=parent, relation="has_spec")
    names = Siblings()
    for req in requirements:
        rprops: dict[str, Any] = {"name": req.name, "description": req.text, "tags": []}
        put(rprops, "strength", strength(req.text))
        put(rprops, "delta_type", req.delta_type)
        node = b.node(spec.child(names.segment("req", req.name)), "Requirement", rprops, parent=spec,
                      relation="has_requirement")
        scenario_keys = Siblings()
        for scenario in req.scenarios:
            b.node(node.child(scenario_keys.segment("scenario", scenario.name)), "Scenario", _scenario(scenario),
                   parent=node, relation="has_scenario")


def project_spec(workspace_id: str, cap: str, reader: Reader) -> Graph:
    """The unit `openspec:spec:<cap>`: empty when `openspec/specs/<cap>/spec.md` is not there."""
    b = UnitBuilder(workspace_id, OPENSPEC_SPEC + cap, "openspec")
    folder = f"{SPECS}/{cap}"
    if not is_capability(cap) or ("spec.md", False) not in (reader.listdir(folder) or []):
        return b.graph
    text = read(reader, f"{folder}/spec.md")
    parsed = guarded(partial(_main_spec, text)) if text is not None else None
    purpose, requirements = parsed or ("", [])
    _spec(b, b.root(f"spec:{escape(cap)}"), cap, purpose, None, requirements, None)
    return b.graph


def _change(b: UnitBuilder, reader: Reader, folder: str, path: str, name: str, archived_on: str | None) -> None:
    """One copy of a change (`archived_on`: None when active, else its date or "")."""
    status = "active" if archived_on is None else "archived"
    change = b.node(path, "Change", {"name": name, "status": status,
                                     "tags": [f"archived:{archived_on}"] if archived_on else []}, status=status)
    files = {entry for entry, is_dir in reader.listdir(folder) or [] if not is_dir}
    # A document that exists gets its node even when it cannot be read; only its contents are lost.
    if "proposal.md" in files:
        text = read(reader, f"{folder}/proposal.md")
        props = guarded(partial(_proposal, text)) if text is not None else None
        b.node(change.child("proposal"), "Proposal", props or {"intent": "", "tags": []}, parent=change,
               relation="has_proposal")
    if "design.md" in files:
        text = read(reader, f"{folder}/design.md")
        props = guarded(partial(_design, text)) if text is not None else None
        b.node(change.child("design"), "Design", props or {"tags": []}, parent=change, relation="has_design")
    for cap in capabilities(reader, f"{folder}/specs"):
        text = read(reader, f"{folder}/specs/{cap}/spec.md")
        delta = guarded(partial(_delta, text)) if text is not None else None
        kind, purpose, requirements = delta or (None, "", [])
        _spec(b, change.child(f"spec:{escape(cap)}"), cap, purpose, kind, requirements, change)
    if "tasks.md" in files:
        text = read(reader, f"{folder}/tasks.md")
        numbers = Siblings()
        for props in (guarded(partial(_tasks, text)) if text is not None else None) or []:
            b.node(change.child(numbers.segment("task", props["number"])), "Task", props, status=props["status"],
                   parent=change, relation="has_task")


def project_change(workspace_id: str, name: str, reader: Reader, archived: list[str] | None = None) -> Graph:
    """The unit `openspec:change:<name>`: the active folder and every archived copy.

    The active folder owns the plain keys (`change:<name>`); without one, the newest archived
    copy does, so archiving keeps the Change's key. Other copies are keyed `archive:<folder>`.
    `archived` is the change's archive folders when the caller has listed them already.
    """
    b = UnitBuilder(workspace_id, OPENSPEC_CHANGE + name, "openspec")
    if not name or "/" in name:
        return b.graph
    active = is_active_change(name) and reader.listdir(f"{CHANGES}/{name}") is not None
    folders = archived_folders(reader).get(name, []) if archived is None else archived
    owner = None if active or not folders else max(folders, key=lambda f: (archived_name(f)[1] or "", f))
    plain = b.root(f"change:{escape(name)}")
    if active:
        _change(b, reader, f"{CHANGES}/{name}", plain, name, None)
    for folder in folders:
        path = plain if folder == owner else b.root(f"archive:{escape(folder)}")
        _change(b, reader, f"{ARCHIVE}/{folder}", path, name, archived_name(folder)[1] or "")
    return b.graph
