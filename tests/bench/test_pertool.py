"""The per-tool bench stage's own logic: its catalogue against a live server, its gate, its template matching.

No timing here (benchmarks stay in bench/): a tiny generated workspace, an in-memory server, and
one call of every catalogue entry, each reply checked the way `bench.pertool` checks it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from bench import catalog, pertool
from bench.transport import HarnessError
from specactor.config import SessionLogConfig, load
from specactor.testing import MemoryClient, open_memory_server

TINY = catalog.Sizes(specs=60, openspec_specs=12, changes=6, memories=200, knowledge_items=20, check_files=3)


class _Caller:
    def fail(self, what: str) -> HarnessError:
        return HarnessError(what)


async def _registered(client: MemoryClient) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for method, (field, kind, key) in pertool.LISTS.items():
        reply = await client.request(method, {})
        found[kind] = [item[key] for item in reply["result"][field]]
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, catalog.Seeds]:
    root = tmp_path / "ws"
    return root, catalog.build(root, TINY, calls=4)


async def test_the_catalogue_covers_everything_the_server_registers_and_every_entry_succeeds(
        workspace: tuple[Path, catalog.Seeds]) -> None:
    root, seeds = workspace
    config = msgspec.structs.replace(load({"root": str(root)}, catalog.memory_env(root)),
                                     session_log=SessionLogConfig(enabled=False))
    cat = catalog.Catalogue(root, seeds)
    ops = cat.ops()
    async with open_memory_server(config) as client:
        await client.initialize()
        found = await _registered(client)
        assert pertool.coverage(found, ops) == []
        assert len(found["tool"]) == len([op for op in ops if op.kind == "tool"])
        await client.request("tools/call", {"name": "sync_now", "arguments": {}}, timeout=30)
        for op in ops:
            if op.prepare is not None:
                op.prepare(2)
            for _ in range(2):  # twice: consuming pools and toggles must hold up
                params = op.params()
                reply: Any = await client.request(op.method, params, timeout=30)
                pertool._check(_Caller(), op, params, reply)  # type: ignore[arg-type]


def test_coverage_names_a_registered_tool_without_a_workload_entry(workspace: tuple[Path, catalog.Seeds]) -> None:
    root, seeds = workspace
    ops = [op for op in catalog.Catalogue(root, seeds).ops() if op.name != "spec_list"]
    found = {"tool": ["spec_list", *(op.name for op in ops if op.kind == "tool")],
             "resource": ["airsspec:///config", "airsspec:///1737734400-some-spec"],
             "template": ["airsspec:///{spec_id}"], "prompt": []}
    problems = pertool.coverage(found, ops)
    assert "no workload entry for tool:spec_list" in problems
    assert not any("1737734400-some-spec" in p for p in problems)  # an instance of a covered template


def test_templates_match_one_segment_or_with_a_plus_several() -> None:
    assert pertool._template("openspec://specs/{+capability}").match("openspec://specs/area-1/cap-5")
    assert pertool._template("airsspec:///{spec_id}").match("airsspec:///1737734400-a")
    assert not pertool._template("airsspec:///{spec_id}").match("airsspec:///1737734400-a/plan")


def _section(p95: float, p95_c100: float, *, quick: bool = False, error: str | None = None) -> dict[str, Any]:
    op = {"kind": "tool", "name": "spec_list", "p95_ms": p95, "p95_c100_ms": p95_c100}
    return {"quick": quick, "sizes_text": "tiny",
            "transports": {"stdio": {"ops": {"tool:spec_list": op, "tool:list": {**op, "p95_c100_ms": 3.0}},
                                     "error": error}}}


def test_the_gate_fails_naming_the_tool_whose_p95_reaches_200_ms_at_any_concurrency() -> None:
    (gate,) = pertool.gates(_section(1.0, 200.0))
    assert gate.verdict == "fail"
    assert "tool:spec_list p95 200.0 ms at c=100" in gate.detail
    assert "tool:list" not in gate.detail.split("over:")[1]


def test_the_gate_passes_below_200_ms_is_smoke_when_quick_and_fails_when_the_harness_broke() -> None:
    assert pertool.gates(_section(150.0, 199.9))[0].verdict == "pass"
    assert pertool.gates(_section(1.0, 500.0, quick=True))[0].verdict == "smoke"
    assert pertool.gates(_section(1.0, 1.0, error="server died"))[0].verdict == "fail"


def test_a_reply_is_checked_against_what_the_catalogue_expects() -> None:
    ok = {"result": {"structuredContent": {"success": True, "data": {}}}}
    refused = {"result": {"isError": True, "structuredContent": {"success": False}}}
    rpc_error = {"error": {"code": -32602, "message": "bad params"}}
    plain, init = catalog.Op("tool", "list", dict), catalog.Op("tool", "init", dict, expect_error=True)
    pertool._check(_Caller(), plain, {}, ok)  # type: ignore[arg-type]
    pertool._check(_Caller(), init, {}, refused)  # type: ignore[arg-type]
    for op, reply in ((plain, refused), (init, ok), (init, rpc_error), (plain, rpc_error)):
        with pytest.raises(HarnessError):
            pertool._check(_Caller(), op, {}, reply)  # type: ignore[arg-type]
    with pytest.raises(HarnessError):  # a resource read with no contents
        pertool._check(_Caller(), catalog.Op("resource", "x://y", dict), {}, {"result": {"contents": []}})  # type: ignore[arg-type]


def test_only_a_retryable_conflict_makes_the_first_sync_run_again() -> None:
    def reply(error: dict[str, Any] | None) -> dict[str, Any]:
        content = {"success": error is None, **({"error": error} if error else {})}
        return {"result": {"structuredContent": content, "isError": error is not None}}

    assert pertool.retryable_conflict(reply({"code": "CONFLICT", "retryable": True, "message": "another sync"}))
    assert not pertool.retryable_conflict(reply({"code": "CONFLICT", "retryable": False, "message": "x"}))
    assert not pertool.retryable_conflict(reply({"code": "INTERNAL", "retryable": True, "message": "x"}))
    assert not pertool.retryable_conflict(reply(None))
    assert not pertool.retryable_conflict({"error": {"code": -32603, "message": "x"}})


def test_no_peers_is_refused_without_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        pertool.main(["--no-peers"])
    assert exit_info.value.code == 2
    assert "--no-peers is for partial runs" in capsys.readouterr().err


@pytest.mark.slow
def test_a_partial_run_without_peers_measures_only_the_operations_it_matches() -> None:
    section = pertool.run(True, lambda _: None, ["stdio"], samples=3, bursts=1, only="prompt:openspec-archive$",
                          peers=False)
    entry = section["transports"]["stdio"]
    assert entry["error"] is None
    assert list(entry["ops"]) == ["prompt:openspec-archive"] and entry["peers"] == {}
    assert section["peers"] is False
    assert [g.verdict for g in pertool.gates(section)] == ["smoke"]
