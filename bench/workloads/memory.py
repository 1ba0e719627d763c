"""Workloads for the memory toolset's performance targets, and the relevance figure.

    python -m bench.workloads.memory                  # every workload, full size (about a minute)
    python -m bench.workloads.memory --quick          # small sizes, a smoke test
    python -m bench.workloads.memory --json out.json  # also write the figures as JSON

| workload | target |
|---|---|
| memory_search over 100,000 memories (tools/call through the in-memory server) | P95 < 5 ms |
| memory_add, durable (WAL, synchronous=FULL; reply after commit) | P95 < 5 ms |
| knowledge_check, 1,000 files x 50 constraints (the tool call, git lookup included) | < 100 ms |
| sync_now, 1,000 items changed since the last sync (delta) | < 1 s |

It also reports recall@5 of the default (lexical) search on the tests' labelled set.
Each workload runs in a fresh temporary directory; nothing outside it is touched.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

from bench.stats import summarize

TARGETS_MS = {"memory_search": 5.0, "memory_search_ranked": 5.0, "memory_add": 5.0,
              "knowledge_check": 100.0, "sync_now_delta": 1000.0}


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    """Pronounceable made-up words, so the tokenizer and stemmer see word-like text."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Corpus:
    """English-like text: Zipf-distributed words (exponent 1) whose 100 most frequent are English
    stopwords and the rest made-up content words, so word frequencies look like real notes."""

    def __init__(self, seed: int = 7) -> None:
        from specactor.domain.memory.scoring import STOPWORDS

        self.rng = random.Random(seed)
        self.stop = sorted(STOPWORDS)[:100]
        self.words = self.stop + vocabulary(self.rng, 20_000)
        self.weights = [1.0 / (rank + 1) for rank in range(len(self.words))]

    def memory(self) -> str:
        return " ".join(self.rng.choices(self.words, weights=self.weights, k=self.rng.randint(10, 40)))

    def query(self, memory: str) -> str:
        """Two or three content words of a memory, between stopwords, like a question."""
        content = sorted({w for w in memory.split() if w not in self.stop}) or memory.split()
        picked = self.rng.sample(content, min(len(content), self.rng.randint(2, 3)))
        return " ".join([self.rng.choice(self.stop), *picked, self.rng.choice(self.stop)])


async def _tool(client: Any, name: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    reply = await client.request("tools/call", {"name": name, "arguments": arguments}, timeout=60)
    elapsed = (time.perf_counter() - started) * 1000
    content: dict[str, Any] = reply["result"]["structuredContent"]
    if not content.get("success"):
        raise RuntimeError(f"{name} failed: {content}")
    return elapsed, content["data"]


def _server(root: Path, db: Path, knowledge: Path) -> Any:
    os.environ.update({"SPECACTOR_MEMORY_DB": str(db), "SPECACTOR_KNOWLEDGE_REPO": str(knowledge),
                       "SPECACTOR_MEMORY_USER_ID": "bench"})
    from specactor.config import Config, SessionLogConfig
    from specactor.testing import open_memory_server

    return open_memory_server(Config(root=str(root), session_log=SessionLogConfig(enabled=False)))


def memory_workload(tmp: Path, memories: int, samples: int) -> dict[str, Any]:
    """Bulk-load `memories` into the user layer, then time tool calls of memory_search and memory_add."""
    from specactor.domain.memory.layers import Identifiers, scope_key
    from specactor.domain.memory.records import NewMemory
    from specactor.sqlite.memory_db import connect, insert_memory

    corpus = Corpus()
    db = tmp / "memory.db"
    texts = [corpus.memory() for _ in range(memories)]
    conn = connect(db, writer=True)
    key = scope_key("user", Identifiers(user_id="bench"))
    started = time.perf_counter()
    conn.execute("BEGIN")
    for text in texts:
        insert_memory(conn, NewMemory(text, "user", key, {"userId": "bench"}, [], {}))
    conn.execute("COMMIT")
    conn.close()
    load_s = time.perf_counter() - started
    queries = [corpus.query(corpus.rng.choice(texts)) for _ in range(samples)]

    async def run() -> dict[str, Any]:
        async with _server(tmp, db, tmp / "knowledge") as client:
            await client.initialize()
            for q in queries[:50]:  # warm-up: caches, the reader pool, the page cache
                await _tool(client, "memory_search", {"query": q})
            search, found, ranked, ranked_found = [], [], [], []
            for q in queries:
                ms, data = await _tool(client, "memory_search", {"query": q})
                search.append(ms)
                found.append(data["totalCount"])
                # The same query ranked alone (threshold 0): always a full page of results, so the
                # figure cannot be flattered by searches that find nothing.
                ms, data = await _tool(client, "memory_search", {"query": q, "threshold": 0.0})
                ranked.append(ms)
                ranked_found.append(len(data["results"]))
            add = [(await _tool(client, "memory_add", {"content": corpus.memory()}))[0] for _ in range(samples)]
        return {"memory_search": summarize(search), "memory_search_ranked": summarize(ranked),
                "memory_add": summarize(add), "search_hits_median": sorted(found)[len(found) // 2],
                "ranked_results_median": sorted(ranked_found)[len(ranked_found) // 2],
                "load_seconds": round(load_s, 2),
                "memories": memories}

    return trio.run(run)


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def knowledge_repo(root: Path, items: int, constraints_per_item: int = 5) -> None:
    """`items` policies under company/ and teams/, every tenth carrying constraints."""
    root.mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "bench")
    rng = random.Random(3)
    patterns = [("must_not_match", "code", r"console\.log\("), ("must_not_use", "import", "moment|lodash"),
                ("must_not_use", "dependency", "mysql2?|mariadb"), ("must_match", "code", r"^// SPDX"),
                ("must_not_match", "code", r"\beval\("), ("must_not_exist", "file", "**/*.orig"),
                ("must_not_match", "config", r"debug:\s*true"), ("must_not_match", "code", r"TODO\(\w+\)")]
    for i in range(items):
        folder = "company" if i % 2 == 0 else "teams/core"  # the constrained ones bind every project
        body = f"Policy number {i} about area {rng.randint(0, 50)}.\n"
        if i % 10 == 0:
            rules = []
            for j in range(constraints_per_item):
                op, target, pattern = patterns[(i + j) % len(patterns)]
                glob = rng.choice(["*.ts", "src/**", "*.py", "services/*/src/**"])
                variant = str(j) if (op, target) == ("must_not_match", "code") else ""  # 50 distinct regexes
                rules.append(f"- operator: {op}\n  target: {target}\n  pattern: '{pattern}{variant}'\n"
                             f"  appliesTo: ['{glob}']\n")
            body += "\n## Constraints\n```yaml\n" + "".join(rules) + "```\n"
        path = root / folder / "policies" / f"pol-{i:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\nid: pol-{i:04d}\ntitle: Policy {i}\nstatus: accepted\nseverity: warn\n---\n{body}")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "items")


def source_files(count: int) -> list[dict[str, str]]:
    rng = random.Random(5)
    lines = ["import { x } from './x'", "const a = b + c;", "console.log(3)", "function f(a, b) { return a * b; }",
             "// a comment about things", "if (ok) { run(); }", "console.info('fine')", "export default f;"]
    out = []
    for i in range(count):
        ext = rng.choice([".ts", ".py", ".ts", ".yaml"])
        text = "\n".join(rng.choice(lines) for _ in range(rng.randint(20, 60))) + "\n"
        out.append({"path": f"services/s{i % 20}/src/file{i}{ext}", "content": text})
    return out


def knowledge_workload(tmp: Path, files: int, samples: int) -> dict[str, Any]:
    """knowledge_check over `files` files against 50 constraints (10 items x 5), through the tool."""
    repo = tmp / "knowledge"
    knowledge_repo(repo, 100)
    payload = {"files": source_files(files), "dependencies": [{"name": "express"}, {"name": "pg"}],
               "minSeverity": "info"}

    async def run() -> dict[str, Any]:
        async with _server(tmp, tmp / "memory.db", repo) as client:
            await client.initialize()
            await _tool(client, "knowledge_check", payload)
            times, violations = [], 0
            for _ in range(samples):
                ms, data = await _tool(client, "knowledge_check", payload)
                times.append(ms)
                violations = len(data["violations"])
        return {"knowledge_check": summarize(times), "files": files, "constraints": 50, "violations": violations}

    return trio.run(run)


def sync_workload(tmp: Path, items: int) -> dict[str, Any]:
    """A first full sync of `items`, then a delta sync after every item changed, then a delta of ten."""
    repo = tmp / "knowledge"
    knowledge_repo(repo, items)

    def touch(count: int, tag: str) -> None:
        for path in sorted((repo).rglob("pol-*.md"))[:count]:
            path.write_text(path.read_text() + f"\nRevised {tag}.\n")
        git(repo, "commit", "-q", "-am", f"revise {tag}")

    async def run() -> dict[str, Any]:
        async with _server(tmp, tmp / "memory.db", repo) as client:
            await client.initialize()
            first, data = await _tool(client, "sync_now", {})
            touch(items, "all")
            delta, changed = await _tool(client, "sync_now", {})
            touch(10, "few")
            small, _ = await _tool(client, "sync_now", {})
        return {"sync_now_full_ms": round(first, 1), "sync_now_delta": {"p95": delta, "median": delta},
                "sync_now_delta_updated": changed["updated"], "sync_now_delta_10_ms": round(small, 1),
                "items": items, "first_added": data["added"]}

    return trio.run(run)


def relevance() -> dict[str, float | None]:
    """recall@5 on the tests' labelled set: ranking alone (threshold 0) and at the default 0.7 (None if
    the tests are not importable, e.g. from an installed package)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    try:
        from tests.memory.relevance_set import recall
    except ImportError:
        return {"recall_at_5": None, "recall_at_5_threshold_0_7": None}

    return {"recall_at_5": recall(5, 0.0), "recall_at_5_threshold_0_7": recall(5, 0.7)}


def measure(quick: bool = False) -> dict[str, Any]:
    sizes = (5_000, 100, 200, 100, 200) if quick else (100_000, 1000, 1000, 1000, 30)
    memories, samples, files, items, check_samples = sizes
    results: dict[str, Any] = {}
    steps: list[tuple[str, Callable[[Path], dict[str, Any]]]] = [
        ("memory", lambda t: memory_workload(t, memories, samples)),
        ("knowledge", lambda t: knowledge_workload(t, files, check_samples)),
        ("sync", lambda t: sync_workload(t, items)),
    ]
    for name, step in steps:
        with tempfile.TemporaryDirectory(prefix=f"specactor-bench-{name}-") as tmp:
            results.update(step(Path(tmp)))
    results.update(relevance())
    results["gates"] = {name: {"p95_ms": round(float(results[name]["p95"]), 3), "target_ms": target,
                               "passed": float(results[name]["p95"]) < target}
                        for name, target in TARGETS_MS.items()}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workloads.memory", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = measure(args.quick)
    for name, gate in results["gates"].items():
        verdict = "ok" if gate["passed"] else "FAIL"
        print(f"{name:16} p95 {gate['p95_ms']:9.3f} ms   target < {gate['target_ms']:g} ms   {verdict}")
    if results["recall_at_5"] is not None:
        print(f"recall@5 {results['recall_at_5']:.2f} (threshold 0), "
              f"{results['recall_at_5_threshold_0_7']:.2f} (0.7, the default)")
    if args.json:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(results), indent=2))
    return 0 if args.quick or all(g["passed"] for g in results["gates"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
