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
