"""Constraint patterns run by RE2: no pattern hangs a check, a refused one is reported by name and
skips only itself, and on the syntax both engines share RE2 finds what Python's `re` finds."""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec
import pytest
import trio
from hypothesis import event, given
from hypothesis import strategies as st

from specactor.domain.knowledge.api import Constraint, Item
from specactor.domain.knowledge.check import check
from specactor.domain.knowledge.globs import compile_glob, matches, normalise
from specactor.domain.knowledge.parse import parse_item
from specactor.domain.knowledge.patterns import Refused, encode, python_spellings, regex
from specactor.testing import MemoryClient
from tests.memory.conftest import Repo, item, ok


def rule(operator: str, target: str, pattern: str, applies_to: list[str] | None = None) -> Constraint:
    return msgspec.convert({"operator": operator, "target": target, "pattern": pattern, "severity": "warn",
                            "appliesTo": applies_to}, Constraint)


def holder(*constraints: Constraint, item_id: str = "pol-1", path: str = "company/policies/rules.md") -> Item:
    return msgspec.convert({"id": item_id, "type": "policy", "layer": "company", "scope": None, "title": "Rules",
                            "summary": "", "content": "", "status": "accepted", "severity": "warn", "tags": [],
                            "metadata": {}, "path": path, "contentHash": "0",
                            "constraints": [msgspec.to_builtins(c) for c in constraints]}, Item)


def test_a_catastrophic_backtracking_pattern_returns_on_a_crafted_file() -> None:
    # Python's re takes longer than the age of the universe on this; RE2 is linear in the text
    crafted = "a" * 100_000 + "!"
    rules = holder(rule("must_not_match", "code", "(a+)+$"), rule("must_match", "code", "^(a|aa)+$"),
                   rule("must_not_use", "dependency", "(x+x+)+y"))
    passed, violations, counts, invalid = check([rules], [("crafted.txt", crafted)], [("x" * 5_000, None)])
    assert invalid == []
    assert [(v.constraint.operator, v.location.file if v.location else None) for v in violations] == [
        ("must_match", "crafted.txt")]
    assert passed and counts.warn == 1


def test_a_glob_with_many_stars_returns_on_a_long_path() -> None:
    # `*a*a*…b` became nested `[^/]*` loops that Python's re backtracks through polynomially
    path = "a" * 1_000
    assert matches("*a" * 20 + "*b", path) is False
    assert matches("*a" * 20 + "*", path) is True
    _, violations, _, invalid = check([holder(rule("must_not_exist", "file", "**/" + "*a" * 20 + "*b"),
                                              rule("must_not_match", "code", "a", ["*a" * 20 + "*b"]))],
                                      [(path, "a")], None)
    assert violations == [] and invalid == []


REFUSED = [
    (r"(a)\1", r"invalid escape sequence: \1"),
    (r"(?P<x>a)(?P=x)", "invalid perl operator: (?P"),
    ("foo(?=bar)", "invalid perl operator: (?="),
    ("(?<!un)safe", "invalid perl operator: (?<!"),
    ("(?>a+)b", "invalid perl operator: (?>"),
    ("a++b", "bad repetition operator: ++"),
    ("(unclosed", "missing ): (unclosed"),
    ("a{1001}", "invalid repetition size: {1001}"),
]


@pytest.mark.parametrize(("pattern", "reason"), REFUSED, ids=[p for p, _ in REFUSED])
def test_a_refused_pattern_is_reported_with_its_item_and_the_other_constraints_still_apply(
        pattern: str, reason: str) -> None:
    text = ("---\nid: adr-007-no-eval\ntitle: No eval\nstatus: accepted\n---\n## Constraints\n```yaml\n"
            f"- {{operator: must_not_match, target: code, pattern: '{pattern}'}}\n"
            "- {operator: must_not_match, target: code, pattern: 'eval\\('}\n"
            f"- {{operator: must_not_use, target: dependency, pattern: '{pattern}'}}\n```\n")
    adr = parse_item("company/adrs/adr-007.md", text.encode())  # the item loads: RE2 judges at check time
    other = holder(rule("must_not_use", "dependency", "left-pad"))
    passed, violations, _, invalid = check([adr, other], [("src/x.py", "x = 1\neval(y)\n")], [("left-pad", "1")])
    assert [(v.knowledge_item_id, v.constraint.pattern, v.location.line if v.location else None)
            for v in violations] == [("adr-007-no-eval", r"eval\(", 2), ("pol-1", "left-pad", None)]
    assert msgspec.to_builtins(invalid) == [
        {"knowledgeItemId": "adr-007-no-eval", "file": "company/adrs/adr-007.md", "reason": reason,
         "constraint": {"operator": "must_not_match", "target": "code", "pattern": pattern}},
        {"knowledgeItemId": "adr-007-no-eval", "file": "company/adrs/adr-007.md", "reason": reason,
         "constraint": {"operator": "must_not_use", "target": "dependency", "pattern": pattern}}]
    assert passed


def test_a_malformed_glob_on_an_item_built_elsewhere_is_reported_not_raised() -> None:
    rules = holder(rule("must_not_exist", "file", "[oops"), rule("must_not_match", "code", "x", ["{a,b"]),
                   rule("must_not_match", "code", "x"))
    _, violations, _, invalid = check([rules], [("a.txt", "x")], None)
    assert [v.constraint.pattern for v in violations] == ["x"]
    assert [(i.constraint.pattern, "is not valid" in i.reason or "unclosed" in i.reason) for i in invalid] == [
        ("[oops", True), ("x", True)]


@pytest.mark.parametrize(("pattern", "text", "spelled", "found"), [
    (r"end\Z", "the end", r"end\z", True),
    (r"end\Z", "the end\n", r"end\z", False),  # unlike `$`, not before a final newline
    ("^ab{,2}c$", "abbc", "^ab{0,2}c$", True),
    ("^ab{,2}c$", "ab{,2}c", "^ab{0,2}c$", False),  # RE2 alone would read `{,2}` as text
    ("^x{,}$", "xxx", "^x{0,}$", True),
    (r"caf\u00e9", "café", r"caf\x{00e9}", True),
    (r"\U0001F600", "\U0001F600", r"\x{0001F600}", True),
    (r"[\Z{,2}]", "", r"[\Z{,2}]", None),  # in a class nothing is rewritten (Python refuses `\Z` there too)
    (r"\\Z", "\\Z", r"\\Z", True),  # an escaped backslash, then a plain Z
])
def test_python_spellings_re2_lacks_are_rewritten_to_mean_the_same(pattern: str, text: str, spelled: str,
                                                                   found: bool | None) -> None:
    assert python_spellings(pattern) == spelled
    compiled = regex(pattern)
    if found is None:
        assert isinstance(compiled, Refused)
        return
    assert not isinstance(compiled, Refused)
    assert compiled.search(encode(text)) is found is (re.search(pattern, text, re.MULTILINE) is not None)


segments = st.sampled_from(["*", "**", "a", "b.py", "*.py", "?", "[ab]", "[!a]", "{a,b.py}", "*a*", ".", "é"])
globs = st.lists(segments, min_size=1, max_size=3).map("/".join) | segments.map(lambda s: "/" + s + "/**")
paths = st.lists(st.text(alphabet="ab.py/é\n", min_size=0, max_size=5), min_size=1, max_size=3).map("/".join)


@given(glob=globs, path=paths)
def test_a_glob_matches_the_paths_it_matched_under_python_re(glob: str, path: str) -> None:
    # the regex text a glob becomes is unchanged; only the engine (and, for `*.py`, `src/**` and
    # plain names, a string test) is new. Without `/` a glob used to look at the file name only.
    text, seen = glob.strip().removeprefix("./"), normalise(path)
    full = compile_glob(glob).pattern
    if "/" not in text.rstrip("/"):
        expected = re.fullmatch(full.removeprefix("(?:.*/)?"), seen.rpartition("/")[2], re.DOTALL)
    else:
        expected = re.fullmatch(full, seen, re.DOTALL)
    assert matches(glob, path) is (expected is not None)


async def test_knowledge_check_lists_invalid_constraints_beside_the_violations(client: MemoryClient,
                                                                              repo: Repo) -> None:
    repo.write("company/policies/lookahead.md", item(
        "pol-lookahead", "No unsafe calls", kind="policy",
        body="## Constraints\n```yaml\n- {operator: must_not_match, target: code, pattern: 'unsafe(?!_ok)'}\n"
             "- {operator: must_not_match, target: code, pattern: '(a+)+$'}\n"
             "- {operator: must_not_match, target: code, pattern: 'console\\.log'}\n```\n"))
    repo.commit()
    files = [{"path": "web/app.ts", "content": "unsafe()\n" + "a" * 50_000 + "!\nconsole.log(1)\n"}]
    with trio.fail_after(60):  # generous: a hang, not a slow run, is what this guards against
        result = await ok(client, "knowledge_check", {"files": files})
    assert [(v["knowledgeItemId"], v["location"]) for v in result["violations"]] == [
        ("pol-lookahead", {"file": "web/app.ts", "line": 3})]
    assert result["invalidConstraints"] == [{
        "knowledgeItemId": "pol-lookahead", "file": "company/policies/lookahead.md",
        "constraint": {"operator": "must_not_match", "target": "code", "pattern": "unsafe(?!_ok)"},
        "reason": "invalid perl operator: (?!"}]
    clean = await ok(client, "knowledge_check", {"files": [{"path": "a.ts", "content": ""}],
                                                 "knowledgeItemIds": ["pol-lookahead"]})
    assert clean["passed"] is True and clean["invalidConstraints"][0]["knowledgeItemId"] == "pol-lookahead"


# ---- generated patterns ------------------------------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    """Generated regex text; `nested` when a quantifier applies to something already quantified."""

    text: str
    quantifiers: int = 0
    nested: bool = False


ATOMS = ["a", "b", "1", " ", "-", ".", r"\.", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", "[ab]", "[^a]", "[a-c1]",
         "[^\\n]", r"\n", "^", "$", r"\b", r"\B", r"\A", r"\Z", "(?:)"]
QUANTIFIERS = ["*", "+", "?", "{2}", "{1,3}", "{,2}", "*?", "+?", "??", "{1,}"]
# What RE2 refuses (Python takes all but the last four): each must come back as an invalid constraint.
REFUSABLE = [r"(a)\1", "(?=a)", "(?!b)", "(?<=a)", "(?<!b)", "(?>a)", "a++", "(?P<n>a)(?P=n)", "(?#note)",
             "(", "[a", "*", "a{3,1}"]


def _quantified(inner: Pattern, quantifier: str) -> Pattern:
    return Pattern(f"(?:{inner.text}){quantifier}", inner.quantifiers + 1, inner.nested or inner.quantifiers > 0)


def _joined(parts: list[Pattern], bar: str) -> Pattern:
    return Pattern(bar.join(p.text for p in parts), sum(p.quantifiers for p in parts), any(p.nested for p in parts))


base = st.one_of(
    st.sampled_from(ATOMS * 3 + REFUSABLE).map(Pattern),  # a refusable leaf spoils the pattern: keep them rare
    st.tuples(st.sampled_from(ATOMS[:18]), st.sampled_from(QUANTIFIERS)).map(lambda t: Pattern(t[0] + t[1], 1)),
)
patterns = st.recursive(base, lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from(QUANTIFIERS)).map(lambda t: _quantified(*t)),
    st.lists(inner, min_size=2, max_size=3).map(lambda ps: _joined(ps, "")),
    st.lists(inner, min_size=2, max_size=3).map(lambda ps: _joined(ps, "|")),
    st.tuples(st.sampled_from(["(", "(?:", "(?i:", "(?P<g>"]), inner).map(
        lambda t: Pattern(t[0] + t[1].text + ")", t[1].quantifiers, t[1].nested)),
), max_leaves=6)
# ASCII only: on other letters and digits `\w`, `\d`, `\s` and `\b` differ between the engines by design
texts = st.text(alphabet="ab1 _-.\nA", min_size=1, max_size=30)


def python_finds(pattern: str, text: str, whole: bool) -> bool | None:
    """Whether Python's `re` matches, or None when it refuses the pattern."""
    try:
        compiled = re.compile(pattern, re.MULTILINE)
    except re.error:
        return None
    return (compiled.fullmatch(text) if whole else compiled.search(text)) is not None


@given(pattern=patterns, text=texts)
def test_every_generated_pattern_either_matches_as_python_does_or_is_reported_invalid(pattern: Pattern,
                                                                                      text: str) -> None:
    rules = holder(rule("must_not_match", "code", pattern.text), rule("must_not_use", "dependency", pattern.text))
    _, violations, _, invalid = check([rules], [("f.txt", text)], [(text, None)], "info")
    if isinstance(regex(pattern.text), Refused):
        event("RE2 refuses")
        assert [i.constraint.target for i in invalid] == ["code", "dependency"] and violations == []
        assert all(i.constraint.pattern == pattern.text and i.reason for i in invalid)
        return
    assert invalid == []
    found = {v.constraint.target for v in violations}
    # Python's backtracking may take exponential time on nested quantifiers: compare only the others
    if not pattern.nested and pattern.quantifiers <= 3:
        for target, whole in (("code", False), ("dependency", True)):
            expected = python_finds(pattern.text, text, whole)
            event("compared with re" if expected is not None else "re refuses")
            if expected is not None:
                assert (target in found) == expected, (target, pattern.text, text)


unicode_texts = st.one_of(st.text(max_size=40), st.text(max_size=40).map(lambda s: s + "\ud800\n" + s))


@given(pattern=st.one_of(patterns.map(lambda p: p.text), st.text(max_size=20)), text=unicode_texts,
       glob=st.text(max_size=12))
def test_the_check_never_raises_whatever_the_patterns_and_the_text(pattern: str, text: str, glob: str) -> None:
    rules = holder(*[rule(op, target, pattern, applies) for op in ("must_not_match", "must_use")
                     for target in ("code", "import", "dependency", "config", "file") for applies in (None, [glob])])
    passed, violations, counts, invalid = check([rules], [("f.env", text), (text or "x", "import " + text)],
                                                [(text, None)], "info")
    assert counts.info + counts.warn + counts.block == len(violations) and passed
    assert all(i.constraint.pattern == pattern and i.reason for i in invalid)
    assert all(not v.location or v.location.line is None or v.location.line >= 1 for v in violations)


@given(text=unicode_texts, word=st.sampled_from(["a", "é", "\n", "", "\ud800"]))
def test_each_line_with_a_match_is_reported_once_counting_characters_not_bytes(text: str, word: str) -> None:
    content = text + word + "zz" + word
    _, violations, _, _ = check([holder(rule("must_not_match", "code", "z+"))], [("f.txt", content)], None)
    lines = content.split("\n")
    assert [v.location.line for v in violations if v.location] == [
        n for n, line in enumerate(lines, start=1) if "z" in line]
    assert all(v.message.endswith("'") and set(v.message.split("found ")[1]) <= {"z", "'"} for v in violations)


def test_an_excerpt_is_the_first_200_characters_of_the_match() -> None:
    for letter in ("e", "é", "\U0001F600", "\ud800"):
        _, violations, _, _ = check([holder(rule("must_not_match", "code", "x.+"))],
                                    [("f.txt", "ab\nx" + letter * 300)], None)
        shown = violations[0].message.split("found ")[1][1:-1]
        assert violations[0].location and violations[0].location.line == 2
        assert shown == ("x" + letter * 199 if letter != "\ud800" else "x" + "\ufffd" * 199)
        assert len(encode(shown)) <= 800
