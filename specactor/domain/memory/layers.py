"""The seven memory layers, the identifiers each needs, and who can see what.

Precedence runs from the most specific layer (agent, 1) to the least (company, 7). A memory
belongs to one *scope*: its layer plus the values of the identifiers that layer requires
(`["alice"]`, the userId, for the user layer). Searches and writes name scopes through these keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Final, Literal, get_args

import msgspec
from msgspec import Meta

Layer = Literal["agent", "user", "session", "project", "team", "org", "company"]
LAYERS: Final[tuple[Layer, ...]] = get_args(Layer)
PRECEDENCE: Final[dict[str, int]] = {layer: rank for rank, layer in enumerate(LAYERS, start=1)}

Ident = Annotated[str, Meta(min_length=1, max_length=200, description="An identifier value")]

# camelCase identifier name -> the layers that need it, in the reference's table.
REQUIRED: Final[dict[Layer, tuple[str, ...]]] = {
    "agent": ("agentId", "userId"),
    "user": ("userId",),
    "session": ("userId", "sessionId"),
    "project": ("projectId",),
    "team": ("teamId",),
    "org": ("orgId",),
    "company": ("companyId",),
}


class Identifiers(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True, rename="camel"):
    """Who a memory belongs to. Any value given in a call overrides the session's default."""

    agent_id: Ident | None = None
    user_id: Ident | None = None
    session_id: Ident | None = None
    project_id: Ident | None = None
    team_id: Ident | None = None
    org_id: Ident | None = None
    company_id: Ident | None = None

    def as_dict(self) -> dict[str, str]:
        """The identifiers that are set, by their camelCase names."""
        out: dict[str, str] = msgspec.to_builtins(self)
        return out


class MissingIdentifier(Exception):
    """A layer was named whose identifiers are neither given nor configured."""

    def __init__(self, layer: str, name: str) -> None:
        super().__init__(f"the {layer} layer needs '{name}', which was neither given in 'identifiers' nor "
                         f"configured")
        self.layer = layer
        self.name = name


def merge(defaults: Identifiers, given: Identifiers | None) -> Identifiers:
    """`defaults` with every identifier set in `given` replacing its default."""
    if given is None:
        return defaults
    return msgspec.convert({**defaults.as_dict(), **given.as_dict()}, Identifiers)


def accessible(ids: Identifiers) -> list[Layer]:
    """The layers whose identifiers are all present, in precedence order."""
    return _accessible(ids.as_dict())


def _accessible(have: dict[str, str]) -> list[Layer]:
    return [layer for layer in LAYERS if all(name in have for name in REQUIRED[layer])]


def scope_key(layer: Layer, ids: Identifiers) -> str:
    """The canonical key of `layer`'s scope under `ids`: its identifier values as a JSON array,
    e.g. `["claude","alice"]` for the agent layer (unambiguous whatever the values hold).

    Raises:
        MissingIdentifier: naming the first identifier the layer needs that is not set.
    """
    return _key(layer, ids.as_dict())


def search_scopes(ids: Identifiers, layers: Sequence[Layer] | None = None) -> list[tuple[Layer, str]]:
    """The (layer, scope key) pairs a search covers, in precedence order: those of `layers`, or of
    every layer `accessible` under `ids`. `ids` is read once for all of them (each of a burst's
    searches paid a conversion per layer).

    Raises:
        MissingIdentifier: a layer of `layers` needs an identifier that is not set.
    """
    have = ids.as_dict()
    chosen = sorted(set(layers), key=LAYERS.index) if layers is not None else _accessible(have)
    return [(layer, _key(layer, have)) for layer in chosen]


def _key(layer: Layer, have: dict[str, str]) -> str:
    parts = []
    for name in REQUIRED[layer]:
        if name not in have:
            raise MissingIdentifier(layer, name)
        parts.append(have[name])
    return msgspec.json.encode(parts).decode()


def scope_identifiers(layer: Layer, ids: Identifiers) -> dict[str, str]:
    """Only the identifiers `layer` requires: what a memory of that layer records as its owner."""
    have = ids.as_dict()
    return {name: have[name] for name in REQUIRED[layer] if name in have}
