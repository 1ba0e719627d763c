"""Differential tests: specactor's openspec tools against the real OpenSpec CLI 1.13.2.

Every workspace in `workspaces.WORKSPACES` is written twice; the CLI (through `cli_driver.mjs`)
and specactor (through the in-memory server) run the same list, show, validate and archive
commands, and their JSON must be equal once durations, mtimes, the root path and the archive date
are normalised. Archive also compares every file the two left behind, byte for byte.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.openspec.cli import Driver, binary, openspec_cli
from tests.openspec.support import as_cli, call_tools, normalise, stamp, tree
from tests.openspec.workspaces import WORKSPACES, materialise

pytestmark = pytest.mark.slow

names = pytest.mark.parametrize("name", sorted(WORKSPACES))


@pytest.fixture(scope="module")
def cli() -> Driver:
    return openspec_cli()


def workspace(name: str, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    materialise(WORKSPACES[name](), root)
    stamp(root)
    return root


CliCall = tuple[str, str | None, dict[str, Any]]
ToolCall = tuple[str, dict[str, Any]]


def compare(cli: Driver, root: Path, runs: list[tuple[CliCall, ToolCall]], drop: tuple[str, ...] = ()) -> None:
    """Run each (CLI command, specactor tool call) pair on `root` and require equal JSON."""
    ours = call_tools(root, [call for _, call in runs])
    for ((command, item, options), call), result in zip(runs, ours, strict=True):
        expected, _ = cli.run(root, command, item, **options)
        got = as_cli(result)
        if isinstance(got, dict):
            got = {k: v for k, v in got.items() if k not in drop}
        assert normalise(got, root) == normalise(expected, root), (command, item, options, call)


@names
def test_list_and_list_specs_match_the_cli(name: str, cli: Driver, tmp_path: Path) -> None:
    root = workspace(name, tmp_path / name)
    compare(cli, root, [(("list", None, {}), ("list", {})),
                        (("list", None, {"specs": True}), ("list", {"specs": True}))])


@names
def test_show_matches_the_cli_for_every_change_and_spec(name: str, cli: Driver, tmp_path: Path) -> None:
    root = workspace(name, tmp_path / name)
    changes = [c["name"] for c in cli.run(root, "list")[0]["changes"]]
    specs = [s["id"] for s in cli.run(root, "list", specs=True)[0]["specs"]]
    runs: list[Any] = []
    for item in [*changes, *specs, "no-such-item", "user-auth"]:
        runs.append((("show", item, {}), ("show", {"item": item})))
        runs.append((("show", item, {"deltasOnly": True}), ("show", {"item": item, "deltasOnly": True})))
        for kind in ("change", "spec"):
            runs.append((("show", item, {"type": kind}), ("show", {"item": item, "type": kind})))
    compare(cli, root, runs, drop=("taskStatus",))


@names
def test_validate_matches_the_cli_in_bulk_and_item_by_item(name: str, cli: Driver, tmp_path: Path) -> None:
    root = workspace(name, tmp_path / name)
    runs: list[Any] = []
    for strict in (False, True):
        for scope in ("all", "changes", "specs"):
            options = {scope: True, "strict": strict}
            runs.append((("validate", None, options), ("validate", options)))
    changes = [c["name"] for c in cli.run(root, "list")[0]["changes"]]
    specs = [s["id"] for s in cli.run(root, "list", specs=True)[0]["specs"]]
    for item in [*changes, *specs, "nothing-here"]:
        runs.append((("validate", item, {}), ("validate", {"item": item})))
        runs.append((("validate", item, {"strict": True}), ("validate", {"item": item, "strict": True})))
        for kind in ("change", "spec"):
            runs.append((("validate", item, {"type": kind}), ("validate", {"item": item, "type": kind})))
    compare(cli, root, runs)


@names
def test_archive_matches_the_cli_json_and_writes_byte_identical_specs(name: str, cli: Driver, tmp_path: Path) -> None:
    base = workspace(name, tmp_path / "base")
    changes = [c["name"] for c in cli.run(base, "list")[0]["changes"]]
    for change in [*changes, "missing-change"]:
        for force in (True, False):
            theirs, ours = tmp_path / f"cli-{change}-{force}", tmp_path / f"ours-{change}-{force}"
            shutil.copytree(base, theirs, symlinks=True)
            shutil.copytree(base, ours, symlinks=True)
            expected, _ = cli.run(theirs, "archive", change, yes=True) if force else cli.run(theirs, "archive", change)
            if not force and any(s["code"] == "archive_confirmation_required" for s in expected.get("status", [])):
                shutil.rmtree(theirs)
                shutil.copytree(base, theirs, symlinks=True)
                expected, _ = cli.run(theirs, "archive", change, yes=True)
            dry, result = call_tools(ours, [("archive", {"changeId": change, "force": force, "dryRun": True}),
                                            ("archive", {"changeId": change, "force": force})])
            context = (change, force)
            assert normalise(as_cli(result), ours) == normalise(expected, theirs), context
            assert tree(ours) == tree(theirs), context
            if dry["success"]:
                assert {k: v for k, v in dry["data"].items() if k not in ("dryRun", "specs")} == result["data"]
            else:
                assert dry["error"] == result["error"], context


@names
def test_archive_without_spec_updates_matches_the_cli_skip_specs(name: str, cli: Driver, tmp_path: Path) -> None:
    base = workspace(name, tmp_path / "base")
    for change in [c["name"] for c in cli.run(base, "list")[0]["changes"]][:4]:
        theirs, ours = tmp_path / f"cli-{change}", tmp_path / f"ours-{change}"
        shutil.copytree(base, theirs)
        shutil.copytree(base, ours)
        expected, _ = cli.run(theirs, "archive", change, yes=True, skipSpecs=True)
        result = call_tools(ours, [("archive", {"changeId": change, "force": True, "updateSpecs": False})])[0]
        assert normalise(as_cli(result), ours) == normalise(expected, theirs), change
        assert tree(ours) == tree(theirs), change


def test_the_driver_answers_like_the_openspec_executable(cli: Driver, tmp_path: Path) -> None:
    root = workspace("basic", tmp_path / "basic")
    for args, (command, item, options) in [
        (["list", "--json"], ("list", None, {})),
        (["show", "add-two-factor-auth", "--json"], ("show", "add-two-factor-auth", {})),
        (["validate", "--all", "--json", "--no-interactive"], ("validate", None, {"all": True})),
    ]:
        real, code = binary(root, *args)
        driven, driven_code = cli.run(root, command, item, **options)
        assert normalise(real, root) == normalise(driven, root) and code == driven_code, args


def test_init_writes_the_files_openspec_init_writes(cli: Driver, tmp_path: Path) -> None:
    (tmp_path / "theirs").mkdir()
    binary(tmp_path / "theirs", "init", "--tools", "none")
    (tmp_path / "ours").mkdir()
    assert call_tools(tmp_path / "ours", [("init", {})])[0]["success"]
    assert tree(tmp_path / "ours") == tree(tmp_path / "theirs")
