"""The picture: latency CDF of single calls (log x) and the spread of burst-100 latencies.

Rendered with matplotlib's Agg backend (no display needed) to `<out>/latest.png`, from the
raw samples in the results document, so any stored JSON can be re-plotted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLORS = {"specactor": "#1f77b4", "sdk": "#d62728", "floor": "#7f7f7f"}


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _pos: f"{value:g}")
    # minor ticks: label only the 2s and 5s of each decade, so labels never collide
    sparse = FuncFormatter(lambda value, _pos: f"{value:g}" if f"{value:e}"[0] in "25" else "")

    servers = doc["servers"]
    keys = [k for k in ("specactor", "sdk", "floor") if k in servers]
    fig, (cdf, box) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]})

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
    cdf.set_title(f"single tools/call echo over {doc['transport']}: CDF")
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
    box.set_title(f"burst of {doc['config']['burst']} pipelined calls\n(box p25-p75, whiskers p1-p99)")
    box.grid(True, axis="y", which="both", alpha=0.3)

    fig.suptitle(f"specactor bench {doc['timestamp']} — {doc['verdict']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
