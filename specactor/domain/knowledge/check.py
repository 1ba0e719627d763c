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
import itertools
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
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


# A match: where it is (file and line, or neither for a dependency) and what matched.
Hit = tuple[Location | None, str]
# A thing a constraint looks at: where it is, its name, and the pattern's hits in it.
Thing = tuple[Location | None, str, list[Hit]]


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


AGGREGATE: Final = frozenset({"must_use", "must_exist"})  # one violation per constraint, over every file


class Reading(NamedTuple):
    """The rules on files that read the same way (one key: target, pattern, appliesTo), by index
    into `Rules.rules`: those whose violations each file gives on its own, and those violated
    when no file at all matches (must_use, must_exist)."""

    key: Key
    each: list[int]
    aggregate: list[int]
    misses: bool  # whether a thing without a match is reported (must_match reads the way)


class Rules(NamedTuple):
    """Items' constraints made ready for checking, in order, and those `refusal` turns down. The
    same items are checked again and again (a snapshot's binding items): made once, kept.

    `readings` group the rules on files by what they read (`Reading`), `dependency` indexes the
    rules on dependencies; `token` names this set of rules in the memo of what files gave."""

    rules: list[Rule]
    invalid: list[InvalidConstraint]
    readings: list[Reading]
    aggregate: list[int]  # the rules on files violated when no file matches, in order
    dependency: list[int]
    token: int


_tokens = itertools.count(1)


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
    readings: dict[Key, Reading] = {}
    dependency: list[int] = []
    for i, rule in enumerate(rules):
        if rule.c.target == "dependency":
            dependency.append(i)
            continue
        reading = readings.get(rule.key)
        if reading is None:
            reading = readings[rule.key] = Reading(rule.key, [], [], False)
        (reading.aggregate if rule.c.operator in AGGREGATE else reading.each).append(i)
        if rule.c.operator == "must_match":
            readings[rule.key] = reading._replace(misses=True)
    aggregate = sorted(i for r in readings.values() for i in r.aggregate)
    return Rules(rules, invalid, list(readings.values()), aggregate, dependency, next(_tokens))


def _dependencies_found(rules: Rules, names: tuple[str, ...]) -> list[tuple[int, list[Violation]]]:
    """The violations the rules on dependencies find among `names`, by rule index; rules that read
    the same way (one pattern) share what they read."""
    read: dict[str, list[Thing]] = {}
    found: list[tuple[int, list[Violation]]] = []
    for i in rules.dependency:
        rule = rules.rules[i]
        things = read.get(rule.c.pattern)
        if things is None:
            rx = regex(rule.c.pattern)
            assert not isinstance(rx, Refused)  # `rules_of` set it aside
            things = read[rule.c.pattern] = [(None, name, [(None, name)] if rx.fullmatch(name) else [])
                                             for name in names]
        pairs: list[tuple[Location | None, str]]
        if rule.c.operator in AGGREGATE:
            pairs = [] if any(hits for _, _, hits in things) else [_nothing_matches(rule)]
        else:
            pairs = _each(rule, things)
        if pairs:
            found.append((i, _made(rule, pairs)))
    return found


def _nothing_matches(rule: Rule) -> tuple[None, str]:
    return None, rule.c.message or f"{rule.prefix}nothing matches"


def _each(rule: Rule, things: Iterable[Thing]) -> list[tuple[Location | None, str]]:
    """The violations of a rule whose operator reports each thing (must_match) or each match (the
    prohibitions) among `things`: (location, message) pairs."""
    c = rule.c
    message = c.message
    if c.operator == "must_match":
        return [(where, message or f"{rule.prefix}'{name}' does not match") for where, name, hits in things
                if not hits]
    if message:
        return [(where, message) for _, _, hits in things for where, _ in hits]
    return [(where, f"{rule.prefix}found '{text}'") for _, _, hits in things for where, text in hits]


def _file_things(reading: Reading, f: Source, applies: Callable[[tuple[str, ...]], bool]) -> list[Thing] | None:
    """What the rules of `reading` read in the one file `f` (each thing, with the pattern's hits in
    it), or None when `f` is not their input (`appliesTo` leaves it out; not a config file). An
    empty list when nothing matches and misses do not matter (`Reading.misses`)."""
    target, pattern, applies_to = reading.key
    if applies_to and not applies(applies_to):
        return None
    if target == "file":
        if not matcher(pattern)(f.path):
            return [(Location(file=f.path), f.path, [])] if reading.misses else []
        return [(Location(file=f.path), f.path, [(Location(file=f.path), f.path)])]
    rx = regex(pattern)
    assert not isinstance(rx, Refused)  # `rules_of` set it aside
    if target == "import":
        return [(Location(file=f.path, line=line), name, [(Location(file=f.path, line=line), name)]
                 if rx.fullmatch(name) else []) for name, line in f.imports()]
    if target == "config" and not f.is_config:
        return None
    hits = _content_hits(rx, f)
    return [(Location(file=f.path), f.path, hits)] if hits or reading.misses else []


@dataclass(frozen=True, eq=False)
class _FileFound:
    """What one file gives a check of one set of rules, whatever else is checked with it: the
    violations each rule (by index) finds in it on its own, unordered, and the aggregate rules
    (must_use, must_exist) it is input to and those of them that match in it."""

    found: list[tuple[int, list[Violation]]]
    counted: frozenset[int]
    matched: frozenset[int]


def _file_found(rules: Rules, f: Source) -> _FileFound:
    globs: dict[tuple[str, ...], bool] = {}

    def applies(key: tuple[str, ...]) -> bool:
        found = globs.get(key)
        if found is None:
            found = globs[key] = any(matcher(g)(f.path) for g in key)
        return found

    found: list[tuple[int, list[Violation]]] = []
    counted: list[int] = []
    matched: list[int] = []
    for reading in rules.readings:
        things = _file_things(reading, f, applies)
        if things is None:
            continue
        if reading.aggregate:
            counted += reading.aggregate
            if any(hits for _, _, hits in things):
                matched += reading.aggregate
        if things:
            for i in reading.each:
                rule = rules.rules[i]
                pairs = _each(rule, things)
                if pairs:
                    found.append((i, _made(rule, pairs)))
    return _FileFound(found, frozenset(counted), frozenset(matched))


def _made(rule: Rule, pairs: Iterable[tuple[Location | None, str]]) -> list[Violation]:
    item, what, severity = rule.item, rule.what, rule.c.severity
    return [Violation(knowledge_item_id=item.id, knowledge_item_title=item.title, constraint=what,
                      severity=severity, message=message, location=location) for location, message in pairs]


class _Memo:
    """What each file gave each set of rules (`_FileFound`), by (rules, path, content): an agent
    checks the same files again and again, most of them unchanged. The least recently used go
    first past `entries`, or past `chars` of content held (the keys hold the content); a file
    larger than a quarter of that is not kept. Shared by the threads a process checks on."""

    def __init__(self, entries: int, chars: int) -> None:
        self.entries, self.chars = entries, chars
        self._found: dict[tuple[int, str, str], _FileFound] = {}
        self._held = 0
        self._dependencies: dict[tuple[int, tuple[str, ...]], list[tuple[int, list[Violation]]]] = {}
        self._lock = threading.Lock()

    def get(self, rules: Rules, path: str, content: str) -> _FileFound:
        """What the file `path` (normalised) with `content` gives `rules`."""
        key = (rules.token, path, content)
        with self._lock:
            found = self._found.pop(key, None)
            if found is not None:
                self._found[key] = found  # the most recently used, last
                return found
        found = _file_found(rules, Source(path, content))
        size = len(path) + len(content)
        if size <= self.chars // 4:
            with self._lock:
                if key not in self._found:
                    self._found[key] = found
                    self._held += size
                while len(self._found) > self.entries or self._held > self.chars:
                    oldest = next(iter(self._found))
                    del self._found[oldest]
                    self._held -= len(oldest[1]) + len(oldest[2])
        return found

    def dependencies(self, rules: Rules, names: tuple[str, ...]) -> list[tuple[int, list[Violation]]]:
        """`_dependencies_found`, remembered: a project's dependencies change rarely."""
        key = (rules.token, names)
        with self._lock:
            found = self._dependencies.get(key)
        if found is None:
            found = _dependencies_found(rules, names)
            with self._lock:
                if len(self._dependencies) >= DEPENDENCY_LISTS:
                    self._dependencies.clear()
                self._dependencies[key] = found
        return found


DEPENDENCY_LISTS: Final = 64  # lists of dependencies `MEMO` keeps what they gave (all dropped past that)
MEMO: Final = _Memo(entries=4096, chars=16 << 20)


def check(items: Iterable[Item] | Rules, files: Sequence[tuple[str, str]] | None,
          dependencies: Sequence[tuple[str, str | None]] | None,
          min_severity: Severity = "warn") -> Checked:
    """Evaluate every constraint of `items` (or of the `Rules` already made of them), skipping
    (and listing) those `refusal` turns down.

    What each file gives is remembered (`MEMO`), so a file checked again, unchanged, against the
    same `Rules` costs a lookup; the violations in the answer are then the objects an earlier
    answer held (never changed: Violations are read, encoded, dropped).

    Never raises for a pattern: a knowledge repository is shared input, and one bad constraint
    must not stop the others from being checked.
    """
    rules = items if isinstance(items, Rules) else rules_of(items)
    per_file = [MEMO.get(rules, normalise(p), c) for p, c in files] if files is not None else []
    # each rule's violations: in file order (a file's own, in order), then the rules in order
    found: dict[int, list[list[Violation]]] = {}
    for part in per_file:
        for i, violations in part.found:
            got = found.get(i)
            if got is None:
                found[i] = [violations]
            else:
                got.append(violations)
    if rules.aggregate and per_file:
        counted = frozenset().union(*(part.counted for part in per_file))
        matched = frozenset().union(*(part.matched for part in per_file))
        for i in rules.aggregate:
            if i in counted and i not in matched:
                found[i] = [_made(rules.rules[i], [_nothing_matches(rules.rules[i])])]
    if dependencies is not None and rules.dependency:
        for i, violations in MEMO.dependencies(rules, tuple(name for name, _ in dependencies)):
            found[i] = [violations]
    floor = SEVERITY_RANK[min_severity]
    tally = dict.fromkeys(SEVERITY_RANK, 0)
    reported: list[Violation] = []
    for i in sorted(found):
        rule = rules.rules[i]
        for violations in found[i]:
            tally[rule.c.severity] += len(violations)
            if rule.rank >= floor:
                reported += violations
    counts = SeverityCounts(**tally)
    return Checked(counts.block == 0, reported, counts, list(rules.invalid))
