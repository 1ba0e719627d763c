"""Regexes from the knowledge repository, run by RE2 in time linear in the text they search.

A knowledge repository is shared input: one crafted pattern (`(a+)+$`) must not hang every server
that reads it, so constraint regexes and globs never reach Python's backtracking `re`. `regex()`
returns a `Refused` carrying RE2's reason for a pattern it will not run (a backreference, a
lookaround, a syntax error); callers report it and carry on, nothing here raises for a bad pattern.

Python spellings RE2 lacks are rewritten first: `\\Z` → `\\z`, `\\uXXXX`/`\\UXXXXXXXX` → `\\x{…}`,
and `{,n}` → `{0,n}` (which RE2 would otherwise read as literal text). Texts are searched as
UTF-8 bytes, so a span is a pair of byte offsets into `encode(text)`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information; this module is its typed face
from re2 import _re2  # type: ignore[import-untyped]

# RE2's memory budget per compiled pattern, program and DFA cache together. A program that does
# not fit is refused ("pattern too large"); a search whose DFA outgrows the rest falls back to the
# NFA, linear but slower the larger the program: the worst we built, `(?s)(?:.{1000}a|.{999}b|…)!`
# (56,000 instructions), takes 20 s per 256 KiB, in a worker thread (RE2 releases the GIL). A
# larger budget admits larger programs and so a slower worst case; 1 MiB still fits `\pL{50}` and
# keeps `regex`'s 256 cached patterns under 256 MiB however hostile the repository.
MAX_MEM: Final = 1 << 20
_OPEN_MIN: Final = re.compile(r"\{,(\d*)\}")  # a fixed, linear pattern over our own input
_HEX: Final = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True, slots=True)
class Refused:
    """A pattern RE2 will not run, and its reason in RE2's words."""

    pattern: str
    reason: str


# The binding's own RE2 object, not the `re`-like wrapper around it: the wrapper builds a generator
# and a match object per call, which doubled the cost of the short full matches a check makes
# thousands of (a path against a glob: 1.6 µs through the wrapper, 0.7 µs here).
_UNANCHORED: Final = _re2.RE2.Anchor.UNANCHORED
_BOTH: Final = _re2.RE2.Anchor.ANCHOR_BOTH


class Regex:
    """A compiled pattern. Whole matches only: groups are parsed but never captured."""

    __slots__ = ("_re", "pattern")

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self._re = compiled

    def search(self, data: bytes) -> bool:
        """Whether the pattern matches anywhere in `data` (UTF-8, as `encode` gives it)."""
        found: int = self._re.Match(_UNANCHORED, data, 0, len(data))[0][0]
        return found >= 0

    def fullmatch(self, text: str) -> bool:
        """Whether the pattern matches the whole of `text`."""
        data = encode(text)
        found: int = self._re.Match(_BOTH, data, 0, len(data))[0][0]
        return found >= 0

    def spans(self, data: bytes) -> Iterator[tuple[int, int]]:
        """(start, end) byte offsets of each match in `data`, left to right, as `re.finditer` finds them."""
        pos, end = 0, len(data)
        while pos <= end:
            start, stop = self._re.Match(_UNANCHORED, data, pos, end)[0]
            if start < 0:
                return
            yield start, stop
            pos = stop
            if stop == start:  # an empty match: go on from the next character (not byte) after it
                pos += 1
                while pos < end and 0x80 <= data[pos] < 0xC0:
                    pos += 1


def encode(text: str) -> bytes:
    """`text` as the bytes a `Regex` searches; a lone surrogate passes through instead of raising."""
    return text.encode("utf-8", "surrogatepass")


def _options() -> Any:
    options = re2.Options()
    options.max_mem = MAX_MEM
    options.log_errors = False  # a refusal goes back to the caller, not to stderr
    options.never_capture = True  # only whole matches are used: no capture bookkeeping
    return options


_OPTIONS: Final = _options()


def _compile(pattern: bytes) -> tuple[Any, str]:
    """RE2's object for `pattern`, and its reason when it refuses (then the object is unusable)."""
    compiled = _re2.RE2(pattern, _OPTIONS)
    if compiled.ok():
        return compiled, ""
    reason: bytes = compiled.error()
    return compiled, reason.decode("utf-8", "replace")


def python_spellings(pattern: str) -> str:
    """`pattern` with the Python spellings RE2 lacks (`\\Z`, `\\u`, `\\U`, `{,n}`) in RE2's."""
    if "\\" not in pattern and "{," not in pattern:
        return pattern  # the common case: nothing to rewrite
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            escaped = pattern[i + 1]
            width = {"u": 4, "U": 8}.get(escaped, 0)
            digits = pattern[i + 2:i + 2 + width]
            if escaped == "Z" and not in_class:
                out.append("\\z")
            elif width and len(digits) == width and set(digits) <= _HEX:
                out.append("\\x{" + digits + "}")
                i += width
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            # `]` straight after `[` or `[^` is a member, not the end of the class
            j = i + 1 + pattern.startswith("^", i + 1)
            j += pattern.startswith("]", j)
            out.append(pattern[i:j])
            i, in_class = j, True
            continue
        elif c == "{" and (m := _OPEN_MIN.match(pattern, i)):
            out.append("{0," + m.group(1) + "}")
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


@lru_cache(maxsize=256)  # constraints repeat across checks; see MAX_MEM for what 256 can hold
def regex(pattern: str, flags: str = "m") -> Regex | Refused:
    """`pattern` (Python syntax, as far as RE2 has it) compiled with RE2's inline `flags`.

    The default `m` is Python's `re.MULTILINE`, as constraints have always been matched; globs
    pass `s` (`re.DOTALL`).
    """
    body = encode(python_spellings(pattern))
    compiled, reason = _compile(f"(?{flags})".encode() + body if flags else body)
    if not reason:
        return Regex(pattern, compiled)
    # the refusal again without the flag prefix, so that the reason quotes the author's text
    return Refused(pattern, _compile(body)[1] or reason)
