"""Change validation: `Validator.validateChangeDeltaSpecs` of the 1.13.2 CLI, issue for issue.

Delta files are discovered recursively; each is checked for skipped headers, unpaired renames,
orphaned requirements, empty or keyword-less requirements, missing scenarios, duplicates and
cross-section conflicts. With `against_main` (what `openspec validate` does) MODIFIED blocks are
checked for scenario loss against the main specs and archive's merge is dry-run (INFO), and the
task files are linted.
"""

from __future__ import annotations

from dataclasses import dataclass

from specactor.domain.openspec.blocks import (
    Block,
    DeltaPlan,
    describe_balance,
    diff_scenarios,
    extract_requirements_section,
    fold_name,
    normalize_name,
    parse_delta,
)
from specactor.domain.openspec.markdown import (
    contains_shall_or_must,
    count_empty_scenarios,
    count_scenarios,
    extract_requirement_body,
)
from specactor.domain.openspec.merge import MergeError, build_updated_spec
from specactor.domain.openspec.metadata import METADATA_FILE, Marker, config_value, metadata_schema, read_marker
from specactor.domain.openspec.model import Issue
from specactor.domain.openspec.source import (
    Source,
    Unreadable,
    discover_spec_files,
    has_any_file_under,
    join,
    unread_delta_files,
)
from specactor.domain.openspec.spec_rules import issue, missing_keyword_message
from specactor.domain.openspec.tasks import checkbox_issues, numbering_issues
from specactor.domain.openspec.text import rx

CHANGE_NO_DELTAS = "Change must have at least one delta"
GUIDE_NO_DELTAS = (
    "No deltas found. Ensure your change has a specs/ directory with capability folders (e.g. "
    "specs/http-server/spec.md) containing .md files that use delta headers (## ADDED/MODIFIED/REMOVED/RENAMED "
    'Requirements) and that each requirement includes at least one "#### Scenario:" block. If this change '
    'intentionally modifies no specs (pure refactor, tooling, docs), set "skip_specs: true" in the change\'s '
    '.openspec.yaml instead. Tip: run "openspec change show <change-id> --json --deltas-only" to inspect '
    "parsed deltas.")
SKIP_SPECS_CONFLICT = ("skip_specs is set in .openspec.yaml but spec files exist under specs/. Remove skip_specs or "
                       "delete the delta spec files")
SKIP_SPECS_ACCEPTED = ("skip_specs is set in .openspec.yaml: change declares no spec-level behavior changes, zero "
                       "deltas accepted")
SKIP_SPECS_INVALID = ("skip_specs is set but .openspec.yaml is not valid change metadata, so the marker is not "
                      "honored. Fix the metadata")
_NAMELESS = rx(r"^requirement:?$", "i")


@dataclass(frozen=True)
class Context:
    """Where the change lives: `root` is the absolute `openspec/` path (for messages), `schemas` the
    schema names that resolve, `project_schema` the one `config.yaml` names."""

    root: str
    schemas: tuple[str, ...] = ("spec-driven",)
    project_schema: str | None = None


def delta_plan(src: Source, path: str) -> DeltaPlan | None:
    return src.memo(path, "delta-plan", lambda text: None if text is None else parse_delta(text))


def validate_change(src: Source, change: str, ctx: Context, *, against_main: bool) -> list[Issue]:
    """Every issue `openspec validate <change>` (against_main) or archive's gate reports."""
    base = join("changes", change)
    specs_dir = join(base, "specs")
    issues: list[Issue] = []
    total = 0
    missing_headers: list[str] = []
    empty_sections: list[tuple[str, list[str]]] = []
    discovered = discover_spec_files(src, specs_dir)
    root_spec = src.kind(join(specs_dir, "spec.md")) == "file"
    if root_spec:
        issues.append(issue("ERROR", "spec.md", (
            "Delta spec found at specs/spec.md. Delta specs must live under a capability path (e.g. "
            "specs/<capability-path>/spec.md) — a file at the specs/ root is ignored when the change is applied or "
            "archived.")))
    for spec_id, path in discovered:
        try:
            plan = delta_plan(src, path)
        except Unreadable:
            continue
        if plan is None:
            continue
        entry = path[len(specs_dir) + 1:]
        for stray in plan.skipped:
            if _NAMELESS.match(stray.header):
                msg = (f'Header "### {stray.header}" in {stray.section} is missing a requirement name and is '
                       'ignored by validation. Add a name, e.g. "### Requirement: <name>".')
            else:
                msg = (f'Header "### {stray.header}" in {stray.section} is not a "### Requirement:" header and is '
                       f'ignored by validation. Use "### Requirement: {stray.header}" if it should be validated as '
                       "a requirement.")
            issues.append(issue("INFO", entry, msg, stray.line))
        for u in plan.unpaired:
            other = "TO" if u.side == "FROM" else "FROM"
            issues.append(issue("ERROR", entry, f'RENAMED {u.side}: "{u.name}" has no matching {other}: line. Write '
                                                "each rename as a FROM: line followed immediately by its TO: line.",
                                u.line))
        for orphan in plan.orphans:
            where = f'under "## {orphan.section}"' if orphan.section else 'above the first "## " section'
            issues.append(issue("WARNING", entry, (
                f'Requirement "{orphan.name}" is {where}, which is not a delta section, so it is ignored. Move it '
                'under "## ADDED Requirements", "## MODIFIED Requirements", "## REMOVED Requirements", or '
                '"## RENAMED Requirements".'), orphan.line))
        sections = [f"## {key.upper()} Requirements" for key in ("added", "modified", "removed", "renamed")
                    if plan.presence.get(key)]
        if plan.entry_count == 0:
            if sections:
                empty_sections.append((entry, sections))
            else:
                missing_headers.append(entry)
        total += plan.entry_count
        loss = _scenario_loss(src, plan, spec_id, entry, ctx) if against_main and plan.modified else []
        issues += _entry_issues(plan, entry, loss)
    if against_main:
        reported = {i.path for i in issues if i.level == "ERROR"} | set(missing_headers)
        reported |= {p for p, _ in empty_sections}
        issues += _archive_blockers(src, change, discovered, reported)
    unread = unread_delta_files(src, specs_dir, lambda text: parse_delta(text).has_sections)
    for rel, expected in unread:
        issues.append(issue("ERROR", rel, (
            f"Delta spec found at specs/{rel}. Delta specs must be a spec.md inside a capability folder — this file "
            f"is ignored when the change is applied or archived. Move its requirements into specs/{expected}.")))
    for rel, names in empty_sections:
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        issues.append(issue("ERROR", rel, (
            f"Delta sections {listed} were found, but no requirement entries parsed. Ensure each section includes at "
            'least one "### Requirement:" block (REMOVED may use bullet list syntax).')))
    for rel in missing_headers:
        issues.append(issue("ERROR", rel, 'No delta sections found. Add headers such as "## ADDED Requirements" or '
                                          "move non-delta notes outside specs/."))
    try:
        marker = read_marker(src.text(join(base, METADATA_FILE)), "skip_specs", ctx.schemas)
    except Unreadable as err:
        marker = Marker(False, f"the metadata file cannot be read ({err})")
    if marker.invalid_reason:
        issues.append(issue("ERROR", METADATA_FILE, f"{SKIP_SPECS_INVALID} ({marker.invalid_reason})"))
    files_under = marker.declared and _safe_has_files(src, specs_dir)
    if files_under:
        issues.append(issue("ERROR", "file", SKIP_SPECS_CONFLICT))
    if total == 0 and not root_spec and not unread:
        if marker.declared and not files_under:
            issues.append(issue("INFO", "file", SKIP_SPECS_ACCEPTED))
        elif not marker.declared:
            issues.append(issue("ERROR", "file", f"{CHANGE_NO_DELTAS}. {GUIDE_NO_DELTAS}"))
    if against_main:
        issues += task_file_issues(src, change, ctx)
    return issues


def _safe_has_files(src: Source, directory: str) -> bool:
    try:
        return has_any_file_under(src, directory)
    except Unreadable:
        return True


def _requirement_checks(kind: str, block_name: str, raw: str, entry: str) -> list[Issue]:
    out = []
    text = extract_requirement_body(raw.split("\n")[1:])
    label = f'{kind} "{block_name}"'
    if not text:
        msg = (missing_keyword_message(label, block_name) if contains_shall_or_must(block_name)
               else f"{label} is missing requirement text")
        out.append(issue("ERROR", entry, msg))
    elif not contains_shall_or_must(text):
        out.append(issue("WARNING", entry, missing_keyword_message(label, block_name, True)))
    body = raw.split("\n")[1:]
    if count_scenarios(body) < 1:
        hint = (' (a scenario header with no body under it does not count; add its steps, e.g. "- **WHEN** ..." '
                'and "- **THEN** ...")') if count_empty_scenarios(body) else ""
        out.append(issue("ERROR", entry, f"{label} must include at least one scenario{hint}"))
    return out


def _entry_issues(plan: DeltaPlan, entry: str, loss: list[Issue]) -> list[Issue]:
    """ADDED and MODIFIED checks, then `loss` (scenario loss), then REMOVED, RENAMED and conflicts."""
    out: list[Issue] = []
    seen: dict[str, list[str]] = {"ADDED": [], "MODIFIED": [], "REMOVED": []}
    for kind, blocks in (("ADDED", plan.added), ("MODIFIED", plan.modified)):
        for block in blocks:
            key = normalize_name(block.name)
            if key in seen[kind]:
                out.append(issue("ERROR", entry, f'Duplicate requirement in {kind}: "{block.name}"'))
            else:
                seen[kind].append(key)
            out += _requirement_checks(kind, block.name, block.raw, entry)
    out += loss
    for name in plan.removed:
        key = normalize_name(name)
        if key in seen["REMOVED"]:
            out.append(issue("ERROR", entry, f'Duplicate requirement in REMOVED: "{name}"'))
        else:
            seen["REMOVED"].append(key)
    froms: list[str] = []
    tos: list[str] = []
    for r in plan.renamed:
        f, t = normalize_name(r.from_), normalize_name(r.to)
        if f in froms:
            out.append(issue("ERROR", entry, f'Duplicate FROM in RENAMED: "{r.from_}"'))
        else:
            froms.append(f)
        if t in tos:
            out.append(issue("ERROR", entry, f'Duplicate TO in RENAMED: "{r.to}"'))
        else:
            tos.append(t)
    added, modified, removed = seen["ADDED"], seen["MODIFIED"], seen["REMOVED"]
    for n in modified:
        if n in removed:
            out.append(issue("ERROR", entry, f'Requirement present in both MODIFIED and REMOVED: "{n}"'))
        if n in added:
            out.append(issue("ERROR", entry, f'Requirement present in both MODIFIED and ADDED: "{n}"'))
    for n in added:
        if n in removed:
            out.append(issue("ERROR", entry, f'Requirement present in both ADDED and REMOVED: "{n}"'))
    for r in plan.renamed:
        f, t = normalize_name(r.from_), normalize_name(r.to)
        if f in modified:
            out.append(issue("ERROR", entry, f'MODIFIED references old name from RENAMED. Use new header for "{r.to}"'))
        if t in added:
            out.append(issue("ERROR", entry, f'RENAMED TO collides with ADDED for "{r.to}"'))
        match = next((x for x in removed if fold_name(x) == fold_name(f)), None)
        if match is not None:
            spelled = "" if match == f else f' (REMOVED spells it "{match}")'
            out.append(issue("ERROR", entry, f'Requirement present in both RENAMED and REMOVED: "{r.from_}"{spelled}'))
    return out


def _scenario_loss(src: Source, plan: DeltaPlan, spec_id: str, entry: str, ctx: Context) -> list[Issue]:
    main = join("specs", spec_id, "spec.md")
    try:
        content = src.text(main)
    except Unreadable as err:
        if err.code not in ("EACCES", "EPERM", "EISDIR", "ELOOP", "ENAMETOOLONG"):
            return []
        return [issue("ERROR", entry, f"Could not read {ctx.root}/{main} to check the MODIFIED requirements against "
                                      f"it ({err.code}). Archive reads the same file, so fix the file before "
                                      "archiving.")]
    if content is None:
        return []
    current = {normalize_name(b.name): b for b in extract_requirements_section(content).blocks}
    renamed_from = {normalize_name(r.to): normalize_name(r.from_) for r in plan.renamed}
    renamed_away = {normalize_name(r.from_) for r in plan.renamed}
    out = []
    for block in plan.modified:
        key = normalize_name(block.name)
        if key in renamed_away:
            continue
        found: Block | None = None
        visited: set[str] = set()
        cursor: str | None = key
        while cursor is not None and cursor not in visited:
            if cursor in current:
                found = current[cursor]
                break
            visited.add(cursor)
            cursor = renamed_from.get(cursor)
        if found is None:
            continue
        diff = diff_scenarios(found, block)
        if diff.missing:
            listed = ", ".join(f'"{n}"' for n in diff.missing)
            out.append(issue("ERROR", entry, (
                f'MODIFIED "{block.name}" omits scenario(s) the current spec still has: {listed}. '
                f"{describe_balance(diff)} Copy the omitted scenarios into the MODIFIED block (a MODIFIED requirement "
                "replaces the whole block, so archive refuses to drop them).")))
    return out


def _archive_blockers(src: Source, change: str, discovered: list[tuple[str, str]], reported: set[str]) -> list[Issue]:
    out = []
    for spec_id, path in discovered:
        entry = f"{spec_id}/spec.md"
        if entry in reported:
            continue
        try:
            delta = src.text(path)
            target = src.text(join("specs", spec_id, "spec.md"))
        except Unreadable:
            continue
        if delta is None:
            continue
        try:
            build_updated_spec(spec_id, change, delta, target)
        except MergeError as err:
            out.append(issue("INFO", entry, f"Archive would refuse this delta: {err}"))
    return out


def task_file_issues(src: Source, change: str, ctx: Context) -> list[Issue]:
    """The tasks.md warnings (`collectTaskFileIssues`) for the built-in spec-driven schema."""
    base = join("changes", change)
    try:
        meta = src.text(join(base, METADATA_FILE))
    except Unreadable:
        return []
    if meta is not None:
        schema = metadata_schema(meta)
        if schema is None or schema not in ctx.schemas:
            return []  # the CLI cannot resolve the change's schema, so it checks nothing
    else:
        schema = ctx.project_schema or "spec-driven"
    if schema != "spec-driven" or "spec-driven" not in ctx.schemas:
        return []
    try:
        content = src.text(join(base, "tasks.md"))
    except Unreadable:
        return []
    if content is None:
        return []
    docs = [("tasks.md", content)]
    found = checkbox_issues(docs) + numbering_issues(docs)
    return [issue("WARNING", t.path, t.message, t.line) for t in found]


def context_for(src: Source, root: str) -> Context:
    """The validation context of a workspace: its schemas (built-in and `openspec/schemas/*`) and
    the schema `config.yaml` names."""
    schemas = ["spec-driven"] + [e.name for e in src.entries("schemas") or []
                                 if e.is_dir and src.kind(f"schemas/{e.name}/schema.yaml") == "file"]
    def schema_in(text: str | None) -> tuple[bool, str | None]:  # (the file exists, its string schema:)
        value = config_value(text, "schema")
        return text is not None, value if isinstance(value, str) else None

    present, schema = src.memo("config.yaml", "schema", schema_in)
    if not present:
        schema = src.memo("config.yml", "schema", schema_in)[1]
    return Context(root, tuple(schemas), schema)
