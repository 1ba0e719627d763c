"""Fixed texts: fallback documents, the files `init` writes, and the three workflow prompts.

The prompts follow the seed's steps and name specactor's real resources (`openspec://...`) and
tools (`list`, `show`, `validate`, `archive`, `task_complete`, ...), so an assistant can act on
them without knowing the CLI.
"""

from __future__ import annotations

CONFIG_YAML = """schema: spec-driven

# Project context (optional)
# This is shown to AI when creating artifacts.
# Add your tech stack, conventions, style guides, domain knowledge, etc.
# Example:
#   context: |
#     Tech stack: TypeScript, React, Node.js
#     We use conventional commits
#     Domain: e-commerce platform

# Per-artifact rules (optional)
# Add custom rules for specific artifacts.
# Example:
#   rules:
#     proposal:
#       - Keep proposals under 500 words
#       - Always include a "Non-goals" section
#     tasks:
#       - Break tasks into chunks of max 2 hours

# Per-operation guidance (optional)
# Add advisory guidance for how apply and archive work should be conducted.
# This is separate from artifact rules above.
# Example:
#   operations:
#     apply:
#       guidance:
#         - Keep test summaries concise
#     archive:
#       guidance:
#         - Summarize the archive outcome before finishing
"""
"""What `openspec init` 1.13.2 writes to `openspec/config.yaml` (`serializeConfig`)."""

INSTRUCTIONS = """# OpenSpec Instructions

Instructions for AI coding assistants using OpenSpec for spec-driven development through specactor.

## TL;DR Checklist

- Read `openspec://project` for conventions, `openspec://specs` and `openspec://changes` for what exists.
- Pick a unique verb-led change id (kebab-case: `add-`, `update-`, `remove-`, `refactor-`).
- Write `openspec/changes/<id>/proposal.md`, `tasks.md`, optional `design.md`, and delta specs under
  `openspec/changes/<id>/specs/<capability>/spec.md`.
- Deltas use `## ADDED|MODIFIED|REMOVED|RENAMED Requirements`; every requirement has at least one
  `#### Scenario:` with `- **WHEN**` / `- **THEN**` lines.
- Run the `validate` tool (`{"item": "<id>", "strict": true}`) and fix every issue.
- Implement tasks in order; tick each with `task_complete`.
- When every task is done, `archive` the change (`dryRun` first) to merge its deltas into the specs.

## Three stages

1. **Propose** a change when adding features, changing behaviour or architecture. Skip proposals for
   typo fixes, formatting and non-breaking dependency bumps.
2. **Apply** it: read `proposal.md`, `design.md` and `tasks.md`, implement the tasks sequentially, and
   keep `tasks.md` true (`- [x]` only for finished work).
3. **Archive** it once deployed: the change moves to `changes/archive/YYYY-MM-DD-<id>/` and its deltas
   become the current truth in `openspec/specs/`.

## Spec format

```markdown
### Requirement: Descriptive name
The system SHALL ...

#### Scenario: Success case
- **WHEN** a user does something
- **THEN** the expected result happens
```

MODIFIED requirements replace the whole block: copy the current requirement, edit it, and keep
every scenario it still has. REMOVED entries name the requirement (a `### Requirement:` header or a
``- `### Requirement: Name` `` bullet). RENAMED entries pair ``- FROM: `### Requirement: Old` `` with
``- TO: `### Requirement: New` ``.
"""
"""`openspec://instructions` when `openspec/AGENTS.md` does not exist."""

PROJECT = """# Project Context

## Purpose
[Describe your project's purpose and goals]

## Tech Stack
- [List your primary technologies]

## Project Conventions

### Code Style
[Describe your code style preferences, formatting rules, and naming conventions]

### Architecture Patterns
[Document your architectural decisions and patterns]

### Testing Strategy
[Explain your testing approach and requirements]

### Git Workflow
[Describe your branching strategy and commit conventions]

## Domain Context
[Add domain-specific knowledge that AI assistants need to understand]

## Important Constraints
[List any technical, business, or regulatory constraints]

## External Dependencies
[Document key external services, APIs, or systems]
"""
"""`openspec://project` when neither `project.md` nor a `context:` in `config.yaml` exists."""

NEXT_STEPS = [
    "Describe the project (tech stack, conventions) with the update_project_context tool.",
    "Start a change: use the openspec-propose prompt, or write openspec/changes/<change-id>/proposal.md, "
    "tasks.md and delta specs under specs/<capability>/spec.md.",
    'Check it with the validate tool ({"item": "<change-id>", "strict": true}).',
]

SCOPES = {
    "new-capability": "This adds a new capability: create a new `specs/<capability>/spec.md` delta with ADDED "
                      "requirements.",
    "modify-existing": "This modifies existing behaviour: use MODIFIED requirements copied in full from the current "
                       "spec.",
    "refactor": "This is a refactor: behaviour should not change; if no spec changes, set `skip_specs: true` in the "
                "change's `.openspec.yaml`.",
    "fix": "This is a fix: MODIFY the requirement whose behaviour was wrong, or ADD the missing scenario.",
}


def propose(description: str, scope: str | None) -> str:
    scope_line = SCOPES.get(scope or "", f"Scope: {scope}." if scope else "")
    return f"""Create an OpenSpec change proposal for: {description}
{scope_line}

Follow these steps:
1. Read the resources `openspec://instructions`, `openspec://project`, `openspec://specs` and
   `openspec://changes` (the `list` tool with `{{"specs": true}}` gives requirement counts).
2. Analyse the request against the existing specs (`show` with `{{"item": "<capability>", "type": "spec"}}`)
   and the active changes: look for conflicts and overlaps, and reuse existing capabilities.
3. Choose a unique kebab-case change id starting with a verb, and create
   `openspec/changes/<change-id>/` with `proposal.md` (`## Why`, `## What Changes`, `## Impact`),
   `tasks.md` (numbered `- [ ] 1.1 ...` checkboxes), `design.md` when the change is cross-cutting,
   and one delta spec per affected capability at `specs/<capability>/spec.md` using
   `## ADDED|MODIFIED|REMOVED|RENAMED Requirements`, each requirement with a SHALL/MUST statement and at
   least one `#### Scenario:`.
4. Validate the proposal with the `validate` tool (`{{"item": "<change-id>", "type": "change", "strict": true}}`)
   and `show` (`{{"item": "<change-id>", "deltasOnly": true}}`); fix every issue before asking for review.
"""


def apply(change: str) -> str:
    return f"""Implement the OpenSpec change `{change}`.

Follow these steps:
1. Read the change: `openspec://changes/{change}` (or `…/proposal`, `…/design`, `…/tasks`), and the
   specs it touches via `show` (`{{"item": "{change}", "type": "change"}}`).
2. Implement the tasks in `tasks.md` sequentially; finish one before starting the next.
3. After each task is really done, tick it with the `task_complete` tool
   (`{{"changeId": "{change}", "task": "<task id such as 1.2>"}}`); never tick unfinished work.
4. Validate continuously with `validate` (`{{"item": "{change}", "strict": true}}`) and keep the delta
   specs true to what you built.
"""


def archive(change: str) -> str:
    return f"""Archive the completed OpenSpec change `{change}`.

Follow these steps:
1. Verify every task is complete: `show` (`{{"item": "{change}", "type": "change"}}`) reports `taskStatus`;
   `openspec://changes/{change}/tasks` shows the list. Finish or tick what is left first.
2. Run validation: `validate` (`{{"item": "{change}", "strict": true}}`) must report it valid.
3. Preview the archive: `archive` (`{{"changeId": "{change}", "dryRun": true}}`) lists the specs it will
   create or update and the operation totals; check them.
4. Execute the archive: `archive` (`{{"changeId": "{change}"}}`). It merges the deltas into
   `openspec/specs/` and moves the change to `changes/archive/YYYY-MM-DD-{change}/`, all or nothing.
5. Verify the specs after the archive: `validate` (`{{"specs": true, "strict": true}}`) and read
   `openspec://specs` to confirm the merged requirements.
"""
