"""A workspace for the session context and the hooks: a knowledge repository, a memory database
holding memories of this project, of another project and of a user, and the environment that
points specactor at them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from specactor.domain.memory.layers import Layer
from specactor.domain.memory.records import NewMemory
from specactor.sqlite.memory_db import connect, insert_memory
from tests.memory.conftest import ADR_042, Repo, item

NO_CONSOLE = item("pol-console", "No console.log", extra="severity: warn\n", body=(
    "## Constraints\n```yaml\n- operator: must_not_match\n  target: code\n  pattern: 'console\\.log\\('\n"
    "  appliesTo: ['**/*.ts']\n- operator: must_exist\n  target: file\n  pattern: README.md\n```\n"))
NO_EVAL = item("pol-eval", "No eval", extra="severity: block\n", body=(
    "## Constraints\n```yaml\n- operator: must_not_match\n  target: code\n  pattern: '\\beval\\('\n"
    "  message: eval is not allowed in this project\n```\n"))
OTHER_PROJECT = item("pol-other", "Only for the other project", body=(
    "## Constraints\n```yaml\n- operator: must_not_match\n  target: code\n  pattern: 'foo'\n```\n"))
DRAFT = item("pol-draft", "A draft", status="draft", body=(
    "## Constraints\n```yaml\n- operator: must_not_match\n  target: code\n  pattern: 'bar'\n```\n"))

MINE = ["We deploy the shop service with blue-green deployments.",
        "The database for new services is PostgreSQL 16.",
        "Release notes live in CHANGES.md, newest on top."]
THEIRS = "The other project stores secrets in vault-other."
USERS = "alice prefers tabs over spaces."


@dataclass
class Workspace:
    root: Path
    db: Path
    knowledge: Path

    def env(self) -> dict[str, str]:
        """The environment of a specactor process on this workspace (no other SPECACTOR_* variable)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SPECACTOR_", "CLAUDE_", "GEMINI_"))}
        return env | {"SPECACTOR_MEMORY_DB": str(self.db), "SPECACTOR_KNOWLEDGE_REPO": str(self.knowledge)}


def add_memories(db: Path, project: str, texts: list[str], *, layer: Layer = "project") -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(db, writer=True)
    try:
        conn.execute("BEGIN")
        ident = "projectId" if layer == "project" else "userId"
        for text in texts:
            insert_memory(conn, NewMemory(text, layer, f'["{project}"]', {ident: project}, [], {}))
        conn.execute("COMMIT")
    finally:
        conn.close()


def workspace(tmp: Path, *, knowledge: bool = True, memories: bool = True) -> Workspace:
    """`tmp/shop` (project id "shop"), its knowledge repository and memory database."""
    root = tmp / "shop"
    (root / "src").mkdir(parents=True)
    ws = Workspace(root, tmp / "data" / "memory.db", tmp / "knowledge")
    if knowledge:
        repo = Repo(ws.knowledge)
        repo.write("company/adrs/adr-042.md", ADR_042)
        repo.write("company/policies/no-console.md", NO_CONSOLE)
        repo.write("projects/shop/policies/no-eval.md", NO_EVAL)
        repo.write("projects/other/policies/other.md", OTHER_PROJECT)
        repo.write("company/policies/draft.md", DRAFT)
        repo.commit()
    if memories:
        add_memories(ws.db, "shop", MINE)
        add_memories(ws.db, "other", [THEIRS])
        add_memories(ws.db, "alice", [USERS], layer="user")
    return ws
