"""What a change-feed event says: one committed write (or an edit seen on disk) in one workspace.

Pure data and the rule that names an event's kind from its toolset and paths. The feed itself
(`actors/change_feed.py`) carries these; writers publish them, subscribers (notifications,
caches, graph sync) read them.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Kind = Literal["spec", "change", "task", "plan", "memory", "knowledge", "config", "other", "rescan"]
Origin = Literal["self", "external"]


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """One write: the workspace root, the paths written and removed (relative to it, `/`-separated),
    the toolset that wrote them ("" for an edit by hand or by another process) and its kind.

    `seq` is the feed's own counter, set when published: subscribers see events in `seq` order.
    A `rescan` event names no paths: the subscriber missed events and must look at everything.
    """

    workspace: str
    toolset: str
    kind: Kind
    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    origin: Origin = "self"
    seq: int = 0

    @property
    def paths(self) -> tuple[str, ...]:
        return self.written + self.removed


def kind_of(toolset: str, paths: tuple[str, ...]) -> Kind:
    """The kind of a write from where it landed: the first path that says something decides.

    OpenSpec: `openspec/changes/<id>/tasks.md` is a task, anything else under `changes/` a change,
    `openspec/specs/...` a spec, `openspec/config.yaml` or `project.md` config. AirsSpec:
    `.airsspec/specs/<id>/plan.*` a plan, other files of a spec a spec, `.airsspec/config*` config.
    """
    for path in paths:
        parts = path.split("/")
        if parts[0] == "openspec" and len(parts) > 1:
            if parts[1] == "changes":
                return "task" if parts[-1] == "tasks.md" else "change"
            if parts[1] == "specs":
                return "spec"
            return "config"
        if parts[0] == ".airsspec" and len(parts) > 1:
            if parts[1] == "specs":
                return "plan" if parts[-1].startswith("plan.") else "spec"
            return "config"
    if toolset == "memory":
        return "memory"
    if toolset == "knowledge":
        return "knowledge"
    return "other"


_CHANGE_DOCS = ("proposal.md", "tasks.md", "design.md")
# After a rescan anything may have changed: the index resources say so to their subscribers.
_INDEXES = ("openspec://specs", "openspec://changes", "openspec://archive", "airsspec:///specs")


def resource_uris(change: Change) -> list[str]:
    """The resources whose content a change touched, each once, in a stable order: what
    `notifications/resources/updated` goes out for. Paths are relative to the storage root, the
    folder that holds `openspec/` or `.airsspec/`."""
    if change.kind == "rescan":
        return list(_INDEXES)
    uris: dict[str, None] = {}
    for path in change.paths:
        for uri in _uris_of(path.split("/")):
            uris[uri] = None
    return list(uris)


def _uris_of(parts: list[str]) -> list[str]:
    top, rest = parts[0], parts[1:]
    if top == "openspec" and rest:
        if rest[0] == "specs" and len(rest) >= 3:
            return [f"openspec://specs/{'/'.join(rest[1:-1])}", "openspec://specs"]
        if rest[0] == "changes" and len(rest) >= 2:
            if rest[1] == "archive":
                return ["openspec://archive", "openspec://changes"]
            change_id, inner = rest[1], "/".join(rest[2:])
            own = f"openspec://changes/{change_id}"
            doc = [f"{own}/{inner.removesuffix('.md')}" if inner in _CHANGE_DOCS else f"{own}/{inner}"] if inner else []
            return [*doc, own, "openspec://changes"]
        if rest == ["AGENTS.md"]:
            return ["openspec://instructions"]
        if rest in (["project.md"], ["config.yaml"]):
            return ["openspec://project"]
        return []
    if top == ".airsspec" and rest:
        if rest[0] == "specs" and len(rest) >= 2:
            spec = f"airsspec:///{rest[1]}"
            return [spec, f"{spec}/spec", f"{spec}/plan", f"{spec}/state", "airsspec:///specs"]
        if rest[0].startswith("config"):
            return ["airsspec:///config"]
    return []
