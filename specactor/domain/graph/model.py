"""The graph a workspace implies: `Node`s (Emergent objects) and `Edge`s (relationships), keyed.

A node's `key` is its identity in Emergent and its `digest` the hash of everything that is
mirrored (type, properties, labels, status), so a sync compares digests instead of objects.
Every node and edge names the `unit` that projected it; two units never share a key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import msgspec


class Node(msgspec.Struct, frozen=True, kw_only=True):
    """One Emergent object: `properties` hold only the pack type's property names (plus `tags`)."""

    key: str
    type: str
    unit: str
    properties: dict[str, Any]
    labels: tuple[str, ...]
    status: str | None = None

    def digest(self) -> str:
        """sha256 hex of what Emergent stores for the object; `key` and `unit` are left out, so a
        node that moves to another key (a renamed requirement) keeps its digest."""
        payload = msgspec.json.encode((self.type, self.properties, self.labels, self.status), order="sorted")
        return hashlib.sha256(payload).hexdigest()


class Edge(msgspec.Struct, frozen=True, kw_only=True):
    """One relationship between two nodes of the same unit, by their keys."""

    type: str
    src: str
    dst: str
    unit: str

    @property
    def key(self) -> str:
        # Keys never hold '|' (names are escaped, workspace ids cannot), so this splits back uniquely.
        return f"{self.type}|{self.src}|{self.dst}"


class Graph(msgspec.Struct, kw_only=True):
    """Nodes and edges by key. Mutable while a projection builds it; treat a returned one as a value."""

    nodes: dict[str, Node] = msgspec.field(default_factory=dict)
    edges: dict[str, Edge] = msgspec.field(default_factory=dict)

    def add_node(self, node: Node) -> None:
        """Raises:
            ValueError: another node already holds the key (two units, or one unit twice).
        """
        if node.key in self.nodes and self.nodes[node.key] != node:
            raise ValueError(f"two nodes with the key {node.key!r}")
        self.nodes[node.key] = node

    def add_edge(self, edge: Edge) -> None:
        """Raises:
            ValueError: the same relationship was already projected by another unit.
        """
        key = edge.key
        if key in self.edges and self.edges[key] != edge:
            raise ValueError(f"two edges with the key {key!r}")
        self.edges[key] = edge

    def update(self, other: Graph) -> None:
        """Add every node and edge of `other` in place.

        Raises:
            ValueError: a key of `other` is already here with another value.
        """
        for node in other.nodes.values():
            self.add_node(node)
        for edge in other.edges.values():
            self.add_edge(edge)

    def merge(self, other: Graph) -> Graph:
        """A new graph holding both (see `update`)."""
        merged = Graph(nodes=dict(self.nodes), edges=dict(self.edges))
        merged.update(other)
        return merged

    def units(self) -> set[str]:
        return {n.unit for n in self.nodes.values()} | {e.unit for e in self.edges.values()}

    def by_unit(self) -> dict[str, Graph]:
        """The graph split by the unit that projected each node and edge."""
        out: dict[str, Graph] = {}
        for node in self.nodes.values():
            out.setdefault(node.unit, Graph()).nodes[node.key] = node
        for key, edge in self.edges.items():
            out.setdefault(edge.unit, Graph()).edges[key] = edge
        return out

    def select(self, units: Iterable[str]) -> Graph:
        """Only what the given units projected."""
        wanted = set(units)
        return Graph(nodes={k: n for k, n in self.nodes.items() if n.unit in wanted},
                     edges={k: e for k, e in self.edges.items() if e.unit in wanted})

    def without(self, units: Iterable[str]) -> Graph:
        """Everything but what the given units projected (with `merge`, a unit's part is replaced)."""
        dropped = set(units)
        return Graph(nodes={k: n for k, n in self.nodes.items() if n.unit not in dropped},
                     edges={k: e for k, e in self.edges.items() if e.unit not in dropped})

    def digests(self) -> dict[str, str]:
        """Node key -> digest."""
        return {k: n.digest() for k, n in self.nodes.items()}
