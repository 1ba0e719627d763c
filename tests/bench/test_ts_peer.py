"""The TS SDK peer's pins, its replies next to the Python SDK peer's, and its reported (never gated) targets.

No timing here (benchmarks stay in bench/). The reply check runs only where the peer is installed
(`.bench/ts-peer`, by `python -m bench` or `bench.peers.ts.project.ensure`): tests never reach npm.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench import gates
from bench.peers.ts import SOURCE, project
from bench.servers import server_specs
from bench.stdio_driver import StdioTransport

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
CALLS = [{"jsonrpc": "2.0", "id": mid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
         for mid, name, arguments in ((2, "echo", {"text": "hé"}), (3, "add", {"a": 1, "b": 2.5}))]


def test_ts_peer_pins_exact_versions_and_its_lock_agrees() -> None:
    deps = json.loads((SOURCE / "package.json").read_text(encoding="utf-8"))["dependencies"]
    assert deps["@modelcontextprotocol/sdk"] == "1.32.2"
    assert deps["node"].split(".")[0] == "22"
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in deps.values()), deps
    lock = json.loads((SOURCE / "package-lock.json").read_text(encoding="utf-8"))["packages"]
    assert lock[""]["dependencies"] == deps
    assert {name: lock[f"node_modules/{name}"]["version"] for name in deps} == deps


def _results(key: str, workdir: Path) -> dict[int, Any]:
    """The `result` of initialize and of each call in CALLS, through the bench's own pipe client."""
    conn = StdioTransport().open(server_specs()[key], workdir)
    try:
        frames = [(1, json.dumps(INIT).encode())]
        (init,) = conn.request_many(frames, 30)
        conn.notify(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        replies = [init, *conn.request_many([(c["id"], json.dumps(c).encode()) for c in CALLS], 30)]
    finally:
        assert conn.close(10) == 0
    return {r.id: json.loads(r.body)["result"] for r in replies}


@pytest.mark.slow
@pytest.mark.skipif(not project.installed(), reason="the TS SDK peer is not installed (python -m bench installs it)")
def test_ts_peer_answers_the_tools_as_the_python_sdk_peer_does(tmp_path: Path) -> None:
    ts, py = _results("ts", tmp_path), _results("sdk", tmp_path)
    assert ts[1]["serverInfo"]["name"] == "ts-sdk-peer"
    for call in CALLS:
        mid = call["id"]
        assert (ts[mid]["content"], ts[mid]["structuredContent"]) == (py[mid]["content"], py[mid]["structuredContent"])
    assert ts[2]["structuredContent"] == {"result": "hé"}


def test_reported_targets_show_a_verdict_but_never_fail_the_run() -> None:
    stdio = {"specactor": {"burst_cpu_s_per_1k": 0.05}, "ts": {"burst_cpu_s_per_1k": 0.012}}
    http = {"specactor": {"http_c10_calls_per_s": 2500.0, "http_c100_calls_per_s": 2600.0},
            "ts": {"http_c10_calls_per_s": 2000.0, "http_c100_calls_per_s": 2100.0},
            "ts-stateless": {"http_c10_calls_per_s": 3000.0, "http_c100_calls_per_s": 2500.0}}
    judged = {g.name: g for g in gates.evaluate(stdio, http)}
    burst = judged["stdio burst CPU per call vs TS SDK"]
    assert (burst.verdict, burst.measures) == ("missed", ("burst_cpu_s_per_1k",))
    assert "4.17 x TS SDK" in burst.detail
    tput = judged["HTTP throughput vs TS SDK at c=10 and c=100"]
    assert tput.verdict == "missed"  # c=10 loses to the stateless process, the better of the two there
    assert "0.83 x ts-stateless" in tput.detail and "1.04 x ts-stateless" in tput.detail
    reported = [g for g in judged.values() if g.verdict in gates.REPORTED_VERDICTS]
    assert gates.overall(reported) == "SKIP"  # neither PASS nor FAIL: the exit status ignores them


def test_reported_targets_are_met_or_skipped_as_the_figures_allow() -> None:
    http = {"specactor": {"http_c10_calls_per_s": 3100.0, "http_c100_calls_per_s": 3200.0},
            "ts-stateless": {"http_c10_calls_per_s": 3000.0, "http_c100_calls_per_s": 2500.0}}
    judged = {g.name: g.verdict for g in gates.evaluate({"specactor": {"burst_cpu_s_per_1k": 0.01}}, http)}
    assert judged["HTTP throughput vs TS SDK at c=10 and c=100"] == "met"
    assert judged["stdio burst CPU per call vs TS SDK"] == "skip"  # the TS peer was left out of stdio
    quick = {g.name: g.verdict for g in gates.evaluate({"specactor": {}}, http, quick=True)}
    assert quick["HTTP throughput vs TS SDK at c=10 and c=100"] == "smoke"  # a cold JIT proves nothing
