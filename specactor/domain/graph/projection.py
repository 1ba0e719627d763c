"""The pure projection from a workspace's files to the graph of objects and relationships they imply.

`project(ws, reader)` is the union of `project_unit(ws, unit, reader)` over `discover_units`;
a unit's graph depends only on the files `units_of` maps to it, so a write re-projects just the
units it touches. Same files, same graph: keys, properties and digests are stable.
"""

from __future__ import annotations

from specactor.domain.graph.airsspec_units import project_airsspec
from specactor.domain.graph.keys import check_workspace_id, workspace_id_from
from specactor.domain.graph.model import Edge, Graph, Node
from specactor.domain.graph.openspec_units import project_change, project_spec
from specactor.domain.graph.reader import DictReader, Reader
from specactor.domain.graph.units import (
    OPENSPEC_CHANGE,
    OPENSPEC_SPEC,
    active_changes,
    airsspec_specs,
    archived_folders,
    capabilities,
    discover_units,
    parse_unit,
    units_of,
)

# MAPPING: files -> specmcp pack types (docs/graph.md copies this). `…` stands for the parent's key.
#
# | File                         | Object `key` (under <ws>/)  | Properties (+ `tags` on all)      | Edge in         |
# |------------------------------|-----------------------------|-----------------------------------|-----------------|
# | openspec/specs/<cap>/spec.md | Spec `spec:<cap>`           | name=cap, domain (1), purpose     |                 |
# |   `## Requirements` children | Requirement `…/req:<n>`     | name, description (2),            | has_requirement |
# |                              |                             | strength (3)                      |                 |
# |   each `#### Scenario: <s>`  | Scenario `…/scenario:<s>`   | name=title=s, given, when,        | has_scenario    |
# |                              |                             | then, and_also (4)                |                 |
# | openspec/changes/<name>/     | Change `change:<name>`      | name, status=active [active]      |                 |
# | openspec/changes/archive/    | Change `change:<name>` if   | name, status=archived,            |                 |
# |   [<YYYY-MM-DD>-]<name>/     | it owns it (5), else        | tags=[archived:<date>]            |                 |
# |                              | `archive:<folder>`          | [archived]                        |                 |
# |   proposal.md                | Proposal `…/proposal`       | intent=Why, scope=What Changes,   | has_proposal    |
# |                              |                             | impact=Impact (6)                 |                 |
# |   design.md                  | Design `…/design`           | approach, decisions, data_flow    | has_design      |
# |                              |                             | (7)                               |                 |
# |   specs/<cap>/spec.md delta  | Spec `…/spec:<cap>`         | name, domain, purpose,            | has_spec        |
# |                              |                             | delta_type (8)                    |                 |
# |     each delta entry         | Requirement `…/req:<n>`     | as above + delta_type (9)         | has_requirement |
# |     its scenarios            | Scenario `…/scenario:<s>`   | as above                          | has_scenario    |
# |   tasks.md checkbox lines    | Task `…/task:<number>`      | number, description, status       | has_task        |
# |                              |                             | (10) [status]                     |                 |
# | .airsspec/specs/<id>/        | Change `airsspec:<id>`      | name=title (else id), status      |                 |
# |                              |                             | (11), tags=[category]             |                 |
# |                              |                             | [lifecycle]                       |                 |
# |   spec.md                    | Proposal `…/proposal`       | intent=description, scope=body    | has_proposal    |
# |   plan.md                    | Design `…/design`           | approach                          | has_design      |
# |   each plan step n (1-based) | Task `…/task:<n>`           | number=n, description (12),       | has_task        |
# |                              |                             | status (13), complexity_points    |                 |
# |                              |                             | (14) [status]                     |                 |
#
# [x] is the object's own top-level status. (1) the parent path of a nested capability: `billing` of
# `billing/invoices`. (2) the CLI's requirement text (`openspec show --json`). (3) the first upper-case SHALL, MUST,
# SHOULD or MAY in it, as a whole word. (4) the texts of the `**GIVEN**`, `**WHEN**`, `**THEN**` bullets
# ("\n"-joined); and_also: the `**AND**` ones. (5) the active folder owns `change:<name>`; without one, the newest
# dated archived copy does, so archiving keeps the key. (6) a proposal with none of the three sections: intent =
# the whole text. (7) approach = an `Approach` or `Technical Approach` section, else the whole text; decisions =
# `Decisions`; data_flow = `Data Flow`. (8) added when it only adds, removed when it only removes, else modified;
# purpose = a delta's `## Purpose`. (9) added / modified / removed; a RENAMED pair is modified, named by its TO and
# described `Rename requirement from "A" to "B"`. (10) number = the task id (`1.2`, taken off the description),
# else the 1-based position; status: `[x]`/`[X]` completed; `[!]`, a description starting `BLOCKED` or holding
# `(blocked)` blocked; `[~]` `[-]` `[/]` in_progress; else pending. (11) archived when the lifecycle (state.toon,
# else the front matter) is done, archived or cancelled, else active. (12) title + "\n\n" + description.
# (13) the step's; skipped -> completed with tags=[skipped]. (14) trivial 1, simple 2, moderate 3, complex 5.
#
# Labels on every node: `workspace:<ws>`, `specactor`, `source:openspec|airsspec`. Optional properties that are
# empty are left out (never "" or null); required ones are always set (Change name/status, Proposal intent, Spec
# name, Requirement name/description, Scenario name, Task number/description/status). Not mirrored: project.md,
# config files, AGENTS.md, .openspec.yaml, AirsSpec dependencies (an edge to another unit's node would dangle
# once that unit is gone). Malformed files: a document that exists keeps its node; what cannot be parsed leaves
# that node with its required properties only and without children (builder.guarded).

__all__ = ["DictReader", "Edge", "Graph", "Node", "Reader", "discover_units", "project", "project_unit",
           "units_of", "workspace_id_from"]


def project_unit(workspace_id: str, unit: str, reader: Reader) -> Graph:
    """Everything one unit implies; an empty graph when the unit is not (or no longer) on disk,
    or is not a unit id at all. Malformed files never raise: see the module's MAPPING notes.

    Raises:
        ValueError: `workspace_id` is not 1-64 characters of `[A-Za-z0-9._/-]`.
    """
    check_workspace_id(workspace_id)
    parsed = parse_unit(unit)
    if parsed is None:
        return Graph()
    prefix, ident = parsed
    if prefix == OPENSPEC_SPEC:
        return project_spec(workspace_id, ident, reader)
    if prefix == OPENSPEC_CHANGE:
        return project_change(workspace_id, ident, reader)
    return project_airsspec(workspace_id, ident, reader)


def project(workspace_id: str, reader: Reader) -> Graph:
    """The whole workspace: the union of `project_unit` over `discover_units` (listing the
    archive once instead of once per change).

    Raises:
        ValueError: `workspace_id` is not 1-64 characters of `[A-Za-z0-9._/-]`.
    """
    check_workspace_id(workspace_id)
    graph = Graph()
    for cap in capabilities(reader):
        graph.update(project_spec(workspace_id, cap, reader))
    archived = archived_folders(reader)
    for name in sorted(set(active_changes(reader)) | set(archived)):
        graph.update(project_change(workspace_id, name, reader, archived.get(name, [])))
    for spec_id in airsspec_specs(reader):
        graph.update(project_airsspec(workspace_id, spec_id, reader))
    return graph
