"""Open loop over Streamable HTTP, as an agent fleet would load a team server: 100 clients each
calling a read-tool mix on a schedule, against one client at the same pace.

    python -m bench.openloop [--quick] [--json F]

specactor (`python -m specactor serve --http --port 0`, every default toolset) serves a workspace
with real data: an AirsSpec workspace (`bench/workloads/airsspec.py`), an OpenSpec workspace
(`bench/workloads/openspec.py`) and a memory store (lexical, the default without embeddings).
The mix, in turn per client: `spec_list`, `spec_status`, OpenSpec `list` and `show`,
`memory_search`, and a resource read (an AirsSpec spec or an OpenSpec spec).

Each client has its own keep-alive connection and session (2025-11-25 era) and a **schedule**:
request k is due at start + phase + k x period (phase uniform in [0, period), seeded). A request
leaves at its due time, or when the client's previous reply arrives if that is later (one
request in flight per connection); its latency runs from the **due time** to the last byte of
its reply, so time spent queued behind a slow reply counts (no coordinated omission).

Three parts (issue 15):

1. **gate**, against the default deployment (`--workers` = the cores): one client at 5 calls/s,
   then 100 clients at 5 calls/s each (500 calls/s offered). Gates (bench/gates.py, "I/O-waiting
   and open loop"; `bench.knee.holds`): P95 of the 100 clients ≤ 1.5 x the one client's; every
   P95 < 200 ms;
2. **stress**, reported: the same at 10 calls/s each (1,000 calls/s offered);
3. **knee**, reported: the highest offered rate at which both targets still hold, with the default
   deployment and with `--workers 1`: a bisection (`bench.knee.search`) over `KNEE_RATES` calls/s
   per client, each probe 100 clients for `knee_open_s` and one client at the same pace for
   `knee_single_s` (longer at slow paces: at least `knee_single_calls` calls); the default
   deployment's gate and stress runs count as probes; at most `knee_budget_s` per deployment.

Server CPU is summed over the server's process tree (its HTTP workers). `--quick` is a smoke
test: shorter, verdicts "smoke", exit 0. Gates and table: `bench/openloop_report.py`.
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

from bench import knee, procstat, stagecli
from bench.http_driver import LEGACY, Endpoint, Worker
from bench.http_harness import HttpServer
from bench.openloop_report import gates, table
from bench.servers import REPO, http_workers
from bench.stats import summarize
from bench.transport import HarnessError, ServerSpec

FULL = {"airsspec_specs": 200, "openspec_specs": 100, "openspec_changes": 40, "memories": 5000,
        "single_s": 20.0, "open_s": 10.0, "stress_single_s": 10.0, "stress_open_s": 10.0,
        "knee_single_s": 5.0, "knee_single_calls": 40, "knee_open_s": 5.0, "knee_budget_s": 90.0}
QUICK = {"airsspec_specs": 40, "openspec_specs": 20, "openspec_changes": 8, "memories": 500,
         "single_s": 2.0, "open_s": 2.0, "stress_single_s": 1.5, "stress_open_s": 1.5,
         "knee_single_s": 1.0, "knee_single_calls": 0, "knee_open_s": 1.0, "knee_budget_s": 6.0}
CLIENTS = 100
GATE_RATE = 5.0  # calls/s per client: 500 calls/s offered by the 100 (the gate)
STRESS_RATE = 10.0  # 1,000 calls/s offered (reported)
KNEE_RATES = (2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 14.0)  # calls/s per client the knee search may probe
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
    phase: float  # where in the period its schedule starts, a fraction in [0, 1)
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
              seconds: float, server_pid: int, rate: float) -> LoopResult:
    """Every client sends `rate` calls/s on its schedule for `seconds`, then the loop waits for the last replies."""
    sel = selectors.DefaultSelector()
    by_fd: dict[int, Client] = {}
    late = 0
    for c in clients:
        assert c.worker.sock is not None
        c.worker.sock.setblocking(False)
        by_fd[c.worker.sock.fileno()] = c
        sel.register(c.worker.sock, selectors.EVENT_READ)
    pids = procstat.tree(server_pid)  # the server and its HTTP workers
    cpu0, srv0 = time.process_time(), procstat.summed(procstat.cpu_seconds, pids)
    start = time.perf_counter_ns() + 5_000_000
    period = int(1e9 / rate)
    total = max(1, round(seconds * rate))  # requests per client

    def due(c: Client, k: int) -> int:
        return start + int(c.phase * period) + k * period

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
    return LoopResult(samples, total * len(clients), (last - start) / 1e9,
                      procstat.summed(procstat.cpu_seconds, pids) - srv0, time.process_time() - cpu0, late)


# ---------------------------------------------------------------------- the run


@contextlib.contextmanager
def serving(root: Path, db: Path, workers: int | None) -> Iterator[HttpServer]:
    """specactor serving HTTP on `root`: `--workers N`, or its default deployment when `workers` is None."""
    path = os.environ.get("PYTHONPATH")
    flags = () if workers is None else ("--workers", str(workers))
    spec = ServerSpec("specactor", "specactor", (), {
        "PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""), "SPECACTOR_MEMORY_DB": str(db),
        "SPECACTOR_MEMORY_USER_ID": "bench", "SPECACTOR_KNOWLEDGE_REPO": str(root / "knowledge")},
        (sys.executable, "-m", "specactor", "serve", "--http", "--port", "0", *flags, "--no-session-log",
         "--root", "{root}"))
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
        out.append(Client(w, i, rng.random(), i % ops))
    return out


def _summary(result: LoopResult, clients: int, rate: float, *, samples: bool = True) -> dict[str, Any]:
    values = [ms for _, ms in result.samples]
    s = summarize(values)
    per_op: dict[str, list[float]] = {}
    for name, ms in result.samples:
        per_op.setdefault(name, []).append(ms)
    out = {"clients": clients, "n": s["n"], "p50_ms": s["median"], "p95_ms": s["p95"], "p99_ms": s["p99"],
           "max_ms": s["max"], "offered_per_s": clients * rate, "achieved_per_s": len(values) / result.wall_s,
           "late_sends": result.late_sends, "server_cpu_ms_per_call": result.server_cpu_s * 1000 / len(values),
           "client_cpu_ms_per_call": result.client_cpu_s * 1000 / len(values),
           "per_op": {k: {"n": len(v), "p50_ms": summarize(v)["median"], "p95_ms": summarize(v)["p95"]}
                      for k, v in sorted(per_op.items())}}
    if samples:
        out["samples_ms"] = values
    return out


@dataclass
class Fleet:
    """One server with one warm client and `CLIENTS` warm clients, each with its session."""

    server: HttpServer
    ops: list[tuple[str, Callable[[], tuple[str, dict[str, Any]]]]]
    one: list[Client]
    crowd: list[Client]

    def pair(self, rate: float, single_s: float, open_s: float, *, samples: bool = True) -> dict[str, Any]:
        """One client, then the crowd, each at `rate` calls/s per client: their summaries and the verdict.

        Raises:
            HarnessError: a reply was wrong or missing (with the server's stderr tail).
        """
        try:
            one = open_loop(self.one, self.ops, single_s, self.server.pid, rate)
            time.sleep(0.3)  # the last replies' aftermath (session bookkeeping, GC) stays out of the next loop
            crowd = open_loop(self.crowd, self.ops, open_s, self.server.pid, rate)
            time.sleep(0.3)
        except (OSError, ValueError, HarnessError) as err:
            raise self.server.fail(f"open loop at {rate:g}/s per client: {err}") from err
        single = _summary(one, 1, rate, samples=samples)
        many = _summary(crowd, CLIENTS, rate, samples=samples)
        return {"rate_per_client": rate, "offered_per_s": rate * CLIENTS, "single": single, "open": many,
                "ratio_p95": many["p95_ms"] / single["p95_ms"], "holds": knee.holds(many["p95_ms"], single["p95_ms"])}


@contextlib.contextmanager
def fleet(root: Path, db: Path, workers: int | None, ops: list[tuple[str, Callable[[], tuple[str, dict[str, Any]]]]],
          rng: random.Random) -> Iterator[Fleet]:
    """A server and its warm clients (each warmed up for 1 s, unrecorded); sessions ended at the end."""
    with serving(root, db, workers) as server:
        endpoint = server.wait_ready(TIMEOUT)
        clients: list[Client] = []
        try:
            try:
                one = _clients(endpoint, 1, rng, len(ops))
                clients += one
                open_loop(one, ops, 1.0, server.pid, STRESS_RATE)  # caches, the memory store, the reader pool
                crowd = _clients(endpoint, CLIENTS, rng, len(ops))
                clients += crowd
                open_loop(crowd, ops, 1.0, server.pid, GATE_RATE)  # the 100 sessions, unrecorded
            except (OSError, ValueError, HarnessError) as err:
                raise server.fail(f"open loop warm-up: {err}") from err
            yield Fleet(server, ops, one, crowd)
        finally:
            for c in clients:
                c.worker.end_session(5.0)


def knee_search(f: Fleet, sizes: dict[str, Any], known: dict[float, dict[str, Any]],
                progress: Callable[[str], None], label: str) -> dict[str, Any]:
    """The knee for one deployment within `knee_budget_s`; `known`: runs already made (rate -> pair)."""
    started = time.monotonic()
    probes: dict[float, dict[str, Any]] = {}

    def single_s(rate: float) -> float:
        return max(sizes["knee_single_s"], sizes["knee_single_calls"] / rate)

    def affordable(rate: float) -> bool:
        cost = single_s(rate) + sizes["knee_open_s"] + 1.5  # + the settling pauses and the last replies
        return time.monotonic() - started + cost <= sizes["knee_budget_s"]

    def probe(rate: float) -> bool:
        progress(f"openloop knee ({label}): {CLIENTS} clients at {rate:g}/s each ({rate * CLIENTS:,.0f}/s offered)")
        probes[rate] = f.pair(rate, single_s(rate), sizes["knee_open_s"], samples=False)
        return bool(probes[rate]["holds"])

    found = knee.search(KNEE_RATES, probe, KNEE_RATES.index(GATE_RATE), affordable,
                        {r: bool(v["holds"]) for r, v in known.items()})
    rows = [{"rate_per_client": r, "offered_per_s": r * CLIENTS, "from": "probe" if r in probes else "run",
             "single_p95_ms": v["single"]["p95_ms"], "open_p95_ms": v["open"]["p95_ms"],
             "ratio_p95": v["ratio_p95"], "achieved_per_s": v["open"]["achieved_per_s"],
             "server_cpu_ms_per_call": v["open"]["server_cpu_ms_per_call"], "holds": v["holds"]}
            for r, v in sorted({**known, **probes}.items())]
    return {"knee_per_s": None if found.knee is None else found.knee * CLIENTS,
            "first_fail_per_s": None if found.first_fail is None else found.first_fail * CLIENTS,
            "closed": found.closed, "rates_per_s": [r * CLIENTS for r in KNEE_RATES],
            "budget_s": sizes["knee_budget_s"], "spent_s": round(time.monotonic() - started, 1), "probes": rows}


def run(quick: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    sizes = {**(QUICK if quick else FULL), "quick": quick}
    rng = random.Random(17)
    workers = http_workers()
    with tempfile.TemporaryDirectory(prefix="specactor-bench-openloop-") as tmp:
        root, db = Path(tmp) / "ws", Path(tmp) / "memory.db"
        root.mkdir()
        progress(f"openloop: {sizes['airsspec_specs']} AirsSpec specs, {sizes['openspec_specs']} OpenSpec specs + "
                 f"{sizes['openspec_changes']} changes, {sizes['memories']:,} memories")
        data = build(root, db, sizes)
        ops = mix(data, rng)
        knees: dict[str, Any] = {}
        with fleet(root, db, None, ops, rng) as f:
            progress(f"openloop (default deployment, {workers} workers): 1 client, then {CLIENTS} clients, at "
                     f"{GATE_RATE:g}/s each")
            gate = f.pair(GATE_RATE, sizes["single_s"], sizes["open_s"])
            progress(f"openloop: stress, 1 client then {CLIENTS} clients at {STRESS_RATE:g}/s each")
            stress = f.pair(STRESS_RATE, sizes["stress_single_s"], sizes["stress_open_s"])
            knees[str(workers)] = knee_search(f, sizes, {GATE_RATE: gate, STRESS_RATE: stress}, progress,
                                              f"{workers} workers")
        if workers != 1:
            with fleet(root, db, 1, ops, rng) as f:
                knees["1"] = knee_search(f, sizes, {}, progress, "1 worker")
    return {"quick": quick, "sizes": sizes, "clients": CLIENTS, "workers": workers,
            "mix": [name for name, _ in ops], "gate": gate, "stress": stress, "knee": knees}


def main(argv: list[str] | None = None) -> int:
    return stagecli.main(argv, prog="python -m bench.openloop", doc=__doc__,
                         quick_help="shorter, smaller; verdicts are smoke", run=run, gates=gates,
                         table=table)


if __name__ == "__main__":
    raise SystemExit(main())
