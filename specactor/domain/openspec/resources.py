"""The bodies of the eleven `openspec://` resources, read from a `Source`.

Documents fall back to templates (instructions, project); lists are markdown with links to the
item resources; an item that does not exist raises `Missing` with a sentence saying which file
was looked for.
"""

from __future__ import annotations

from specactor.domain.openspec import render, templates
from specactor.domain.openspec.change import extract_title
from specactor.domain.openspec.errors import Missing
from specactor.domain.openspec.model import Root
from specactor.domain.openspec.project import config_context
from specactor.domain.openspec.source import Source, Unreadable, archived_change_ids, join
from specactor.domain.openspec.workspace import list_changes, list_specs

CHANGE_DOCS = ("proposal", "tasks", "design")
_MIME = {".md": "text/markdown", ".yaml": "application/yaml", ".yml": "application/yaml"}


def _read(src: Source, rel: str) -> str | None:
    try:
        return src.text(rel)
    except Unreadable as err:
        raise Missing(f"openspec/{rel} cannot be read: {err}") from None


def instructions(src: Source) -> str:
    return _read(src, "AGENTS.md") or templates.INSTRUCTIONS


def project(src: Source) -> str:
    """project.md (0.x), else the `context:` of config.yaml (1.x), else the template."""
    text = _read(src, "project.md")
    if text is not None:
        return text
    config = _read(src, "config.yaml")
    context = config_context(config if config is not None else _read(src, "config.yml"))
    if context and context.strip():
        return f"# Project Context\n\n{context.rstrip()}\n"
    return templates.PROJECT


def specs_list(src: Source) -> str:
    listed = list_specs(src, Root("", "nearest")).specs or []
    return render.specs_index([(s.id, s.requirementCount) for s in listed])


def spec(src: Source, capability: str) -> str:
    text = _read(src, join("specs", capability, "spec.md"))
    if text is None:
        raise Missing(f"Spec '{capability}' not found: openspec/specs/{capability}/spec.md does not exist")
    return text


def changes_list(src: Source) -> str:
    rows = []
    for entry in sorted(list_changes(src, Root("", "nearest")).changes or [], key=lambda c: c.name):
        if entry.name.startswith("."):
            continue
        try:
            proposal = src.text(join("changes", entry.name, "proposal.md"))
        except Unreadable:
            proposal = None
        title = extract_title(proposal, entry.name) if proposal else entry.name
        rows.append((entry.name, title, entry.completedTasks, entry.totalTasks))
    return render.changes_index(rows)


def _require_change(src: Source, change: str) -> None:
    if change == "archive" or change.startswith(".") or src.kind(join("changes", change)) != "dir":
        raise Missing(f"Change '{change}' not found: openspec/changes/{change}/ does not exist")


def change_doc(src: Source, change: str, doc: str) -> str:
    _require_change(src, change)
    text = _read(src, join("changes", change, f"{doc}.md"))
    if text is None:
        raise Missing(f"Change '{change}' has no {doc}.md")
    return text


def change_files(src: Source, change: str) -> list[tuple[str, str, str]]:
    """Every file of a change as (uri, mime type, text): proposal, tasks, design first, then the rest."""
    _require_change(src, change)
    found: list[str] = []

    def walk(rel: str, prefix: str) -> None:
        for entry in src.entries(join("changes", change, rel)) or []:
            path = f"{prefix}{entry.name}"
            if entry.is_dir:
                walk(join(rel, entry.name), f"{path}/")
            elif src.kind(join("changes", change, path)) == "file":
                found.append(path)

    walk("", "")
    order = {f"{doc}.md": i for i, doc in enumerate(CHANGE_DOCS)}
    out = []
    for path in sorted(found, key=lambda p: (order.get(p, len(order)), p)):
        text = _read(src, join("changes", change, path))
        if text is not None:
            out.append(_file(change, path, text))
    return out


def change_file(src: Source, change: str, path: str) -> tuple[str, str, str]:
    """One file of a change, as `change_files` lists it: (uri, mime type, text)."""
    _require_change(src, change)
    rel = join("changes", change, path)
    if src.kind(rel) != "file":
        raise Missing(f"Change '{change}' has no file {path}: openspec/{rel} does not exist")
    text = _read(src, rel)
    if text is None:
        raise Missing(f"Change '{change}' has no file {path}: openspec/{rel} does not exist")
    return _file(change, path, text)


def _file(change: str, path: str, text: str) -> tuple[str, str, str]:
    stem = path[:-3] if path[:-3] in CHANGE_DOCS else path
    suffix = path[path.rfind("."):] if "." in path else ""
    return f"openspec://changes/{change}/{stem}", _MIME.get(suffix, "text/plain"), text


def archive_list(src: Source) -> str:
    """Archived changes, newest first (by their date prefix, then name)."""
    return render.archive_index(sorted(archived_change_ids(src), reverse=True))

