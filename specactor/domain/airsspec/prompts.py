"""The five AirsSpec prompts: the seed's templates, with `{{argument}}` filled in."""

from __future__ import annotations

from typing import Annotated, Final

import msgspec
from msgspec import Meta

WRITE_SPEC: Final = """\
You are helping write a specification for: {{feature_description}}

A good spec should answer:
1. WHAT: What exactly needs to be built?
2. WHY: Why is this needed? What problem does it solve?
3. SCOPE: What's included and what's explicitly NOT included?
4. SUCCESS: How do we know it's done correctly?
5. DEPENDENCIES: What must be in place before this can be built?

Please generate a well-structured specification with these sections:

## Overview
Brief summary of the feature.

## Problem Statement
What problem does this solve? Why is it needed?

## Requirements
Numbered list of specific requirements.

## Success Criteria
How do we know this is complete and correct?

## Out of Scope
What is explicitly NOT part of this spec?

## Dependencies
What specs or systems must be ready first?

Use the spec_create tool to save the specification when complete."""

CREATE_PLAN: Final = """\
You are creating an implementation plan for spec: {{spec_id}}

First, read the spec using the airsspec:///{{spec_id}}/spec resource.

Break down the implementation into:
1. APPROACH: High-level strategy (architecture, patterns, libraries)
2. STEPS: Ordered, actionable steps with clear completion criteria
3. COMPLEXITY: Estimate each step (trivial, simple, moderate, complex)

Each step should be:
- Specific and actionable (not vague)
- Independently verifiable (clear when done)
- Appropriately sized (2-4 hours of work ideally)
- Ordered logically (dependencies first)

After creating the plan, use the plan_create tool to save it."""

REVIEW_SPEC: Final = """\
Review the spec at airsspec:///{{spec_id}}/spec

Check for:
- [ ] Clear problem statement (why is this needed?)
- [ ] Specific success criteria (how do we know it's done?)
- [ ] Scope boundaries (what's in/out)
- [ ] Dependencies identified (what must come first?)
- [ ] Non-functional requirements (performance, security, etc.)
- [ ] No ambiguous language ("should", "might", "could")

Provide feedback:
1. List any missing sections
2. Flag ambiguous requirements
3. Suggest improvements
4. Rate overall readiness (ready, needs work, incomplete)"""

VALIDATE_PLAN: Final = """\
Compare the plan at airsspec:///{{spec_id}}/plan against the spec at airsspec:///{{spec_id}}/spec

Verify:
- [ ] All spec requirements are covered by plan steps
- [ ] Plan approach aligns with spec constraints
- [ ] Dependencies are accounted for in ordering
- [ ] Success criteria can be verified by plan completion
- [ ] No plan steps go beyond spec scope

Flag any:
1. Missing coverage (spec requirement without plan step)
2. Scope creep (plan step not in spec)
3. Ordering issues (step depends on later step)
4. Missing complexity estimates"""

CHECK_PROGRESS: Final = """\
Check progress on spec: {{spec_id}}

Use the spec_status tool to get current status.

Review:
1. Current lifecycle state
2. Current workflow phase
3. Completed plan steps
4. Build progress percentage

Summarize:
- What's been accomplished
- What's remaining
- Any blockers or dependencies
- Estimated time to completion
- Recommended next actions"""


class WriteSpecArgs(msgspec.Struct):
    feature_description: Annotated[str, Meta(description="Brief description of what to build")]


class CreatePlanArgs(msgspec.Struct):
    spec_id: Annotated[str, Meta(description="Spec to plan for")]


class ReviewSpecArgs(msgspec.Struct):
    spec_id: Annotated[str, Meta(description="Spec to review")]


class ValidatePlanArgs(msgspec.Struct):
    spec_id: Annotated[str, Meta(description="Spec to validate plan against")]


class CheckProgressArgs(msgspec.Struct):
    spec_id: Annotated[str, Meta(description="Spec to check progress on")]


# name -> (description, arguments, template), in the seed's order
PROMPTS: Final[dict[str, tuple[str, type[msgspec.Struct], str]]] = {
    "write_spec": ("Guide for writing a comprehensive specification", WriteSpecArgs, WRITE_SPEC),
    "create_plan": ("Guide for breaking down a spec into actionable steps", CreatePlanArgs, CREATE_PLAN),
    "review_spec": ("Check if a spec is complete and well-formed", ReviewSpecArgs, REVIEW_SPEC),
    "validate_plan": ("Ensure plan adequately addresses spec requirements", ValidatePlanArgs, VALIDATE_PLAN),
    "check_progress": ("Assess current progress on a spec", CheckProgressArgs, CHECK_PROGRESS),
}


def render(template: str, args: dict[str, str]) -> str:
    """The template with each `{{name}}` replaced by its argument (in one pass: a value that
    itself contains `{{...}}` is not expanded again)."""
    out, rest = [], template
    while "{{" in rest:
        head, _, tail = rest.partition("{{")
        name, close, after = tail.partition("}}")
        out.append(head)
        if close and name in args:
            out.append(args[name])
            rest = after
        else:
            out.append("{{")
            rest = tail
    out.append(rest)
    return "".join(out)
