"""The conformance suite's results: its SUMMARY and `checks.json` files read back, and the
table and markdown summary written from them (`tests.conformance.run` drives the runs)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "@modelcontextprotocol/conformance"


@dataclass(frozen=True)
class Configuration:
    key: str
    install: str  # directory under .conformance/
    version: str  # of the suite package
    args: tuple[str, ...]
    timeout_flag: bool  # 0.1.16 has no --timeout option

    @property
    def label(self) -> str:
        return f"{PACKAGE}@{self.version} {' '.join(self.args)}"


class HarnessError(Exception):
    """The harness (install, server, suite run or its output) broke: not a conformance verdict."""


@dataclass
class Scenario:
    name: str
    passed: int = 0
    failed: int = 0
    scored: bool = True
    why_unscored: str = ""
    failures: list[str] = field(default_factory=list)  # "check-id: message" of each failing check


@dataclass
class Outcome:
    config: Configuration
    scenarios: dict[str, Scenario] = field(default_factory=dict)
    exit_code: int | None = None
    seconds: float = 0.0
    error: str | None = None  # a harness problem
    notes: list[str] = field(default_factory=list)

    @property
    def scored_failures(self) -> list[str]:
        return [s.name for s in self.scenarios.values() if s.scored and s.failed]

    @property
    def ok(self) -> bool:
        return self.error is None and not self.scored_failures

    @property
    def totals(self) -> tuple[int, int]:
        return (sum(s.passed for s in self.scenarios.values()), sum(s.failed for s in self.scenarios.values()))


# ---------------------------------------------------------------------------- reading results

_LINE = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed\s*$")
_UNSCORED = re.compile(r"^\s+([✓✗]) (\S+) \((.+)\)\s*$")
_TOTAL = re.compile(r"^Total: (\d+) passed, (\d+) failed")
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[0-9-]+Z$")


def parse_summary(text: str) -> tuple[dict[str, Scenario], tuple[int, int] | None]:
    """The SUMMARY block of the suite's output: per-scenario counts, which are not scored, the total."""
    if "=== SUMMARY ===" not in text:
        return {}, None
    tail = text.split("=== SUMMARY ===", 1)[1]
    scenarios: dict[str, Scenario] = {}
    total = None
    unscored_block = False
    for line in tail.splitlines():
        if line.startswith("Not scored"):
            unscored_block = True
            continue
        if unscored_block and (m := _UNSCORED.match(line)):
            scenario = scenarios.setdefault(m.group(2), Scenario(m.group(2)))
            scenario.scored, scenario.why_unscored = False, m.group(3)
        elif (m := _LINE.match(line)) and not unscored_block:
            scenarios[m.group(2)] = Scenario(m.group(2), int(m.group(3)), int(m.group(4)))
        elif m := _TOTAL.match(line):
            total = (int(m.group(1)), int(m.group(2)))
        elif line.strip() and not line.startswith(" "):
            unscored_block = False
    return scenarios, total


def read_checks(out: Path) -> tuple[dict[str, tuple[int, int]], dict[str, list[str]]]:
    """(passed, failed) per scenario from the suite's `server-<scenario>-<time>/checks.json` files,
    and the failing checks' ids and messages."""
    counts: dict[str, tuple[int, int]] = {}
    failures: dict[str, list[str]] = {}
    for directory in sorted(p for p in out.iterdir() if p.is_dir() and p.name.startswith("server-")):
        name = _STAMP.sub("", directory.name.removeprefix("server-"))
        try:
            checks = json.loads((directory / "checks.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise HarnessError(f"unreadable {directory / 'checks.json'}: {err}") from None
        checks = [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []
        statuses = [c.get("status") for c in checks]
        passed, failed = counts.get(name, (0, 0))
        counts[name] = (passed + statuses.count("SUCCESS"), failed + statuses.count("FAILURE"))
        failures.setdefault(name, []).extend(f"{c.get('id')}: {c.get('errorMessage', '')}".strip()
                                             for c in checks if c.get("status") == "FAILURE")
    return counts, failures


def interpret(outcome: Outcome, text: str, out: Path) -> None:
    summary, total = parse_summary(text)
    if not summary:
        outcome.error = outcome.error or f"the suite printed no SUMMARY (exit {outcome.exit_code}; see {out}/suite.log)"
        return
    checks, failures = read_checks(out)
    for name, scenario in summary.items():
        scenario.failures = failures.get(name, [])
        if name in checks and checks[name] != (scenario.passed, scenario.failed):
            outcome.notes.append(f"{name}: SUMMARY says {scenario.passed}/{scenario.failed}, "
                                 f"checks.json {checks[name][0]}/{checks[name][1]}; using checks.json")
            scenario.passed, scenario.failed = checks[name]
    for name in sorted(set(checks) - set(summary)):
        summary[name] = Scenario(name, *checks[name], failures=failures.get(name, []))
        outcome.notes.append(f"{name}: in checks.json but not in the SUMMARY")
    outcome.scenarios = summary
    if total is not None and total != outcome.totals:
        outcome.notes.append(f"the suite's total {total[0]}/{total[1]} differs from the scenarios' "
                             f"{outcome.totals[0]}/{outcome.totals[1]}")
    if outcome.exit_code != 0 and not outcome.scored_failures:
        outcome.error = outcome.error or (f"the suite exited {outcome.exit_code} without a scored failure "
                                          f"(see {out}/suite.log)")
    if outcome.exit_code == 0 and outcome.scored_failures:
        outcome.notes.append("the suite exited 0 although scored scenarios failed; counted as failures")


# ---------------------------------------------------------------------------- reporting


def _cell(scenario: Scenario | None) -> str:
    if scenario is None:
        return "—"
    mark = "✓" if not scenario.failed else "✗"
    text = f"{mark} {scenario.passed}/{scenario.failed}"
    return text if scenario.scored else f"{text} (unscored: {scenario.why_unscored})"


def _rows(outcomes: list[Outcome]) -> list[list[str]]:
    names: list[str] = []
    for outcome in outcomes:
        names += [n for n in outcome.scenarios if n not in names]
    return [[name, *(_cell(o.scenarios.get(name)) for o in outcomes)] for name in names]


def _verdict(outcome: Outcome) -> str:
    passed, failed = outcome.totals
    if outcome.error is not None:
        return f"HARNESS ERROR: {outcome.error}"
    failures = outcome.scored_failures
    state = "PASS" if not failures else f"FAIL (scored failures: {', '.join(failures)})"
    unscored = sum(1 for s in outcome.scenarios.values() if not s.scored and s.failed)
    extra = f", {unscored} unscored scenario(s) failing" if unscored else ""
    return (f"{state} — {passed} passed, {failed} failed{extra}; suite exit {outcome.exit_code}; "
            f"{outcome.seconds:.1f} s")


def print_table(outcomes: list[Outcome]) -> None:
    header = ["scenario (passed/failed checks)", *(o.config.key for o in outcomes)]
    rows = _rows(outcomes)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print()
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    print()
    for outcome in outcomes:
        print(f"{outcome.config.key:>6}  {outcome.config.label}: {_verdict(outcome)}")
        for name in outcome.scored_failures:
            for failure in outcome.scenarios[name].failures:
                print(f"        ✗ {name}: {failure}")
        for note in outcome.notes:
            print(f"        note: {note}")


def write_markdown(outcomes: list[Outcome], path: Path) -> None:
    lines = ["# MCP conformance: specactor fixture server", "",
             f"Run {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by `python3 -m tests.conformance.run`. "
             "Cells are passed/failed checks; ✗ marks a scenario with a failing check.", "",
             "| configuration | result |", "|---|---|"]
    lines += [f"| `{o.config.label}` | {_verdict(o)} |" for o in outcomes]
    lines += ["", "| scenario | " + " | ".join(o.config.key for o in outcomes) + " |",
              "|---|" + "---|" * len(outcomes)]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(outcomes)]
    notes = [f"- {o.config.key}: scored failure {name}: {failure}" for o in outcomes
             for name in o.scored_failures for failure in o.scenarios[name].failures]
    notes += [f"- {o.config.key}: {note}" for o in outcomes for note in o.notes]
    if notes:
        lines += ["", "Notes:", "", *notes]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
