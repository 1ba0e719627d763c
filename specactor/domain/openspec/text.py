"""JavaScript string semantics in Python, so the parsers read text exactly as the OpenSpec CLI does.

The CLI is TypeScript: its regular expressions use JS `\\s`, `.`, `$` and `\\b`, and its `trim()`
strips a different set of characters than `str.strip()`. `rx` translates a JS pattern to an
equivalent Python one; `trim` and friends strip the JS whitespace set; `collation_key` orders
ids like `String.prototype.localeCompare` (ICU root) does for the ASCII range.
"""

from __future__ import annotations

import re
from functools import lru_cache

# ECMAScript WhiteSpace + LineTerminator (what `\s` and `trim()` mean in JS).
JS_WHITESPACE = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
                 "\u2028\u2029\u202f\u205f\u3000\ufeff")
_WS_CLASS_BODY = r"\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_LINE_TERMINATORS = r"\n\r\u2028\u2029"


def trim(text: str) -> str:
    """`String.prototype.trim`."""
    return text.strip(JS_WHITESPACE)


def trim_end(text: str) -> str:
    return text.rstrip(JS_WHITESPACE)


def trim_start(text: str) -> str:
    return text.lstrip(JS_WHITESPACE)


def _translate(pattern: str, multiline: bool) -> str:
    """A JS regular expression source as Python source with the same meaning."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            i += 2
            if nxt == "s":
                out.append(_WS_CLASS_BODY if in_class else f"[{_WS_CLASS_BODY}]")
            elif nxt == "S":
                if in_class:
                    raise ValueError("\\S inside a character class is not supported")
                out.append(f"[^{_WS_CLASS_BODY}]")
            elif nxt == "d":
                out.append("0-9" if in_class else "[0-9]")
            elif nxt == "w":
                out.append("A-Za-z0-9_" if in_class else "[A-Za-z0-9_]")
            else:
                out.append("\\" + nxt)
            continue
        i += 1
        if in_class:
            if ch == "]":
                in_class = False
            elif ch == "[":
                ch = "\\["  # a literal `[` inside a class (Python would warn about nested sets)
            out.append(ch)
            continue
        if ch == "[":
            in_class = True
            out.append(ch)
            if pattern[i:i + 1] == "^":
                out.append("^")
                i += 1
            if pattern[i:i + 1] == "]":  # a leading `]` is literal in Python, empty class in JS: not used
                raise ValueError("empty character class")
        elif ch == ".":
            out.append(f"[^{_LINE_TERMINATORS}]")
        elif ch == "$":
            out.append(f"(?=[{_LINE_TERMINATORS}]|\\Z)" if multiline else "\\Z")
        elif ch == "^":
            out.append(f"(?:\\A|(?<=[{_LINE_TERMINATORS}]))" if multiline else "\\A")
        else:
            out.append(ch)
    return "".join(out)


@lru_cache(maxsize=512)
def rx(pattern: str, flags: str = "") -> re.Pattern[str]:
    """Compile a JS regex (`flags` among "i", "m") with JS semantics.

    `\\b` keeps JS's ASCII notion of a word character (re.ASCII); `\\s`, `\\d`, `\\w`, `.`, `^`
    and `$` are translated explicitly, so re.ASCII changes nothing else.
    """
    py_flags = 0
    if "i" in flags:
        py_flags |= re.IGNORECASE
    if "\\b" in pattern:
        py_flags |= re.ASCII
    return re.compile(_translate(pattern, "m" in flags), py_flags)


def columns(prefix: str) -> int:
    """The width of `prefix` in columns, a tab reaching the next multiple of 4 (CommonMark's rule)."""
    column = 0
    for ch in prefix:
        column += 4 - column % 4 if ch == "\t" else 1
    return column


def indent_columns(line: str) -> int:
    """The width of `line`'s leading spaces and tabs."""
    return columns(line[:len(line) - len(line.lstrip(" \t"))])


def normalize_newlines(text: str) -> str:
    """`content.replace(/\\r\\n?/g, '\\n')`."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def strip_bom(text: str) -> str:
    return text[1:] if text.startswith("\ufeff") else text


# ---------------------------------------------------------------------- fenced code blocks

_FENCE_OPEN = rx(r"^\s*(`{3,}|~{3,})")
_FENCE_CLOSE = rx(r"^\s*(`{3,}|~{3,})\s*$")


def fence_mask(lines: list[str]) -> list[bool]:
    """True for each line inside a fenced code block, the fence lines included (`buildCodeFenceMask`)."""
    mask = [False] * len(lines)
    joined = "\n".join(lines)
    if "```" not in joined and "~~~" not in joined:  # no line can open a fence (the usual case, found in C)
        return mask
    active: tuple[str, int] | None = None
    for i, line in enumerate(lines):
        if active is None:
            if "`" not in line and "~" not in line:
                continue
            m = _FENCE_OPEN.match(line)
            if m:
                active = (m.group(1)[0], len(m.group(1)))
                mask[i] = True
            continue
        mask[i] = True
        m = _FENCE_CLOSE.match(line)
        if m and m.group(1)[0] == active[0] and len(m.group(1)) >= active[1]:
            active = None
    return mask


# ---------------------------------------------------------------------- ordering

# ICU root collation order of printable ASCII (checked against Node's localeCompare).
_ICU_ORDER = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
_PRIMARY = {c: i for i, c in enumerate(_ICU_ORDER)}


def collation_key(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A sort key that orders like `a.localeCompare(b)`: case-insensitive first, then lower before upper."""
    primary = tuple(_PRIMARY.get(c.lower(), 1000 + ord(c)) if c.isascii() else 1000 + ord(c.lower())
                    for c in text)
    tertiary = tuple(1 if c.isupper() else 0 for c in text)
    return primary, tertiary


def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
        prev = cur
    return prev[len(b)]


def nearest_matches(name: str, candidates: list[str], limit: int = 5) -> list[str]:
    """The CLI's "Did you mean" list: candidates by edit distance, stable, at most `limit`."""
    return sorted(candidates, key=lambda c: levenshtein(name, c))[:limit]
