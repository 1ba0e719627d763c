"""Building one unit's graph: keyed nodes with the unit's labels, edges, and guarded parsing.

`UnitBuilder.node` takes a node's full key path (children extend it) and stores it under its
shortened key. `guarded` is the one place a parser's failure is absorbed: a document that does
not parse keeps its own node, minimal, and loses only its children.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

import msgspec

from specactor.domain.graph.keys import shorten
from specactor.domain.graph.model import Edge, Graph, Node
from specactor.domain.graph.reader import Reader

T = TypeVar("T")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
Source = Literal["openspec", "airsspec"]


class Ref(msgspec.Struct, frozen=True, gc=False):
    """A node as a parent: its full key path (what children extend) and its stored key."""

    path: str
    key: str

    def child(self, segment: str) -> str:
        return f"{self.path}/{segment}"


def labels_for(workspace_id: str, source: Source) -> tuple[str, ...]:
    return tuple(sorted({f"workspace:{workspace_id}", "specactor", f"source:{source}"}))


class UnitBuilder:
    def __init__(self, workspace_id: str, unit: str, source: Source) -> None:
        self.workspace_id = workspace_id
        self.unit = unit
        self.labels = labels_for(workspace_id, source)
        self.graph = Graph()

    def root(self, segment: str) -> str:
        return f"{self.workspace_id}/{segment}"

    def node(self, path: str, type_: str, properties: dict[str, Any], status: str | None = None,
             parent: Ref | None = None, relation: str = "") -> Ref:
        """Add the node at key path `path`; with `parent`, also the edge `parent -relation-> node`."""
        ref = Ref(path, shorten(path))
        self.graph.add_node(Node(key=ref.key, type=type_, unit=self.unit, properties=properties,
                                 labels=self.labels, status=status))
        if parent is not None:
            self.graph.add_edge(Edge(type=relation, src=parent.key, dst=ref.key, unit=self.unit))
        return ref


def clean(text: str) -> str:
    """Text Emergent can store: no NUL (Postgres jsonb refuses `\\u0000`), no lone surrogates
    (a reader decoding with `surrogateescape` leaves them; JSON cannot encode them)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode()
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text


def read(reader: Reader, rel: str) -> str | None:
    text = reader.text(rel)
    return None if text is None else clean(text)


def guarded(parse: Callable[[], T]) -> T | None:
    """`parse()`, or None when it fails.

    Any exception, on purpose: the projection runs on whatever is on disk (a file mid-write,
    binary junk), and a parser that fails on one document, by its own refusal or on input it
    never expected, must cost that document's contents, never the sync of the whole workspace.
    """
    try:
        return parse()
    except Exception:
        return None


def put(properties: dict[str, Any], name: str, value: Any) -> None:
    """Set an optional property: absent values are left out, never sent as "" or null."""
    if value:
        properties[name] = value
