"""Workspaces for the tests: hand-written ones that hit the CLI's rules one by one, and seeded
random ones. Each is a dict of project-relative path -> text (or bytes), written by `materialise`."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path

from specactor.domain.openspec.render import DeltaDoc, RequirementDoc, ScenarioDoc, render_delta, render_spec
from specactor.domain.openspec.templates import CONFIG_YAML

Files = dict[str, str | bytes]
S = "openspec/specs"
C = "openspec/changes"
PURPOSE = "Authenticate users of the task service with email and password and issue session tokens that expire."


def materialise(files: Files, root: Path) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode())
    return root


def req(name: str, statement: str = "The system SHALL do it.", *scenarios: str) -> RequirementDoc:
    names = scenarios or ("Works",)
    return RequirementDoc(name, [statement], [ScenarioDoc(s, ["- **WHEN** it runs", f"- **THEN** {s.lower()} holds"])
                                              for s in names])


def proposal(title: str, why: str = "Because the product needs this behaviour for the next release cycle.",
             what: str = "- Adds the behaviour described in the delta specs.") -> str:
    return f"# Change: {title}\n\n## Why\n{why}\n\n## What Changes\n{what}\n\n## Impact\n- Affected specs: several\n"


def basic() -> Files:
    """The reference workspace of ../shared/reference/openspec.md."""
    return {
        "openspec/config.yaml": CONFIG_YAML,
        f"{S}/user-auth/spec.md": render_spec("user-auth", PURPOSE, [
            req("User Login", "The system SHALL authenticate a user who submits a registered email and the matching "
                              "password.", "Valid credentials", "Invalid password"),
            req("Login Audit", "The system SHALL record every login attempt.", "Audit entry"),
            req("Session Expiry", "The system SHALL expire sessions after 30 minutes.", "Idle session"),
        ]),
        f"{S}/task-list/spec.md": render_spec("task-list", "Track tasks.", [
            req("Create Task", "The system SHALL create tasks.", "Create"),
            req("Complete Task", "Users can complete tasks.", "Complete"),
        ]),
        f"{C}/add-two-factor-auth/proposal.md": proposal("Add two-factor authentication"),
        f"{C}/add-two-factor-auth/tasks.md": "## 1. Implementation\n- [x] 1.1 Add OTP table\n- [x] 1.2 Send codes\n"
                                             "- [ ] 1.3 Verify codes\n- [ ] 1.4 Docs\n",
        f"{C}/add-two-factor-auth/specs/notifications/spec.md": render_delta(DeltaDoc(added=[
            req("OTP Email", "The system SHALL email the one-time password to the user's registered address.",
                "Challenge issued")])),
        f"{C}/add-two-factor-auth/specs/user-auth/spec.md": render_delta(DeltaDoc(
            added=[req("Two Factor", "The system SHALL require a second factor.", "Second factor")],
            modified=[req("Session Expiry", "The system SHALL expire sessions after 15 minutes.", "Idle session",
                          "Absolute timeout")],
            renamed=[("Login Audit", "Authentication Audit")])),
        f"{C}/update-task-broken/proposal.md": "# Proposal\n\n## Why\nshort\n\n## What Changes\n- **task-list:** "
                                               "Adds priorities to tasks\n",
        f"{C}/update-task-broken/tasks.md": "- [ ] 1.1 a\n- [ ] 1.2 b\n",
        f"{C}/update-task-broken/specs/task-list/spec.md": "## MODIFIED Requirements\n### Requirement: Create Task\n"
                                                          "Tasks get a priority.\n",
        f"{C}/archive/2025-01-01-old-change/proposal.md": proposal("Old"),
        f"{C}/archive/2025-02-01-newer-change/proposal.md": proposal("Newer"),
    }


def nested() -> Files:
    """Nested capability ids, a nested delta, a folder wrapping a change, and a 0.x layout."""
    return {
        "openspec/project.md": "# Project\n\nA billing system.\n",
        "openspec/AGENTS.md": "# Agents\n\nCustom instructions.\n",
        f"{S}/billing/invoices/spec.md": render_spec("billing/invoices", PURPOSE, [req("Invoice Totals")]),
        f"{S}/billing/spec.md": render_spec("billing", PURPOSE, [req("Billing Cycle")]),
        f"{S}/members/profile/spec.md": render_spec("members/profile", PURPOSE, [req("Display Name")]),
        f"{S}/spec.md": "# stray root spec\n",
        f"{S}/.hidden/spec.md": render_spec("hidden", PURPOSE, [req("Hidden")]),
        f"{C}/add-invoice-tax/proposal.md": proposal("Add invoice tax"),
        f"{C}/add-invoice-tax/tasks.md": "- [x] 1.1 done\n  - [x] 1.1.1 nested done\n1. [X] 1.2 ordered\n",
        f"{C}/add-invoice-tax/specs/billing/invoices/spec.md": render_delta(DeltaDoc(
            added=[req("Invoice Tax", "Invoices MUST include tax.", "Tax line")],
            modified=[req("Invoice Totals", "The system SHALL total invoices with tax.", "Works")])),
        f"{C}/add-invoice-tax/specs/members/new-cap/spec.md": render_delta(DeltaDoc(
            purpose="Members have avatars that other members can see in every listing.",
            added=[req("Avatar", "The system SHALL show avatars.", "Shown")])),
        f"{C}/team-work/sub-change/proposal.md": proposal("Nested"),
        f"{C}/team-work/sub-change/tasks.md": "- [ ] 1.1 x\n",
        f"{C}/.drafts/proposal.md": proposal("Hidden draft"),
    }


BAD_SPECS: dict[str, str] = {
    "no-purpose": "# x\n\n## Requirements\n### Requirement: A\nThe system SHALL a.\n\n#### Scenario: s\n- ok\n",
    "no-requirements-section": f"# x\n\n## Purpose\n{PURPOSE}\n",
    "empty-requirements": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n",
    "no-scenario": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\nThe system SHALL a.\n",
    "bullet-scenario": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\nThe system SHALL a.\n"
                       "- **WHEN** x\n- **THEN** y\n",
    "no-keyword": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\nUsers can do a.\n\n"
                  "#### Scenario: s\n- **WHEN** a\n",
    "keyword-in-header": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: The system SHALL a\n\n"
                         "#### Scenario: s\n- **WHEN** a\n",
    "placeholder": "# x\n\n## Purpose\nTBD - created by archiving change add-x. Update Purpose after archive.\n\n"
                   "## Requirements\n### Requirement: A\nThe system SHALL a.\n\n#### Scenario: s\n- a\n",
    "todo-purpose": "# x\n\n## Purpose\ntodo: write this\n\n## Requirements\n### Requirement: A\nThe system SHALL a.\n"
                    "\n#### Scenario: s\n- a\n",
    "spanish-purpose": "# x\n\n## Purpose\nTodo el sistema de facturas que los usuarios usan cada mes para pagar.\n\n"
                       "## Requirements\n### Requirement: A\nThe system SHALL a.\n\n#### Scenario: s\n- a\n",
    "long": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\nThe system SHALL {'a' * 600}.\n\n"
            "#### Scenario: s\n- a\n",
    "fenced": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\nThe system SHALL a.\n\n```md\n"
              "### Requirement: Fake\n#### Scenario: fake\n```\n\n#### Scenario: s\n- a\n",
    "delta-header": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\nThe system SHALL a.\n\n"
                    "#### Scenario: s\n- a\n\n## ADDED Requirements\n### Requirement: B\nThe system SHALL b.\n",
    "duplicate": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\nThe system SHALL a.\n\n"
                 "#### Scenario: s\n- a\n\n### Requirement: A ###\nThe system SHALL a again.\n\n"
                 "#### Scenario: t\n- b\n",
    "outside": f"# x\n\n### Requirement: Early\nThe system SHALL be early.\n\n## Purpose\n{PURPOSE}\n\n"
               "## Requirements\n### Requirement: A\nThe system SHALL a.\n\n#### Scenario: s\n- a\n",
    "crlf": (f"# x\r\n\r\n## Purpose\r\n{PURPOSE}\r\n\r\n## Requirements\r\n### Requirement: A\r\nThe system SHALL a."
             "\r\n\r\n#### Scenario: s\r\n- a\r\n"),
    "bom": f"\ufeff# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\nThe system SHALL a.\n\n"
           "#### Scenario: s\n- a\n",
    "metadata-only": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\n**ID**: REQ-1\n"
                     "**Constraint**: The system MUST a.\n\n#### Scenario: s\n- a\n",
    "empty-scenario": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Requirement: A\nThe system SHALL a.\n\n"
                      "#### Scenario: empty\n\n#### Scenario: full\n- a\n",
    "non-requirement-h3": f"# x\n\n## Purpose\n{PURPOSE}\n\n## Requirements\n### Notes\nSome notes.\n\n"
                          "### Requirement: A\nThe system SHALL a.\n\n#### Scenario: s\n- a\n",
    "emoji": "# x\n\n## Purpose\nShort purpose 😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀\n\n## Requirements\n"
             "### Requirement: A\nThe system SHALL a.\n\n#### Scenario: s\n- a\n",
    "lowercase-headers": f"# x\n\n## purpose\n{PURPOSE}\n\n## requirements\n### requirement: A\nThe system SHALL a.\n"
                         "\n#### scenario: s\n- a\n",
}


def edge_specs() -> Files:
    files: Files = {"openspec/config.yaml": "schema: spec-driven\ncontext: |\n  Python project.\n"}
    for name, text in BAD_SPECS.items():
        files[f"{S}/{name}/spec.md"] = text
    files[f"{S}/invalid-utf8/spec.md"] = b"# x\n\n## Purpose\n\xff\xfe broken \xc3 bytes long enough to pass.\n"
    return files


def _change(name: str, delta: str | None, tasks: str | None = None, extra: Mapping[str, str] | None = None,
            capability: str = "user-auth", prop: str | None = None) -> Files:
    files: Files = {f"{C}/{name}/proposal.md": prop if prop is not None else proposal(name)}
    if delta is not None:
        files[f"{C}/{name}/specs/{capability}/spec.md"] = delta
    if tasks is not None:
        files[f"{C}/{name}/tasks.md"] = tasks
    for rel, text in (extra or {}).items():
        files[f"{C}/{name}/{rel}"] = text
    return files


def lines(*parts: str) -> str:
    """A markdown document from its lines."""
    return "\n".join(parts) + "\n"


SCENARIO = ("", "#### Scenario: s", "- a")


def edge_changes() -> Files:
    """Changes that hit the delta validator and archive's refusals one by one."""
    files = basic()
    added = "## ADDED Requirements"
    deltas: dict[str, str] = {
        "empty-sections": lines(added, "", "Nothing here."),
        "no-headers": lines("# Notes", "", "Just notes."),
        "unpaired": lines("## RENAMED Requirements", "- FROM: `### Requirement: A`", "- FROM: `### Requirement: B`",
                          "- TO: `### Requirement: C`", "- TO: `### Requirement: D`"),
        "orphans": lines("### Requirement: Above", "The system SHALL x.", "", "## Notes", "### Requirement: Orphan",
                         "The system SHALL y.", "", added, "### Documentation Requirements", "### Requirement:",
                         "### Requirement: Real", "The system SHALL z.", *SCENARIO),
        "duplicates": lines(added, "### Requirement: Dup", "The system SHALL a.", *SCENARIO, "",
                            "### Requirement: Dup", "The system SHALL b.", *SCENARIO, "", "## REMOVED Requirements",
                            "- `### Requirement: Dup`", "* `### Requirement: Gone`", "+ `### Requirement: Gone`", "",
                            "## MODIFIED Requirements", "### Requirement: Dup", "Changed.", "",
                            "## RENAMED Requirements", "- FROM: `### Requirement: Gone`",
                            "- TO: `### Requirement: Dup`"),
        "scenario-loss": render_delta(DeltaDoc(modified=[
            req("User Login", "The system SHALL authenticate users.", "Valid credentials", "New one")])),
        "blockers": render_delta(DeltaDoc(added=[req("Login Audit", "The system SHALL audit differently.", "Other")],
                                          modified=[req("Does Not Exist", "The system SHALL exist.", "x")],
                                          removed=["user login"])),
        "rename-missing": render_delta(DeltaDoc(renamed=[("Nope", "Still Nope")])),
        "skip-conflict": render_delta(DeltaDoc(added=[req("Skip A")])),
        "bad-yaml": render_delta(DeltaDoc(added=[req("Yaml A")])),
        "tasks-issues": render_delta(DeltaDoc(added=[req("Tasks A")])),
        "plain-tasks": render_delta(DeltaDoc(added=[req("Plain A")])),
        "missing-why": render_delta(DeltaDoc(added=[req("Why A")])),
        "no-proposal": render_delta(DeltaDoc(added=[req("NP A")])),
        "fenced-delta": lines(added, "### Requirement: Fenced", "The system SHALL f.", "", "```md",
                              "#### Scenario: fake", "```", "", "#### Scenario:   ", "", "## REMOVED Requirements",
                              "```", "### Requirement: Not Removed", "```"),
        "repeated-sections": lines(added, "### Requirement: First", "The system SHALL 1.", *SCENARIO, "",
                                   "## Added Requirements", "### Requirement: Second", "The system SHALL 2.",
                                   *SCENARIO),
        "header-keyword": lines(added, "### Requirement: The system SHALL k", *SCENARIO, "",
                                "### Requirement: Softly", "Users may do things.", *SCENARIO),
        "remove-all": render_delta(DeltaDoc(removed=["Create Task", "Complete Task"])),
        "2025-01-01-old-change": render_delta(DeltaDoc(added=[req("Dated")])),
        "orphan-warning": lines("### Requirement: Stray", "The system SHALL stray.", *SCENARIO, "", added,
                                "### Requirement: Kept", "The system SHALL keep.", *SCENARIO, "",
                                "## REMOVED Requirements", "### Requirement: Not There"),
    }
    for name, delta in deltas.items():
        capability = "task-list" if name == "remove-all" else "user-auth"
        files.update(_change(name, delta, capability=capability))
    files.update(_change("no-deltas", None, "- [x] 1.1 done\n"))
    files.update(_change("new-cap-modified", render_delta(DeltaDoc(modified=[req("X", "The system SHALL x.", "s")])),
                         capability="brand-new"))
    files.update(_change("root-spec", None, extra={"specs/spec.md": lines(added, "### Requirement: A",
                                                                          "The system SHALL a.", *SCENARIO),
                                                   "specs/user-auth.md": lines(added)}))
    meta = ".openspec.yaml"
    files.update(_change("skip-ok", None, extra={meta: "schema: spec-driven\nskip_specs: true\n"}))
    files.update(_change("skip-yes", None, extra={meta: "schema: spec-driven\nskip_specs: yes\n"}))
    files[f"{C}/skip-conflict/{meta}"] = "schema: spec-driven\ncreated: 2025-01-01\nskip_specs: true\n"
    files.update(_change("skip-unknown-schema", None, extra={meta: "schema: nope\nskip_specs: true\n"}))
    files[f"{C}/bad-yaml/{meta}"] = "schema: [unclosed\nskip_specs: true\n"
    files[f"{C}/tasks-issues/tasks.md"] = lines("## 1. Setup", "- [ ] 1.1 a", "- [x] 2.1 misplaced", "- [ ] 1.1 dup",
                                                "",
                                                "## 2. Build", "- [~] 2.2 odd", "- [] 2.3 empty box",
                                                "- [ ] 2.4 [link](x)")
    files[f"{C}/plain-tasks/tasks.md"] = lines("---", "tags:", "- a", "---", "", "```", "- not this", "```", "",
                                               "<!-- - nor this -->", "- first real item")
    files.update(_change("prose-deltas", None, prop=proposal(
        "Prose", what="- **user-auth:** Adds lockout after failures\n- **task-list**: Removes archived tasks\n"
                      "- **billing:** Renamed invoices to bills\n- **misc:** tweaks address handling")))
    files[f"{C}/missing-why/proposal.md"] = "# Change: x\n\n## What Changes\n- x\n"
    del files[f"{C}/no-proposal/proposal.md"]
    files[f"{S}/crlf-cap/spec.md"] = render_spec("crlf-cap", PURPOSE, [req("Line Endings")]).replace("\n", "\r\n")
    files.update(_change("update-crlf", render_delta(DeltaDoc(added=[req("More Endings")])), capability="crlf-cap"))
    files[f"{S}/notes-cap/spec.md"] = lines("# notes-cap Specification", "", "## Purpose", PURPOSE, "",
                                            "## Requirements",
                                           "Preamble text.", "", "### Requirement: Noted", "The system SHALL note.",
                                           *SCENARIO, "", "", "", "## Notes", "Trailing notes.")
    noted = DeltaDoc(modified=[req("Noted", "The system SHALL note more.", "s")], added=[req("Second Note")])
    files.update(_change("update-notes", render_delta(noted), capability="notes-cap"))
    retire = {meta: "schema: spec-driven\nretire_capabilities: true\n"}
    files[f"{S}/area/gone/spec.md"] = render_spec("area/gone", PURPOSE, [req("Only One")])
    files.update(_change("retire-gone", render_delta(DeltaDoc(removed=["Only One"])), capability="area/gone",
                         extra=retire))
    files.update(_change("retire-blocked", render_delta(DeltaDoc(removed=["Noted"])), capability="notes-cap",
                         extra=retire))
    files.update(_change("retire-nothing", render_delta(DeltaDoc(removed=["Ghost"])), capability="never-was",
                         extra=retire))
    files.update(_change("early-synced", render_delta(DeltaDoc(
        added=[req("Create Task", "The system SHALL create tasks.", "Create")],
        removed=["Gone Long Ago"], renamed=[("Old Name", "Complete Task")])), capability="task-list"))
    return files


def _sentence(rng: random.Random) -> str:
    words = ["user", "task", "invoice", "token", "session", "record", "report", "member", "queue", "limit"]
    return " ".join(rng.choice(words) for _ in range(rng.randint(2, 8)))


def random_workspace(seed: int, specs: int = 12, changes: int = 8) -> Files:
    """Valid-looking specs and changes whose deltas are sometimes wrong on purpose."""
    rng = random.Random(seed)
    files: Files = {"openspec/config.yaml": CONFIG_YAML}
    catalogue: dict[str, list[str]] = {}
    for i in range(specs):
        cap = f"cap-{i}" if rng.random() < 0.8 else f"area-{i % 3}/cap-{i}"
        names = [f"Req {i}-{j}" for j in range(rng.randint(1, 5))]
        catalogue[cap] = names
        reqs = [RequirementDoc(n, [f"The system {rng.choice(['SHALL', 'MUST', 'should'])} {_sentence(rng)}."],
                               [ScenarioDoc(f"S{k}", [f"- **WHEN** {_sentence(rng)}", f"- **THEN** {_sentence(rng)}"])
                                for k in range(rng.randint(0 if rng.random() < 0.1 else 1, 3))]) for n in names]
        purpose = PURPOSE if rng.random() < 0.8 else _sentence(rng)
        files[f"{S}/{cap}/spec.md"] = render_spec(cap, purpose, reqs)
    caps = list(catalogue)
    for c in range(changes):
        name = f"change-{seed}-{c}"
        files[f"{C}/{name}/proposal.md"] = proposal(name.replace("-", " ").title())
        n_tasks = rng.randint(0, 4)
        files[f"{C}/{name}/tasks.md"] = "".join(f"- [{'x' if rng.random() < 0.7 else ' '}] 1.{t + 1} {_sentence(rng)}\n"
                                                for t in range(n_tasks))
        for cap in rng.sample(caps, rng.randint(1, min(3, len(caps)))):
            existing = catalogue[cap]
            added = [req(f"New {name} {k}", f"The system SHALL {_sentence(rng)}.", "Fresh")
                     for k in range(rng.randint(0, 2))]
            modified, removed, renamed = [], [], []
            for n in existing:
                roll = rng.random()
                if roll < 0.15:
                    keep = ["S0", "S1", "S2"][:rng.randint(0, 3)]
                    modified.append(req(n, f"The system SHALL {_sentence(rng)}.", *(keep or ["Other"])))
                elif roll < 0.25:
                    removed.append(n)
                elif roll < 0.32:
                    renamed.append((n, f"{n} renamed"))
            if rng.random() < 0.1:
                added.append(req(existing[0], "The system SHALL clash.", "Clash"))
            if not (added or modified or removed or renamed):
                added.append(req(f"Filler {name}", "The system SHALL fill.", "Fill"))
            files[f"{C}/{name}/specs/{cap}/spec.md"] = render_delta(DeltaDoc(added, modified, removed, renamed))
        if rng.random() < 0.2:
            files[f"{C}/{name}/specs/cap-new-{seed}-{c}/spec.md"] = render_delta(DeltaDoc(added=[req("Brand New")]))
    return files


WORKSPACES: dict[str, Callable[[], Files]] = {
    "basic": basic,
    "nested": nested,
    "edge-specs": edge_specs,
    "edge-changes": edge_changes,
    "random-1": lambda: random_workspace(1),
    "random-2": lambda: random_workspace(2),
    "random-3": lambda: random_workspace(3, specs=20, changes=12),
}
