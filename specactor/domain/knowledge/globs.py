"""Path globs, as `appliesTo` and file constraints use them.

`*` matches within one path segment, `?` one character, `[abc]`/`[!abc]` a class, `{a,b}` either
alternative, and `**` any number of whole segments (`src/**/*.py`, `docs/**`). A glob without
`/` matches the file name at any depth, as in `.gitignore` (`*.py` is every Python file).
Paths are compared as given, `/`-separated, with a leading `./` ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache


class BadGlob(ValueError):
    pass


def _translate(glob: str) -> str:
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**", i):
            at_start = i == 0 or glob[i - 1] == "/"
            if at_start and glob.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            if at_start and i + 2 == n:
                out.append(".*")
                i += 2
                continue
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = glob.find("]", i + 2 if glob.startswith("[!", i) or glob.startswith("[]", i) else i + 1)
            if end < 0:
                raise BadGlob(f"unclosed '[' in glob {glob!r}")
            body = glob[i + 1:end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif c == "{":
            end = glob.find("}", i)
            if end < 0:
                raise BadGlob(f"unclosed '{{' in glob {glob!r}")
            options = glob[i + 1:end].split(",")
            out.append("(?:" + "|".join(_translate(o) for o in options) + ")")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


@lru_cache(maxsize=4096)
def compile_glob(glob: str) -> re.Pattern[str]:
    """The glob as a compiled regex matched with `fullmatch` against a normalised path.

    Raises:
        BadGlob: an unclosed `[` or `{`, or an empty glob.
    """
    text = glob.strip().removeprefix("./")
    if not text:
        raise BadGlob("an empty glob matches nothing")
    anywhere = "/" not in text.rstrip("/")
    body = _translate(text.lstrip("/"))
    try:
        return re.compile(("(?:.*/)?" if anywhere else "") + body, re.DOTALL)
    except re.error as err:
        raise BadGlob(f"glob {glob!r} is not valid: {err}") from None


def normalise(path: str) -> str:
    return path.removeprefix("./")


@lru_cache(maxsize=4096)
def matcher(glob: str) -> Callable[[str], bool]:
    """A fast test of a normalised path: a glob without `/` only looks at the file name.

    Raises:
        BadGlob: as `compile_glob`.
    """
    compile_glob(glob)  # validates
    text = glob.strip().removeprefix("./")
    if "/" not in text.rstrip("/"):
        name = re.compile(_translate(text), re.DOTALL)
        return lambda path: name.fullmatch(path.rpartition("/")[2]) is not None
    full = compile_glob(glob)
    return lambda path: full.fullmatch(path) is not None


def matches(glob: str, path: str) -> bool:
    return matcher(glob)(normalise(path))
