"""The lifecycle state machine (AirsSpec `state/machine.rs`).

draft → active; active → done | blocked | cancelled; blocked → active; done → archived;
cancelled → archived; archived is final. No state may transition to itself.
"""

from __future__ import annotations

from typing import Final

from specactor.domain.airsspec.errors import InvalidTransition
from specactor.domain.airsspec.vocab import Lifecycle

TRANSITIONS: Final[dict[Lifecycle, tuple[Lifecycle, ...]]] = {
    "draft": ("active",),
    "active": ("done", "blocked", "cancelled"),
    "blocked": ("active",),
    "done": ("archived",),
    "cancelled": ("archived",),
    "archived": (),
}


def valid_transitions(state: Lifecycle) -> list[Lifecycle]:
    return list(TRANSITIONS[state])


def check_transition(from_state: Lifecycle, to_state: Lifecycle) -> None:
    """Raises:
        InvalidTransition: naming both states and the valid targets.
    """
    if to_state not in TRANSITIONS[from_state]:
        raise InvalidTransition(from_state, to_state, list(TRANSITIONS[from_state]))
