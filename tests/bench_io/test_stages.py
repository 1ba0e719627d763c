"""The I/O-waiting and open-loop bench stages: the fake embeddings endpoint answers concurrently and
correctly, and the stages judge their figures as the issue says (naming what fails, smoke when quick)."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import trio
import trio.testing

from bench import iowait, openloop
from bench.peers.embeddings import Endpoint, embed, serve


def test_fake_vectors_are_deterministic_unit_vectors_of_the_words() -> None:
    a, b = embed("The cat sat", 256), embed("the CAT sat", 256)
    assert a == b and len(a) == 256 and math.isclose(math.fsum(x * x for x in a), 1.0)
    assert embed("", 8) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


async def test_the_endpoint_waits_for_every_request_at_once(autojump_clock: trio.testing.MockClock) -> None:
    endpoint = Endpoint(delay_s=0.02, dims=16)
    replies: list[tuple[int, bytes]] = []

    async def post(i: int) -> None:
        body = msgspec.json.encode({"model": "m", "input": [f"text {i}", "more"]})
        replies.append(await endpoint.answer(b"POST", b"/v1/embeddings", body))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(post, i)
    assert endpoint.max_in_flight == 20 and endpoint.stats() == {"requests": 20, "inputs": 40, "max_in_flight": 20}
    status, body = replies[0]
    data = msgspec.json.decode(body)["data"]
    assert status == 200 and [d["index"] for d in data] == [0, 1] and data[1]["embedding"] == embed("more", 16)


async def test_the_endpoint_speaks_keep_alive_http() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(serve, Endpoint(0.0, 4), "127.0.0.1", 0)
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            for text in ("one", "two"):
                body = msgspec.json.encode({"input": text})
                await stream.send_all(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                                      % (len(body), body))
                head = b""
                while b"\r\n\r\n" not in head:
                    head += await stream.receive_some(1 << 16)
                top, _, rest = head.partition(b"\r\n\r\n")
                length = int(top.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(rest) < length:
                    rest += await stream.receive_some(1 << 16)
                assert top.startswith(b"HTTP/1.1 200") and msgspec.json.decode(rest)["data"][0]["embedding"] == embed(
                    text, 4)
            await stream.aclose()
            nursery.cancel_scope.cancel()


def level(p95: float) -> dict[str, Any]:
    return {"n": 100, "p50_ms": p95 / 2, "p95_ms": p95, "p99_ms": p95, "max_ms": p95}


def io_section(c1: float, c100: float, *, quick: bool = False) -> dict[str, Any]:
    op = {"c1": level(c1), "c100": level(c100), "ratio_p95": c100 / c1, "cpu_bound_p95_ms": 10.0,
          "server_cpu_ms_per_call": {"c1": 1.0, "c100": 0.1}, "embedded_inputs": 10, "embedding_requests": 2,
          "hits_median": 3}
    return {"quick": quick, "sizes": iowait.FULL, "delay_ms": 20.0, "dims": 256, "burst": 100,
            "operations": {"memory_search": op, "memory_search_semantic": op, "sync_now": {**op, "c100": level(25.0),
                                                                                          "ratio_p95": 25.0 / c1}}}


def verdicts(gates: list[Any]) -> dict[str, str]:
    return {g.name: g.verdict for g in gates}


def test_iowait_fails_a_tool_whose_p95_grows_more_than_half_under_concurrency_and_names_it() -> None:
    got = verdicts(iowait.gates(io_section(20.0, 40.0)))
    assert got["I/O wait hidden: memory_search"] == "fail" and got["I/O wait hidden: sync_now"] == "pass"
    assert got["I/O wait hidden: graph sync"] == "skip" and got["I/O-waiting P95 at any concurrency"] == "pass"


def test_iowait_fails_any_p95_of_200_ms_and_is_smoke_when_quick() -> None:
    assert verdicts(iowait.gates(io_section(150.0, 200.0)))["I/O-waiting P95 at any concurrency"] == "fail"
    assert set(verdicts(iowait.gates(io_section(20.0, 400.0, quick=True))).values()) == {"smoke", "skip"}


def test_iowait_table_shows_every_tool_at_both_levels_beside_its_target() -> None:
    lines = iowait.table(io_section(20.0, 40.0), lambda v: "-" if v is None else f"{v:.3g}")
    rows = [line for line in lines if line.startswith("| memory_search (hybrid")]
    assert len(rows) == 2 and "2x" in rows[1] and "≤ 1.5x" in rows[1]
    assert any("graph sync" in line and "not built yet" in line for line in lines)


def loop_section(one: float, many: float, *, quick: bool = False) -> dict[str, Any]:
    def lv(clients: int, p95: float) -> dict[str, Any]:
        return {**level(p95), "clients": clients, "offered_per_s": clients * 10.0, "achieved_per_s": clients * 9.5,
                "late_sends": 0, "server_cpu_ms_per_call": 1.0, "per_op": {"spec_list": level(p95)}}

    return {"quick": quick, "sizes": openloop.FULL, "period_ms": 100.0, "clients": 100, "mix": ["spec_list"],
            "single": lv(1, one), "open": lv(100, many), "ratio_p95": many / one}


def test_open_loop_fails_when_the_crowd_p95_is_more_than_one_and_a_half_times_one_clients() -> None:
    assert verdicts(openloop.gates(loop_section(4.0, 6.0))) == {"open loop P95 vs one client": "pass",
                                                                "open loop P95": "pass"}
    assert verdicts(openloop.gates(loop_section(4.0, 6.1)))["open loop P95 vs one client"] == "fail"
    assert verdicts(openloop.gates(loop_section(150.0, 210.0)))["open loop P95"] == "fail"
    assert set(verdicts(openloop.gates(loop_section(4.0, 600.0, quick=True))).values()) == {"smoke"}


def test_open_loop_table_has_a_row_per_client_count_and_per_operation() -> None:
    lines = openloop.table(loop_section(4.0, 6.0), lambda v: "-" if v is None else f"{v:.3g}")
    assert sum(line.startswith("| 1 |") or line.startswith("| 100 |") for line in lines) == 2
    assert any(line.startswith("| spec_list |") for line in lines)
