"""The ways an AirsSpec operation can be refused, as plain exceptions.

The toolset turns each into the seed's answer: a tool error in the envelope (with the seed's
JSON-RPC domain code in its details) or, for resources, a JSON-RPC error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

# The seed's JSON-RPC domain codes (docs/decisions.md: kept for this toolset).
SPEC_NOT_FOUND: Final = -32001
PLAN_NOT_FOUND: Final = -32002
INVALID_TRANSITION: Final = -32003
DEPENDENCY_NOT_SATISFIED: Final = -32004
VALIDATION_FAILED: Final = -32005


class AirsSpecError(Exception):
    """Base: `code` is the seed's JSON-RPC domain code, `details` the structured context."""

    code: int = VALIDATION_FAILED

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class NotFoundError(AirsSpecError):
    """No spec (or no plan for a spec) with this id."""

    def __init__(self, kind: str, spec_id: str) -> None:
        what = "spec" if kind == "spec" else f"plan for spec '{spec_id}'"
        message = f"spec '{spec_id}' was not found" if kind == "spec" else f"no {what} exists; create it first"
        super().__init__(message, {"id": spec_id, "kind": kind})
        self.code = SPEC_NOT_FOUND if kind == "spec" else PLAN_NOT_FOUND
        self.kind = kind
        self.spec_id = spec_id


class InvalidTransition(AirsSpecError):
    code = INVALID_TRANSITION

    def __init__(self, from_state: str, to_state: str, valid: list[str]) -> None:
        super().__init__(f"Cannot transition from '{from_state}' to '{to_state}'",
                         {"error": "invalid_transition", "from": from_state, "to": to_state,
                          "valid_transitions": valid})


class DependencyNotSatisfied(AirsSpecError):
    code = DEPENDENCY_NOT_SATISFIED

    def __init__(self, spec_id: str, blocking: list[str], states: Mapping[str, str | None]) -> None:
        named = ", ".join(f"'{b}' ({states.get(b) or 'missing'})" for b in blocking)
        super().__init__(f"dependency not satisfied: spec '{spec_id}' needs {named} done first",
                         {"error": "dependency_not_satisfied", "blocking": blocking})


class Conflict(AirsSpecError):
    """The spec's state does not allow the operation (wrong phase, plan exists, progress backwards…)."""

    code = INVALID_TRANSITION

    def __init__(self, error: str, message: str, **details: Any) -> None:
        super().__init__(message, {"error": error, **details})


class StepOutOfRange(AirsSpecError):
    def __init__(self, index: int, total: int) -> None:
        limit = "the plan has no steps" if total == 0 else f"valid indexes are 0 to {total - 1}"
        super().__init__(f"step_index {index} is outside the plan: {limit}",
                         {"field": "step_index", "rule": "range", "min": 0, "max": total - 1, "actual": index})


class ValidationFailed(AirsSpecError):
    """A workspace file that does not parse; names the file (workspace-relative) and the 1-based line."""

    code = VALIDATION_FAILED

    def __init__(self, file: str, line: int, reason: str) -> None:
        super().__init__(f"{file}:{line}: {reason}",
                         {"error": "validation_failed", "file": file, "line": line, "reason": reason})
        self.file = file
        self.line = line
        self.reason = reason
