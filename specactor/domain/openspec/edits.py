"""Planning the small writes: `init`, `update_project_context` and `task_complete`.

Each function reads what it needs from a `Source` and returns the files to write (paths relative
to `openspec/`), or raises `EditRefused` naming why; the toolset commits the result in one
storage transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from specactor.domain.openspec import templates
from specactor.domain.openspec.errors import EditRefused
from specactor.domain.openspec.project import Mode, config_context, edit_markdown, set_config_context
from specactor.domain.openspec.source import Source, join
from specactor.domain.openspec.tasks import Task, TaskNotFound, count_tasks, tick

INIT_FILES = {"config.yaml": templates.CONFIG_YAML, "specs/.gitkeep": "", "changes/archive/.gitkeep": ""}
_MARKERS = ("config.yaml", "config.yml", "project.md", "AGENTS.md", "specs", "changes")


def plan_init(src: Source) -> dict[str, str]:
    """The 1.x layout `openspec init` creates (config.yaml, specs/, changes/archive/).

    Raises:
        EditRefused: "exists" when the directory already holds an OpenSpec workspace.
    """
    present = [m for m in _MARKERS if src.kind(m) is not None]
    if present:
        raise EditRefused("exists", f"OpenSpec is already initialised here (found openspec/{present[0]})")
    return dict(INIT_FILES)


@dataclass(frozen=True)
class ContextEdit:
    file: str  # relative to openspec/
    text: str | None  # None: nothing to write
    mode: Mode


def plan_project_context(src: Source, content: str | None, merge: bool, section: str | None) -> ContextEdit:
    """project.md when it exists (or when nothing else does), else `context:` in config.yaml."""
    mode: Mode = "section" if section is not None else "append" if merge else "replace"
    if src.kind("") != "dir":
        raise EditRefused("missing", "no openspec/ directory; call the init tool first")
    markdown = src.text("project.md")
    config_file = next((f for f in ("config.yaml", "config.yml") if src.kind(f) == "file"), None)
    if markdown is None and config_file is not None:
        config = src.text(config_file) or ""
        current = config_context(config) or ""
        if content is None and mode != "section":
            return ContextEdit(config_file, None, mode)
        updated = edit_markdown(current, content, mode, section)
        try:
            return ContextEdit(config_file, set_config_context(config, updated), mode)
        except ValueError as err:
            raise EditRefused("invalid", str(err)) from None
    if content is None and mode != "section":
        return ContextEdit("project.md", None, mode)
    return ContextEdit("project.md", edit_markdown(markdown or "", content, mode, section), mode)


@dataclass(frozen=True)
class TaskEdit:
    text: str
    task: Task
    already_done: bool
    total: int
    completed: int


def plan_task_complete(src: Source, change: str, task: str) -> TaskEdit:
    """Tick one task of a change's tasks.md.

    Raises:
        EditRefused: "missing" for an unknown change, a change without tasks.md, or an unknown task.
    """
    if change == "archive" or src.kind(join("changes", change)) != "dir":
        raise EditRefused("missing", f"Change '{change}' not found in openspec/changes/")
    current = src.text(join("changes", change, "tasks.md"))
    if current is None:
        raise EditRefused("missing", f"Change '{change}' has no tasks.md")
    try:
        text, found, done = tick(current, task)
    except TaskNotFound as err:
        raise EditRefused("missing", str(err)) from None
    total, completed = count_tasks(text)
    return TaskEdit(text, found, done, total, completed)
