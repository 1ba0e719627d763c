"""Constraint evaluation: a golden case for every operator x target, the reference's mysql2 example,
and properties of thresholds, narrowing and locations."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specactor.domain.knowledge.api import Constraint, Item, Location
from specactor.domain.knowledge.check import check
from specactor.domain.knowledge.parse import parse_item
from tests.memory.conftest import ADR_042, ADR_042_BOTH

FILES = [
    ("src/app.py", "import os\nfrom requests import get\nprint('hello')\npassword = 'x'\n"),
    ("src/util.ts", "import lodash from 'lodash'\nconst m = require('moment')\n"),
    ("config/app.yaml", "debug: true\nlog_level: info\n"),
    ("README.md", "# readme\n"),
]
DEPS = [("mysql2", "3.0.0"), ("express", "4.0.0")]
NOWHERE = (None, None)

GOLDEN = [  # operator, target, pattern, appliesTo, expected violation locations (file, line)
    ("must_use", "file", "LICENSE", None, [NOWHERE]),
    ("must_exist", "file", "src/*.py", None, []),
    ("must_not_use", "file", "*.ts", None, [("src/util.ts", None)]),
    ("must_not_exist", "file", "config/**", None, [("config/app.yaml", None)]),
    ("must_match", "file", "*.py", ["src/**"], [("src/util.ts", None)]),
    ("must_not_match", "file", "*.md", None, [("README.md", None)]),
    ("must_use", "code", r"logging\.", None, [NOWHERE]),
    ("must_exist", "code", r"print\(", ["*.py"], []),
    ("must_not_use", "code", r"password\s*=", None, [("src/app.py", 4)]),
    ("must_not_exist", "code", r"require\(", None, [("src/util.ts", 2)]),
    ("must_match", "code", r"^# SPDX", ["src/**"], [("src/app.py", None), ("src/util.ts", None)]),
    ("must_not_match", "code", r"print\(|^debug", None, [("src/app.py", 3), ("config/app.yaml", 1)]),
    ("must_use", "config", r"log_level", None, []),
    ("must_exist", "config", r"metrics:", None, [NOWHERE]),
    ("must_not_use", "config", r"debug:\s*true", None, [("config/app.yaml", 1)]),
    ("must_not_exist", "config", r"log_level: info", None, [("config/app.yaml", 2)]),
    ("must_match", "config", r"^version:", None, [("config/app.yaml", None)]),
    ("must_not_match", "config", r"^debug", ["src/**"], []),
    ("must_use", "import", "structlog", None, [NOWHERE]),
    ("must_exist", "import", "requests", None, []),
    ("must_not_use", "import", "requests", None, [("src/app.py", 2)]),
    ("must_not_exist", "import", "moment", None, [("src/util.ts", 2)]),
    ("must_match", "import", "os", ["*.py"], [("src/app.py", 2)]),
    ("must_not_match", "import", "lodash|os", None, [("src/app.py", 1), ("src/util.ts", 1)]),
    ("must_use", "dependency", "postgresql|pg|postgres", None, [NOWHERE]),
    ("must_exist", "dependency", "express", None, []),
    ("must_not_use", "dependency", "mysql|mysql2|mariadb", None, [NOWHERE]),
    ("must_not_exist", "dependency", "express", None, [NOWHERE]),
    ("must_match", "dependency", "express|pg", None, [NOWHERE]),
    ("must_not_match", "dependency", "my.*|ex.*", None, [NOWHERE, NOWHERE]),
]


def holder(*constraints: Constraint, item_id: str = "pol-1") -> Item:
    return msgspec.convert({"id": item_id, "type": "policy", "layer": "company", "scope": None, "title": "Rules",
                            "summary": "", "content": "", "status": "accepted", "severity": "warn", "tags": [],
                            "metadata": {}, "path": "company/policies/rules.md", "contentHash": "0",
                            "constraints": [msgspec.to_builtins(c) for c in constraints]}, Item)


def rule(operator: str, target: str, pattern: str, applies_to: list[str] | None = None,
         severity: str = "warn") -> Constraint:
    return msgspec.convert({"operator": operator, "target": target, "pattern": pattern, "severity": severity,
                            "appliesTo": applies_to}, Constraint)


@pytest.mark.parametrize(("operator", "target", "pattern", "applies_to", "expected"), GOLDEN,
                         ids=[f"{o}-{t}" for o, t, *_ in GOLDEN])
def test_every_operator_on_every_target_gives_the_golden_violations(
        operator: str, target: str, pattern: str, applies_to: list[str] | None,
        expected: list[tuple[str | None, int | None]]) -> None:
    passed, violations, counts, invalid = check([holder(rule(operator, target, pattern, applies_to))], FILES, DEPS,
                                                "info")
    got = [(v.location.file, v.location.line) if v.location else NOWHERE for v in violations]
    assert got == expected and invalid == []
    assert passed and counts.warn == len(expected)
    assert all(v.constraint.operator == operator and v.constraint.pattern == pattern for v in violations)


def test_the_golden_cases_cover_every_operator_and_target() -> None:
    assert {(o, t) for o, t, *_ in GOLDEN} == {(o, t) for o in ("must_use", "must_not_use", "must_match",
                                                                "must_not_match", "must_exist", "must_not_exist")
                                               for t in ("file", "code", "dependency", "import", "config")}


def test_a_constraint_whose_input_was_not_given_is_not_evaluated() -> None:
    items = [holder(rule("must_use", "dependency", "pg"), rule("must_use", "code", "x"), rule("must_use", "file", "y"))]
    assert check(items, None, None)[1] == []
    assert [v.constraint.target for v in check(items, None, [])[1]] == ["dependency"]
    assert [v.constraint.target for v in check(items, [("a.py", "")], None)[1]] == ["code", "file"]


def test_the_reference_mysql2_example_comes_out_exactly() -> None:
    adr = parse_item("company/adrs/adr-042-database-selection.md", ADR_042.encode())
    passed, violations, summary, _ = check([adr], None, [("mysql2", "3.0.0")])
    assert passed is False
    assert msgspec.to_builtins(violations) == [{
        "knowledgeItemId": "adr-042-database-selection",
        "knowledgeItemTitle": "Database Selection for New Services",
        "constraint": {"operator": "must_not_use", "target": "dependency", "pattern": "mysql|mysql2|mariadb"},
        "severity": "block",
        "message": "MySQL not allowed for new services per ADR-042. Use PostgreSQL instead.",
    }]
    assert msgspec.to_builtins(summary) == {"info": 0, "warn": 0, "block": 1}


def test_the_adr_with_its_must_use_constraint_as_well_reports_both_blocks() -> None:
    # The reference's 03 spells ADR-042 with a second block constraint (must_use postgresql|pg|postgres);
    # evaluated literally against [mysql2] it is violated too. We pin the literal behaviour.
    adr = parse_item("company/adrs/adr-042-database-selection.md", ADR_042_BOTH.encode())
    passed, violations, summary, _ = check([adr], None, [("mysql2", "3.0.0")])
    assert not passed and [v.constraint.operator for v in violations] == ["must_not_use", "must_use"]
    assert msgspec.to_builtins(summary) == {"info": 0, "warn": 0, "block": 2}
    assert check([adr], None, [("pg", "8")])[0] is True


lines = st.lists(st.lists(st.sampled_from(["alpha", "beta", "gamma", "  ", "x=1"]), max_size=4).map(" ".join),
                 max_size=12)
severities = st.sampled_from(["info", "warn", "block"])


@given(content=lines, word=st.sampled_from(["alpha", "beta", "gamma"]))
def test_must_not_match_reports_each_line_that_matches(content: list[str], word: str) -> None:
    text = "\n".join(content)
    _, violations, _, _ = check([holder(rule("must_not_match", "code", word))], [("f.txt", text)], None, "info")
    assert [v.location.line for v in violations if v.location] == [
        i for i, line in enumerate(content, start=1) if word in line]


@given(content=lines, sevs=st.lists(severities, min_size=1, max_size=4), floor=severities)
def test_passed_means_no_block_and_min_severity_only_filters_the_list(content: list[str], sevs: list[str],
                                                                      floor: str) -> None:
    words = ["alpha", "beta", "gamma", "x=1"]
    item = holder(*[rule("must_not_match", "code", words[i % 4], severity=s) for i, s in enumerate(sevs)])
    files = [("f.txt", "\n".join(content))]
    passed, everything, counts, _ = check([item], files, None, "info")
    passed2, some, counts2, _ = check([item], files, None, floor)  # type: ignore[arg-type]
    assert passed == passed2 == (counts.block == 0) == all(v.severity != "block" for v in everything)
    assert counts == counts2 and counts.info + counts.warn + counts.block == len(everything)
    rank = {"info": 0, "warn": 1, "block": 2}
    assert some == [v for v in everything if rank[v.severity] >= rank[floor]]


@given(paths=st.lists(st.sampled_from(["a.py", "src/b.py", "src/c.ts", "docs/d.md", "src/x/e.py"]), unique=True),
       glob=st.sampled_from(["*.py", "src/**", "src/*.py", "**/*.ts", "docs/**", "nothing"]))
def test_applies_to_only_narrows_what_a_prohibition_reports(paths: list[str], glob: str) -> None:
    files = [(p, "forbidden\n") for p in paths]
    _, wide, _, _ = check([holder(rule("must_not_use", "code", "forbidden"))], files, None)
    _, narrow, _, _ = check([holder(rule("must_not_use", "code", "forbidden", [glob]))], files, None)
    assert {v.location.file for v in narrow if v.location} <= {v.location.file for v in wide if v.location}


@given(st.lists(st.sampled_from(FILES), max_size=4, unique=True), st.sampled_from(["info", "warn", "block"]))
def test_rules_made_once_and_checked_again_and_again_give_what_a_fresh_check_gives(
        files: list[tuple[str, str]], severity: str) -> None:
    from specactor.domain.knowledge.check import rules_of

    items = [holder(*(rule(o, t, p, a, severity=("info", "warn", "block")[k % 3])
                      for k, (o, t, p, a, _) in enumerate(GOLDEN))),
             holder(rule("must_not_use", "code", "(?<=x)y"), item_id="pol-2")]  # RE2 refuses a lookbehind
    made = rules_of(items)
    for _ in range(2):  # the shared rules come out of a check as they went in
        assert check(made, files, DEPS, severity) == check(items, files, DEPS, severity)
    assert [i.knowledge_item_id for i in check(items, files, DEPS, severity).invalid] == ["pol-2"]


# The same paths with other contents, a path spelled another way, and files no golden rule expects.
EDITED = [*FILES, ("src/app.py", "print('changed')\npassword = 'y'\n"), ("./src/util.ts", "import os\n"),
          ("lib/x.py", "import requests\nimport structlog\n"), ("deploy/prod.toml", "metrics: on\nversion: 2\n")]


@given(files=st.lists(st.sampled_from(EDITED), max_size=6), floor=severities,
       deps=st.sampled_from([None, [], DEPS, [("pg", None), ("mysql2", None)]]))
def test_a_check_of_many_rules_finds_what_each_rule_finds_alone_whatever_was_checked_before(
        files: list[tuple[str, str]], floor: str, deps: list[tuple[str, str | None]] | None) -> None:
    """Rules that read the same way share what they read, each file's findings are remembered
    (and reused for the same path and content), and none of it changes what a rule finds."""
    from specactor.domain.knowledge.check import rules_of

    rules = [rule(o, t, p, a, severity=("info", "warn", "block")[k % 3]) for k, (o, t, p, a, _) in enumerate(GOLDEN)]
    made = rules_of([holder(*rules)])
    alone = [check([holder(r)], files, deps, "info") for r in rules]
    rank = {"info": 0, "warn": 1, "block": 2}
    expected = [v for found in alone for v in found.violations if rank[v.severity] >= rank[floor]]
    for _ in range(2):  # the second time, every file is remembered
        found = check(made, files, deps, floor)  # type: ignore[arg-type]
        assert found.violations == expected
        assert sum(msgspec.structs.astuple(found.summary)) == sum(len(a.violations) for a in alone)
        assert found.passed == all(a.passed for a in alone)
    for place in range(len(files)):  # the same file again, now beside others: what it gives is the same
        again = check(made, files[place:] + files[:place], deps, floor)  # type: ignore[arg-type]
        assert sorted(msgspec.json.encode(v) for v in again.violations) == sorted(
            msgspec.json.encode(v) for v in expected)


def test_the_memo_of_what_files_gave_keeps_to_its_bounds_and_answers_the_same() -> None:
    from specactor.domain.knowledge import check as module

    memo = module._Memo(entries=2, chars=200)
    made = module.rules_of([holder(rule("must_not_use", "code", "password"), rule("must_use", "import", "os"))])
    files = [(f"f{k}.py", f"import os\npassword = {k}\n") for k in range(5)] + [("big.py", "password\n" * 10)]
    for path, content in files * 2:
        got = memo.get(made, path, content)
        lines = range(1, 11) if path == "big.py" else [2]
        assert [v.location for _, found in got.found for v in found] == [Location(file=path, line=n) for n in lines]
        assert got.counted == {1} and got.matched == ({1} if path != "big.py" else set())
        assert len(memo._found) <= 2 and memo._held <= 200
    assert "big.py" not in {path for _, path, _ in memo._found}  # over a quarter of the bound: not kept
