"""Path globs, as `appliesTo` and file constraints use them.

`*` matches within one path segment, `?` one character, `[abc]`/`[!abc]` a class, `{a,b}` either
alternative, and `**` any number of whole segments (`src/**/*.py`, `docs/**`). A glob without
`/` matches the file name at any depth, as in `.gitignore` (`*.py` is every Python file).
Paths are compared as given, `/`-separated, with a leading `./` ignored. A glob becomes an RE2
regex (patterns.py): `*a*a*a*b` against a long path would take Python's `re` hours.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from specactor.domain.knowledge.patterns import Refused, Regex, regex


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


def _compiled(glob: str, text: str) -> Regex:
    compiled = regex(text, "s")  # `s`: re.DOTALL, as globs have always been matched
    if isinstance(compiled, Refused):
        raise BadGlob(f"glob {glob!r} is not valid: {compiled.reason}")
    return compiled


@lru_cache(maxsize=4096)
def compile_glob(glob: str) -> Regex:
    """The glob as a compiled regex matched with `fullmatch` against a normalised path.

    Raises:
        BadGlob: an unclosed `[` or `{`, an empty glob, or a class RE2 refuses (`[z-a]`).
    """
    text = glob.strip().removeprefix("./")
    if not text:
        raise BadGlob("an empty glob matches nothing")
    anywhere = "/" not in text.rstrip("/")
    body = _translate(text.lstrip("/"))
    return _compiled(glob, ("(?:.*/)?" if anywhere else "") + body)


def normalise(path: str) -> str:
    return path.removeprefix("./")


def _plain(text: str) -> bool:
    return not any(c in "*?[{" for c in text)


@lru_cache(maxsize=4096)
def matcher(glob: str) -> Callable[[str], bool]:
    """A fast test of a normalised path: a glob without `/` only looks at the file name.

    The commonest globs (`*.py`, `src/**`, a plain name) are string tests: a call into RE2 costs
    0.7 µs more than one into `re`, and a check makes one per file per glob (9,000 in the bench's).

    Raises:
        BadGlob: as `compile_glob`.
    """
    compile_glob(glob)  # validates
    text = glob.strip().removeprefix("./")
    if "/" not in text.rstrip("/"):
        if "/" not in text and _plain(text.removeprefix("*")):
            rest = text.removeprefix("*")  # no `/`: the path ends so exactly when its name does
            return (lambda path: path.endswith(rest)) if text.startswith("*") else \
                (lambda path: path.rpartition("/")[2] == text)
        name = _compiled(glob, _translate(text))
        return lambda path: name.fullmatch(path.rpartition("/")[2])
    rooted = text.lstrip("/")
    if rooted.endswith("/**") and _plain(rooted[:-3]):
        return lambda path: path.startswith(rooted[:-2])
    return compile_glob(glob).fullmatch


def matches(glob: str, path: str) -> bool:
    return matcher(glob)(normalise(path))
