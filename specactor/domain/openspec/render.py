"""Writing OpenSpec markdown: spec and delta documents from their parts, and the resource lists.

`render_spec` and `render_delta` are the inverse of the parsers for well-formed parts (the
property tests check `parse(render(x)) == x`); the bench and the tests build workspaces with
them. The `*_index` functions are the markdown lists the `openspec://specs`, `changes` and
`archive` resources answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ScenarioDoc:
    name: str
    steps: list[str]  # lines such as "- **WHEN** ..."


@dataclass(frozen=True)
class RequirementDoc:
    name: str
    statement: list[str]  # the body lines before the first scenario
    scenarios: list[ScenarioDoc] = field(default_factory=list)


def render_requirement(req: RequirementDoc) -> str:
    lines = [f"### Requirement: {req.name}", *req.statement]
    for scenario in req.scenarios:
        lines += ["", f"#### Scenario: {scenario.name}", *scenario.steps]
    return "\n".join(lines)


def render_spec(capability: str, purpose: str, requirements: list[RequirementDoc]) -> str:
    parts = [f"# {capability} Specification", "", "## Purpose", purpose, "", "## Requirements", ""]
    parts += ["\n\n".join(render_requirement(r) for r in requirements)] if requirements else []
    return "\n".join(parts).rstrip("\n") + "\n"


@dataclass(frozen=True)
class DeltaDoc:
    added: list[RequirementDoc] = field(default_factory=list)
    modified: list[RequirementDoc] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    purpose: str | None = None


def render_delta(delta: DeltaDoc) -> str:
    sections: list[str] = []
    if delta.purpose is not None:
        sections.append(f"## Purpose\n{delta.purpose}")
    if delta.added:
        sections.append("## ADDED Requirements\n\n" + "\n\n".join(render_requirement(r) for r in delta.added))
    if delta.modified:
        sections.append("## MODIFIED Requirements\n\n" + "\n\n".join(render_requirement(r) for r in delta.modified))
    if delta.removed:
        body = "\n\n".join(f"### Requirement: {n}\n**Reason**: no longer needed" for n in delta.removed)
        sections.append("## REMOVED Requirements\n\n" + body)
    if delta.renamed:
        body = "\n".join(f"- FROM: `### Requirement: {a}`\n- TO: `### Requirement: {b}`" for a, b in delta.renamed)
        sections.append("## RENAMED Requirements\n\n" + body)
    return "\n\n".join(sections) + "\n"


# ---------------------------------------------------------------------- resource lists


def specs_index(specs: list[tuple[str, int]]) -> str:
    lines = ["# Specifications", ""]
    if not specs:
        lines.append("No specifications found in openspec/specs/.")
    for ident, count in specs:
        lines.append(f"- [{ident}](openspec://specs/{ident}) ({count} requirement{'s' if count != 1 else ''})")
    return "\n".join(lines) + "\n"


def changes_index(changes: list[tuple[str, str, int, int]]) -> str:
    """`changes` are (id, title, completed, total)."""
    lines = ["# Active Changes", ""]
    if not changes:
        lines.append("No active changes found in openspec/changes/.")
    for ident, title, done, total in changes:
        progress = "no tasks" if total == 0 else f"{done}/{total} tasks"
        label = f" — {title}" if title and title != ident else ""
        lines.append(f"- [{ident}](openspec://changes/{ident}){label} ({progress})")
    return "\n".join(lines) + "\n"


def archive_index(names: list[str]) -> str:
    lines = ["# Archived Changes", ""]
    if not names:
        lines.append("No archived changes found in openspec/changes/archive/.")
    lines += [f"- {name} (openspec/changes/archive/{name}/)" for name in names]
    return "\n".join(lines) + "\n"
