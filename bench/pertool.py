"""Per-tool latency: every tool, resource (and template) and prompt of `specactor serve`, at c=1 and c=100.

    python -m bench.pertool                      # full sizes, stdio then Streamable HTTP
    python -m bench.pertool --quick              # small workspace, few samples (the CI smoke test)
    python -m bench.pertool --transport http --json out.json

One workspace is generated (`bench.catalog.build`: the toolset issues' sizes, smaller with
`--quick`) and copied afresh for each transport. There `python -m specactor serve --root <copy>
--no-session-log` (every toolset on) is started, asked for its tools, resources, templates and
prompts (tools/list, resources/list, resources/templates/list, prompts/list), and every one of
them must have an entry in the catalogue (`bench.catalog.Catalogue.ops`), or the run stops with a
harness error naming what is missing. Then, operation by operation: `warmup` unrecorded calls and
one unrecorded burst of 100 (over HTTP the sequential calls reach one of the worker processes, a
burst reaches each, and each warms its own caches), `samples` sequential calls (c=1), then `bursts`
closed bursts of 100 (stdio: 100 requests
written at once on the one pipe; HTTP: 100 connections with a session each, one request each,
sent back to back). Every reply is checked (a JSON-RPC error, `isError` or `success: false` the
catalogue did not expect is a harness error). Server CPU (utime + stime of the process and of
the children it waited for, e.g. git, from /proc) is read around the c=1 calls and around the bursts.

The peers run beside it on the same workspace copy: the SDK peer (`bench/peers/sdk_server.py`:
`spec_list`, mirroring specactor's, and `echo`) and the floor's `echo` (`bench/peers/floor.py`;
over HTTP `floor_http.py`), measured the same way right after specactor's `spec_list`.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import catalog
from bench.callers import Call, HttpCaller, StdioCaller, Timed
from bench.catalog import Catalogue, CatalogueError, Op
from bench.gates import P95_MS, GateResult, _gate
from bench.servers import REPO, compile_bytecode, http_workers, server_specs
from bench.stats import percentile, ratio, summarize
from bench.transport import HarnessError, ServerSpec
from specactor.config import available_cores

TRANSPORTS = ("stdio", "http")
ERA = "2025-11-25 (a session per connection)"
BURST = 100
TIMEOUT_S = 120.0
RETRIES = 5  # a retryable CONFLICT (sync_now across HTTP workers) is sent again, at most this many times
LISTS = {"tools/list": ("tools", "tool", "name"), "resources/list": ("resources", "resource", "uri"),
         "resources/templates/list": ("resourceTemplates", "template", "uriTemplate"),
         "prompts/list": ("prompts", "prompt", "name")}


@dataclass(frozen=True)
class Plan:
    warmup: int
    samples: int  # sequential calls per operation (c=1)
    bursts: int  # closed bursts of BURST per operation, after one unrecorded warm-up burst

    def calls(self) -> int:
        """The calls one operation makes: warm-up, c=1 samples, the warm-up burst and the bursts."""
        return self.warmup + self.samples + (self.bursts + 1) * BURST if self.bursts else self.warmup + self.samples


FULL = Plan(warmup=10, samples=200, bursts=3)
QUICK = Plan(warmup=2, samples=20, bursts=1)
Caller = StdioCaller | HttpCaller


def cpu_seconds(pid: int) -> float:
    """utime + stime of the server's process tree (HTTP workers, pool workers), each process with the
    children it waited for (git; a retired pool worker), in seconds. The tree is found at each reading:
    pool workers start when heavy jobs overlap."""
    from bench import procstat

    return procstat.summed(procstat.cpu_with_children, procstat.tree(pid))


def cpu_bound_ms(cpu_s_per_1k: float | None, cores: int, burst: int = 100) -> float | None:
    """The least P95 a closed burst of `burst` can have on `cores`: the 95th reply waits for at least 95 calls'
    server CPU spread over every core (0.95 x burst x CPU per call ÷ cores)."""
    return None if cpu_s_per_1k is None else 0.95 * burst * cpu_s_per_1k / cores


def quantiles(values: list[float], count: int = 200) -> list[float]:
    ordered = sorted(values)
    return [round(percentile(ordered, 100 * k / (count - 1)), 4) for k in range(count)] if ordered else []


def _specs(root: Path) -> dict[str, ServerSpec]:
    py, env = sys.executable, {"PYTHONPATH": str(REPO), **catalog.memory_env(root)}
    serve = (py, "-m", "specactor", "serve", "--root", "{root}", "--no-session-log")
    sdk = (py, "-m", "bench.peers.sdk_server", "--root", "{root}")
    return {"specactor": ServerSpec("specactor", "specactor serve", serve, env, (*serve, "--http", "--port", "0")),
            "sdk": ServerSpec("sdk", "SDK peer", sdk, env, (*sdk, "--http", "--port", "0")),
            "floor": server_specs()["floor"]}


def _check(caller: Caller, op: Op, params: dict[str, Any], reply: dict[str, Any]) -> None:
    """A reply the catalogue did not expect is a harness error; an expected one feeds its pool.

    A JSON-RPC error is never expected: `expect_error` means the tool's own error result
    (`isError`, `success: false`), as `init` answers on an initialised workspace.
    """
    result: dict[str, Any] = reply.get("result") or {}
    failed = "error" in reply
    if not failed and op.kind == "tool":
        content = result.get("structuredContent")
        failed = bool(result.get("isError")) or (isinstance(content, dict) and content.get("success") is False)
    elif not failed:
        failed = not (result.get("contents") if op.method == "resources/read" else result.get("messages"))
    if "error" in reply or failed != op.expect_error:
        what = "answered" if failed else "did not answer the expected error"
        raise caller.fail(f"{op.key} {what}: params {json.dumps(params)[:300]} -> {json.dumps(reply)[:600]}")
    if op.after is not None and not failed:
        op.after(params, result)


def _probe(caller: Caller, params: dict[str, Any]) -> None:
    deadline = time.monotonic() + 10
    while True:
        reply = caller.one(("tools/call", params)).reply
        if not reply.get("result", {}).get("isError") and "error" not in reply:
            return
        if time.monotonic() > deadline:
            raise caller.fail(f"probe {params} never succeeded: {json.dumps(reply)[:400]}")
        time.sleep(0.05)


def retryable_conflict(reply: dict[str, Any]) -> bool:
    """A tool's CONFLICT error that asks to be retried (sync_now: "another sync finished first")."""
    content = (reply.get("result") or {}).get("structuredContent")
    error = content.get("error") if isinstance(content, dict) else None
    return isinstance(error, dict) and error.get("code") == "CONFLICT" and error.get("retryable") is True


def _first_sync(caller: Caller) -> Timed:
    """The first, full knowledge sync, untimed. With several HTTP workers another worker's own first sync
    may finish first: the reply is then a retryable CONFLICT, and the call is made again, as it asks."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        first = caller.one(("tools/call", {"name": "sync_now", "arguments": {}}))
        if not retryable_conflict(first.reply) or time.monotonic() > deadline:
            _check(caller, Op("tool", "sync_now", dict), {}, first.reply)
            return first
        time.sleep(0.05)


def measure(caller: Caller, op: Op, plan: Plan, cat: Catalogue | None = None) -> dict[str, Any]:
    """One operation: warm-up, `samples` calls at c=1, `bursts` bursts of BURST; figures in ms."""
    if op.prepare is not None:
        op.prepare(plan.calls())
    probe = cat.probe_params(op) if cat is not None else None
    if probe is not None:
        _probe(caller, probe)

    def draw() -> Call:
        try:
            return op.method, op.params()
        except CatalogueError as err:
            raise caller.fail(f"{op.key}: {err}") from err

    retried = {"c1": 0, "c100": 0}

    def run(calls: list[Call], burst: bool) -> list[float]:
        timed: list[Timed] = caller.burst(calls) if burst else [caller.one(c) for c in calls]
        out = []
        for call, t in zip(calls, timed, strict=True):
            ms, reply, tries = t.ms, t.reply, 0
            while retryable_conflict(reply) and tries < RETRIES:  # as the reply asks; its round trip counts
                again = caller.one(call)
                ms, reply, tries = ms + again.ms, again.reply, tries + 1
            retried["c100" if burst else "c1"] += tries
            _check(caller, op, call[1], reply)
            out.append(ms)
        return out

    for _ in range(plan.warmup):
        run([draw()], False)
    if plan.bursts:
        caller.open_pool(BURST)  # HTTP: the burst's 100 sessions opened outside its CPU reading
        # One unrecorded burst: the sequential warm-up reaches one HTTP worker process (one
        # connection), the bursts reach them all; each process warms its own caches (a cold
        # `list` costs ~250 ms in the worker that meets it first).
        run([draw() for _ in range(BURST)], True)
    retried.update(c1=0, c100=0)  # the warm-up's do not count
    cpu0 = cpu_seconds(caller.pid)
    single = [run([draw()], False)[0] for _ in range(plan.samples)]
    cpu1 = cpu_seconds(caller.pid)
    burst: list[float] = []
    for _ in range(plan.bursts):
        burst += run([draw() for _ in range(BURST)], True)
    cpu2 = cpu_seconds(caller.pid)
    one, many = summarize(single), summarize(burst)
    cpu_c100 = round((cpu2 - cpu1) / len(burst) * 1000, 3) if burst else None
    bound = cpu_bound_ms(cpu_c100, available_cores(), BURST)
    return {"kind": op.kind, "name": op.name, "note": op.note, "expect_error": op.expect_error,
            "n": len(single), "median_ms": one.get("median"), "p95_ms": one.get("p95"), "p99_ms": one.get("p99"),
            "n_c100": len(burst), "median_c100_ms": many.get("median"), "p95_c100_ms": many.get("p95"),
            "p99_c100_ms": many.get("p99"), "ratio_c100": ratio(many.get("p95"), one.get("p95")),
            "cpu_s_per_1k": round((cpu1 - cpu0) / len(single) * 1000, 3) if single else None,
            "cpu_s_per_1k_c100": cpu_c100, "cpu_bound_c100_ms": bound,
            "cpu_bound_ratio": ratio(bound, one.get("p95")),
            "retried": dict(retried), "_single": single}


def registered(caller: Caller) -> dict[str, list[str]]:
    """What the live server registers: kind -> names (tool/prompt names, URIs, URI templates)."""
    found: dict[str, list[str]] = {}
    for method, (field, kind, key) in LISTS.items():
        cursor: str | None = None
        while True:
            reply = caller.one((method, {"cursor": cursor} if cursor else {})).reply
            if "error" in reply:
                raise caller.fail(f"{method}: {reply['error']}")
            found.setdefault(kind, []).extend(item[key] for item in reply["result"][field])
            cursor = reply["result"].get("nextCursor")
            if not cursor:
                break
    return found


def _template(uri_template: str) -> re.Pattern[str]:
    """An RFC 6570 level-2 template as a regex: {var} is one path segment, {+var} may span several."""
    parts = re.split(r"(\{\+?[^}]+\})", uri_template)
    return re.compile("".join(("(.+)" if p.startswith("{+") else "([^/]+)") if p.startswith("{") else re.escape(p)
                              for p in parts) + "$")


def coverage(found: dict[str, list[str]], ops: list[Op]) -> list[str]:
    """Problems: a registered operation with no catalogue entry, or an entry nothing registers.

    resources/list also lists the instances of templates (a spec's own URI): those are covered by
    their template's entry; every other listed resource needs its own.
    """
    templates = [_template(t) for t in found.get("template", [])]
    known = [op.key for op in ops]
    live = {f"{kind}:{name}" for kind, names in found.items() for name in names
            if kind != "resource" or f"resource:{name}" in known or not any(t.match(name) for t in templates)}
    problems = [f"no workload entry for {key}" for key in sorted(live - set(known))]
    problems += [f"catalogue entry {key} is not registered" for key in sorted(set(known) - live)]
    problems += [f"catalogue entry {key} twice" for key in sorted({k for k in known if known.count(k) > 1})]
    return problems


def _peers(callers: dict[str, Caller], plan: Plan) -> dict[str, dict[str, Any]]:
    echo = {"name": "echo", "arguments": {"text": "hi"}}
    rows = (("sdk", "spec_list", {"name": "spec_list", "arguments": {}}), ("sdk", "echo", echo),
            ("floor", "echo", echo))
    out = {}
    for server, tool, params in rows:
        op = Op("tool", tool, functools.partial(dict, params))
        out[f"{server}:{tool}"] = {"server": server, **measure(callers[server], op, plan)}
    return out


def _transport(name: str, template: Path, seeds: catalog.Seeds, tmp: Path, plan: Plan,
               progress: Callable[[str], None], only: re.Pattern[str] | None = None,
               peers: bool = True) -> dict[str, Any]:
    started = time.monotonic()
    root = tmp / name
    catalog.copy(template, root)
    cat = Catalogue(root, copy.deepcopy(seeds))
    try:
        ops = cat.ops()
    except CatalogueError as err:
        return {"ops": {}, "peers": {}, "error": f"catalogue: {err}", "cdf_ms": [], "duration_s": 0.0}
    make = StdioCaller if name == "stdio" else HttpCaller
    callers: dict[str, Caller] = {}
    entry: dict[str, Any] = {"ops": {}, "peers": {}, "error": None}
    try:
        specs = _specs(root)
        callers["specactor"] = make(specs["specactor"], root, TIMEOUT_S)
        sa = callers["specactor"]
        found = registered(sa)
        entry["registered"] = {kind: len(names) for kind, names in found.items()}
        entry["registered"]["resource"] = sum(1 for op in ops if op.kind == "resource")  # the rest: templates'
        problems = coverage(found, ops)
        if problems:
            raise HarnessError("per-tool catalogue does not match the live server: " + "; ".join(problems))
        first = _first_sync(sa)
        entry["first_sync_ms"] = round(first.ms, 1)
        for key in ("sdk", "floor") if peers else ():
            callers[key] = make(specs[key], root, TIMEOUT_S)
        chosen = [op for op in ops if only is None or only.search(op.key) or (peers and op.key == "tool:spec_list")]
        for k, op in enumerate(chosen, 1):
            entry["ops"][op.key] = measure(sa, op, plan, cat)
            fig = entry["ops"][op.key]
            progress(f"per-tool {name} {k}/{len(chosen)} {op.key}: median {fig['median_ms']:.2f} ms, "
                     f"p95 {fig['p95_ms']:.2f} ms, p95 c={BURST} {fig['p95_c100_ms']:.1f} ms")
            if op.key == "tool:spec_list" and peers:
                entry["peers"] = _peers(callers, plan)
    except HarnessError as err:
        entry["error"] = str(err)
        progress(f"per-tool {name}: HARNESS ERROR: {str(err)[:2000]}")
    finally:
        entry["exit_codes"] = {key: c.close() for key, c in callers.items()}
    pooled: list[float] = []
    for key, fig in entry["ops"].items():
        single = fig.pop("_single")
        pooled += single
        if key == "tool:spec_list":  # beside the SDK peer's spec_list in the plot
            fig["cdf_ms"] = quantiles(single)
    entry["cdf_ms"] = quantiles(pooled)  # every operation's c=1 calls, pooled
    for fig in entry["peers"].values():
        fig["cdf_ms"] = quantiles(fig.pop("_single"))
    entry["duration_s"] = round(time.monotonic() - started, 1)
    return entry


def run(quick: bool, progress: Callable[[str], None], transports: list[str], *, samples: int | None = None,
        bursts: int | None = None, only: str | None = None, peers: bool = True) -> dict[str, Any]:
    """The `pertool` section of the results document (JSON-able); `samples` and `bursts` override the
    plan's calls at c=1 and bursts of 100 per operation; `only` (a regex over `kind:name` keys) measures
    just the operations it matches (and spec_list, beside its peers): a partial run, its gates SMOKE;
    `peers` False leaves the SDK peer and the floor out (and spec_list, unless `only` matches it)."""
    sizes, plan = (catalog.QUICK, QUICK) if quick else (catalog.FULL, FULL)
    plan = Plan(plan.warmup, samples or plan.samples, bursts or plan.bursts)
    section: dict[str, Any] = {"quick": quick, "sizes": asdict(sizes), "sizes_text": sizes.text(),
                               "plan": {**asdict(plan), "burst": BURST}, "http_era": ERA, "cores": available_cores(),
                               "http_workers": http_workers(), "transports": {}, "only": only, "peers": peers}
    with tempfile.TemporaryDirectory(prefix="specactor-bench-pertool-") as tmp:
        progress(f"per-tool: generating the workspace ({sizes.text()})")
        started = time.monotonic()
        seeds = catalog.build(Path(tmp) / "template", sizes, plan.calls())
        section["generate_s"] = round(time.monotonic() - started, 1)
        for name in transports:
            progress(f"per-tool over {name}: {plan.samples} calls at c=1 and {plan.bursts} x {BURST} per operation")
            section["transports"][name] = _transport(name, Path(tmp) / "template", seeds, Path(tmp), plan, progress,
                                                     re.compile(only) if only else None, peers)
    return section


def gates(section: dict[str, Any]) -> list[GateResult]:
    """Per transport: every operation's P95 < P95_MS at c=1 and at c=100 (the ratio is reported, not judged)."""
    out = []
    for name, entry in section.get("transports", {}).items():
        gate = f"per-tool P95 ({name})"
        target = f"every tool, resource and prompt p95 < {P95_MS:g} ms at c=1 and c={BURST}"
        if name == "http":
            target += f" (default deployment, {section.get('http_workers', '?')} workers)"
        keys = tuple(f"pertool:{name}:{key}" for key in entry["ops"])
        if entry.get("error"):
            out.append(GateResult(gate, target, "fail", f"harness broke: {entry['error'][:300]}", keys))
            continue
        p95s = [(key, c, fig[stat]) for key, fig in entry["ops"].items()
                for c, stat in ((1, "p95_ms"), (BURST, "p95_c100_ms")) if fig.get(stat) is not None]
        if not p95s:
            out.append(_gate(gate, target, keys, None, ""))
            continue
        over = [f"{key} p95 {v:.1f} ms at c={c}" for key, c, v in p95s if v >= P95_MS]
        worst = max(p95s, key=lambda t: t[2])
        detail = f"{len(entry['ops'])} operations; worst {worst[0]} p95 {worst[2]:.1f} ms at c={worst[1]}"
        if over:
            detail += "; over: " + ", ".join(over)
        if section.get("quick") or section.get("only"):
            why = "quick, " + section["sizes_text"] if section.get("quick") else f"partial: --only {section['only']}"
            out.append(GateResult(gate, target, "smoke", f"smoke ({why}): {detail}", keys))
        else:
            out.append(_gate(gate, target, keys, not over, detail))
    return out


def _label(fig: dict[str, Any]) -> str:
    kind, name = fig["kind"], fig["name"]
    text = {"tool": name, "resource": f"read {name}", "template": f"read {name}", "prompt": f"prompt {name}"}[kind]
    return f"{text} ({fig['note']})" if fig.get("note") else text


def table(section: dict[str, Any], num: Callable[[float | None], str]) -> list[str]:
    """The markdown lines: one table per transport, one row per operation, then the peers."""
    plan = section["plan"]
    lines = ["## Per tool: every tool, resource and prompt of `specactor serve`, c=1 and a closed burst of "
             f"{plan['burst']}", "",
             f"Workspace ({'quick, smaller than the issues: gate SMOKE' if section['quick'] else 'the issues sizes'}):"
             f" {section['sizes_text']}; generated in {section['generate_s']} s and copied afresh per transport. "
             f"Per operation: {plan['warmup']} warm-up calls and one warm-up burst of {plan['burst']} (unrecorded; "
             f"with HTTP workers, sequential calls reach one process), {plan['samples']} sequential calls (c=1), then "
             f"{plan['bursts']} closed burst(s) of {plan['burst']} (stdio: pipelined on one pipe; HTTP: "
             f"{plan['burst']} connections, one request each, era {section['http_era']}). HTTP: `specactor serve "
             f"--http` in its default deployment (`--workers` = the cores: {section.get('http_workers', '?')} "
             "worker processes here). Latencies in ms, client side; CPU = server utime + stime per 1,000 calls "
             "(summed over the server's process tree, its HTTP and pool workers, with the children each waited "
             "for, e.g. git), at c=1 and in the bursts; ÷ floor = median ÷ the floor's echo median. c=100÷c=1 "
             "is P95 over P95: reported, not gated. CPU bound = 0.95 x 100 x CPU per burst call ÷ "
             f"{section.get('cores', '?')} cores, the least P95 at c=100 the CPU allows; bound÷c=1 = that over "
             "the P95 at c=1: above the 1.5 of the I/O-waiting gate, no ratio gate could pass. Every reply is "
             "checked."]
    for name, entry in section["transports"].items():
        where = (f" (default deployment: {section.get('http_workers', '?')} workers)" if name == "http" else "")
        lines += ["", f"### {name}{where} — {entry.get('duration_s', '-')} s", ""]
        if entry.get("error"):
            lines += [f"**Harness error**: {entry['error'][:1000]}", ""]
        floor = entry["peers"].get("floor:echo", {}).get("median_ms")
        lines += ["| operation | n | median | P95 | P99 | P95 c=100 | c=100÷c=1 | CPU bound c=100 | bound÷c=1 | "
                  "CPU s / 1k | CPU s / 1k c=100 | ÷ floor | P95 verdict |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        rows = [(_label(fig), fig) for fig in entry["ops"].values()]
        rows += [(f"*{'SDK peer' if fig['server'] == 'sdk' else 'floor'} {fig['name']}*", fig)
                 for fig in entry["peers"].values()]
        for label, fig in rows:
            worst = max((v for v in (fig.get("p95_ms"), fig.get("p95_c100_ms")) if v is not None), default=None)
            peer = "server" in fig
            verdict = "" if peer or worst is None else "**over**" if worst >= P95_MS else "ok"
            r, f, b = fig.get("ratio_c100"), ratio(fig.get("median_ms"), floor), fig.get("cpu_bound_ratio")
            lines.append(f"| {label} | {fig['n']} | {num(fig['median_ms'])} | {num(fig['p95_ms'])} | "
                         f"{num(fig['p99_ms'])} | {num(fig['p95_c100_ms'])} | {'-' if r is None else f'{r:.1f}x'} | "
                         f"{num(fig.get('cpu_bound_c100_ms'))} | {'-' if b is None else f'{b:.1f}x'} | "
                         f"{num(fig['cpu_s_per_1k'])} | {num(fig.get('cpu_s_per_1k_c100'))} | "
                         f"{'-' if f is None else f'{f:.1f}x'} | {verdict} |")
        again = {key: fig["retried"] for key, fig in entry["ops"].items() if sum((fig.get("retried") or {}).values())}
        if again:
            lines += ["", "Sent again after a retryable CONFLICT (as the reply asks; each call's latency counts every "
                      "round trip, the retries made after the burst, on an idler server): "
                      + ", ".join(f"{key} {v['c1']} at c=1, {v['c100']} at c={BURST}" for key, v in again.items())
                      + "."]
        sa, sdk = entry["ops"].get("tool:spec_list"), entry["peers"].get("sdk:spec_list")
        if sa and sdk:
            lines += ["", f"spec_list on the same workspace: specactor median {num(sa['median_ms'])} ms, P95 "
                      f"{num(sa['p95_ms'])}, P95 c=100 {num(sa['p95_c100_ms'])}; SDK peer median "
                      f"{num(sdk['median_ms'])}, P95 {num(sdk['p95_ms'])}, P95 c=100 {num(sdk['p95_c100_ms'])}: "
                      f"SDK÷specactor {num(ratio(sdk['median_ms'], sa['median_ms']))}x (median), "
                      f"{num(ratio(sdk['p95_c100_ms'], sa['p95_c100_ms']))}x (P95 c=100)."]
        if entry.get("registered"):
            lines += ["", "Registered and measured: " + ", ".join(f"{v} {k}s" for k, v in entry["registered"].items())
                      + "."]
    return lines


def _num(value: float | None) -> str:
    from bench.report import _num as fmt

    return fmt(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pertool", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small workspace, few samples")
    parser.add_argument("--transport", choices=(*TRANSPORTS, "all"), default="all")
    parser.add_argument("--json", type=Path, help="also write the section here")
    parser.add_argument("--samples", type=int, help=f"calls at c=1 per operation (default {FULL.samples})")
    parser.add_argument("--bursts", type=int, help=f"bursts of {BURST} per operation (default {FULL.bursts})")
    parser.add_argument("--only", metavar="REGEX", help="measure only the operations whose `kind:name` key matches "
                        "(e.g. 'tool:list$|prompt:'); gates SMOKE")
    parser.add_argument("--no-peers", action="store_true", help="with --only: leave out the SDK peer and the floor "
                        "(and spec_list beside them), for a quick A/B of one operation (÷ floor then '-')")
    args = parser.parse_args(argv)
    if args.no_peers and not args.only:
        parser.error("--no-peers is for partial runs: give --only too")
    if (args.samples is not None and args.samples < 1) or (args.bursts is not None and args.bursts < 1):
        parser.error("--samples and --bursts must be at least 1")
    transports = list(TRANSPORTS) if args.transport == "all" else [args.transport]
    compile_bytecode()
    section = run(args.quick, lambda m: print(f"bench: {m}", file=sys.stderr, flush=True), transports,
                  samples=args.samples, bursts=args.bursts, only=args.only, peers=not args.no_peers)
    if args.json:
        args.json.write_text(json.dumps(section, indent=1, allow_nan=False) + "\n")
    print("\n".join(table(section, _num)))
    results = gates(section)
    for g in results:
        print(f"{g.verdict.upper():5} {g.name}: {g.detail}")
    if any(e.get("error") for e in section["transports"].values()):
        return 2
    return 1 if any(g.verdict == "fail" for g in results) else 0


if __name__ == "__main__":
    sys.exit(main())
