"""Where things live, relative to the directory that holds `.airsspec/`."""

from __future__ import annotations

from typing import Final

AIRSSPEC: Final = ".airsspec"
CONFIG: Final = ".airsspec/config.toml"
SPECS: Final = ".airsspec/specs"
GITIGNORE: Final = ".airsspec/.gitignore"
# Bumped by every write (any process): lets a reader see "what changed" without a directory scan.
JOURNAL: Final = ".airsspec/.journal"

GITIGNORE_TEXT: Final = "# written by specactor: local bookkeeping, not part of the specs\n.journal\nlogs/\n"


def spec_dir(spec_id: str) -> str:
    return f"{SPECS}/{spec_id}/"


def spec_file(spec_id: str) -> str:
    return f"{SPECS}/{spec_id}/spec.md"


def plan_file(spec_id: str) -> str:
    return f"{SPECS}/{spec_id}/plan.md"


def state_file(spec_id: str) -> str:
    return f"{SPECS}/{spec_id}/state.toon"
