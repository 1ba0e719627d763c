"""`just lock`: pin the `dev` extra to one resolved set of versions, for every platform.

pyproject.toml keeps what we depend on as ranges in the `dev-unpinned` extra (and the runtime
dependencies as ranges, for people who install the package). This resolves them with
`uv pip compile --universal` and writes the result, every package of the closure at one version
with its environment markers, as the `dev` extra. So the README's plain `pip install -e '.[dev]'`
installs exactly the locked versions, upgrading or downgrading what a machine already has.
`--check` only says whether the lock is still what the ranges resolve to today; `--compare` lists
the installed packages whose versions differ from the lock (what `just test-latest` tries anew).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
BLOCK = re.compile(r"^dev = \[\n.*?^\]\n", re.DOTALL | re.MULTILINE)
HEAD = ("# The lock: written by `just lock` from dev-unpinned (uv pip compile --universal). Edit the ranges,\n"
        "# not this list.\n")


def resolve(pyproject: Path) -> list[str]:
    """The pinned requirement lines that `dev-unpinned` resolves to today."""
    out = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "compile", "--universal", "--python-version", "3.11", "--quiet",
         "--no-header", "--no-annotate", "--extra", "dev-unpinned", str(pyproject)],
        check=True, capture_output=True, text=True, cwd=pyproject.parent).stdout
    return [line.strip() for line in out.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def render(pins: list[str]) -> str:
    lines = "".join(f'    "{pin}",\n' for pin in ['specactor[http,vector,langchain]', *pins])
    return f"{HEAD}dev = [\n{lines}]\n"


def compare(text: str) -> list[str]:
    """`name: locked -> installed` for each locked package installed here at another version."""
    from packaging.requirements import Requirement

    block = BLOCK.search(text)
    assert block is not None
    out = []
    for line in re.findall(r'^    "(.+)",$', block.group(0), re.MULTILINE):
        req = Requirement(line)
        pinned = next((spec.version for spec in req.specifier if spec.operator == "=="), None)
        if pinned is None or (req.marker is not None and not req.marker.evaluate()):
            continue
        try:
            installed = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if installed != pinned:
            out.append(f"{req.name}: {pinned} -> {installed}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lock", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the lock differs from a fresh resolve")
    parser.add_argument("--compare", action="store_true",
                        help="list installed packages whose versions differ from the lock")
    args = parser.parse_args(argv)
    text = PYPROJECT.read_text()
    if args.compare:
        changed = compare(text)
        print("newer than the lock:" if changed else "every installed package is at its locked version")
        print("\n".join(f"  {line}" for line in changed))
        return 0
    text_without_head = text.replace(HEAD, "")
    if not BLOCK.search(text_without_head):
        print("pyproject.toml has no `dev = [` block to write the lock into", file=sys.stderr)
        return 2
    new = BLOCK.sub(lambda _: render(resolve(PYPROJECT)), text_without_head, count=1)
    if args.check:
        if new != text:
            print("the dev lock differs from what dev-unpinned resolves to today: run `just lock`")
            return 1
        print("the dev lock is current")
        return 0
    PYPROJECT.write_text(new)
    print(f"wrote the dev lock into {PYPROJECT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
