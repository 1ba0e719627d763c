"""`plan.md`: front matter (spec_id, approach, created_at, updated_at), then the steps as the seed
renders them, which is also what is parsed back:

    ### Step 1: Set up auth database schema
    - **Complexity:** simple
    - **Status:** completed
    - **Notes:** Created users table

    The step's description.

A description line that starts with `#` or `\\` is written with a `\\` in front (a markdown
escape), so no description can pass for a heading; multi-line notes continue on lines indented
by two spaces.
"""

from __future__ import annotations

import re
from typing import Any, Final

from specactor.domain.airsspec import frontmatter, vocab
from specactor.domain.airsspec.errors import ValidationFailed
from specactor.domain.airsspec.model import PlanDoc, PlanStep
from specactor.domain.airsspec.text import block, note

_STEP: Final = re.compile(r"^### Step (\d+):(?: (.*))?$")
_BULLET: Final = re.compile(r"^- \*\*(Complexity|Status|Notes):\*\*(?: (.*))?$")
_SECTION: Final = re.compile(r"^#{1,2}(?: |$)")


def _escape(text: str) -> list[str]:
    return ["\\" + line if line.startswith(("#", "\\")) else line for line in text.split("\n")] if text else []


def _unescape(lines: list[str]) -> str:
    return block("\n".join(line[1:] if line.startswith("\\") else line for line in lines))


def render(plan: PlanDoc) -> str:
    data: dict[str, Any] = {"spec_id": plan.spec_id, "approach": plan.approach, "created_at": plan.created_at,
                            "updated_at": plan.updated_at}
    out = ["# Implementation Plan", "", "## Approach", ""]
    approach = _escape(block(plan.approach))
    out += [*approach, ""] if approach else []
    out += ["## Steps", ""]
    for number, step in enumerate(plan.steps, start=1):
        out.append(f"### Step {number}: {step.title}")
        if step.complexity is not None:
            out.append(f"- **Complexity:** {step.complexity}")
        out.append(f"- **Status:** {step.status}")
        if step.notes:
            first, *more = step.notes.split("\n")
            out.append(f"- **Notes:** {first}")
            out += [f"  {line}" for line in more]
        out.append("")
        description = _escape(step.description)
        out += [*description, ""] if description else []
    return frontmatter.render(data, "\n".join(out).rstrip("\n") + "\n")


def parse(text: str, file: str, spec_id: str) -> PlanDoc:
    """Raises:
        ValidationFailed: naming `file` and the line of the first problem.
    """
    fm = frontmatter.parse(text, file)
    data = fm.data
    if data.get("spec_id", spec_id) != spec_id:
        raise fm.fail("spec_id", f"'spec_id' must be '{spec_id}', the directory the plan is in")
    created, updated = fm.timestamps()
    first_body_line = text[:len(text) - len(fm.body)].count("\n") + 1
    steps, approach_lines = _steps(fm.body.split("\n"), file, first_body_line)
    approach = data.get("approach")
    if approach is None:
        approach = _unescape(approach_lines)
    if not isinstance(approach, str):
        raise fm.fail("approach", "'approach' must be a string")
    return PlanDoc(spec_id=spec_id, approach=approach, steps=tuple(steps), created_at=created, updated_at=updated)


class _Step:
    def __init__(self, title: str, line: int) -> None:
        self.title = title
        self.line = line
        self.fields: dict[str, str] = {}
        self.notes: list[str] = []
        self.description: list[str] = []
        self.in_bullets = True


def _steps(lines: list[str], file: str, offset: int) -> tuple[list[PlanStep], list[str]]:
    steps: list[PlanStep] = []
    approach: list[str] = []
    section = ""
    current: _Step | None = None
    for index, line in enumerate(lines):
        number = offset + index
        heading = _STEP.match(line)
        if heading:
            if current is not None:
                steps.append(_finish(current, file))
            title = (heading.group(2) or "").strip()
            if not title:
                raise ValidationFailed(file, number, "a step heading needs a title: '### Step N: <title>'")
            current = _Step(title, number)
            continue
        if _SECTION.match(line):
            if current is not None:
                steps.append(_finish(current, file))
                current = None
            section = line.lstrip("#").strip().lower()
            continue
        if current is None:
            if section == "approach":
                approach.append(line)
            continue
        if current.in_bullets:
            bullet = _BULLET.match(line)
            if bullet:
                _bullet(current, bullet.group(1), bullet.group(2) or "", file, number)
                continue
            if line.startswith("  ") and current.notes:
                current.notes.append(line[2:])
                continue
            current.in_bullets = False
        current.description.append(line)
    if current is not None:
        steps.append(_finish(current, file))
    return steps, approach


def _bullet(step: _Step, key: str, value: str, file: str, line: int) -> None:
    if key == "Notes":
        step.notes = [value] if value else [""]
        return
    word = value.strip().lower().replace(" ", "_")
    ok = vocab.complexity(word) if key == "Complexity" else vocab.step_status(word)
    if ok is None:
        valid = vocab.COMPLEXITIES if key == "Complexity" else vocab.STEP_STATUSES
        raise ValidationFailed(file, line, f"{key} must be one of {', '.join(valid)}; got '{value.strip()}'")
    step.fields[key] = ok


def _finish(step: _Step, file: str) -> PlanStep:
    notes = note("\n".join(step.notes))
    complexity = vocab.complexity(step.fields.get("Complexity", ""))
    status = vocab.step_status(step.fields.get("Status", "pending"))
    assert status is not None
    return PlanStep(title=step.title, description=_unescape(step.description), complexity=complexity,
                    status=status, notes=notes or None)
