"""The tools' and prompts' arguments, as Structs whose JSON Schema carries every rule.

An id is one path segment (a change) or several (a capability such as `members/profile`); no
segment may be `.` or `..` or hold `/`, `\\` or NUL, so an absolute or climbing path never
validates. Unknown fields are refused (INVALID_INPUT naming them).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from specactor.wire.arguments import ToolInput

# One path segment that is not `.`/`..` and holds no `/`, `\` or NUL; an item may nest segments.
_SEGMENT = r"(?!\.\.?(?:/|$))[^/\\\x00]+"
ITEM_ID = rf"^{_SEGMENT}(?:/{_SEGMENT})*$"
CHANGE_ID = rf"^{_SEGMENT}$"

# A `pattern` field's description says its rule in words: a refusal quotes it (protocol/schema.py).
Item = Annotated[str, Meta(pattern=ITEM_ID, min_length=1, max_length=1024,
                           description="Change id or capability id (capabilities may nest: members/profile); each "
                                       "'/'-separated part is a folder name, not '.' or '..', without '\\' or NUL")]
ChangeId = Annotated[str, Meta(pattern=CHANGE_ID, min_length=1, max_length=255,
                               description="Change id: one folder name under openspec/changes/; '/', '\\', NUL, "
                                           "'.' and '..' are not allowed")]
ItemType = Literal["change", "spec"]


class InitIn(ToolInput):
    pass


class ListIn(ToolInput):
    specs: Annotated[bool, Meta(description="List specs instead of active changes")] = False


class ShowIn(ToolInput):
    item: Item
    type: Annotated[ItemType | None, Meta(description="Disambiguate a change from a spec")] = None
    deltasOnly: Annotated[bool, Meta(description="Only the deltas of a change (same JSON as the CLI)")] = False


class ValidateIn(ToolInput):
    item: Item | None = None
    type: ItemType | None = None
    all: Annotated[bool, Meta(description="Every change and spec (the default when no item is named: "
                                          "then `type` narrows it to changes or specs)")] = False
    changes: bool = False
    specs: bool = False
    strict: Annotated[bool, Meta(description="Warnings fail validation too")] = False


class ArchiveIn(ToolInput):
    changeId: ChangeId
    dryRun: Annotated[bool, Meta(description="Report the plan, write nothing")] = False
    updateSpecs: Annotated[bool, Meta(description="Merge the deltas into openspec/specs")] = True
    force: Annotated[bool, Meta(description="Archive even with incomplete tasks")] = False


class ProjectContextIn(ToolInput):
    content: Annotated[str, Meta(description="New text; omitted with `section` removes that section")] | None = None
    merge: Annotated[bool, Meta(description="Append instead of replacing")] = False
    section: Annotated[str, Meta(pattern=r"^[^\r\n]*\S[^\r\n]*$", max_length=200,
                                 description="Rewrite only this `## Section` (one line, not blank)")] | None = None


class TaskCompleteIn(ToolInput):
    changeId: ChangeId
    task: Annotated[str, Meta(pattern=r"^[0-9]{1,9}(?:\.[0-9]{1,9})*[A-Za-z]{0,8}$",
                              description="Task id such as 1.2, or its 1-based position")]


class ProposeArgs(msgspec.Struct):
    description: Annotated[str, Meta(description="What to build or change")]
    scope: Annotated[str, Meta(description="new-capability | modify-existing | refactor | fix")] = ""


class ChangeArgs(msgspec.Struct):
    changeId: Annotated[str, Meta(description="The change id")]
