"""A minimal JSONC editor that splices text: set or remove one member or array item, and keep every
other byte of the file (comments, trailing commas, key order, odd spacing) as it was.

`parse` reads JSON with `//` and `/* */` comments and trailing commas into nodes that know their
spans; `Document` edits by splicing new text into those spans and parses again after each edit
(config files are small). New text follows the file's indentation and line endings. A file that
does not parse raises `JsoncError` with its line and column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

JsonPath = tuple[str, ...]


class JsoncError(ValueError):
    """Text that is not JSON (with comments), or an edit whose path crosses a non-object."""


@dataclass
class Node:
    start: int
    end: int  # one past the value's last character
    value: Any = None  # scalars only; containers build theirs in `to_python`
    members: list[Member] | None = None  # objects
    items: list[Node] | None = None  # arrays

    def to_python(self) -> Any:
        if self.members is not None:
            return {m.key: m.value.to_python() for m in self.members}
        if self.items is not None:
            return [item.to_python() for item in self.items]
        return self.value

    @property
    def children(self) -> list[Any]:
        return list(self.members if self.members is not None else self.items or [])


@dataclass
class Member:
    key: str
    start: int  # where the key's quote opens
    value: Node = field(repr=False)

    @property
    def end(self) -> int:
        return self.value.end


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_LITERALS = {"true": True, "false": False, "null": None}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> JsoncError:
        line = self.text.count("\n", 0, self.pos) + 1
        column = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        return JsoncError(f"{what} at line {line}, column {column}")

    def skip(self) -> None:
        """Past whitespace, comments and a byte-order mark."""
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("an unclosed /* comment")
                self.pos = end + 2
            else:
                return

    def value(self) -> Node:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("a value expected")
        ch = self.text[self.pos]
        if ch == "{":
            return self.container("}")
        if ch == "[":
            return self.container("]")
        if ch == '"':
            start = self.pos
            decoded = self.string()
            return Node(start, self.pos, decoded)
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return Node(match.start(), match.end(), json.loads(match.group()))
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return Node(self.pos - len(word), self.pos, literal)
        raise self.fail(f"unexpected {ch!r}")

    def string(self) -> str:
        match = _STRING.match(self.text, self.pos)
        if not match:
            raise self.fail("a bad string")
        self.pos = match.end()
        decoded: str = json.loads(match.group())
        return decoded

    def container(self, close: str) -> Node:
        node = Node(self.pos, self.pos)
        if close == "}":
            node.members = []
        else:
            node.items = []
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith(close, self.pos):
                self.pos += 1
                node.end = self.pos
                return node
            if node.members is not None:
                if not self.text.startswith('"', self.pos):
                    raise self.fail("a quoted key expected")
                key_start = self.pos
                key = self.string()
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("':' expected")
                self.pos += 1
                node.members.append(Member(key, key_start, self.value()))
            else:
                assert node.items is not None
                node.items.append(self.value())
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith(close, self.pos):
                raise self.fail(f"',' or {close!r} expected")


def parse(text: str) -> Node:
    """The root node of `text`; raises JsoncError when it is not JSON with comments."""
    parser = _Parser(text)
    root = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("text after the value")
    return root


def has_comments(text: str) -> bool:
    """Whether `text` holds a `//` or `/* */` comment outside its strings."""
    bare = _STRING.sub('""', text)
    return "//" in bare or "/*" in bare


def strip_comments(text: str) -> Any:
    """The value of `text` (comments and trailing commas allowed), as `json.loads` would give it."""
    return parse(text).to_python()


class Document:
    """One JSONC text under edit. Each method splices the text and parses it again."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.root = parse(text)
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.unit = _indent_unit(text)

    # ------------------------------------------------------------------ reading

    def find(self, path: JsonPath) -> Node | None:
        node: Node | None = self.root
        for key in path:
            if node is None or node.members is None:
                return None
            node = next((m.value for m in node.members if m.key == key), None)
        return node

    def get(self, path: JsonPath) -> Any:
        node = self.find(path)
        return None if node is None else node.to_python()

    # ------------------------------------------------------------------ editing

    def set(self, path: JsonPath, value: Any) -> bool:
        """Give the member at `path` the value `value`, creating missing objects on the way; True
        when the text changed (nothing changes when it already holds an equal value)."""
        node = self.root
        for depth, key in enumerate(path[:-1]):
            if node.members is None:
                raise JsoncError(f"'{'.'.join(path[:depth])}' is not an object")
            child = next((m.value for m in node.members if m.key == key), None)
            if child is None:
                nested: Any = value
                for inner in reversed(path[depth + 1:]):
                    nested = {inner: nested}
                self._insert(node, key, nested)
                return True
            node = child
        if node.members is None:
            raise JsoncError(f"'{'.'.join(path[:-1])}' is not an object")
        existing = next((m for m in node.members if m.key == path[-1]), None)
        if existing is None:
            self._insert(node, path[-1], value)
            return True
        if _same(existing.value.to_python(), value):
            return False
        self._splice(existing.value.start, existing.value.end, self._dump(value, self._indent_at(existing.start)))
        return True

    def append(self, path: JsonPath, value: Any) -> None:
        """Add `value` at the end of the array at `path`, creating the array when it is missing."""
        node = self.find(path)
        if node is None:
            self.set(path, [value])
            return
        if node.items is None:
            raise JsoncError(f"'{'.'.join(path)}' is not an array")
        self._insert(node, None, value)

    def replace_item(self, path: JsonPath, index: int, value: Any) -> None:
        node = self.find(path)
        assert node is not None and node.items is not None
        item = node.items[index]
        self._splice(item.start, item.end, self._dump(value, self._indent_at(item.start)))

    def remove(self, path: JsonPath, index: int | None = None) -> bool:
        """Remove the member at `path`, or (given `index`) that item of the array at `path`, with its
        line when it has one to itself; True when something was removed."""
        if index is None:
            parent = self.find(path[:-1])
            if parent is None or parent.members is None:
                return False
            position = next((i for i, m in enumerate(parent.members) if m.key == path[-1]), None)
        else:
            parent = self.find(path)
            if parent is None or parent.items is None or not 0 <= index < len(parent.items):
                return False
            position = index
        if position is None:
            return False
        self._remove_child(parent, position)
        return True

    def prune(self, path: JsonPath) -> None:
        """Remove the member at `path` and then its parents, deepest first, while each is an empty
        object or array."""
        for depth in range(len(path), 0, -1):
            node = self.find(path[:depth])
            if node is None:
                continue
            if node.children:
                return
            self.remove(path[:depth])

    # ------------------------------------------------------------------ splicing

    def _splice(self, start: int, end: int, new: str, *more: tuple[int, int, str]) -> None:
        """Replace text[start:end] with `new` (and each further (start, end, new), none overlapping),
        then parse once."""
        text = self.text
        for a, b, piece in sorted([(start, end, new), *more], key=lambda edit: edit[0], reverse=True):
            text = text[:a] + piece + text[b:]
        self.root = parse(text)
        self.text = text

    def _line_start(self, pos: int) -> int:
        return self.text.rfind("\n", 0, pos) + 1

    def _indent_at(self, pos: int) -> str:
        start = self._line_start(pos)
        line = self.text[start:pos]
        return line[:len(line) - len(line.lstrip(" \t"))]

    def _dump(self, value: Any, indent: str) -> str:
        """`value` as JSON text starting at column `indent`: objects one member a line, arrays of
        scalars on one line (`["serve", "--root", "x"]`), as people write config files."""
        if isinstance(value, dict) and value:
            inner = indent + self.unit
            members = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {self._dump(v, inner)}" for k, v in value.items()]
            return "{" + self.newline + ("," + self.newline).join(members) + self.newline + indent + "}"
        if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
            inner = indent + self.unit
            items = [inner + self._dump(v, inner) for v in value]
            return "[" + self.newline + ("," + self.newline).join(items) + self.newline + indent + "]"
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))

    def _entry(self, key: str | None, value: Any, indent: str, compact: bool) -> str:
        body = (json.dumps(value, ensure_ascii=False, separators=(", ", ": ")) if compact
                else self._dump(value, indent))
        return body if key is None else f"{json.dumps(key, ensure_ascii=False)}: {body}"

    def _insert(self, node: Node, key: str | None, value: Any) -> None:
        text, nl = self.text, self.newline
        children = node.children
        own_indent = self._indent_at(node.start)
        if not children:
            inner = text[node.start + 1:node.end - 1]
            child_indent = own_indent + self.unit
            entry = self._entry(key, value, child_indent, compact=False)
            if inner.strip(" \t\r\n") == "":
                self._splice(node.start + 1, node.end - 1, f"{nl}{child_indent}{entry}{nl}{own_indent}")
            else:  # only comments inside: keep them after the new entry
                self._splice(node.start + 1, node.start + 1, f"{nl}{child_indent}{entry}")
            return
        last = children[-1]
        if "\n" not in text[node.start:node.end]:  # a one-line container stays on one line
            self._splice(last.end, last.end, ", " + self._entry(key, value, "", compact=True))
            return
        first_start = children[0].start
        starts_line = text[self._line_start(first_start):first_start].strip(" \t") == ""
        child_indent = self._indent_at(first_start) if starts_line else own_indent + self.unit
        entry = self._entry(key, value, child_indent, compact=False)
        pos = _skip_inline(text, last.end)
        trailing = pos < len(text) and text[pos] == ","
        if trailing:
            pos += 1
        after = _skip_inline(text, pos, comments=True)
        at = after if text.startswith(("\n", "\r\n"), after) else pos
        tail = ","
        if trailing:
            self._splice(at, at, f"{nl}{child_indent}{entry}{tail}")
        else:
            self._splice(at, at, f"{nl}{child_indent}{entry}", (last.end, last.end, ","))

    def _remove_child(self, node: Node, index: int) -> None:
        text = self.text
        children = node.children
        child = children[index]
        if len(children) == 1:
            before, after = text[node.start + 1:child.start], text[child.end:node.end - 1]
            if before.strip(" \t\r\n") == "" and after.strip(" \t\r\n,") == "":
                self._splice(node.start + 1, node.end - 1, "")
                return
        start, end = child.start, _skip_inline(text, child.end)
        trailing = end < len(text) and text[end] == ","
        if trailing:
            end += 1
        line_start = self._line_start(start)
        if text[line_start:start].strip(" \t") == "":  # the child starts its line: take the line
            start = line_start
            stop = _skip_inline(text, end, comments=True)
            if text.startswith("\r\n", stop):
                end = stop + 2
            elif text.startswith("\n", stop):
                end = stop + 1
            else:  # the line goes on (`}`): take the line break before it instead, unless a comment ends that line
                previous_end = children[index - 1].end if index else node.start + 1
                if start > previous_end and "//" not in text[previous_end:start]:
                    start -= 2 if text[start - 2:start] == "\r\n" else 1
        elif index + 1 < len(children):  # one line, not the last: up to the next child
            end = children[index + 1].start
        if index > 0 and index == len(children) - 1 and not trailing:
            comma = _comma_after(text, children[index - 1].end)
            if start == line_start or comma is None:
                if comma is None:
                    self._splice(start, end, "")
                else:
                    self._splice(start, end, "", (comma, comma + 1, ""))
                return
            start = comma  # one line: from the comma before it
        self._splice(start, end, "")


def _skip_inline(text: str, pos: int, comments: bool = False) -> int:
    """Past spaces and tabs (and, with `comments`, a `//` comment or one-line `/* */`) on this line."""
    while pos < len(text):
        if text[pos] in " \t":
            pos += 1
        elif comments and text.startswith("//", pos):
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else (end - 1 if text[end - 1] == "\r" else end)
            return pos
        elif comments and text.startswith("/*", pos):
            end = text.find("*/", pos)
            if end < 0 or "\n" in text[pos:end]:
                return pos
            pos = end + 2
        else:
            return pos
    return pos


def _comma_after(text: str, pos: int) -> int | None:
    parser = _Parser(text)
    parser.pos = pos
    parser.skip()
    return parser.pos if text.startswith(",", parser.pos) else None


def _indent_unit(text: str) -> str:
    """The file's indentation step: the first indented line's leading whitespace, else two spaces."""
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else "  "


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (1 and 1.0 alike; True is not 1)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
