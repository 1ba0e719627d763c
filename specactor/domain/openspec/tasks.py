"""Task lists: counting checkboxes as the 1.x CLI does, its task-file warnings, and ticking one task.

Counting (`parseTaskLines`): every line matching the permissive 1.13.2 pattern is a task, fences
included; only `x`/`X` is done. `checkbox_issues` and `numbering_issues` are the validate
warnings. `tick` marks exactly one task done, found by its id (`1.2`) or its 1-based position.
"""

from __future__ import annotations

from dataclasses import dataclass

from specactor.domain.openspec.text import indent_columns, rx, trim, trim_end, trim_start

TASK_LINE = rx(r"^\s*(?:[-*+]|\d{1,9}[.)])\s*\[(?:\s*([^\]\s]?)\s*\](?![([])|\s+\])\s*(.*)")
_LIST_ITEM = rx(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+\S")
_FENCE = rx(r"^ {0,3}(`{3,}|~{3,})(.*)")
_FRONT_MATTER = rx(r"^-{3}\s*$")
_LEVEL_TWO = rx(r"^ {0,3}##(?!#)(?:[ \t]+|[ \t]*\r?$)")
_NUMBERED_GROUP = rx(r"^ {0,3}##[ \t]+(\d+)\.(?:[ \t]|\r?$)")
_TASK_ID = rx(r"^(\d+(?:\.\d+)+(?:[A-Za-z]+)?)(?=\s|$)")
_LEADING_ZEROS = rx(r"^0+(?=\d)")


@dataclass(frozen=True)
class Task:
    done: bool
    description: str
    line: int  # 1-based


@dataclass(frozen=True)
class TaskIssue:
    path: str
    line: int
    message: str


def parse_tasks(content: str) -> list[Task]:
    out = []
    for n, line in enumerate(content.split("\n"), start=1):
        if "[" not in line:
            continue
        m = TASK_LINE.match(line)
        if m:
            out.append(Task((m.group(1) or "").lower() == "x", trim(m.group(2)), n))
    return out


def count_tasks(content: str) -> tuple[int, int]:
    """(total, completed)."""
    tasks = parse_tasks(content)
    return len(tasks), sum(1 for t in tasks if t.done)


def task_id(task: Task) -> str | None:
    m = _TASK_ID.match(task.description)
    return m.group(1) if m else None


# ---------------------------------------------------------------------- ticking


class TaskNotFound(LookupError):
    pass


def tick(content: str, task: str) -> tuple[str, Task, bool]:
    """Mark one task done. `task` is its id (`"2.1"`) or its 1-based position (`"3"`).

    Returns the new content, the task, and whether it was already done (content unchanged).

    Raises:
        TaskNotFound: naming the task, when no task or more than one matches.
    """
    tasks = parse_tasks(content)
    wanted = trim(task)
    by_id = [t for t in tasks if task_id(t) == wanted]
    if len(by_id) > 1:
        raise TaskNotFound(f"task id '{wanted}' is declared {len(by_id)} times (lines "
                           f"{', '.join(str(t.line) for t in by_id)}); tick it by position instead")
    if by_id:
        chosen = by_id[0]
    elif wanted.isdigit() and 1 <= int(wanted) <= len(tasks):
        chosen = tasks[int(wanted) - 1]
    else:
        raise TaskNotFound(f"no task '{wanted}' in tasks.md (it has {len(tasks)} task(s); "
                           "give a task id such as 1.2 or a 1-based position)")
    if chosen.done:
        return content, chosen, True
    lines = content.split("\n")
    line = lines[chosen.line - 1]
    opening = line.index("[")
    closing = line.index("]", opening)
    lines[chosen.line - 1] = line[:opening] + "[x]" + line[closing + 1:]
    return "\n".join(lines), chosen, False


# ---------------------------------------------------------------------- validate warnings


def _skip_front_matter(lines: list[str]) -> int:
    if not lines or not _FRONT_MATTER.match(trim_end(lines[0].removeprefix("\ufeff"))):
        return 0
    for i in range(1, len(lines)):
        if _FRONT_MATTER.match(trim_end(lines[i])):
            return i + 1
    return 0


def _first_list_item_line(content: str) -> int | None:
    lines = content.split("\n")
    open_fence: tuple[str, int] | None = None
    in_comment = False
    for i in range(_skip_front_matter(lines), len(lines)):
        line = lines[i]
        if in_comment:
            if "-->" in line:
                in_comment = False
            continue
        m = _FENCE.match(line)
        if m:
            marker, length = m.group(1)[0], len(m.group(1))
            if open_fence is None:
                open_fence = (marker, length)
            elif marker == open_fence[0] and length >= open_fence[1] and trim(m.group(2)) == "":
                open_fence = None
            continue
        if open_fence is not None:
            continue
        if trim_start(line).startswith("<!--"):
            if "-->" not in line[line.index("<!--") + 4:]:
                in_comment = True
            continue
        if _LIST_ITEM.match(line) and indent_columns(line) < 4:
            return i + 1
    return None


CHECKBOX_MESSAGE = ("This change counts as 0 tasks: no line in its tracked task files is a checkbox, so "
                    '"openspec list" and "openspec status" report no work and "openspec archive" has nothing to flag '
                    'as incomplete. Write each task as "- [ ] 1.1 Description".')


def checkbox_issues(documents: list[tuple[str, str]]) -> list[TaskIssue]:
    """A warning per tracked file that lists work without checkboxes, when no file has any."""
    if not documents or any(parse_tasks(content) for _, content in documents):
        return []
    out = []
    for path, content in documents:
        line = _first_list_item_line(content)
        if line is not None:
            out.append(TaskIssue(path, line, CHECKBOX_MESSAGE))
    return out


def numbering_issues(documents: list[tuple[str, str]]) -> list[TaskIssue]:
    """Duplicate task ids and ids filed under the wrong `## N.` group (`findTaskNumberingIssues`)."""
    out = []
    first: dict[str, tuple[str, int]] = {}
    for path, content in documents:
        lines = content.split("\n")
        if not any(_NUMBERED_GROUP.match(line) for line in lines):
            continue
        group: str | None = None
        for index, line in enumerate(lines):
            if _LEVEL_TWO.match(line):
                m = _NUMBERED_GROUP.match(line)
                group = m.group(1) if m else None
            if group is None:
                continue
            tasks = parse_tasks(line)
            ident = task_id(tasks[0]) if tasks else None
            if not ident:
                continue
            number = index + 1
            task_group = ident.split(".")[0]
            if _LEADING_ZEROS.sub("", task_group) != _LEADING_ZEROS.sub("", group):
                out.append(TaskIssue(path, number, f'Task "{ident}" is under group {group}, but its leading number '
                                                   f"points to group {task_group}. Move it to group {task_group} "
                                                   "or renumber it."))
            if ident in first:
                where_path, where_line = first[ident]
                where = f"on line {where_line}" if where_path == path else f"in {where_path} on line {where_line}"
                out.append(TaskIssue(path, number, f'Task ID "{ident}" is duplicated; it was first declared {where}.'))
            else:
                first[ident] = (path, number)
    return out

