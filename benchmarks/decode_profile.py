"""Where a generative metric's decoding spends its time: torch's profiler over one ``compute``.

    python -m benchmarks.decode_profile [--metric fact_accuracy] [--webnlg 100] [--batch-size 256]
        [--attn sdpa|eager] [--out DIR] [--rows 25]

Issue #35: on a lent H200 (2026-11-29, RESULTS.md ``gpu_checks``) fact_accuracy decoded about 100 ms
per step with the GPU at most 9 % busy, and the only profile of that run (cProfile) was taken while a
training shared the GPU, so it cannot say where a clean step's time goes. This probe answers that in
one run: the metric is prepared as ``d2t-metrics score`` prepares it (the project's checkpoint, the
device the metric picks: the GPU when there is one) and warmed up; then ``compute`` runs under
``torch.profiler`` (CPU and, when present, CUDA activities) over the first N of the robustness benchmark's
fixed sample of N + 4 WebNLG 2017 outputs, the other 4 (``--warm``) having been the warm-up. It prints and writes to ``DIR``:

- ``decode_profile_<metric>_<attn>.json``: wall seconds, outputs/s, the decoder's forward calls (model
  steps) and ms per step, the device's kernel time and its share of the wall time (``device_busy``:
  the GPU waits when it is small), and the top operators;
- ``..._cpu.txt`` / ``..._device.txt``: the operator tables by self CPU time and by self device time.

``--attn eager`` switches the loaded decoders from SDPA to transformers' eager attention (same
arithmetic up to rounding), the first alternative to measure when SDPA's call is where the host waits.
Nothing here is a test of speed: it is read by a person, on the machine that matters.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from typing import Dict, List

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)


def loaded_decoders() -> List:
    """The causal LMs alive in this process (the metrics keep their generators in caches, out of reach
    otherwise)."""
    import transformers

    return [o for o in gc.get_objects() if isinstance(o, transformers.PreTrainedModel) and type(o).__name__.endswith("ForCausalLM")]


class StepCounter:
    """Counts the forward calls of the decoders' base models (one per decoding step or prefill)."""

    def __init__(self, models):
        self.calls = 0
        self.handles = []
        seen = set()
        for model in models:
            base = getattr(model, "model", model)
            if id(base) not in seen:
                seen.add(id(base))
                self.handles.append(base.register_forward_hook(self._count))

    def _count(self, *_):
        self.calls += 1

    def remove(self):
        for h in self.handles:
            h.remove()


def operator_rows(averages, key: str, limit: int) -> List[Dict]:
    """The top ``limit`` operators of a profiler's ``key_averages()`` by ``key`` (``self_cpu_time_total``
    or ``self_device_time_total``), in milliseconds."""
    rows = sorted(averages, key=lambda e: getattr(e, key, 0) or 0, reverse=True)[:limit]
    return [{"name": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1000,
             "self_device_ms": (getattr(e, "self_device_time_total", 0) or 0) / 1000} for e in rows]


def device_busy(device_us: float, wall_s: float) -> float:
    """The share of the wall time the device spent in kernels (an upper bound: overlapping kernels count twice)."""
    return device_us / 1e6 / wall_s if wall_s > 0 else 0.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--metric", default="fact_accuracy", choices=("fact_accuracy", "data_questeval"))
    p.add_argument("--webnlg", type=int, default=100, metavar="N", help="WebNLG 2017 outputs profiled (fixed sample)")
    p.add_argument("--batch-size", type=int, default=None, help="the metric's batch_size (default: its own)")
    p.add_argument("--attn", default="sdpa", choices=("sdpa", "eager"), help="the decoders' attention implementation")
    p.add_argument("--out", default=".", help="folder for the JSON and the two tables (default: here)")
    p.add_argument("--rows", type=int, default=25, help="operators in each table")
    p.add_argument("--warm", type=int, default=4, help="outputs of the warm-up compute (default 4)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    from d2t_metrics.runner import build_compute_kwargs, find_checkpoints_dir, find_metrics_dir, prepare_metric

    from d2t_metrics.runner import parse_corpus

    from .generation_speed import webnlg_lines

    metrics_dir = find_metrics_dir()
    # the warm-up reads other outputs than the profiled ones: a metric may keep what it decoded for a text
    lines = webnlg_lines(args.webnlg + args.warm)
    corpus = parse_corpus("\n".join(lines[: args.webnlg]), f"webnlg2017 sample of {args.webnlg}")
    warm = parse_corpus("\n".join(lines[args.webnlg:]), "warm-up")
    prepared = prepare_metric(args.metric, os.path.join(metrics_dir, args.metric), None, None,
                              find_checkpoints_dir(None, metrics_dir), warm, args.batch_size, False)
    metric = prepared.metric
    metric.download_and_prepare()
    decoders = loaded_decoders()
    for model in decoders:
        model.set_attn_implementation(args.attn)
    metric.compute(**build_compute_kwargs(metric, warm, args.batch_size, False))  # CUDA's first calls, caches warm
    kwargs = build_compute_kwargs(metric, corpus, args.batch_size, False)
    if hasattr(metric, "question_cache"):
        metric.question_cache.clear()  # data_questeval: the warm-up's questions must not be reused
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    steps = StepCounter(loaded_decoders())
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        metric.compute(**kwargs)
        if cuda:
            torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    steps.remove()
    averages = prof.key_averages()
    device_us = sum(getattr(e, "self_device_time_total", 0) or 0 for e in averages)
    record = {
        "metric": args.metric, "outputs": len(corpus), "batch_size": args.batch_size, "attn": args.attn,
        "device": "cuda" if cuda else "cpu", "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "wall_seconds": round(wall, 3), "outputs_per_second": round(len(corpus) / wall, 3),
        "decoder_steps": steps.calls, "ms_per_step": round(1000 * wall / max(steps.calls, 1), 2),
        "device_kernel_seconds": round(device_us / 1e6, 3), "device_busy": round(device_busy(device_us, wall), 4),
        "top_by_cpu": operator_rows(averages, "self_cpu_time_total", args.rows),
        "top_by_device": operator_rows(averages, "self_device_time_total", args.rows) if cuda else [],
        "note": "measured under torch.profiler, which slows the host; compare attn variants within one machine",
    }
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"decode_profile_{args.metric}_{args.attn}")
    with open(stem + ".json", "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    with open(stem + "_cpu.txt", "w", encoding="utf-8") as f:
        f.write(averages.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    if cuda:
        with open(stem + "_device.txt", "w", encoding="utf-8") as f:
            f.write(averages.table(sort_by="self_device_time_total", row_limit=args.rows))
    print(json.dumps({k: v for k, v in record.items() if not k.startswith("top_")}), flush=True)
    for row in record["top_by_cpu"][:10]:
        print(f"  {row['self_cpu_ms']:10.1f} ms CPU {row['self_device_ms']:10.1f} ms device {row['calls']:7d}  {row['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
