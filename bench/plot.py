"""The picture: one row of panels per transport measured, from the results document.

- stdio: latency CDF of single calls (log x) and the spread of burst-100 latencies, every server
  (specactor, the SDK peer, the floor, the TS SDK) in its own colour (`COLORS`);
- Streamable HTTP: p95 latency against concurrency (every target's line side by side: specactor
  in its default deployment and with `--workers 1`, the peers, the TS SDK with sessions and stateless),
  throughput against concurrency, and the latency CDF at the lowest and highest concurrency;
- per tool (`bench.pertool`), per transport: the latency CDF at c=1 of every operation pooled and
  of spec_list, beside the SDK peer's spec_list and echo and the floor's echo; and P95 at c=1
  against c=100, one line per operation, the peers' lines beside them.

Rendered with matplotlib's Agg backend (no display needed) to `<out>/latest.png`, from the
samples stored in the results document, so any stored JSON can be re-plotted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLORS = {"specactor": "#1f77b4", "sdk": "#d62728", "floor": "#7f7f7f",
          "specactor-2026": "#17becf", "sdk-2026": "#ff7f0e",
          "specactor-1w": "#9467bd", "specactor-1w-2026": "#c5b0d5",  # specactor --workers 1
          "ts": "#2ca02c", "ts-stateless": "#bcbd22"}  # the TypeScript SDK: sessions, stateless
STDIO_KEYS = ("specactor", "sdk", "floor", "ts")


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r, present in (("stdio", bool(doc["servers"])), ("http", bool(doc.get("http"))),
                                 ("pertool", bool((doc.get("pertool") or {}).get("transports")))) if present]
    if not rows:
        return
    fig = plt.figure(figsize=(15, 5.2 * len(rows)), layout="constrained")
    subfigs = fig.subfigures(len(rows), 1, squeeze=False)[:, 0]
    for sub, row in zip(subfigs, rows, strict=True):
        if row == "stdio":
            _stdio(sub, doc)
        elif row == "http":
            _http(sub, doc)
        else:
            _pertool(sub, doc)
    fig.suptitle(f"specactor bench {doc['timestamp']} — {doc['verdict']} — load average "
                 + " / ".join(f"{v:.2f}" for v in doc["machine"]["loadavg"]), fontsize=10)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _formatters() -> tuple[Any, Any]:
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _pos: f"{value:g}")
    # minor ticks: label only the 2s and 5s of each decade, so labels never collide
    sparse = FuncFormatter(lambda value, _pos: f"{value:g}" if f"{value:e}"[0] in "25" else "")
    return plain, sparse


def _stdio(sub: Any, doc: dict[str, Any]) -> None:
    plain, sparse = _formatters()
    servers = doc["servers"]
    keys = [k for k in STDIO_KEYS if k in servers]
    cdf, box = sub.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    for key in keys:
        values = sorted(servers[key]["samples"]["single_ms"])
        if not values:
            continue
        n = len(values)
        label = f"{servers[key]['label']} (median {servers[key]['figures']['single_median_ms']:.3f} ms)"
        cdf.step(values, [(i + 1) / n for i in range(n)], where="post", color=COLORS[key], label=label)
    cdf.set_xscale("log")
    cdf.xaxis.set_major_formatter(plain)
    cdf.set_xlabel("latency (ms, log)")
    cdf.set_ylabel("fraction of calls ≤ x")
    cdf.set_title("stdio: single tools/call echo, CDF")
    cdf.grid(True, which="both", alpha=0.3)
    cdf.legend(loc="lower right", fontsize=8)

    data = [servers[k]["samples"]["burst_ms"] or [float("nan")] for k in keys]
    parts = box.boxplot(data, whis=(1, 99), showfliers=False, patch_artist=True)
    ticks = []
    for key in keys:
        tput = servers[key]["figures"].get("burst_calls_per_s")
        ticks.append(servers[key]["label"] + (f"\n{tput:,.0f} calls/s" if tput else ""))
    box.set_xticks(range(1, len(keys) + 1), ticks)
    for patch, key in zip(parts["boxes"], keys, strict=True):
        patch.set_facecolor(COLORS[key])
        patch.set_alpha(0.5)
    box.set_yscale("log")
    box.yaxis.set_major_formatter(plain)
    box.yaxis.set_minor_formatter(sparse)
    box.set_ylabel("per-request latency (ms, log)")
    box.set_title(f"stdio: burst of {doc['config']['burst']} pipelined calls\n(box p25-p75, whiskers p1-p99)")
    box.grid(True, axis="y", which="both", alpha=0.3)


def _http(sub: Any, doc: dict[str, Any]) -> None:
    plain, _ = _formatters()
    http = doc["http"]
    levels = http["levels"]
    targets = http["targets"]
    p95, tput, cdf = sub.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 1.4]})
    for key, t in targets.items():
        style = {"color": COLORS.get(key), "marker": "o", "linestyle": "--" if key.endswith("-2026") else "-"}
        p95.plot(levels, [t["figures"].get(f"http_c{c}_p95_ms") for c in levels], label=t["label"], **style)
        tput.plot(levels, [t["figures"].get(f"http_c{c}_calls_per_s") for c in levels], label=t["label"], **style)
    for ax, title, ylabel in ((p95, "HTTP: p95 latency vs concurrency", "p95 latency (ms, log)"),
                              (tput, "HTTP: throughput vs concurrency", "calls/s")):
        ax.set_xscale("log")
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set_xlabel("concurrent connections (closed loop)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    p95.set_yscale("log")
    p95.yaxis.set_major_formatter(plain)
    p95.axhline(200, color="black", linewidth=0.8, linestyle=":", label="gate: 200 ms at c=100")
    p95.legend(fontsize=7)
    tput.set_ylim(bottom=0)

    shown = sorted({levels[0], levels[-1]})
    for key, t in targets.items():
        for c, dash in zip(shown, ("-", "--"), strict=False):
            values = t["samples"].get(f"c{c}", {}).get("cdf_ms") or []
            if not values:
                continue
            n = len(values)
            label = f"{t['label']}, c={c}" if len(shown) > 1 else t["label"]
            cdf.step(values, [(i + 1) / n for i in range(n)], where="post", color=COLORS.get(key),
                     linestyle=dash, label=label)
    cdf.set_xscale("log")
    cdf.xaxis.set_major_formatter(plain)
    cdf.set_xlabel("latency (ms, log)")
    cdf.set_ylabel("fraction of calls ≤ x")
    cdf.set_title("HTTP: latency CDF, c=" + " (solid) and c=".join(map(str, shown)) + (" (dashed)" if len(shown) > 1
                                                                                       else ""))
    cdf.grid(True, which="both", alpha=0.3)
    cdf.legend(loc="lower right", fontsize=6, ncol=2)


def _pertool(sub: Any, doc: dict[str, Any]) -> None:
    plain, _ = _formatters()
    section = doc["pertool"]
    transports = section["transports"]
    axes = sub.subplots(1, 2 * len(transports), squeeze=False)[0]
    burst = section["plan"]["burst"]
    for k, (name, entry) in enumerate(transports.items()):
        cdf, p95 = axes[2 * k], axes[2 * k + 1]
        lines = [("specactor, every operation", entry.get("cdf_ms"), COLORS["specactor"], "-"),
                 ("specactor spec_list", entry["ops"].get("tool:spec_list", {}).get("cdf_ms"), COLORS["specactor"],
                  "--")]
        peers = entry.get("peers", {})
        lines += [("SDK peer spec_list", peers.get("sdk:spec_list", {}).get("cdf_ms"), COLORS["sdk"], "--"),
                  ("SDK peer echo", peers.get("sdk:echo", {}).get("cdf_ms"), COLORS["sdk"], "-"),
                  ("floor echo", peers.get("floor:echo", {}).get("cdf_ms"), COLORS["floor"], "-")]
        for label, values, color, dash in lines:
            if values:
                n = len(values)
                cdf.step(values, [(i + 1) / n for i in range(n)], where="post", color=color, linestyle=dash,
                         label=label)
        cdf.set_xscale("log")
        cdf.xaxis.set_major_formatter(plain)
        cdf.set_xlabel("latency (ms, log)")
        cdf.set_ylabel("fraction of calls ≤ x")
        cdf.set_title(f"per tool, {name}: latency CDF at c=1")
        cdf.grid(True, which="both", alpha=0.3)
        cdf.legend(loc="lower right", fontsize=7)

        for key, fig in entry["ops"].items():
            if fig.get("p95_ms") is not None and fig.get("p95_c100_ms") is not None:
                p95.plot([1, burst], [fig["p95_ms"], fig["p95_c100_ms"]], color=COLORS["specactor"], alpha=0.3,
                         linewidth=0.8, marker=".", label="specactor, one line per operation"
                         if key == next(iter(entry["ops"])) else None)
        for key, fig in peers.items():
            server, tool = key.split(":")
            color = COLORS["sdk" if server == "sdk" else "floor"]
            p95.plot([1, burst], [fig["p95_ms"], fig["p95_c100_ms"]], color=color, linewidth=2, marker="o",
                     linestyle="--" if tool == "spec_list" else "-",
                     label=f"{'SDK peer' if server == 'sdk' else 'floor'} {tool}")
        p95.axhline(200, color="black", linewidth=0.8, linestyle=":", label="gate: 200 ms")
        p95.set_xscale("log")
        p95.set_yscale("log")
        p95.set_xticks([1, burst], ["1", str(burst)])
        p95.yaxis.set_major_formatter(plain)
        p95.set_xlabel("requests in flight (c)")
        p95.set_ylabel("p95 latency (ms, log)")
        p95.set_title(f"per tool, {name}: p95 at c=1 and c={burst}")
        p95.grid(True, which="both", alpha=0.3)
        p95.legend(fontsize=7)
