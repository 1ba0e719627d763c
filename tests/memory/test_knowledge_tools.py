"""knowledge_query, knowledge_show and knowledge_check through the server, on a real git repository."""

from __future__ import annotations

import json
from pathlib import Path

from specactor.testing import MemoryClient
from tests.memory.conftest import ADR_042, Repo, error, item, ok

NO_CONSOLE = item("pol-no-console", "No console logging", kind="policy", extra="tags: [logging]\nseverity: warn\n",
                  body="Use the logger.\n\n## Constraints\n```yaml\n- operator: must_not_match\n  target: code\n"
                       "  pattern: console\\.log\n  appliesTo: ['*.ts']\n```\n")


def seed(repo: Repo) -> None:
    repo.write("company/adrs/adr-042-database-selection.md", ADR_042)
    repo.write("company/policies/no-console.md", NO_CONSOLE)
    repo.write("company/patterns/retry.md", item("pat-retry", "Retry with backoff", status="draft"))
    repo.write("projects/specactor-ws/specs/api.md", item("spec-api", "API versioning", kind="spec",
                                                         body="Version every endpoint.\n"))
    repo.write("projects/other/policies/tabs.md", item("pol-tabs", "Tabs only", kind="policy",
                                                       body="## Constraints\n```yaml\n- operator: must_not_match\n"
                                                            "  target: code\n  pattern: '^  '\n  severity: block\n"
                                                            "```\n"))
    repo.write("company/policies/broken.md", "---\ntitle: [oops\n---\n")
    repo.write("README.md", "not an item\n")
    repo.commit("seed")


async def test_query_returns_accepted_summaries_without_content_by_default(client: MemoryClient, repo: Repo) -> None:
    seed(repo)
    found = await ok(client, "knowledge_query", {})
    ids = [i["id"] for i in found["items"]]
    assert ids[:2] == ["pol-tabs", "spec-api"] and set(ids) == {"spec-api", "pol-tabs", "adr-042-database-selection",
                                                  "pol-no-console"}
    assert found["totalCount"] == 4 and all("content" not in i for i in found["items"])
    adr = next(i for i in found["items"] if i["id"] == "adr-042-database-selection")
    assert adr == {"id": "adr-042-database-selection", "type": "adr", "layer": "company",
                   "title": "Database Selection for New Services", "summary": "New services use PostgreSQL.",
                   "status": "accepted", "tags": ["database", "postgresql"], "hasConstraints": True}
    assert found["problems"] == [{"file": "company/policies/broken.md", "error": found["problems"][0]["error"]}]
    assert "invalid YAML" in found["problems"][0]["error"]


async def test_query_filters_by_words_type_layer_tags_status_and_limit(client: MemoryClient, repo: Repo) -> None:
    seed(repo)
    assert [i["id"] for i in (await ok(client, "knowledge_query", {"query": "postgres database"}))["items"]] == [
        "adr-042-database-selection"]
    assert [i["id"] for i in (await ok(client, "knowledge_query", {"type": "policy", "layer": "company"}))[
        "items"]] == ["pol-no-console"]
    assert [i["id"] for i in (await ok(client, "knowledge_query", {"tags": ["logging"]}))["items"]] == [
        "pol-no-console"]
    drafts = await ok(client, "knowledge_query", {"status": ["draft"], "query": "retry"})
    assert [i["id"] for i in drafts["items"]] == ["pat-retry"]
    limited = await ok(client, "knowledge_query", {"limit": 1})
    assert len(limited["items"]) == 1 and limited["totalCount"] == 4


async def test_show_returns_the_whole_item_with_constraints_and_history_on_request(client: MemoryClient,
                                                                                   repo: Repo) -> None:
    seed(repo)
    repo.write("company/adrs/adr-042-database-selection.md", ADR_042.replace("many MySQL", "several MySQL"))
    second = repo.commit("reword the context")
    shown = await ok(client, "knowledge_show", {"id": "adr-042-database-selection"})
    adr = shown["item"]
    assert "several MySQL" in adr["content"] and adr["severity"] == "block" and len(adr["contentHash"]) == 64
    assert adr["constraints"][0]["pattern"] == "mysql|mysql2|mariadb" and "history" not in shown
    bare = await ok(client, "knowledge_show", {"id": "adr-042-database-selection", "includeConstraints": False,
                                               "includeHistory": True})
    assert "constraints" not in bare["item"]
    assert [h["message"] for h in bare["history"]] == ["reword the context", "seed"]
    assert bare["history"][0]["version"] == second and bare["history"][0]["author"] == "Test Author"
    err = await error(client, "knowledge_show", {"id": "adr-999"})
    assert err["code"] == "NOT_FOUND" and err["details"]["id"] == "adr-999"


async def test_check_gives_the_reference_mysql2_answer(client: MemoryClient, repo: Repo) -> None:
    seed(repo)
    result = await ok(client, "knowledge_check", {"dependencies": [{"name": "mysql2", "version": "3.0.0"}]})
    assert result["passed"] is False
    assert result["violations"] == [{
        "knowledgeItemId": "adr-042-database-selection",
        "knowledgeItemTitle": "Database Selection for New Services",
        "constraint": {"operator": "must_not_use", "target": "dependency", "pattern": "mysql|mysql2|mariadb"},
        "severity": "block",
        "message": "MySQL not allowed for new services per ADR-042. Use PostgreSQL instead.",
    }]
    assert result["summary"] == {"info": 0, "warn": 0, "block": 1}


async def test_check_binds_company_items_and_this_project_only(client: MemoryClient, repo: Repo) -> None:
    seed(repo)
    files = [{"path": "web/app.ts", "content": "function f() {\n  console.log('x')\n}\n"}]
    result = await ok(client, "knowledge_check", {"files": files})
    # pol-tabs belongs to project "other" (this workspace is "specactor-ws"), so its block does not apply
    assert result["passed"] is True
    assert [(v["knowledgeItemId"], v["location"]) for v in result["violations"]] == [
        ("pol-no-console", {"file": "web/app.ts", "line": 2})]
    assert (await ok(client, "knowledge_check", {"files": files, "minSeverity": "block"}))["violations"] == []
    named = await ok(client, "knowledge_check", {"files": files, "knowledgeItemIds": ["pol-tabs"]})
    assert named["passed"] is False and named["summary"]["block"] == 1
    err = await error(client, "knowledge_check", {"knowledgeItemIds": ["nope"]})
    assert err["code"] == "NOT_FOUND" and err["details"]["id"] == "nope"


async def test_a_missing_repository_is_not_found_and_an_empty_one_has_no_items(client: MemoryClient,
                                                                                env: Path) -> None:
    err = await error(client, "knowledge_query", {})
    assert err["code"] == "NOT_FOUND" and err["details"]["kind"] == "knowledge repository"
    Repo(env.parent / "knowledge")
    assert (await ok(client, "knowledge_query", {}))["items"] == []
    assert (await ok(client, "knowledge_check", {"dependencies": []}))["passed"] is True


async def test_knowledge_may_live_in_a_folder_of_the_workspace_repository(client: MemoryClient, env: Path,
                                                                          monkeypatch: object) -> None:
    workspace = Repo(env.parent / "knowledge" / "..")  # the repository holds knowledge/ and more
    workspace.write("knowledge/company/adrs/adr-042-database-selection.md", ADR_042)
    workspace.write("src/app.py", "print('hi')\n")
    workspace.commit("workspace")
    found = await ok(client, "knowledge_query", {"query": "database"})
    assert [i["id"] for i in found["items"]] == ["adr-042-database-selection"]


async def test_overlapping_checks_and_queries_run_in_pool_workers_and_answer_as_a_lone_call_does(
        client: MemoryClient, repo: Repo) -> None:
    seed(repo)
    files = [{"path": "web/app.ts", "content": "function f() {\n  console.log('x')\n}\n"}]
    alone_check = await ok(client, "knowledge_check", {"files": files})
    alone_query = await ok(client, "knowledge_query", {"query": "database"})
    pool = client.app.services.pool
    await pool.wait_started(60)
    sent = {f"c{k}": ("knowledge_check", {"files": files}) for k in range(12)}
    sent |= {f"q{k}": ("knowledge_query", {"query": "database"}) for k in range(12)}
    for ident, (tool, arguments) in sent.items():  # all in flight at once, as a pipelining client sends them
        await client.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                           "params": {"name": tool, "arguments": arguments}})
    for ident in sent:
        reply = await client.reply_for(ident, timeout=60)
        envelope = reply["result"]["structuredContent"]
        assert envelope["success"] is True, envelope
        assert envelope["data"] == (alone_check if ident.startswith("c") else alone_query)
    stats = pool.statistics()
    assert stats.pooled > 0 and stats.crashed == 0, stats
    metrics = await client.request("resources/read", {"uri": "specactor://metrics"})
    assert json.loads(metrics["result"]["contents"][0]["text"])["pool"]["pooled"] == stats.pooled
