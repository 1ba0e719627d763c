"""Open loop over Streamable HTTP: 100 clients each calling a read-tool mix 10 times a second,
against one client at the same pace.

    python -m bench.openloop [--quick] [--json F]

specactor (`python -m specactor serve --http --port 0`, every default toolset) serves a workspace
with real data: an AirsSpec workspace (`bench/workloads/airsspec.py`), an OpenSpec workspace
(`bench/workloads/openspec.py`) and a memory store (lexical, the default without embeddings).
The mix, in turn per client: `spec_list`, `spec_status`, OpenSpec `list` and `show`,
`memory_search`, and a resource read (an AirsSpec spec or an OpenSpec spec).

Each client has its own keep-alive connection and session (2025-11-25 era) and a **schedule**:
request k is due at start + phase + k x 100 ms (phase uniform in [0, 100 ms), seeded). A request
leaves at its due time, or when the client's previous reply arrives if that is later (one
request in flight per connection); its latency runs from the **due time** to the last byte of
its reply, so time spent queued behind a slow reply counts (no coordinated omission).
Gates (bench/gates.py, "I/O-waiting and open loop"): P95 of the 100 clients ≤ 1.5 x P95 of the
single client; every P95 < 200 ms. `--quick` is a smoke test: shorter, verdicts "smoke", exit 0.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import random
import selectors
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from bench import procstat, stagecli
from bench.gates import OPEN_LOOP_P95_MS, OPEN_LOOP_RATIO, GateResult
from bench.http_driver import LEGACY, Endpoint, Worker
from bench.http_harness import HttpServer
from bench.servers import REPO
from bench.stats import summarize
from bench.transport import HarnessError, ServerSpec

FULL = {"airsspec_specs": 200, "openspec_specs": 100, "openspec_changes": 40, "memories": 5000,
        "single_s": 20.0, "open_s": 10.0}
QUICK = {"airsspec_specs": 40, "openspec_specs": 20, "openspec_changes": 8, "memories": 500,
         "single_s": 3.0, "open_s": 3.0}
CLIENTS = 100
PERIOD_S = 0.1  # each client: one request every 100 ms
TIMEOUT = 60.0
_enc = msgspec.json.Encoder()


class _Head(msgspec.Struct):
    id: int | str | None = None
    error: msgspec.Raw | None = None


_head = msgspec.json.Decoder(_Head)


# ---------------------------------------------------------------------- the workspace and the mix


@dataclass
class Data:
    specs: list[str]  # AirsSpec spec ids
    caps: list[str]  # OpenSpec capabilities
    queries: list[str]  # memory queries


def build(root: Path, db: Path, sizes: dict[str, Any]) -> Data:
    from bench.workloads import airsspec, openspec
    from bench.workloads.memory import Corpus
    from specactor.domain.memory.layers import Identifiers, scope_key
    from specactor.domain.memory.records import NewMemory
    from specactor.sqlite.memory_db import connect, insert_memory

    roles = airsspec.workspace(root, sizes["airsspec_specs"])
    caps, _ = openspec.workspace(root, sizes["openspec_specs"], sizes["openspec_changes"])
    corpus = Corpus()
    texts = [corpus.memory() for _ in range(sizes["memories"])]
    conn = connect(db, writer=True)
    key = scope_key("user", Identifiers(user_id="bench"))
    conn.execute("BEGIN")
    for text in texts:
        insert_memory(conn, NewMemory(text, "user", key, {"userId": "bench"}, [], {}))
    conn.execute("COMMIT")
    conn.close()
    rng = random.Random(13)
    return Data(roles.all, caps, [corpus.query(rng.choice(texts)) for _ in range(500)])


def mix(data: Data, rng: random.Random) -> list[tuple[str, Callable[[], tuple[str, dict[str, Any]]]]]:
    """(name, () -> (method, params)): the read tools and resource reads the clients take turns on."""
    def tool(name: str, args: Callable[[], dict[str, Any]]) -> Callable[[], tuple[str, dict[str, Any]]]:
        return lambda: ("tools/call", {"name": name, "arguments": args()})

    def read(uri: Callable[[], str]) -> Callable[[], tuple[str, dict[str, Any]]]:
        return lambda: ("resources/read", {"uri": uri()})

    return [
        ("spec_list", tool("spec_list", dict)),
        ("spec_status", tool("spec_status", lambda: {"spec_id": rng.choice(data.specs)})),
        ("openspec list", tool("list", dict)),
        ("openspec show", tool("show", lambda: {"item": rng.choice(data.caps)})),
        ("memory_search", tool("memory_search", lambda: {"query": rng.choice(data.queries)})),
        ("read airsspec spec", read(lambda: f"airsspec:///{rng.choice(data.specs)}/spec")),
        ("read openspec spec", read(lambda: f"openspec://specs/{rng.choice(data.caps)}")),
    ]


# ---------------------------------------------------------------------- the open loop


@dataclass
class Client:
    worker: Worker
    index: int
    phase: float
    turn: int  # where in the mix this client starts
    sent: int = 0  # requests sent so far
    inflight: tuple[int, int, str] | None = None  # (id, due ns, op)
    samples: list[tuple[str, float]] = field(default_factory=list)  # (op, ms from due to reply)


@dataclass
class LoopResult:
    samples: list[tuple[str, float]]
    offered: int  # requests due within the window
    wall_s: float  # first due -> last reply
    server_cpu_s: float
    client_cpu_s: float
    late_sends: int  # requests that left after their due time (the previous reply was late)


def open_loop(clients: list[Client], ops: list[tuple[str, Callable[[], tuple[str, dict[str, Any]]]]],
              seconds: float, server_pid: int) -> LoopResult:
    """Every client sends on its schedule for `seconds`, then the loop waits for the last replies."""
    sel = selectors.DefaultSelector()
    by_fd: dict[int, Client] = {}
    late = 0
    for c in clients:
        assert c.worker.sock is not None
        c.worker.sock.setblocking(False)
        by_fd[c.worker.sock.fileno()] = c
        sel.register(c.worker.sock, selectors.EVENT_READ)
    cpu0, srv0 = time.process_time(), procstat.cpu_seconds(server_pid)
    start = time.perf_counter_ns() + 5_000_000
    period = int(PERIOD_S * 1e9)
    total = int(seconds / PERIOD_S)  # requests per client

    def due(c: Client, k: int) -> int:
        return start + int(c.phase * 1e9) + k * period

    def send(c: Client) -> None:
        nonlocal late
        name, make = ops[(c.turn + c.sent) % len(ops)]
        method, params = make()
        w = c.worker
        w.ids += 1
        body = _enc.encode({"jsonrpc": "2.0", "id": w.ids, "method": method, "params": params})
        wire = w._head(b"POST", b"", len(body)) + body
        assert w.sock is not None
        d = due(c, c.sent)
        if time.perf_counter_ns() - d > 1_000_000:
            late += 1
        if w.sock.send(wire) != len(wire):  # a few hundred bytes into an idle socket: never partial
            raise HarnessError("short write on an idle connection")
        c.inflight = (w.ids, d, name)
        c.sent += 1

    timers = [(due(c, 0), i) for i, c in enumerate(clients)]
    heapq.heapify(timers)
    last = start
    try:
        while timers or any(c.inflight for c in clients):
            now = time.perf_counter_ns()
            while timers and timers[0][0] <= now:
                _, i = heapq.heappop(timers)
                if clients[i].inflight is None:
                    send(clients[i])  # else: sent when the reply arrives
            wait = (timers[0][0] - now) / 1e9 if timers else TIMEOUT
            if now - last > TIMEOUT * 1e9:
                raise HarnessError(f"no reply for {TIMEOUT} s")
            for key, _ in sel.select(max(0.0, wait)):
                c = by_fd[key.fd]
                w = c.worker
                got = w.poll()
                if got is None:
                    raise HarnessError("the server closed a connection with a request in flight")
                received, replies = got
                if not replies or c.inflight is None:
                    continue
                mid, d, name = c.inflight
                r = replies[0]
                message = r.message(mid) if r.status == 200 else b""
                head = _head.decode(message) if message else None
                if head is None or head.id != mid or head.error is not None or b'"isError":true' in message:
                    raise HarnessError(f"{name}: bad reply to id {mid}: HTTP {r.status} {r.body[:300]!r}")
                c.samples.append((name, (received - d) / 1e6))
                c.inflight = None
                last = received
                if r.closing:  # hypercorn closes a keep-alive connection every 1,000 requests
                    sel.unregister(w.sock)
                    del by_fd[key.fd]
                    w.connect(TIMEOUT)
                    assert w.sock is not None
                    w.sock.setblocking(False)
                    by_fd[w.sock.fileno()] = c
                    sel.register(w.sock, selectors.EVENT_READ)
                if c.sent < total:
                    if due(c, c.sent) <= received:
                        send(c)  # it is late: it leaves now, timed from when it was due
                    else:
                        heapq.heappush(timers, (due(c, c.sent), c.index))
    finally:
        sel.close()
        for c in clients:
            if c.worker.sock is not None:
                c.worker.sock.setblocking(True)
                c.worker.last_used = time.monotonic()
    samples = [s for c in clients for s in c.samples]
    for c in clients:
        c.samples, c.sent = [], 0
    return LoopResult(samples, total * len(clients), (last - start) / 1e9, procstat.cpu_seconds(server_pid) - srv0,
                      time.process_time() - cpu0, late)


# ---------------------------------------------------------------------- the run


@contextlib.contextmanager
def serving(root: Path, db: Path) -> Iterator[HttpServer]:
    path = os.environ.get("PYTHONPATH")
    spec = ServerSpec("specactor", "specactor", (), {
        "PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""), "SPECACTOR_MEMORY_DB": str(db),
        "SPECACTOR_MEMORY_USER_ID": "bench", "SPECACTOR_KNOWLEDGE_REPO": str(root / "knowledge")},
        (sys.executable, "-m", "specactor", "serve", "--http", "--port", "0", "--no-session-log", "--root", "{root}"))
    server = HttpServer(spec, root)
    try:
        yield server
    finally:
        server.close(10.0)


def _clients(endpoint: Endpoint, n: int, rng: random.Random, ops: int) -> list[Client]:
    out = []
    for i in range(n):
        w = Worker(endpoint, LEGACY)
        deadline = time.monotonic() + TIMEOUT
        while True:  # the URL may be announced just before the socket accepts
            try:
                w.connect(TIMEOUT)
                w.handshake(TIMEOUT)
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        out.append(Client(w, i, rng.uniform(0, PERIOD_S), i % ops))
    return out


def _summary(result: LoopResult, clients: int) -> dict[str, Any]:
    values = [ms for _, ms in result.samples]
    s = summarize(values)
    per_op: dict[str, list[float]] = {}
    for name, ms in result.samples:
        per_op.setdefault(name, []).append(ms)
    return {"clients": clients, "n": s["n"], "p50_ms": s["median"], "p95_ms": s["p95"], "p99_ms": s["p99"],
            "max_ms": s["max"], "offered_per_s": clients / PERIOD_S, "achieved_per_s": len(values) / result.wall_s,
            "late_sends": result.late_sends, "server_cpu_ms_per_call": result.server_cpu_s * 1000 / len(values),
            "client_cpu_ms_per_call": result.client_cpu_s * 1000 / len(values),
            "per_op": {k: {"n": len(v), "p50_ms": summarize(v)["median"], "p95_ms": summarize(v)["p95"]}
                       for k, v in sorted(per_op.items())},
            "samples_ms": values}


def run(quick: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    rng = random.Random(17)
    with tempfile.TemporaryDirectory(prefix="specactor-bench-openloop-") as tmp:
        root, db = Path(tmp) / "ws", Path(tmp) / "memory.db"
        root.mkdir()
        progress(f"openloop: {sizes['airsspec_specs']} AirsSpec specs, {sizes['openspec_specs']} OpenSpec specs + "
                 f"{sizes['openspec_changes']} changes, {sizes['memories']:,} memories")
        data = build(root, db, sizes)
        ops = mix(data, rng)
        with serving(root, db) as server:
            endpoint = server.wait_ready(TIMEOUT)
            warm: list[Client] = []
            crowd: list[Client] = []
            try:
                warm = _clients(endpoint, 1, rng, len(ops))
                open_loop(warm, ops, 1.0, server.pid)  # warm-up: caches, the memory store, the reader pool
                progress(f"openloop: 1 client at {1 / PERIOD_S:g}/s for {sizes['single_s']:g} s")
                single = open_loop(warm, ops, sizes["single_s"], server.pid)
                crowd = _clients(endpoint, CLIENTS, rng, len(ops))
                open_loop(crowd, ops, 1.0, server.pid)  # warm-up of the 100 sessions, unrecorded
                progress(f"openloop: {CLIENTS} clients at {1 / PERIOD_S:g}/s each for {sizes['open_s']:g} s")
                many = open_loop(crowd, ops, sizes["open_s"], server.pid)
            except (OSError, ValueError, HarnessError) as err:
                raise server.fail(f"open loop: {err}") from err
            finally:
                for c in [*warm, *crowd]:
                    c.worker.end_session(5.0)
    one, hundred = _summary(single, 1), _summary(many, CLIENTS)
    return {"quick": quick, "sizes": sizes, "period_ms": PERIOD_S * 1000, "clients": CLIENTS,
            "mix": [name for name, _ in ops], "single": one, "open": hundred,
            "ratio_p95": hundred["p95_ms"] / one["p95_ms"]}


# ---------------------------------------------------------------------- table and gates


def gates(section: dict[str, Any]) -> list[GateResult]:
    if "open" not in section:
        return [GateResult("open loop P95 vs one client", f"≤ {OPEN_LOOP_RATIO:g} x", "skip", "not measured", ())]
    smoke = bool(section.get("quick"))
    one, many, ratio = section["single"], section["open"], section["ratio_p95"]
    keys = ("openloop:single:p95", "openloop:open:p95")
    worst = max(one["p95_ms"], many["p95_ms"])
    return [
        GateResult("open loop P95 vs one client",
                   f"P95 of {section['clients']} clients ≤ {OPEN_LOOP_RATIO:g} x one client's, each "
                   f"{1000 / section['period_ms']:g} calls/s",
                   "smoke" if smoke else "pass" if ratio <= OPEN_LOOP_RATIO else "fail",
                   f"{section['clients']} clients p95 {many['p95_ms']:.1f} ms = {ratio:.2f} x one client's "
                   f"{one['p95_ms']:.1f} ms; achieved {many['achieved_per_s']:.0f}/s of {many['offered_per_s']:.0f}/s",
                   keys),
        GateResult("open loop P95", f"every p95 < {OPEN_LOOP_P95_MS:g} ms",
                   "smoke" if smoke else "pass" if worst < OPEN_LOOP_P95_MS else "fail",
                   f"one client {one['p95_ms']:.1f} ms, {section['clients']} clients {many['p95_ms']:.1f} ms", keys),
    ]


def table(section: dict[str, Any], num: Callable[[float | None], str]) -> list[str]:
    sizes = section["sizes"]
    lines = [f"Streamable HTTP (2025-11-25 sessions), each client one keep-alive connection, one request due every "
             f"{section['period_ms']:g} ms, latency from the due time; mix: {', '.join(section['mix'])}. "
             f"Workspace: {sizes['airsspec_specs']} AirsSpec specs, {sizes['openspec_specs']} OpenSpec specs + "
             f"{sizes['openspec_changes']} changes, {sizes['memories']:,} memories"
             + (" (quick: smoke sizes)" if section.get("quick") else "")
             + ". CPU demand = offered calls/s x server CPU per call: above 1, one interpreter cannot keep up", "",
             "| clients | n | offered (calls/s) | achieved (calls/s) | p50 (ms) | p95 (ms) | p99 (ms) | "
             "p95 ÷ one client | target | sent > 1 ms late | server CPU/call (ms) | CPU demand (cores) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for key in ("single", "open"):
        lv = section[key]
        ratio = num(section["ratio_p95"]) + "x" if key == "open" else ""
        target = (f"≤ {OPEN_LOOP_RATIO:g}x; p95 < {OPEN_LOOP_P95_MS:g} ms" if key == "open"
                  else f"p95 < {OPEN_LOOP_P95_MS:g} ms")
        lines.append(f"| {lv['clients']} | {lv['n']:,} | {num(lv['offered_per_s'])} | {num(lv['achieved_per_s'])} | "
                     f"{num(lv['p50_ms'])} | {num(lv['p95_ms'])} | {num(lv['p99_ms'])} | {ratio} | {target} | "
                     f"{lv['late_sends']:,} | {num(lv['server_cpu_ms_per_call'])} | "
                     f"{num(lv['offered_per_s'] * lv['server_cpu_ms_per_call'] / 1000)} |")
    lines += ["", "| operation | p50, 1 client (ms) | p95, 1 client (ms) | p50, 100 clients (ms) | "
                  "p95, 100 clients (ms) |", "|---|---:|---:|---:|---:|"]
    for name in section["mix"]:
        a, b = section["single"]["per_op"].get(name), section["open"]["per_op"].get(name)
        if a and b:
            lines.append(f"| {name} | {num(a['p50_ms'])} | {num(a['p95_ms'])} | {num(b['p50_ms'])} | "
                         f"{num(b['p95_ms'])} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    return stagecli.main(argv, prog="python -m bench.openloop", doc=__doc__,
                         quick_help="shorter, smaller; verdicts are smoke", run=run, gates=gates,
                         table=table)


if __name__ == "__main__":
    raise SystemExit(main())
