"""Requests that wait on I/O, at concurrency 1 and 100: does trio's concurrency hide the waiting?

    python -m bench.iowait [--quick] [--json F]

specactor serves a workspace over stdio (`python -m specactor serve`, every default toolset) with
a memory store of `memories` memories, each with its embedding, and a git knowledge repository of
`items` policies. Two tools wait on I/O:

- `memory_search`: the query is embedded by a fake OpenAI-compatible endpoint
  (`bench/peers/embeddings.py`, its own process) that answers 20 ms after each request arrived,
  then scored; once in hybrid mode (the default with an embeddings URL: above threshold 0.5 only
  the lexical finds are scored by cosine) and once in semantic mode (every memory's vector is
  scored, a CPU-bound scan), each by its own server process;
- `sync_now` after a commit to the knowledge repository: git subprocesses (rev-parse, ls-tree,
  diff, cat-file) and one SQLite transaction. Every reply must name the commit made before the
  request was sent (a sync that missed it is a harness error).

The graph sync is the third (`bench/graphsync.py`, run last, its section under `graph`): an
Emergent double answering after 20 ms; write tools at c=1 and c=100 with graph sync on and off,
the first sync of the OpenSpec workspace, and the catch-up after an outage.

Sizes (full): 2,000 memories, a few thousand as a working store holds: enough that the lexical pass
does real FTS5 work, while semantic mode's pure-Python scan (about 10 us per memory) stays near
20 ms a search, so the figures still show the waiting beside the CPU; 200 knowledge items.

c=1: `samples` requests one after another (for sync_now, a commit before each, untimed).
c=100: `rounds` rounds (`sync_rounds` for sync_now; after one unrecorded) of 100 requests written
at once on the one stdio connection, each timed from the write to its own reply (for sync_now,
one commit per round). Server CPU (/proc) is read around each level.
Gates (bench/gates.py, "I/O-waiting and open loop"): P95 at c=100 ≤ 1.5 x P95 at c=1, per tool;
every P95 < 200 ms; the graph sync's two (`bench/graph_report.py`). `--quick` is a smoke test:
smaller sizes, verdicts "smoke", exit 0.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from bench import graph_report, graphsync, procstat, stagecli
from bench.gates import IO_P95_MS, IO_RATIO, GateResult
from bench.harness import INITIALIZE_PARAMS, INITIALIZED, request
from bench.servers import REPO
from bench.stats import summarize
from bench.stdio_driver import StdioConnection
from bench.transport import HarnessError, Reply, ServerSpec
from bench.workloads.memory import Corpus, git, knowledge_repo

# A c=100 round's replies share one sync (or one burst's CPU), so rounds, not replies, are the independent
# samples: sync_now, cheap, gets many.
FULL = {"memories": 2000, "items": 200, "search_samples": 300, "semantic_samples": 100, "sync_samples": 100,
        "rounds": 10, "sync_rounds": 30}
QUICK = {"memories": 300, "items": 50, "search_samples": 40, "semantic_samples": 20, "sync_samples": 8, "rounds": 2,
         "sync_rounds": 2}
DELAY_MS = 20.0
DIMS = 256
BURST = 100
TIMEOUT = 60.0
OPS = ("memory_search", "memory_search_semantic", "sync_now")


# ---------------------------------------------------------------------- the peer and the workspace


@contextlib.contextmanager
def embeddings_peer(delay_ms: float = DELAY_MS, dims: int = DIMS) -> Iterator[str]:
    """The fake embeddings endpoint as a child process; yields its API base URL."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "bench.peers.embeddings", "--delay-ms", str(delay_ms),
                             "--dims", str(dims)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(TIMEOUT)
        if not line or not line[0]:
            raise HarnessError(f"the embeddings peer announced no URL (exit code {proc.poll()})")
        yield str(msgspec.json.decode(line[0])["url"])
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def peer_stats(url: str) -> dict[str, int]:
    import urllib.request

    with urllib.request.urlopen(url + "/stats", timeout=5) as reply:
        return dict(msgspec.json.decode(reply.read()))


def build_store(db: Path, texts: list[str], user_id: str) -> None:
    """`texts` as user-layer memories of `user_id`, each with the vector the peer would give it."""
    from bench.peers.embeddings import embed
    from specactor.domain.memory.embeddings import pack
    from specactor.domain.memory.layers import Identifiers, scope_key
    from specactor.domain.memory.records import NewMemory
    from specactor.sqlite.memory_db import connect, insert_memory

    conn = connect(db, writer=True)
    key = scope_key("user", Identifiers(user_id=user_id))
    conn.execute("BEGIN")
    for text in texts:
        insert_memory(conn, NewMemory(text, "user", key, {"userId": user_id}, [], {}, pack(embed(text, DIMS))))
    conn.execute("COMMIT")
    conn.close()


def commit_change(repo: Path, n: int) -> str:
    """Revise one policy and commit it; the new HEAD."""
    path = sorted(repo.rglob("pol-*.md"))[n % 7]
    path.write_text(path.read_text() + f"\nRevision {n}.\n")
    git(repo, "commit", "-q", "-am", f"revision {n}")
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def specactor_spec(ws: Path, env: dict[str, str]) -> ServerSpec:
    path = os.environ.get("PYTHONPATH")
    return ServerSpec("specactor", "specactor", (sys.executable, "-m", "specactor", "serve", "--root", str(ws),
                                                 "--no-session-log"),
                      {"PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""), **env})


# ---------------------------------------------------------------------- the client side


class Client:
    """One stdio connection to specactor, its ids, and tool calls checked for success."""

    def __init__(self, conn: StdioConnection) -> None:
        self.conn = conn
        self.ids = 1

    def handshake(self) -> None:
        (reply,) = self.conn.request_many([(1, request(1, "initialize", INITIALIZE_PARAMS))], TIMEOUT)
        if reply.error is not None:
            raise HarnessError(f"initialize failed: {reply.error.decode(errors='replace')}")
        self.conn.notify(INITIALIZED)

    def check(self, reply: Reply) -> dict[str, Any]:
        if reply.error is not None:
            raise HarnessError(f"request {reply.id} failed: {reply.error.decode(errors='replace')}\n"
                               f"{self.conn.stderr_tail()}")
        result = msgspec.json.decode(reply.body).get("result") or {}
        content = result.get("structuredContent") or {}
        if result.get("isError") or content.get("success") is not True:
            raise HarnessError(f"tool call {reply.id} failed: {reply.body[:500]!r}\n{self.conn.stderr_tail()}")
        return dict(content.get("data") or {})

    def calls(self, name: str, arguments: list[dict[str, Any]]) -> list[tuple[float, dict[str, Any]]]:
        """All at once on the pipe; (latency ms, data) in request order."""
        messages = []
        for args in arguments:
            self.ids += 1
            messages.append((self.ids, request(self.ids, "tools/call", {"name": name, "arguments": args})))
        replies = {r.id: r for r in self.conn.request_many(messages, TIMEOUT)}
        return [(replies[mid].latency_ns / 1e6, self.check(replies[mid])) for mid, _ in messages]


def _search(client: Client, pid: int, queries: list[str], samples: int, rounds: int,
            progress: Callable[[str], None], mode: str) -> dict[str, Any]:
    pick = iter(queries * (1 + (samples + BURST * (rounds + 1) + 20) // len(queries)))
    client.calls("memory_search", [{"query": next(pick)} for _ in range(20)])  # warm-up
    c1, hits = [], []
    cpu0 = procstat.cpu_seconds(pid)
    for _ in range(samples):
        ((ms, data),) = client.calls("memory_search", [{"query": next(pick)}])
        c1.append(ms)
        hits.append(data["totalCount"])
    progress(f"iowait: memory_search ({mode}) c=1 p95 {summarize(c1)['p95']:.1f} ms; c={BURST}, {rounds} rounds")
    c100: list[float] = []
    cpu1 = procstat.cpu_seconds(pid)
    for r in range(rounds + 1):
        got = client.calls("memory_search", [{"query": next(pick)} for _ in range(BURST)])
        if r:
            c100 += [ms for ms, _ in got]
    return {"c1": c1, "c100": c100, "hits_median": sorted(hits)[len(hits) // 2],
            "cpu_ms": (cpu1 - cpu0) * 1000 / samples, "cpu_ms_c100": (procstat.cpu_seconds(pid) - cpu1) * 1000 /
            ((rounds + 1) * BURST)}


def _sync(client: Client, pid: int, repo: Path, samples: int, rounds: int,
          progress: Callable[[str], None]) -> dict[str, Any]:
    client.calls("sync_now", [{}])  # the first (full) sync, untimed
    cpu0 = procstat.cpu_seconds(pid)
    revision = 0

    def committed() -> str:
        nonlocal revision
        revision += 1
        return commit_change(repo, revision)

    def checked(got: list[tuple[float, dict[str, Any]]], head: str) -> list[float]:
        for _, data in got:
            if data.get("lastKnowledgeCommit") != head:
                raise HarnessError(f"sync_now answered for {data.get('lastKnowledgeCommit')}, not the commit "
                                   f"{head} made before it was sent")
        return [ms for ms, _ in got]

    c1: list[float] = []
    for _ in range(samples):
        head = committed()
        c1 += checked(client.calls("sync_now", [{}]), head)
    progress(f"iowait: sync_now c=1 p95 {summarize(c1)['p95']:.1f} ms; c={BURST}, {rounds} rounds")
    c100: list[float] = []
    cpu1 = procstat.cpu_seconds(pid)
    for r in range(rounds + 1):
        head = committed()
        got = checked(client.calls("sync_now", [{} for _ in range(BURST)]), head)
        if r:
            c100 += got
    return {"c1": c1, "c100": c100, "cpu_ms": (cpu1 - cpu0) * 1000 / samples,
            "cpu_ms_c100": (procstat.cpu_seconds(pid) - cpu1) * 1000 / ((rounds + 1) * BURST)}


def _level(values: list[float]) -> dict[str, Any]:
    s = summarize(values)
    return {"n": s["n"], "p50_ms": s["median"], "p95_ms": s["p95"], "p99_ms": s["p99"], "max_ms": s["max"]}


def _op(got: dict[str, Any]) -> dict[str, Any]:
    c1, c100 = _level(got["c1"]), _level(got["c100"])
    return {"c1": c1, "c100": c100, "ratio_p95": c100["p95_ms"] / c1["p95_ms"],
            "server_cpu_ms_per_call": {"c1": got["cpu_ms"], "c100": got["cpu_ms_c100"]},
            # The 95th reply of a burst cannot come before 95 calls' CPU on the one core the GIL gives them.
            "cpu_bound_p95_ms": 0.95 * BURST * got["cpu_ms_c100"],
            "samples_ms": {"c1": got["c1"], "c100": got["c100"]}}


def _serve(ws: Path, env: dict[str, str], measure: Callable[[Client, int], dict[str, Any]]) -> dict[str, Any]:
    conn = StdioConnection(specactor_spec(ws, env), ws)
    try:
        client = Client(conn)
        client.handshake()
        out = measure(client, conn.pid)
    finally:
        out_code = conn.close(10.0)
    if out_code != 0:
        raise HarnessError(f"specactor exited with {out_code}")
    return out


def run(quick: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    corpus = Corpus()
    texts = [corpus.memory() for _ in range(sizes["memories"])]
    rng = random.Random(11)
    queries = [corpus.query(rng.choice(texts)) for _ in range(500)]
    ops: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="specactor-bench-iowait-") as tmp, embeddings_peer() as url:
        base = Path(tmp)
        ws, db, repo = base / "ws", base / "memory.db", base / "knowledge"
        ws.mkdir()
        progress(f"iowait: {sizes['memories']:,} memories with embeddings, {sizes['items']} knowledge items")
        build_store(db, texts, "bench")
        knowledge_repo(repo, sizes["items"])
        env = {"SPECACTOR_EMBEDDINGS_URL": url, "SPECACTOR_MEMORY_DB": str(db), "SPECACTOR_KNOWLEDGE_REPO": str(repo),
               "SPECACTOR_MEMORY_USER_ID": "bench"}
        for mode, name in (("hybrid", "memory_search"), ("semantic", "memory_search_semantic")):
            def searches(client: Client, pid: int, mode: str = mode) -> dict[str, Any]:
                peer0 = peer_stats(url)
                samples = sizes["search_samples"] if mode == "hybrid" else sizes["semantic_samples"]
                got = _search(client, pid, queries, samples, sizes["rounds"], progress, mode)
                peer1 = peer_stats(url)
                return {**_op(got), "mode": mode,
                        "hits_median": got["hits_median"], "embedding_requests": peer1["requests"] - peer0["requests"],
                        "embedded_inputs": peer1["inputs"] - peer0["inputs"]}

            ops[name] = _serve(ws, {**env, "SPECACTOR_MEMORY_MODE": mode}, searches)

        def syncs(client: Client, pid: int) -> dict[str, Any]:
            return _op(_sync(client, pid, repo, sizes["sync_samples"], sizes["sync_rounds"], progress))

        ops["sync_now"] = _serve(ws, env, syncs)
    try:
        graph = graphsync.run(quick, progress)
    except (HarnessError, OSError, subprocess.SubprocessError) as err:  # the other tools' figures stand
        progress(f"iowait: graph sync: HARNESS ERROR {err}")
        graph = {"quick": quick, "error": str(err)[:1000]}
    return {"quick": quick, "sizes": sizes, "delay_ms": DELAY_MS, "dims": DIMS, "burst": BURST, "operations": ops,
            "graph": graph}


# ---------------------------------------------------------------------- table and gates


def gates(section: dict[str, Any]) -> list[GateResult]:
    ops = section.get("operations", {})
    smoke = bool(section.get("quick"))
    out = []
    for name in OPS:
        op = ops.get(name)
        keys = (f"iowait:{name}:c1:p95", f"iowait:{name}:c100:p95")
        target = f"P95 at c={BURST} ≤ {IO_RATIO:g} x P95 at c=1"
        if op is None:
            out.append(GateResult(f"I/O wait hidden: {name}", target, "skip", "not measured", keys))
            continue
        ratio = op["ratio_p95"]
        verdict = "smoke" if smoke else "pass" if ratio <= IO_RATIO else "fail"
        out.append(GateResult(f"I/O wait hidden: {name}", target, verdict,
                              f"c={BURST} p95 {op['c100']['p95_ms']:.1f} ms = {ratio:.2f} x c=1 p95 "
                              f"{op['c1']['p95_ms']:.1f} ms", keys))
    if "graph" in section:
        out += graph_report.gates(section["graph"])
    else:
        out.append(GateResult("I/O wait hidden: graph sync", target, "skip", "not measured", ()))
    p95s = {f"{n} c={c}": ops[n][f"c{c}"]["p95_ms"] for n in OPS if n in ops for c in (1, BURST)}
    if p95s:
        worst = max(p95s, key=lambda k: p95s[k])
        ok = all(v < IO_P95_MS for v in p95s.values())
        over = [k for k, v in p95s.items() if v >= IO_P95_MS]
        out.append(GateResult("I/O-waiting P95 at any concurrency", f"every p95 < {IO_P95_MS:g} ms",
                              "smoke" if smoke else "pass" if ok else "fail",
                              f"worst {worst} {p95s[worst]:.1f} ms" + (f"; over: {', '.join(over)}" if over else ""),
                              tuple(f"iowait:{k}" for k in p95s)))
    return out


LABELS = {"memory_search": "memory_search (hybrid, default)", "memory_search_semantic": "memory_search (semantic)",
          "sync_now": "sync_now after a commit"}


def table(section: dict[str, Any], num: Callable[[float | None], str]) -> list[str]:
    sizes, burst = section["sizes"], section["burst"]
    lines = ["## Requests that wait on I/O: c=1 and a burst of 100 (stdio)", "",
             f"{sizes['memories']:,} memories with {section['dims']}-dim embeddings, {sizes['items']} knowledge items; "
             f"the embeddings endpoint answers after {section['delay_ms']:g} ms; stdio, c={burst} = {burst} requests "
             "written at once on one connection, each timed to its own reply. CPU bound = 0.95 x c x server CPU "
             "per call: the least a c=100 P95 can be once the waits overlap, with one core for Python"
             + (" (quick: smoke sizes)" if section.get("quick") else ""), "",
             "| tool | c | n | p50 (ms) | p95 (ms) | p99 (ms) | p95 ÷ c=1 | target | server CPU/call (ms) | "
             "CPU bound (ms) |", "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for name in OPS:
        op = section["operations"].get(name)
        if op is None:
            continue
        for c in (1, burst):
            lv = op[f"c{c}"]
            ratio = num(op["ratio_p95"]) + "x" if c != 1 else ""
            target = f"≤ {IO_RATIO:g}x; p95 < {IO_P95_MS:g} ms" if c != 1 else f"p95 < {IO_P95_MS:g} ms"
            cpu = num(op["server_cpu_ms_per_call"][f"c{c}"])
            bound = num(op["cpu_bound_p95_ms"]) if c != 1 else ""
            lines.append(f"| {LABELS[name]} | {c} | {lv['n']} | {num(lv['p50_ms'])} | {num(lv['p95_ms'])} | "
                         f"{num(lv['p99_ms'])} | {ratio} | {target} | {cpu} | {bound} |")
    lines.append("")
    for name in OPS[:2]:
        op = section["operations"].get(name)
        if op:
            lines.append(f"{LABELS[name]}: {op['embedded_inputs']:,} queries embedded in {op['embedding_requests']:,} "
                         f"requests to the endpoint; median hits {op['hits_median']}.")
    if "graph" in section:
        lines += ["", *graph_report.table(section["graph"], num)]
    return lines


def main(argv: list[str] | None = None) -> int:
    return stagecli.main(argv, prog="python -m bench.iowait", doc=__doc__,
                         quick_help="smaller sizes; verdicts are smoke", run=run, gates=gates,
                         table=table)


if __name__ == "__main__":
    raise SystemExit(main())
