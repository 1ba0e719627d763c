"""A target's new text: pure functions from a file's current text (None: no file) to what install
or uninstall leaves (None: no file).

Install changes only what differs, so installing twice leaves the bytes as they were. Uninstall
removes only what install adds: specactor's members, list items, hook groups, block or owned
file, then the objects and arrays that this leaves empty; a JSON file left as empty as install
would have created it is removed.
"""

from __future__ import annotations

import json
from typing import Any

from specactor.install import toml_block
from specactor.install.clients import (
    HookGroup,
    JsonTarget,
    ListItem,
    Setting,
    Target,
    TomlTarget,
    is_specactor_hook,
)
from specactor.install.jsonc import Document, JsoncError, has_comments


class MergeError(ValueError):
    """A file that cannot be merged safely: it does not parse, or holds something in specactor's way."""


def install(target: Target, text: str | None) -> str:
    if isinstance(target, JsonTarget):
        return _install_json(target, text)
    if isinstance(target, TomlTarget):
        try:
            return toml_block.put(text or "", target.body, "(written by `specactor install codex`; "
                                  "`specactor uninstall codex` removes it)")
        except toml_block.TomlBlockError as err:
            raise MergeError(str(err)) from None
    if text is not None and text != target.content and not _owned(text):
        raise MergeError("the file exists and is not specactor's; move it away or remove it, then install again")
    return target.content


def uninstall(target: Target, text: str | None) -> str | None:
    if text is None:
        return None
    if isinstance(target, JsonTarget):
        return _uninstall_json(target, text)
    if isinstance(target, TomlTarget):
        rest = toml_block.text_without(text)
        return None if not rest.strip() else rest
    if text == target.content or text in target.variants:
        return None
    if _owned(text):
        raise MergeError("changed since specactor installed it; left in place (remove it yourself)")
    return text


def _owned(text: str) -> bool:
    return "specactor: installed by `specactor install" in text.split("\n", 1)[0]


def _document(text: str) -> Document:
    try:
        doc = Document(text)
    except JsoncError as err:
        raise MergeError(f"not valid JSON ({err}); fix it first") from None
    if doc.root.members is None:
        raise MergeError("its top level is not a JSON object")
    return doc


def _install_json(target: JsonTarget, text: str | None) -> str:
    if text is None or not text.strip():
        text = json.dumps(target.skeleton, indent=2) + "\n" if target.skeleton else "{}\n"
    doc = _document(text)
    try:
        for edit in target.edits:
            if isinstance(edit, Setting):
                doc.set(edit.path, edit.value)
            elif isinstance(edit, ListItem):
                current = doc.get(edit.path)
                if not isinstance(current, list) or edit.item not in current:
                    doc.append(edit.path, edit.item)
            else:
                _install_group(doc, edit)
    except JsoncError as err:
        raise MergeError(str(err)) from None
    return doc.text


def _ours(group: Any) -> bool:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return bool(handlers) and isinstance(handlers, list) and all(
        isinstance(h, dict) and is_specactor_hook(h.get("command")) for h in handlers)


def _install_group(doc: Document, edit: HookGroup) -> None:
    path = ("hooks", edit.event)
    groups = doc.get(path)
    if groups is not None and not isinstance(groups, list):
        raise JsoncError(f"'hooks.{edit.event}' is not an array")
    mine = [i for i, group in enumerate(groups or []) if _ours(group)]
    if not mine:
        doc.append(path, edit.group)
        return
    for index in reversed(mine[1:]):  # one group per event: drop duplicates a hand edit left
        doc.remove(path, index)
    if doc.get(path)[mine[0]] != edit.group:
        doc.replace_item(path, mine[0], edit.group)


def _uninstall_json(target: JsonTarget, text: str) -> str | None:
    doc = _document(text)
    for edit in target.edits:
        if isinstance(edit, Setting):
            doc.remove(edit.path)
            doc.prune(edit.path[:-1])
        elif isinstance(edit, ListItem):
            current = doc.get(edit.path)
            while isinstance(current, list) and edit.item in current:
                doc.remove(edit.path, current.index(edit.item))
                current = doc.get(edit.path)
            doc.prune(edit.path)
        else:
            path = ("hooks", edit.event)
            groups = doc.get(path)
            if isinstance(groups, list):
                for index in reversed([i for i, group in enumerate(groups) if _ours(group)]):
                    doc.remove(path, index)
                doc.prune(path)
    if doc.root.to_python() in ({}, target.skeleton) and not has_comments(doc.text):
        return None
    return doc.text
