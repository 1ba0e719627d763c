"""Reading knowledge items: front matter, layers from folders, constraints, and bad files as problems."""

from __future__ import annotations

import pytest

from specactor.domain.knowledge import gitout
from specactor.domain.knowledge.api import Problem
from specactor.domain.knowledge.globs import BadGlob, compile_glob, matches
from specactor.domain.knowledge.parse import item_scope, parse_item, parse_or_problem
from tests.memory.conftest import ADR_042, item


def test_an_item_takes_its_layer_and_scope_from_its_folder_and_its_type_from_the_subfolder() -> None:
    adr = parse_item("company/adrs/adr-042-database-selection.md", ADR_042.encode())
    assert (adr.id, adr.type, adr.layer, adr.scope, adr.status, adr.severity) == (
        "adr-042-database-selection", "adr", "company", None, "accepted", "block")
    assert adr.tags == ["database", "postgresql"] and adr.summary == "New services use PostgreSQL."
    assert adr.constraints and adr.constraints[0].severity == "block" and len(adr.content) > 0
    pattern = parse_item("teams/platform/patterns/retry.md", item("retry", "Retries").encode())
    assert (pattern.type, pattern.layer, pattern.scope) == ("pattern", "team", "platform")
    assert item_scope("projects/specactor/specs/x.md") == ("project", "specactor")
    assert item_scope("README.md") is None and item_scope("company/README.md") is None
    assert item_scope("orgs/acme.md") is None and item_scope("company/adrs/x.txt") is None


def test_the_id_defaults_to_the_file_name_and_the_summary_to_the_first_paragraph() -> None:
    text = "---\ntitle: Use trio\nstatus: proposed\ntype: adr\ncreatedAt: 2026-01-07\n---\n# Use trio\n\nWe use trio.\n"
    got = parse_item("company/adrs/adr-001-trio.md", text.encode())
    assert got.id == "adr-001-trio" and got.summary == "We use trio." and got.created_at == "2026-01-07"
    assert got.constraints == []


@pytest.mark.parametrize(("text", "reason"), [
    ("no front matter", "no YAML front matter"),
    ("---\ntitle: [unclosed\n---\n", "invalid YAML"),
    ("---\n- a list\n---\n", "must be a YAML mapping"),
    ("---\ntitle: x\nstatus: accepted\n", "not closed"),
    ("---\nstatus: accepted\n---\n", "'title'"),
    ("---\ntitle: x\nstatus: maybe\n---\n", "'status' is 'maybe'"),
    ("---\ntitle: x\nstatus: accepted\nlayer: team\n---\n", "'layer' is 'team'"),
    ("---\nid: bad id!\ntitle: x\nstatus: accepted\n---\n", "'id'"),
    ("---\ntitle: x\nstatus: accepted\n---\n## Constraints\n```yaml\n- operator: must_match\n  target: code\n"
     "  pattern: x\n  appliesTo: ['{unclosed']\n```\n", "does not compile"),
    ("---\ntitle: x\nstatus: accepted\n---\n## Constraints\n```yaml\n- operator: must_fly\n  target: code\n"
     "  pattern: x\n```\n", "constraint 1: 'operator'"),
    ("---\ntitle: x\nstatus: accepted\n---\n## Constraints\n```yaml\n- operator: must_use\n  target: file\n"
     "  pattern: '[abc'\n```\n", "does not compile"),
    ("---\ntitle: x\nstatus: accepted\n---\n## Constraints\n```yaml\nnot: a list\n```\n", "YAML list"),
])
def test_a_bad_item_is_a_problem_naming_its_file(text: str, reason: str) -> None:
    got = parse_or_problem("company/policies/bad.md", text.encode())
    assert isinstance(got, Problem) and got.file == "company/policies/bad.md"
    assert reason in got.error, got.error


def test_constraints_may_be_a_mapping_with_a_constraints_key_and_take_the_item_severity() -> None:
    text = ("---\ntitle: x\nstatus: accepted\nseverity: info\n---\n## Constraints\n\n```yaml\nconstraints:\n"
            "  - {operator: must_not_use, target: import, pattern: moment, appliesTo: '*.ts'}\n```\n## Notes\n")
    got = parse_item("company/policies/x.md", text.encode())
    assert got.constraints and got.constraints[0].severity == "info"
    assert got.constraints[0].applies_to == ["*.ts"]


@pytest.mark.parametrize(("glob", "path", "expected"), [
    ("*.py", "a.py", True), ("*.py", "src/deep/a.py", True), ("src/*.py", "src/a.py", True),
    ("src/*.py", "src/x/a.py", False), ("src/**/*.py", "src/a.py", True), ("src/**/*.py", "src/x/y/a.py", True),
    ("src/**", "src/x/y", True), ("src/**", "srcx/a", False), ("**/*.{ts,tsx}", "a/b.tsx", True),
    ("?.md", "a.md", True), ("[!a].md", "a.md", False), ("./docs/*.md", "docs/x.md", True), ("/top.md", "top.md", True),
])
def test_globs_match_like_gitignore(glob: str, path: str, expected: bool) -> None:
    assert matches(glob, path) is expected


def test_a_bad_glob_is_refused() -> None:
    for glob in ("", "[abc", "{a,b"):
        with pytest.raises(BadGlob):
            compile_glob(glob)


def test_git_outputs_are_read() -> None:
    assert gitout.ls_tree(b"100644 blob abc\tcompany/a.md\x00040000 tree def\tx\x00") == {"company/a.md": "abc"}
    assert gitout.name_status(b"M\x00a.md\x00D\x00b.md\x00") == {"a.md", "b.md"}
    assert gitout.cat_file_batch(b"aa blob 3\nxyz\nbb missing\ncc blob 0\n\n") == {"aa": b"xyz", "cc": b""}
    entries = gitout.log(b"h1\x1f2026-01-01T00:00:00+00:00\x1fAnn\x1ffirst\x1e\nh0\x1ft\x1fBo\x1fzero\x1e\n")
    assert [(e.version, e.author, e.message) for e in entries] == [("h1", "Ann", "first"), ("h0", "Bo", "zero")]
