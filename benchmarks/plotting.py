"""PNG plots of the stored results (matplotlib, Agg backend, small files)."""

from __future__ import annotations

import math
import os
from typing import Dict, List

import numpy as np

DPI = 90


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _webnlg_runs(results: Dict[str, Dict]):
    return [(name, res["datasets"]["webnlg"]) for name, res in results.items() if "webnlg" in res.get("datasets", {})]


def scatter_webnlg(results: Dict[str, Dict], path: str) -> bool:
    runs = _webnlg_runs(results)
    if not runs:
        return False
    plt = _plt()
    cols = min(3, len(runs))
    rows = math.ceil(len(runs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False)
    rng = np.random.default_rng(0)
    for ax, (name, run) in zip(axes.flat, runs):
        sc = run["measures"]["scatter"]
        x = np.asarray(sc["semantics"]) + rng.uniform(-0.04, 0.04, len(sc["semantics"]))  # ratings are means of 3-4 votes: jitter
        ax.scatter(x, sc["score"], s=3, alpha=0.35, linewidths=0, rasterized=True)
        r = run["measures"]["segment"]["semantics"]["pearson"]["value"]
        ax.set_title(f"{name}  (r = {r:.3f})", fontsize=9)
        ax.set_xlabel("human semantics (1-3)", fontsize=8)
        ax.set_ylabel("metric score", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(runs):]:
        ax.axis("off")
    fig.suptitle("WebNLG 2017: metric vs. human semantics (9 systems)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


def correlation_bars(results: Dict[str, Dict], path: str) -> bool:
    runs = _webnlg_runs(results)
    if not runs:
        return False
    plt = _plt()
    kinds = [("pearson", "segment Pearson"), ("spearman", "segment Spearman"), ("kendall", "segment Kendall"), ("system", "system Pearson")]
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    width = 0.8 / len(kinds)
    x = np.arange(len(runs))
    for k, (key, label) in enumerate(kinds):
        vals, lows, highs = [], [], []
        for _, run in runs:
            m = run["measures"]
            d = m["system"]["semantics"]["pearson"] if key == "system" else m["segment"]["semantics"][key]
            vals.append(d["value"])
            lows.append(d["value"] - d["low"])
            highs.append(d["high"] - d["value"])
        ax.bar(x + (k - (len(kinds) - 1) / 2) * width, vals, width, yerr=[lows, highs], capsize=2, label=label)
    ax.set_xticks(x)
    ax.set_xticklabels([name for name, _ in runs], fontsize=8)
    ax.tick_params(axis="x", length=0, pad=2)
    ax.set_ylabel("correlation with human semantics", fontsize=8)
    ax.set_ylim(min(0, ax.get_ylim()[0]), 1.05)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.legend(fontsize=7, ncol=len(kinds), loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    ax.set_title("WebNLG 2017: correlation with semantics (95% intervals)", fontsize=10)
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


def speed_bars(results: Dict[str, Dict], path: str) -> bool:
    entries = []
    for name, res in results.items():
        for ds, run in res.get("datasets", {}).items():
            s = run.get("speed")
            if s and s["seconds"] > 0:
                entries.append((f"{name}\n{ds}", run["n"] / s["seconds"], s.get("rss_peak_delta_mb", float("nan"))))
    if not entries:
        return False
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 0.45 * len(entries) + 1.2))
    y = np.arange(len(entries))
    ax1.barh(y, [e[1] for e in entries], color="tab:blue")
    ax1.set_xscale("log")
    ax1.set_xlabel("examples / second (log)", fontsize=8)
    ax1.set_yticks(y)
    ax1.set_yticklabels([e[0] for e in entries], fontsize=7)
    ax1.invert_yaxis()
    ax2.barh(y, [0 if math.isnan(e[2]) else e[2] for e in entries], color="tab:orange")
    ax2.set_xlabel("peak RSS above start (MB)", fontsize=8)
    ax2.set_yticks(y)
    ax2.set_yticklabels([])
    ax2.invert_yaxis()
    for ax in (ax1, ax2):
        ax.tick_params(labelsize=7)
    fig.suptitle("Speed and memory (CPU)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return True


PLOTS = {
    "webnlg_scatter.png": scatter_webnlg,
    "webnlg_correlations.png": correlation_bars,
    "speed.png": speed_bars,
}


def write_plots(results: Dict[str, Dict], plots_dir: str) -> List[str]:
    os.makedirs(plots_dir, exist_ok=True)
    written = []
    for filename, fn in PLOTS.items():
        if fn(results, os.path.join(plots_dir, filename)):
            written.append(filename)
    return written
