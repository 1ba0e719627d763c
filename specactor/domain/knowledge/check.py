"""Constraint evaluation: files and dependencies in, violations with locations out.

Each target reads a set of *things*; `appliesTo` globs first narrow the files (every file when
absent). A constraint whose input was not supplied (no `dependencies`, no applicable file) is
not evaluated.

| target | things | a thing matches when |
|---|---|---|
| file | the applicable paths | the glob `pattern` matches the path |
| code | the applicable files | the regex finds a match in the content (each match has a line) |
| config | applicable .json/.yaml/.yml/.toml/.ini/.cfg/.conf/.env/.properties files | as code |
| import | imports in the applicable files (Python, JS/TS, Go, Rust, Java, C) | the regex matches the whole name |
| dependency | the dependencies' names | the regex matches the whole name |

| operator | violated when | one violation per |
|---|---|---|
| must_use, must_exist | no thing matches | constraint |
| must_not_use, must_not_exist, must_not_match | a thing matches | match (with its file and line) |
| must_match | a thing does not match | thing |

Regexes use Python syntax with `re.MULTILINE`, run by RE2 in linear time (patterns.py). A
constraint RE2 refuses (a backreference, a lookaround, a syntax error), or whose glob does not
parse, is skipped and reported in `invalid`; the rest are evaluated as usual. `passed` is false
exactly when some violation has severity block; `summary` counts every violation found,
`minSeverity` only filters the list.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final, NamedTuple

from specactor.domain.knowledge.api import (
    SEVERITY_RANK,
    Constraint,
    InvalidConstraint,
    Item,
    Location,
    Severity,
    SeverityCounts,
    ViolatedConstraint,
    Violation,
)
from specactor.domain.knowledge.globs import BadGlob, matcher, normalise
from specactor.domain.knowledge.patterns import Refused, Regex, encode, regex

CONFIG_SUFFIXES: Final = frozenset({".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".env",
                                    ".properties"})
_IMPORT: Final = re.compile(
    r"""(?:
        from[ \t]+(?P<py_from>[\w.]+)[ \t]+import\b                            # python
      | import[ \t]+(?P<py>[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)[ \t]*(?:\#.*)?$      # python, bare
      | import[ \t]+(?P<java>(?:static[ \t]+)?[\w.]+(?:\.\*)?)[ \t]*;            # java
      | (?:import|export)\b[^'"]*?\bfrom[ \t]*['"](?P<js_from>[^'"]+)['"]        # js/ts
      | import[ \t]*['"](?P<js>[^'"]+)['"]                                      # js side effect, go
      | import[ \t]+\w+[ \t]+['"](?P<go_alias>[^'"]+)['"]                        # go alias
      | use[ \t]+(?P<rust>[\w:]+)                                               # rust
      | \#[ \t]*include[ \t]*[<"](?P<c>[^>"]+)[>"]                              # c
    )""", re.VERBOSE)
_GROUPS: Final = ("py_from", "py", "java", "js_from", "js", "go_alias", "rust", "c")
_STARTS: Final = ("import", "from", "export", "use ", "#")
_REQUIRE: Final = re.compile(r"""\b(?:require|import)\(\s*['"]([^'"\n]+)['"]\s*\)""")
_GO_LINE: Final = re.compile(r"""(?:[\w.]+[ \t]+)?"([^"]+)"[ \t]*$""")


def extract_imports(content: str) -> list[tuple[str, int]]:
    """(module, line) for each import a line states, in Python, JS/TS, Go, Rust, Java or C."""
    return list(_imports_of(content))


@lru_cache(maxsize=1024)  # the same files are checked again and again; a file's imports never change
def _imports_of(content: str) -> tuple[tuple[str, int], ...]:
    found: set[tuple[str, int]] = set()
    in_go_block = False
    for number, line in enumerate(content.split("\n"), start=1):
        text = line.strip()
        if in_go_block:
            in_go_block = text != ")"
            m = _GO_LINE.match(text)
            if in_go_block and m:
                found.add((m.group(1), number))
            continue
        if text.startswith(_STARTS):
            if text.startswith("import (") or text == "import(":
                in_go_block = True
                continue
            m = _IMPORT.match(text)
            if m:
                for name in (m.group(g) for g in _GROUPS):
                    if name:
                        found.update((part.strip().removeprefix("static").strip(), number)
                                     for part in name.split(","))
        if "require(" in line or "import(" in line:
            found.update((m.group(1), number) for m in _REQUIRE.finditer(line))
    return tuple(sorted(found, key=lambda x: (x[1], x[0])))


def _top_level_bar(pattern: str) -> bool:
    depth, i, in_class = 0, 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            return True
        i += 1
    return False


@lru_cache(maxsize=4096)
def required_literal(pattern: str) -> str | None:
    """Text every match of `pattern` starts with (after `^`/`\\b` anchors), when it is easy to see.

    Checking `literal in content` first (a fast substring search) spares the regex engine most files.
    """
    if _top_level_bar(pattern):
        return None
    i, out = 0, []
    while pattern.startswith(("^", "\\b", "\\A"), i):
        i += 1 if pattern[i] == "^" else 2
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            lit, step = pattern[i + 1], 2
        elif c in ".^$*+?{}[]|()\\":
            break
        else:
            lit, step = c, 1
        after = pattern[i + step:i + step + 1]
        if after and after in "*?{":
            break
        out.append(lit)
        i += step
        if after == "+":
            break
    text = "".join(out)
    return text if len(text) >= 2 else None


@dataclass
class Source:
    """One file under check, with what is computed about it once and reused by every constraint."""

    path: str
    content: str
    _data: bytes | None = None
    _lines: list[int] | None = None
    _imports: Sequence[tuple[str, int]] | None = None

    def __post_init__(self) -> None:
        name = self.path.rpartition("/")[2]
        suffix = name[name.rfind("."):].lower() if "." in name[1:] else ""
        self.is_config = suffix in CONFIG_SUFFIXES or name.startswith(".env")

    @property
    def data(self) -> bytes:
        """The content as the UTF-8 bytes a `Regex` searches, encoded once for every constraint."""
        if self._data is None:
            self._data = encode(self.content)
        return self._data

    def line_of(self, offset: int) -> int:
        """The line holding byte `offset` of `data`."""
        if self._lines is None:
            self._lines = [m.start() for m in re.finditer(b"\n", self.data)]
        return bisect.bisect_left(self._lines, offset) + 1

    def imports(self) -> Sequence[tuple[str, int]]:
        if self._imports is None:
            self._imports = _imports_of(self.content)
        return self._imports


@dataclass
class Workspace:
    """The input of one check: files (or None) and dependencies (or None), with per-glob caches."""

    files: list[Source] | None
    dependencies: list[tuple[str, str | None]] | None
    _applicable: dict[tuple[str, ...], list[Source]] = field(default_factory=dict)
    # (target, pattern, appliesTo) → what `_things` found: constraints that differ only in operator,
    # severity or message (most of a large repository's) read the files once between them (`_violations`).
    _found: dict[tuple[str, str, tuple[str, ...]], tuple[bool, list[Thing]]] = field(default_factory=dict)

    def applicable(self, applies_to: Sequence[str] | None) -> list[Source]:
        if not self.files:
            return []
        key = tuple(applies_to or ())
        if key not in self._applicable:
            if not key:
                self._applicable[key] = self.files
            else:
                tests = [matcher(g) for g in key]
                self._applicable[key] = [f for f in self.files if any(test(f.path) for test in tests)]
        return self._applicable[key]


# A match: where it is (file and line, or neither for a dependency) and what matched.
Hit = tuple[Location | None, str]
# A thing a constraint looks at: where it is, its name, and the pattern's hits in it.
Thing = tuple[Location | None, str, list[Hit]]


def _things(c: Constraint, ws: Workspace) -> tuple[bool, Iterator[Thing]]:
    """Whether the constraint's input was supplied, and each thing with the hits the pattern has in it."""
    rx = regex(c.pattern) if c.target != "file" else None
    if isinstance(rx, Refused):
        return False, iter(())  # `check` reports it; `refusal` says why
    if c.target == "dependency":
        if ws.dependencies is None or rx is None:
            return False, iter(())
        return True, ((None, name, [(None, name)] if rx.fullmatch(name) else []) for name, _ in ws.dependencies)
    files = ws.applicable(c.applies_to)
    if not files:
        return False, iter(())
    if rx is None:  # the file target: its pattern is a glob
        test = matcher(c.pattern)
        return True, ((Location(file=f.path), f.path, [(Location(file=f.path), f.path)] if test(f.path) else [])
                      for f in files)
    if c.target == "import":
        return True, ((Location(file=f.path, line=line), name,
                       [(Location(file=f.path, line=line), name)] if matches(name) else [])
                      for matches in [_remembered(rx.fullmatch)] for f in files for name, line in f.imports())
    chosen = [f for f in files if f.is_config] if c.target == "config" else files
    return bool(chosen), ((Location(file=f.path), f.path, _content_hits(rx, f)) for f in chosen)


def _remembered(test: Callable[[str], bool]) -> Callable[[str], bool]:
    """`test`, asked once per distinct name: the same few modules are imported file after file."""
    known: dict[str, bool] = {}

    def remembered(name: str) -> bool:
        found = known.get(name)
        if found is None:
            found = known[name] = test(name)
        return found

    return remembered


def _content_hits(rx: Regex, f: Source) -> list[Hit]:
    literal = required_literal(rx.pattern)
    if literal is not None and literal not in f.content:
        return []  # the common case: no match, and not even the bytes needed
    data = f.data
    hits: list[Hit] = []
    seen: set[int] = set()
    for start, end in rx.spans(data):
        line = f.line_of(start)
        if line not in seen:
            seen.add(line)
            # 200 characters take at most 800 bytes; a cut character lands past the 200th
            hits.append((Location(file=f.path, line=line), data[start:min(end, start + 800)].decode(
                "utf-8", "replace")[:200]))
    return hits


def _describe(c: Constraint) -> str:
    """How a violation's message starts when its constraint has no message: what was violated."""
    return f"{c.operator} {c.target} '{c.pattern}': "


def refusal(c: Constraint) -> str | None:
    """Why `c` cannot be evaluated (RE2 refuses its regex, a glob does not parse), or None when it can."""
    return _refusal(c.target, c.pattern, tuple(c.applies_to or ()))


@lru_cache(maxsize=8192)  # asked of every constraint at every check: a fifth of a check's CPU, uncached
def _refusal(target: str, pattern: str, applies_to: tuple[str, ...]) -> str | None:
    try:
        for glob in applies_to:
            matcher(glob)
        if target == "file":
            matcher(pattern)
            return None
    except BadGlob as err:
        return str(err)
    compiled = regex(pattern)
    return compiled.reason if isinstance(compiled, Refused) else None


class Checked(NamedTuple):
    """What `check` found: whether it passed, the reported violations, counts of all, the skipped."""

    passed: bool
    violations: list[Violation]
    summary: SeverityCounts
    invalid: list[InvalidConstraint]


Key = tuple[str, str, tuple[str, ...]]  # (target, pattern, appliesTo): what a constraint reads, and how


class Rule(NamedTuple):
    """One constraint ready to evaluate: its item, its key, its severity's rank, and what a
    violation of it reports (one object shared by every violation: never changed)."""

    item: Item
    c: Constraint
    key: Key
    rank: int
    what: ViolatedConstraint
    prefix: str  # how a violation's message starts when the constraint has none (`_describe`)


class Rules(NamedTuple):
    """Items' constraints made ready for checking, in order, and those `refusal` turns down. The
    same items are checked again and again (a snapshot's binding items): made once, kept."""

    rules: list[Rule]
    invalid: list[InvalidConstraint]


def rules_of(items: Iterable[Item]) -> Rules:
    rules: list[Rule] = []
    invalid: list[InvalidConstraint] = []
    for item in items:
        for c in item.constraints or ():
            what = ViolatedConstraint(operator=c.operator, target=c.target, pattern=c.pattern)
            reason = refusal(c)
            if reason is not None:
                invalid.append(InvalidConstraint(knowledge_item_id=item.id, file=item.path, reason=reason,
                                                 constraint=what))
                continue
            rules.append(Rule(item, c, (c.target, c.pattern, tuple(c.applies_to or ())), SEVERITY_RANK[c.severity],
                              what, _describe(c)))
    return Rules(rules, invalid)


def _violations(rule: Rule, ws: Workspace) -> list[tuple[Location | None, str]]:
    """The violations of one rule: (location, message) pairs. What its key reads is found once per
    check (`Workspace._found`); a message of its own, else one made from `prefix`."""
    c = rule.c
    found = ws._found.get(rule.key)
    if found is None:
        supplied, made = _things(c, ws)
        found = ws._found[rule.key] = (supplied, list(made))
    supplied, things = found
    if not supplied:
        return []
    message = c.message
    if c.operator in ("must_use", "must_exist"):
        if any(hits for _, _, hits in things):
            return []
        return [(None, message or f"{rule.prefix}nothing matches")]
    if c.operator == "must_match":
        return [(where, message or f"{rule.prefix}'{name}' does not match") for where, name, hits in things
                if not hits]
    if message:
        return [(where, message) for _, _, hits in things for where, _ in hits]
    return [(where, f"{rule.prefix}found '{text}'") for _, _, hits in things for where, text in hits]


def check(items: Iterable[Item] | Rules, files: Sequence[tuple[str, str]] | None,
          dependencies: Sequence[tuple[str, str | None]] | None,
          min_severity: Severity = "warn") -> Checked:
    """Evaluate every constraint of `items` (or of the `Rules` already made of them), skipping
    (and listing) those `refusal` turns down.

    Never raises for a pattern: a knowledge repository is shared input, and one bad constraint
    must not stop the others from being checked.
    """
    rules = items if isinstance(items, Rules) else rules_of(items)
    ws = Workspace([Source(normalise(p), c) for p, c in files] if files is not None else None,
                   list(dependencies) if dependencies is not None else None)
    floor = SEVERITY_RANK[min_severity]
    tally = dict.fromkeys(SEVERITY_RANK, 0)
    reported: list[Violation] = []
    for rule in rules.rules:
        found = _violations(rule, ws)
        if not found:
            continue
        severity = rule.c.severity
        tally[severity] += len(found)
        if rule.rank >= floor:
            item_id, title, what = rule.item.id, rule.item.title, rule.what
            reported.extend(Violation(knowledge_item_id=item_id, knowledge_item_title=title, constraint=what,
                                      severity=severity, message=message, location=location)
                            for location, message in found)
    counts = SeverityCounts(**tally)
    return Checked(counts.block == 0, reported, counts, list(rules.invalid))
