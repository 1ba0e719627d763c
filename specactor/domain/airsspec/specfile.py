"""`spec.md`: YAML front matter (title, description, category, state, dependencies, created_at,
updated_at) and the markdown body, kept byte for byte."""

from __future__ import annotations

from typing import Any

from specactor.domain.airsspec import frontmatter, vocab
from specactor.domain.airsspec.frontmatter import FrontMatter
from specactor.domain.airsspec.model import Dependency, SpecDoc, SpecMeta


def default_body(title: str, description: str) -> str:
    """The body of a spec created without content: its title as a heading and its description."""
    return f"# {title}\n\n{description}\n" if description.strip() else f"# {title}\n"


def render(doc: SpecDoc) -> str:
    meta = doc.meta
    data: dict[str, Any] = {
        "title": meta.title,
        "description": meta.description,
        "category": meta.category,
        "state": meta.state,
        "dependencies": [{"spec_id": d.spec_id, "kind": d.kind} for d in meta.dependencies],
        "created_at": meta.created_at,
        "updated_at": meta.updated_at,
    }
    return frontmatter.render(data, doc.content)


def parse(text: str, file: str) -> SpecDoc:
    """Raises:
        ValidationFailed: naming `file` and the line of the first problem.
    """
    fm = frontmatter.parse(text, file)
    title = _string(fm, "title", required=True)
    if not title.strip():
        raise fm.fail("title", "'title' cannot be empty")
    category = vocab.category(_string(fm, "category", default="feature"))
    if category is None:
        raise fm.fail("category", f"'category' must be one of {', '.join(vocab.CATEGORIES)} (or documentation)")
    state = vocab.lifecycle(_string(fm, "state", default="draft"))
    if state is None:
        raise fm.fail("state", f"'state' must be one of {', '.join(vocab.LIFECYCLES)}")
    created, updated = fm.timestamps()
    meta = SpecMeta(title=title, description=_string(fm, "description", default=""), category=category,
                    state=state, dependencies=_dependencies(fm), created_at=created, updated_at=updated)
    return SpecDoc(meta=meta, content=fm.body)


def _string(fm: FrontMatter, key: str, *, default: str | None = None, required: bool = False) -> str:
    value = fm.data.get(key)
    if value is None:
        if required or default is None:
            raise fm.fail(key, f"'{key}' is required")
        return default
    if not isinstance(value, str):
        raise fm.fail(key, f"'{key}' must be a string")
    return value


def _dependencies(fm: FrontMatter) -> tuple[Dependency, ...]:
    raw = fm.data.get("dependencies")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fm.fail("dependencies", "'dependencies' must be a list of {spec_id, kind}")
    out = []
    for item in raw:
        if isinstance(item, str):  # a bare id: a hard dependency
            item = {"spec_id": item, "kind": "hard"}
        if not isinstance(item, dict) or not isinstance(item.get("spec_id"), str) or not item["spec_id"]:
            raise fm.fail("dependencies", "each dependency must be a mapping with a 'spec_id' string")
        kind = vocab.dependency_kind(str(item.get("kind", "hard")))
        if kind is None or set(item) - {"spec_id", "kind"}:
            raise fm.fail("dependencies", f"dependency kind must be one of {', '.join(vocab.DEPENDENCY_KINDS)} "
                          "(or blocked_by, related_to), and a dependency has only spec_id and kind")
        out.append(Dependency(spec_id=item["spec_id"], kind=kind))
    return tuple(out)
