"""The 6 `airsspec:///` resources, their completions, and the 5 prompts."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from specactor.domain.airsspec import layout, prompts
from specactor.toolsets import airsspec as toolset
from tests.airsspec.support import FIXED_SECONDS, Client, airsspec_server

AUTH = "1737734400-user-authentication"


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolset, "clock", lambda: FIXED_SECONDS)


async def seeded(c: Client) -> str:
    spec_id = (await c.ok("spec_create", title="User Authentication", description="Login"))["spec_id"]
    await c.ok("plan_create", spec_id=spec_id, approach="JWT", steps=[{"title": "Schema", "description": "x"}])
    return str(spec_id)


async def test_the_resources_and_templates_are_listed_with_their_mime_types(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = await seeded(c)
        listed = (await c.raw.request("resources/list"))["result"]["resources"]
        templates = (await c.raw.request("resources/templates/list"))["result"]["resourceTemplates"]
    assert {(r["uri"], r["mimeType"]) for r in listed} >= {
        ("airsspec:///config", "application/toml"), ("airsspec:///specs", "application/json"),
        (f"airsspec:///{spec_id}", "application/json")}
    assert next(r for r in listed if r["uri"] == f"airsspec:///{spec_id}")["title"] == "User Authentication"
    assert {(t["uriTemplate"], t["mimeType"]) for t in templates} == {
        ("airsspec:///{spec_id}", "application/json"), ("airsspec:///{spec_id}/spec", "text/markdown"),
        ("airsspec:///{spec_id}/plan", "text/markdown"), ("airsspec:///{spec_id}/state", "application/toon")}


async def test_each_resource_reads_what_the_seed_describes(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = await seeded(c)
        config = await c.text("airsspec:///config")
        index = await c.json("airsspec:///specs")
        bundle = await c.json(f"airsspec:///{spec_id}")
        spec = await c.text(f"airsspec:///{spec_id}/spec")
        plan = await c.text(f"airsspec:///{spec_id}/plan")
        state = await c.read(f"airsspec:///{spec_id}/state")
    assert config == (tmp_path / layout.CONFIG).read_text()
    assert index == {"total": 1, "specs": [{"id": spec_id, "title": "User Authentication", "state": "draft",
                                            "category": "feature", "phase": "plan",
                                            "created_at": "2025-01-24T16:00:00Z",
                                            "updated_at": "2025-01-24T16:00:00Z"}]}
    assert set(bundle) == {"id", "spec", "plan", "state"} and bundle["plan"]["approach"] == "JWT"
    assert bundle["spec"]["metadata"]["title"] == "User Authentication" and bundle["state"]["phase"] == "plan"
    assert spec == (tmp_path / layout.spec_file(spec_id)).read_text()
    assert plan == (tmp_path / layout.plan_file(spec_id)).read_text()
    contents = state["result"]["contents"][0]
    assert contents["mimeType"] == "application/toon"
    assert contents["text"] == (tmp_path / layout.state_file(spec_id)).read_text()


async def test_an_empty_workspace_reads_as_defaults_and_an_empty_index(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        config = await c.text("airsspec:///config")
        index = await c.json("airsspec:///specs")
        listed = await c.ok("spec_list")
    assert f'name = "{tmp_path.name}"' in config and 'category = "feature"' in config
    assert index == {"specs": [], "total": 0} and listed == {"specs": [], "total": 0}
    assert not (tmp_path / ".airsspec").exists()


@pytest.mark.parametrize("uri", ["airsspec:///1-nope", "airsspec:///1-nope/spec", "airsspec:///not-an-id/plan",
                                 "airsspec:///..%2Fetc/spec", "airsspec:///{AUTH}/plan"])
async def test_a_resource_that_names_nothing_is_not_found(uri: str, tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        await c.ok("spec_create", title="User Authentication", description="")  # no plan yet
        reply = await c.read(uri.replace("{AUTH}", AUTH))
    assert reply["error"]["code"] == -32002, reply


async def test_spec_ids_complete_by_prefix_or_by_slug(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = await seeded(c)
        await c.ok("spec_create", title="Payments", description="")

        async def complete(ref: dict[str, str], value: str) -> list[str]:
            reply = await c.raw.request("completion/complete", {"ref": ref, "argument": {"name": "spec_id",
                                                                                        "value": value}})
            values: list[str] = reply["result"]["completion"]["values"]
            return values

        by_slug = await complete({"type": "ref/resource", "uri": "airsspec:///{spec_id}/plan"}, "auth")
        by_prefix = await complete({"type": "ref/prompt", "name": "review_spec"}, "1737")
    assert by_slug == [spec_id] and len(by_prefix) == 2


async def test_the_prompts_are_the_seed_templates_with_their_arguments(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        listed = (await c.raw.request("prompts/list"))["result"]["prompts"]
        write = await c.raw.request("prompts/get", {"name": "write_spec",
                                                    "arguments": {"feature_description": "user login"}})
        plan = await c.raw.request("prompts/get", {"name": "validate_plan", "arguments": {"spec_id": AUTH}})
        bad = await c.raw.request("prompts/get", {"name": "check_progress", "arguments": {"spec_id": "../x"}})
        missing = await c.raw.request("prompts/get", {"name": "create_plan", "arguments": {}})
    assert [(p["name"], [(a["name"], a["required"]) for a in p["arguments"]]) for p in listed] == [
        ("write_spec", [("feature_description", True)]), ("create_plan", [("spec_id", True)]),
        ("review_spec", [("spec_id", True)]), ("validate_plan", [("spec_id", True)]),
        ("check_progress", [("spec_id", True)])]
    text = write["result"]["messages"][0]["content"]["text"]
    assert text == prompts.WRITE_SPEC.replace("{{feature_description}}", "user login")
    assert text.startswith("You are helping write a specification for: user login\n\nA good spec should answer:")
    assert plan["result"]["messages"][0]["content"]["text"].startswith(
        f"Compare the plan at airsspec:///{AUTH}/plan against the spec at airsspec:///{AUTH}/spec\n")
    assert bad["error"]["code"] == -32602 and missing["error"]["code"] == -32602


def test_a_prompt_argument_holding_braces_is_not_expanded_twice() -> None:
    assert prompts.render("a {{x}} b {{y}}", {"x": "{{y}}", "y": "Y"}) == "a {{y}} b Y"
    assert prompts.render("{{unknown}} {{x", {"x": "1"}) == "{{unknown}} {{x"


async def test_a_write_tells_subscribers_of_the_spec_and_the_index(tmp_path: Path) -> None:
    async with airsspec_server(tmp_path) as c:
        spec_id = await seeded(c)
        for uri in (f"airsspec:///{spec_id}/state", "airsspec:///specs"):
            assert (await c.raw.request("resources/subscribe", {"uri": uri}))["result"] == {}
        await c.ok("spec_transition", spec_id=spec_id, to_state="active")
        wanted = {f"airsspec:///{spec_id}/state", "airsspec:///specs"}
        with trio.fail_after(5):
            while not wanted <= {n["params"]["uri"] for n in c.raw.notifications
                                 if n["method"] == "notifications/resources/updated"}:
                await c.raw.request("ping")
