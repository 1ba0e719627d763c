"""The `dev` extra is a lock of the ranges we declare: every declared dependency is pinned there, at a
version its range allows. A range edited without `just lock` fails here, not on a newcomer's machine.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PYPROJECT = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())


def declared() -> list[Requirement]:
    project = PYPROJECT["project"]
    extras = project["optional-dependencies"]
    ranges = [*project["dependencies"], *extras["http"], *extras["dev-unpinned"]]
    return [req for req in map(Requirement, ranges) if canonicalize_name(req.name) != "specactor"]


def pins() -> dict[str, list[Requirement]]:
    out: dict[str, list[Requirement]] = {}
    for line in PYPROJECT["project"]["optional-dependencies"]["dev"]:
        req = Requirement(line)
        out.setdefault(canonicalize_name(req.name), []).append(req)
    return out


def test_every_dev_entry_but_the_project_itself_is_an_exact_pin() -> None:
    for name, reqs in pins().items():
        if name == "specactor":
            continue
        for req in reqs:
            assert [spec.operator for spec in req.specifier] == ["=="], f"{req} in the dev lock is not a pin"


def test_every_declared_dependency_is_pinned_at_a_version_its_range_allows() -> None:
    locked = pins()
    for req in declared():
        name = canonicalize_name(req.name)
        assert name in locked, f"{req} is declared but not in the dev lock: run `just lock`"
        for pin in locked[name]:
            if pin.marker is not None and not pin.marker.evaluate():
                continue
            version = next(iter(pin.specifier)).version
            assert req.specifier.contains(version, prereleases=True), (
                f"the lock pins {name}=={version}, outside the declared {req}: run `just lock`")


def test_the_broken_schema_generator_is_gone_for_good() -> None:
    # hypothesis-jsonschema 0.23 broke with hypothesis 6.170.12; tests/schema_strategies.py replaces it.
    assert "hypothesis-jsonschema" not in pins()
    assert "hypothesis-jsonschema" not in {canonicalize_name(r.name) for r in declared()}
