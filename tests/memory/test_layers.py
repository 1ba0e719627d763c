"""Memory layers: the scopes a search covers are each layer's scope key, read from the identifiers once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from specactor.domain.memory.layers import (
    LAYERS,
    REQUIRED,
    Identifiers,
    Layer,
    MissingIdentifier,
    accessible,
    scope_key,
    search_scopes,
)

NAMES = sorted({name for names in REQUIRED.values() for name in names})
identifiers = st.dictionaries(st.sampled_from(NAMES), st.text(min_size=1, max_size=8)).map(
    lambda given: Identifiers(**{f"{n[:-2]}_id": v for n, v in given.items()}))


def one_by_one(ids: Identifiers, layers: list[Layer] | None) -> list[tuple[Layer, str]] | str:
    chosen = sorted(set(layers), key=LAYERS.index) if layers is not None else accessible(ids)
    try:
        return [(layer, scope_key(layer, ids)) for layer in chosen]
    except MissingIdentifier as err:
        return str(err)


@given(identifiers, st.none() | st.lists(st.sampled_from(LAYERS), max_size=9))
def test_search_scopes_are_each_layers_scope_key_in_precedence_order(ids: Identifiers, layers: list[Layer] | None,
                                                                    ) -> None:
    try:
        got: list[tuple[Layer, str]] | str = search_scopes(ids, layers)
    except MissingIdentifier as err:
        got = str(err)
    assert got == one_by_one(ids, layers)


def test_a_search_of_every_accessible_layer_covers_the_users_and_the_agents() -> None:
    ids = Identifiers(agent_id="claude", user_id="alice")
    assert search_scopes(ids) == [("agent", '["claude","alice"]'), ("user", '["alice"]')]


def test_a_named_layer_without_its_identifiers_is_refused_naming_the_identifier() -> None:
    try:
        search_scopes(Identifiers(user_id="alice"), ["team", "user"])
    except MissingIdentifier as err:
        assert (err.layer, err.name) == ("team", "teamId")
    else:
        raise AssertionError("no MissingIdentifier")
