"""Graph sync beside the writes: does mirroring into Emergent stay out of the tools' way?

    python -m bench.graphsync [--quick] [--json F]   # this part alone; `python -m bench.iowait` runs it last

An Emergent contract double (`python -m specactor.testing.emergent`, its own process) answers every
request after `latency_ms` (20 ms) of asynchronous sleep. specactor serves over stdio
(`python -m specactor serve`, toolsets openspec and airsspec; with graph sync, `graph` too, for
graph_status). Three parts, one double:

- **initial sync**: a fresh server on the OpenSpec workspace (`bench.workloads.openspec.workspace`,
  500 specs and 200 changes) against an empty double, timed from the spawn (and from the
  `initialize` reply) until graph_status shows the outbox empty with every object and relationship
  of the projection synced; then the double must hold exactly the projection's keys. Reported with
  the double's request counts and both processes' CPU; target under 15 s, not a gate.
- **writes, graph sync on and off**: two servers side by side on copies of one workspace (AirsSpec
  1,000 specs, OpenSpec 500 + 200: the per-tool stage's), one with graph sync (its first sync
  waited for, and reported), one without; per write tool (`WRITES`, arguments from
  `bench.catalog.Catalogue`, as the per-tool stage draws them), taking turns: warm-up, `samples`
  calls at c=1, `bursts` bursts of 100 written at once on the pipe. Before each burst the graph
  server's outbox is left to drain (untimed, recorded), so a burst meets the graph work of its own
  writes only. Server CPU is read from the first c=1 call to the drained outbox after it (and
  around the bursts likewise), so it includes the graph sync's share.
- **outage**: the double goes down (`down`: every connection reset) for `outage_s` while one
  client writes task_complete and spec_create in turn at `rate` calls/s; then it comes back and
  graph_status is polled until the outbox is empty. Reported: the backlog at recovery, the wait for
  the drain's next attempt (its backoff: `graph.retry_max_seconds`, 30 s, and the client's own
  retries), the drain itself, and the writes' latency during the outage. Defaults throughout.

Gates and table: `bench/graph_report.py`; targets in bench/gates.py (`GRAPH_*`). `--quick`: small
sizes, a 10 s outage, verdicts smoke.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench import catalog, procstat, stagecli
from bench.callers import StdioCaller
from bench.catalog import Catalogue, Op, Seeds
from bench.graph_report import gates, table
from bench.servers import REPO
from bench.stats import summarize
from bench.transport import HarnessError, ServerSpec
from bench.workloads import airsspec as airs
from bench.workloads import openspec as ospec

BURST = 100
LATENCY_MS = 20.0
TIMEOUT = 120.0  # one request or one burst
POLL_S = 0.05  # graph_status while waiting for the outbox
SETTLE_S = 0.5  # an outbox never seen non-empty counts as drained after this long at zero
WRITES = ("task_complete", "archive", "spec_create", "plan_create")
OUTAGE_WRITES = ("task_complete", "spec_create")
KEY = "standalone-key"
OTHER_PROJECT = "00000000-0000-4000-8000-000000000000"  # asks the double for its counts without its objects


@dataclass(frozen=True)
class Sizes:
    """The three parts' sizes: the issues' at full size (`FULL`), small for `--quick`."""

    initial_specs: int
    initial_changes: int
    airs_specs: int
    specs: int
    changes: int
    writes: tuple[str, ...]
    warmup: int
    samples: int
    bursts: int
    outage_s: float
    rate: float  # writes per second during the outage
    sync_timeout_s: float  # longest an initial sync may take before the harness gives up


FULL = Sizes(500, 200, 1000, 500, 200, WRITES, 5, 100, 3, 60.0, 10.0, 600.0)
QUICK = Sizes(50, 20, 100, 50, 20, OUTAGE_WRITES, 2, 10, 1, 10.0, 10.0, 120.0)


# ---------------------------------------------------------------------- the double


class Double:
    """The Emergent double as a child process, driven through its `/_double/` control endpoints.

    Every method raises `urllib.error.URLError` (an `OSError`) when the double does not answer.
    """

    def __init__(self, proc: subprocess.Popen[bytes], url: str, latency_s: float) -> None:
        self.proc = proc
        self.url = url
        self.latency_s = latency_s

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else msgspec.json.encode(body)
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as reply:
            return msgspec.json.decode(reply.read())

    def down(self, down: bool) -> None:
        """An outage (every connection reset) or the end of one; the latency stays."""
        self._call("PUT", "/_double/faults", {"latency": self.latency_s, "down": down})

    def reset(self) -> None:
        self._call("POST", "/_double/reset")

    def counts(self) -> dict[str, int]:
        """Requests received so far by "METHOD route" (faulted ones included)."""
        return dict(self._call("GET", f"/_double/state?project={OTHER_PROJECT}")["counts"])

    def state(self) -> dict[str, Any]:
        return dict(self._call("GET", "/_double/state"))


@contextlib.contextmanager
def emergent_double(work: Path, latency_ms: float = LATENCY_MS) -> Iterator[Double]:
    """`python -m specactor.testing.emergent` at `latency_ms` (its stderr in `work`/emergent.log); yields
    it once its URL is announced, terminates it after.

    Raises:
        HarnessError: no URL within 30 s (the log's tail says why).
    """
    port_file, log = work / "emergent.url", work / "emergent.log"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with log.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "specactor.testing.emergent", "--port-file", str(port_file),
                                 "--latency-ms", str(latency_ms)], stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise HarnessError(f"the Emergent double announced no URL (exit code {proc.poll()}): "
                                   f"{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.02)
        yield Double(proc, port_file.read_text().strip(), latency_ms / 1000)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def requests_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The requests the double received between two `counts()`, by route, the busiest first."""
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return dict(sorted(((k, v) for k, v in delta.items() if v), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------------- the server side


def server(root: Path, url: str, workspace: str | None) -> ServerSpec:
    """specactor over stdio on `root`; with graph sync into the double when `workspace` is given."""
    path = os.environ.get("PYTHONPATH")
    env = {"PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""), "SPECACTOR_TOOLSETS": "openspec,airsspec",
           "SPECACTOR_GRAPH_SYNC": "false"}
    if workspace is not None:
        from specactor.testing.emergent import PROJECT_ID

        env.update({"SPECACTOR_TOOLSETS": "openspec,airsspec,graph", "SPECACTOR_GRAPH_SYNC": "true",
                    "EMERGENT_URL": url, "EMERGENT_API_KEY": KEY, "EMERGENT_PROJECT_ID": PROJECT_ID,
                    "SPECACTOR_GRAPH_WORKSPACE_ID": workspace})
    label = "specactor, graph sync " + ("on" if workspace else "off")
    return ServerSpec("specactor", label, (sys.executable, "-m", "specactor", "serve", "--root", str(root),
                                           "--no-session-log"), env)


def call(caller: StdioCaller, name: str, **arguments: Any) -> dict[str, Any]:
    """One tool call that must succeed; its `data`."""
    reply = caller.one(("tools/call", {"name": name, "arguments": arguments})).reply
    content = (reply.get("result") or {}).get("structuredContent") or {}
    if "error" in reply or content.get("success") is not True:
        raise caller.fail(f"{name} failed: {str(reply)[:600]}")
    return dict(content.get("data") or {})


def checked(caller: StdioCaller, op: Op, params: dict[str, Any], reply: dict[str, Any]) -> None:
    """A write must succeed; its result feeds the catalogue's pools (plan_create <- spec_create)."""
    result = reply.get("result") or {}
    content = result.get("structuredContent") or {}
    if "error" in reply or result.get("isError") or content.get("success") is False:
        raise caller.fail(f"{op.key} failed: params {str(params)[:300]} -> {str(reply)[:600]}")
    if op.after is not None:
        op.after(params, result)


def wait_drained(caller: StdioCaller, timeout: float = TIMEOUT) -> float:
    """Poll graph_status until the outbox is empty and stays so; seconds until it first was.

    The feed reaches the outbox a few milliseconds after a write's reply (projection first), so an
    empty outbox counts only once it has been seen holding something, or after `SETTLE_S` at zero;
    and it must read empty three times in a row. Polls start every `POLL_S` and thin out to 4 a
    second, so a long drain is not slowed (nor its CPU swollen) by the polling.

    Raises:
        HarnessError: still not empty after `timeout` s, or an item went to the dead letters.
    """
    start = time.monotonic()
    seen, zeros, empty_at = False, 0, start
    while True:
        status = call(caller, "graph_status")
        now = time.monotonic()
        if status["outbox"]["deadLetters"]:
            raise caller.fail(f"Emergent refused items: {status['recentDeadLetters'][:3]}")
        if status["outbox"]["pending"]:
            seen, zeros = True, 0
        else:
            empty_at = now if zeros == 0 else empty_at
            zeros += 1
            if zeros >= 3 and (seen or now - start >= SETTLE_S):
                return empty_at - start if seen else 0.0
        if now - start > timeout:
            raise caller.fail(f"the outbox did not drain in {timeout:g} s: {status}")
        time.sleep(POLL_S if zeros else min(0.25, POLL_S + (now - start) / 10))


def quiet(pid: int, timeout: float = 30.0) -> None:
    """Wait until process `pid` has used under 10 ms of CPU in 0.3 s (a fresh server indexes its
    workspace and sets up its watches in the background), at most `timeout` s."""
    deadline = time.monotonic() + timeout
    before = procstat.cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        after = procstat.cpu_seconds(pid)
        if after - before < 0.011:
            return
        before = after


@dataclass(frozen=True)
class Projection:
    """What the graph of one workspace should hold: its object keys and how many relationships."""

    workspace: str
    nodes: frozenset[str]
    edges: int

    @property
    def size(self) -> int:
        return len(self.nodes) + self.edges


def projection(root: Path, workspace: str) -> Projection:
    """What graph sync should mirror of `root` (the pure projection, as the server computes it)."""
    from specactor.domain.graph.projection import project
    from specactor.fs.workspace_reader import WorkspaceReader

    reader = WorkspaceReader(root, root)
    try:
        graph = project(workspace, reader)
    finally:
        reader.close()
    return Projection(workspace, frozenset(graph.nodes), len(graph.edges))


def wait_synced(caller: StdioCaller, want: Projection, timeout: float) -> dict[str, Any]:
    """Poll graph_status until the outbox is empty and every item of `want` is synced; the last status.

    Raises:
        HarnessError: not there after `timeout` s, or an item went to the dead letters.
    """
    deadline = time.monotonic() + timeout
    while True:
        status = call(caller, "graph_status")
        if status["outbox"]["deadLetters"]:
            raise caller.fail(f"Emergent refused items: {status['recentDeadLetters'][:3]}")
        if status["outbox"]["pending"] == 0 and status["synced"] >= want.size:
            return status
        if time.monotonic() > deadline:
            raise caller.fail(f"no full sync in {timeout:g} s ({want.size} items wanted): {status}")
        time.sleep(POLL_S)


def check_mirror(double: Double, want: Projection) -> dict[str, int]:
    """The double holds exactly the projection's objects of that workspace (keys), and its
    relationships; their counts.

    Raises:
        HarnessError: a key missing, extra or twice, or a relationship count that differs.
    """
    state = double.state()
    label = f"workspace:{want.workspace}"
    objects = [o for o in state["objects"] if label in (o.get("labels") or [])]
    keys = [o["key"] for o in objects]
    ids = {o["canonical_id"] for o in objects}
    rels = [r for r in state["relationships"] if r["src_id"] in ids and r["dst_id"] in ids]
    if len(keys) != len(set(keys)) or set(keys) != want.nodes or len(rels) != want.edges:
        raise HarnessError(f"the double's graph is not the projection: {len(keys)} objects ({len(set(keys))} keys) "
                           f"against {len(want.nodes)}, {len(rels)} relationships against {want.edges}; differing "
                           f"keys {sorted(set(keys) ^ want.nodes)[:5]}")
    return {"objects": len(objects), "relationships": len(rels)}


# ---------------------------------------------------------------------- part 1: the initial sync


def initial_sync(double: Double, base: Path, sizes: Sizes, progress: Callable[[str], None]) -> dict[str, Any]:
    """A fresh server's first sync of the OpenSpec workspace into an empty double."""
    root = base / "initial"
    root.mkdir()
    ospec.workspace(root, sizes.initial_specs, sizes.initial_changes)
    airs.settle_on_disk()
    want = projection(root, "bench/initial")
    progress(f"graph: initial sync of {sizes.initial_specs} specs + {sizes.initial_changes} changes "
             f"({len(want.nodes):,} objects, {want.edges:,} relationships)")
    double.reset()
    before, double_cpu = double.counts(), procstat.cpu_seconds(double.proc.pid)
    caller = StdioCaller(server(root, double.url, want.workspace), root, TIMEOUT)
    try:
        spawned = caller.conn.spawned_ns / 1e9
        initialized = time.perf_counter()
        status = wait_synced(caller, want, sizes.sync_timeout_s)
        done = time.perf_counter()
        server_cpu = procstat.cpu_seconds(caller.pid)
    finally:
        caller.close()
    mirrored = check_mirror(double, want)
    requests = requests_between(before, double.counts())
    return {"specs": sizes.initial_specs, "changes": sizes.initial_changes, **mirrored,
            "seconds_from_spawn": done - spawned, "seconds_from_initialize": done - initialized,
            "synced": status["synced"], "requests": sum(requests.values()), "requests_by_route": requests,
            "server_cpu_s": server_cpu, "double_cpu_s": procstat.cpu_seconds(double.proc.pid) - double_cpu}


# ---------------------------------------------------------------------- part 2: writes, graph sync on and off


class Side:
    """One server of the comparison: its workspace copy, client, catalogue and write operations."""

    def __init__(self, name: str, root: Path, seeds: Seeds, spec: ServerSpec) -> None:
        self.name = name
        self.graph = name == "on"
        self.root = root
        self.caller = StdioCaller(spec, root, TIMEOUT)
        self.cat = Catalogue(root, seeds)
        self.ops = {op.name: op for op in self.cat.ops() if op.kind == "tool"}

    def drained(self) -> float:
        return wait_drained(self.caller) if self.graph else 0.0

    def writes(self, op: Op, count: int) -> list[float]:
        """`count` calls of `op`, one after another; each one's latency in ms."""
        out = []
        for _ in range(count):
            params = op.params()
            timed = self.caller.one((op.method, params))
            checked(self.caller, op, params, timed.reply)
            out.append(timed.ms)
        return out

    def burst(self, op: Op) -> list[float]:
        calls = [(op.method, op.params()) for _ in range(BURST)]
        timed = self.caller.burst(calls)
        for (_, params), t in zip(calls, timed, strict=True):
            checked(self.caller, op, params, t.reply)
        return [t.ms for t in timed]

    def probe(self, op: Op) -> None:
        """Until the catalogue's probe succeeds (archive: the changes written for it are visible)."""
        params = self.cat.probe_params(op)
        deadline = time.monotonic() + 10
        while params is not None:
            reply = self.caller.one(("tools/call", params)).reply
            if "error" not in reply and not (reply.get("result") or {}).get("isError"):
                return
            if time.monotonic() > deadline:
                raise self.caller.fail(f"probe {params} never succeeded: {str(reply)[:400]}")
            time.sleep(0.05)


def _level(values: list[float]) -> dict[str, Any]:
    s = summarize(values)
    return {"n": s["n"], "p50_ms": s["median"], "p95_ms": s["p95"], "p99_ms": s["p99"], "max_ms": s["max"]}


def measure_op(side: Side, name: str, sizes: Sizes, double: Double) -> dict[str, Any]:
    """One write tool on one server: warm-up, c=1, bursts. CPU runs from the first call to the drained
    outbox after the level; for the graph server also the double's requests and CPU."""
    op = side.ops[name]
    if op.prepare is not None:  # archive's complete changes, plan_create's drafts
        op.prepare(sizes.warmup + sizes.samples + sizes.bursts * BURST)
    side.probe(op)
    side.writes(op, sizes.warmup)
    side.drained()  # what the prepared files and the warm-up queued goes out first
    quiet(side.caller.pid)
    pid, counts, double_cpu = side.caller.pid, double.counts(), procstat.cpu_seconds(double.proc.pid)
    cpu0 = procstat.cpu_seconds(pid)
    c1 = side.writes(op, sizes.samples)
    drain_c1 = side.drained()
    cpu1 = procstat.cpu_seconds(pid)
    c100: list[float] = []
    drains: list[float] = []
    for _ in range(sizes.bursts):
        c100 += side.burst(op)
        drains.append(side.drained())
    cpu2 = procstat.cpu_seconds(pid)
    one, many = _level(c1), _level(c100)
    out = {"c1": one, "c100": many, "ratio_p95": many["p95_ms"] / one["p95_ms"],
           "server_cpu_ms_per_call": {"c1": (cpu1 - cpu0) * 1000 / len(c1), "c100": (cpu2 - cpu1) * 1000 / len(c100)},
           "samples_ms": {"c1": c1, "c100": c100}}
    if side.graph:
        requests = requests_between(counts, double.counts())
        out.update({"drain_s": {"after_c1": drain_c1, "after_burst_median": summarize(drains)["median"],
                                "after_burst_max": max(drains)},
                    "requests": sum(requests.values()), "requests_by_route": requests,
                    "double_cpu_s": procstat.cpu_seconds(double.proc.pid) - double_cpu})
    return out


def build_workspace(src: Path, sizes: Sizes) -> Seeds:
    """The per-tool stage's AirsSpec and OpenSpec data (no memory store) under `src`; its ids."""
    src.mkdir()
    roles = airs.workspace(src, sizes.airs_specs)
    caps, changes = ospec.workspace(src, sizes.specs, sizes.changes)
    calls = sizes.warmup + sizes.samples + sizes.bursts * BURST
    tasks = catalog._bench_tasks(src, changes, 2 * calls + int(sizes.outage_s * sizes.rate) + 10)
    designed = [c for c in changes if (src / "openspec" / "changes" / c / "design.md").exists()]
    airs.settle_on_disk()
    return Seeds(roles, caps, changes, designed, tasks, [], [],
                 catalog.Sizes(sizes.airs_specs, sizes.specs, sizes.changes, 0, 0, 0))


def writes(double: Double, on: Side, off: Side, want: Projection, sizes: Sizes,
           progress: Callable[[str], None]) -> dict[str, Any]:
    """Every write tool on both servers, taking turns (which goes first alternates)."""
    t0 = time.perf_counter()
    wait_synced(on.caller, want, sizes.sync_timeout_s)
    first_sync = {"seconds_from_initialize": time.perf_counter() - t0, "objects": len(want.nodes),
                  "relationships": want.edges}
    progress(f"graph: the graph server's initial sync took {first_sync['seconds_from_initialize']:.1f} s")
    for side in (on, off):
        quiet(side.caller.pid)
    ops: dict[str, Any] = {}
    for k, name in enumerate(sizes.writes):
        got = {side.name: measure_op(side, name, sizes, double) for side in ((off, on) if k % 2 == 0 else (on, off))}
        ops[name] = {**got, "level_p95": {f"c{c}": got["on"][f"c{c}"]["p95_ms"] / got["off"][f"c{c}"]["p95_ms"]
                                          for c in (1, BURST)}}
        progress(f"graph: {name} p95 c=1 {got['off']['c1']['p95_ms']:.1f} ms off, {got['on']['c1']['p95_ms']:.1f} on; "
                 f"c={BURST} {got['off']['c100']['p95_ms']:.1f} off, {got['on']['c100']['p95_ms']:.1f} on")
    idle = [call(on.caller, "graph_sync")["seconds"] for _ in range(3)]
    return {"airs_specs": sizes.airs_specs, "specs": sizes.specs, "changes": sizes.changes,
            "initial_sync": first_sync, "ops": ops, "graph_sync_idle_s": summarize(idle)["median"]}


# ---------------------------------------------------------------------- part 3: an outage


def outage(double: Double, side: Side, sizes: Sizes, progress: Callable[[str], None]) -> dict[str, Any]:
    """Emergent down for `outage_s` under steady writes, then back: how long until the outbox is empty."""
    side.drained()
    ops = [side.ops[name] for name in OUTAGE_WRITES]
    progress(f"graph: Emergent down for {sizes.outage_s:g} s, writes at {sizes.rate:g}/s")
    double.down(True)
    start = time.monotonic()
    latencies: list[float] = []
    timeline: list[tuple[float, int]] = []
    k = 0
    while (now := time.monotonic()) - start < sizes.outage_s:
        if k % int(sizes.rate) == 0:
            timeline.append((round(now - start, 2), call(side.caller, "graph_status")["outbox"]["pending"]))
        latencies += side.writes(ops[k % len(ops)], 1)
        k += 1
        time.sleep(max(0.0, start + k / sizes.rate - time.monotonic()))
    at_recovery = call(side.caller, "graph_status")
    counts, cpu = double.counts(), procstat.cpu_seconds(side.caller.pid)
    double_cpu = procstat.cpu_seconds(double.proc.pid)
    double.down(False)
    back = time.monotonic()
    first_request = None
    while True:  # no writes now: an empty outbox is the end (nothing is on its way to it)
        status = call(side.caller, "graph_status")
        now = time.monotonic()
        if first_request is None and sum(double.counts().values()) > sum(counts.values()):
            first_request = now - back
        if status["outbox"]["pending"] == 0:
            break
        if now - back > sizes.sync_timeout_s:
            raise side.caller.fail(f"the backlog did not drain in {sizes.sync_timeout_s:g} s: {status}")
        time.sleep(POLL_S)
    catch_up = now - back
    first_request = catch_up if first_request is None else first_request
    requests = requests_between(counts, double.counts())
    return {"outage_s": sizes.outage_s, "rate_per_s": sizes.rate, "writes": len(latencies),
            "backlog_at_recovery": at_recovery["outbox"]["pending"],
            "failures_at_recovery": at_recovery["consecutiveFailures"],
            "next_attempt_in_s_at_recovery": at_recovery["nextAttemptInSeconds"],
            "catch_up_s": catch_up, "wait_for_retry_s": first_request, "drain_s": catch_up - first_request,
            "server_cpu_s": procstat.cpu_seconds(side.caller.pid) - cpu,
            "double_cpu_s": procstat.cpu_seconds(double.proc.pid) - double_cpu, "requests": sum(requests.values()),
            "requests_by_route": requests, "write_latency": _level(latencies), "backlog_timeline": timeline}


# ---------------------------------------------------------------------- the part as a whole


def run(quick: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    """The three parts against one double; the section `gates` and `table` read.

    Raises:
        HarnessError: a server or the double died, hung, refused an item or mirrored something else.
    """
    sizes = QUICK if quick else FULL
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specactor-bench-graph-") as tmp, emergent_double(Path(tmp)) as double:
        base = Path(tmp)
        first = initial_sync(double, base, sizes, progress)
        progress(f"graph: initial sync {first['seconds_from_spawn']:.1f} s, {first['requests']:,} requests")
        seeds = build_workspace(base / "writes", sizes)
        for name in ("off", "on"):
            catalog.copy(base / "writes", base / name)
        want = projection(base / "on", "bench/writes")
        progress(f"graph: writes on AirsSpec {sizes.airs_specs:,} + OpenSpec {sizes.specs} specs, {sizes.changes} "
                 f"changes ({len(want.nodes):,} objects, {want.edges:,} relationships)")
        with contextlib.ExitStack() as stack:
            on = Side("on", base / "on", seeds, server(base / "on", double.url, want.workspace))
            stack.callback(on.caller.close)
            off = Side("off", base / "off", seeds, server(base / "off", double.url, None))
            try:
                measured = writes(double, on, off, want, sizes, progress)
            finally:
                off.caller.close()  # off has no part in the outage
            down = outage(double, on, sizes, progress)
    return {"quick": quick, "sizes": {**asdict(sizes), "writes": list(sizes.writes)}, "latency_ms": LATENCY_MS,
            "burst": BURST, "code": code_version(), "initial": first, "writes": measured, "outage": down,
            "seconds": time.monotonic() - started}


def code_version() -> dict[str, Any]:
    """The commit measured, and the files of specactor/ changed since (the figures belong to those)."""
    def git(*args: str) -> str:
        got = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return got.stdout.strip() if got.returncode == 0 else ""

    return {"commit": git("rev-parse", "--short", "HEAD"),
            "changed": [line[3:] for line in git("status", "--porcelain", "--", "specactor").splitlines()]}


def main(argv: list[str] | None = None) -> int:
    return stagecli.main(argv, prog="python -m bench.graphsync", doc=__doc__,
                         quick_help="small workspaces, a 10 s outage; verdicts are smoke", run=run, gates=gates,
                         table=table)


if __name__ == "__main__":
    raise SystemExit(main())
