"""Meta-evaluation harness: agreement with human judgements, and speed.

    python -m benchmarks.run                      # everything available, full data
    python -m benchmarks.run --smoke --out /tmp/b # <= 50 examples per data set
    python -m benchmarks.run --metrics parent,bleu --datasets webnlg

Each metric's measures are stored in ``<out>/meta_eval/<metric>.json``; RESULTS.md
sections and plots are rendered from all stored results, so rerunning one
metric keeps the others' rows. Metrics whose module or model is missing are
skipped with a message. Exit status 1 when a metric failed (not skipped).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import traceback
from typing import Dict, List, Optional

from . import report
from .adapters import DEFAULT_METRICS, METRICS, MetricUnavailable, Options, model_assignments
from .data import LOADERS, BenchDataset, DatasetMissing, load_dataset
from .meta import analyze
from .plotting import write_plots
from .results_md import write_section
from .speed import measure

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
TRACE_ITEMS = 200  # tracemalloc pass size: it slows Python code several-fold
WARMUP_ITEMS = 2
RESULTS_SUBDIR = "meta_eval"  # <out>/meta_eval/<metric>.json: stored measures per metric


def _csv(value: str) -> List[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="<= 50 examples per data set (CI); output defaults to benchmarks/out/smoke")
    p.add_argument("--metrics", type=_csv, default=list(DEFAULT_METRICS), help=f"comma-separated, from {','.join(METRICS)}")
    p.add_argument("--datasets", type=_csv, default=list(LOADERS), help=f"comma-separated, from {','.join(LOADERS)}")
    p.add_argument("--out", default=None, help="folder for RESULTS.md, plots/ and meta_eval/ (default: benchmarks/)")
    p.add_argument("--model", action="append", default=[], metavar="NAME=PATH", help="model or checkpoint for a metric, e.g. bertscore=/path")
    p.add_argument("--device", default=None, help="device for model-based metrics (default: cuda if present, else cpu)")
    p.add_argument("--bertscore-layer", type=int, default=None, help="hidden layer for BERTScore (default: last)")
    p.add_argument("--bootstrap", type=int, default=1000, help="resamples for segment-level CIs")
    p.add_argument("--system-bootstrap", type=int, default=500, help="resamples for system-level Pearson")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-tracemalloc", action="store_true", help="skip the separate Python-heap measurement")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--progress", action="store_true", help="show progress bars")
    p.add_argument("--list", action="store_true", help="list the registered metrics, then exit")
    p.add_argument("--dump-examples", default=None, metavar="DIR",
                   help="also write each metric's per-example output (its explanations) to DIR/<metric>.<data set>.jsonl")
    p.add_argument("--render-only", action="store_true", help="only rewrite RESULTS.md and plots from the stored results")
    args = p.parse_args(argv)
    for m in args.metrics:
        if m not in METRICS:
            p.error(f"unknown metric {m!r}; choose from {', '.join(METRICS)}")
    for d in args.datasets:
        if d not in LOADERS:
            p.error(f"unknown data set {d!r}; choose from {', '.join(LOADERS)}")
    args.models = model_assignments(args.model, p.error)
    return args


# What a run writes: a change there does not make the measured code differ from its commit.
RUN_OUTPUTS = ("benchmarks/RESULTS.md", "benchmarks/meta_eval", "benchmarks/plots", "benchmarks/out")


def _git_commit() -> str:
    """HEAD's short hash, with ``+changes`` when tracked files other than the run's outputs differ from it."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", "."]
                                 + [f":!{p}" for p in RUN_OUTPUTS], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if changed else "")


def load_stored(results_dir: str) -> Dict[str, Dict]:
    stored = {}
    if os.path.isdir(results_dir):
        for fname in sorted(os.listdir(results_dir)):
            if fname.endswith(".json"):
                with open(os.path.join(results_dir, fname), encoding="utf-8") as f:
                    data = json.load(f)
                if isinstance(data, dict) and "metric" in data and "datasets" in data:  # skip foreign files
                    stored[data["metric"]] = data
    # Registry order, then anything else.
    order = {name: i for i, name in enumerate(METRICS)}
    return dict(sorted(stored.items(), key=lambda kv: order.get(kv[0], len(order))))


def _save(results_dir: str, metric: str, data: Dict) -> None:
    os.makedirs(results_dir, exist_ok=True)
    path = os.path.join(results_dir, f"{metric}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")


def _head(dataset: BenchDataset, n: int) -> BenchDataset:
    return BenchDataset(dataset.name, dataset.description, dataset.items[:n], dataset.reference_system, dataset.path)


def run_metric(spec, options: Options, datasets: Dict[str, BenchDataset], args, meta: Dict) -> Dict:
    """Score every data set the metric supports; returns {dataset: run record}."""
    todo = [d for d in spec.datasets if d in datasets]
    if not todo:
        raise MetricUnavailable(f"none of its data sets ({', '.join(spec.datasets)}) was loaded")
    try:
        import evaluate  # noqa: F401  (a slow first import; not part of any metric's load time)
    except ImportError:
        pass
    with measure() as load_m:
        scorer = spec.load(options)
        scorer.score(_head(datasets[todo[0]], WARMUP_ITEMS))  # lazy model loads happen here
    runs = {}
    for ds_name in todo:
        dataset = datasets[ds_name]
        print(f"[{spec.name}] scoring {ds_name} ({len(dataset)} examples) ...", flush=True)
        with measure() as m:
            scores = scorer.score(dataset, show_progress=args.progress)
        speed = {
            "device": getattr(scorer, "device", "cpu"),
            "load_seconds": load_m.seconds,
            "seconds": m.seconds,
            "rss_peak_delta_mb": m.rss_peak_delta_mb,
            "max_rss_mb": m.max_rss_mb,
            "cuda_peak_mb": m.cuda_peak_mb,
            "python_peak_mb": float("nan"),
            "python_peak_n": 0,
            # Other processes on the machine slow every timing; record how busy it was.
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"),
            "cpu_count": os.cpu_count(),
        }
        if args.dump_examples:
            dump_examples(os.path.join(args.dump_examples, f"{spec.name}.{ds_name}.jsonl"), dataset, scores)
        if not args.no_tracemalloc:
            head = _head(dataset, TRACE_ITEMS)
            with measure(trace_python=True) as tm:
                scorer.score(head)
            speed["python_peak_mb"], speed["python_peak_n"] = tm.python_peak_mb, len(head)
        if spec.speed_baseline is not None:
            speed["baseline"] = spec.speed_baseline(scorer, dataset)
        measures = analyze(dataset, scores, scorer.uses_references, args.bootstrap, args.system_bootstrap, args.seed)
        runs[ds_name] = {
            "n": len(dataset),
            "smoke": args.smoke,
            "model": scorer.model,
            "signature": scorer.signature,
            "speed": speed,
            "measures": measures,
            **meta,
        }
        print(f"[{spec.name}] {ds_name}: {_headline(ds_name, measures)}; {len(dataset) / max(m.seconds, 1e-9):.0f} examples/s", flush=True)
    return runs


def dump_examples(path: str, dataset: BenchDataset, scores) -> None:
    """One JSON line per item: where it came from, the human judgement, the
    number correlated, and the metric's own per-example output."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    examples = scores.examples or [None] * len(dataset.items)
    with open(path, "w", encoding="utf-8") as f:
        for item, score, example in zip(dataset.items, scores.scores, examples):
            row = {"input_id": item.input_id, "system": item.system, "prediction": item.prediction,
                   "human": item.human, "score": float(score), "example": example}
            f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")


def _headline(ds_name: str, measures: Dict) -> str:
    if ds_name == "webnlg":
        seg = measures["segment"]["semantics"]
        return (f"semantics: segment Pearson {seg['pearson']['value']:.3f}, Spearman {seg['spearman']['value']:.3f}, "
                f"system Pearson {measures['system']['semantics']['pearson']['value']:.3f}")
    if ds_name == "e2e":
        two = measures["binary"]["2way"]
        acc = two.get("labels", two["threshold"])["accuracy"]
        return f"2-way accuracy {100 * acc:.1f}% ({'labels' if 'labels' in two else 'oracle threshold'}), AUC {two['threshold']['auc']:.3f}"
    if ds_name == "dae_pairs":
        r = measures["rerank"]
        return f"reranking accuracy {100 * r['accuracy']:.1f}% ({r['ties']} ties)"
    return ""


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.list:
        for name, spec in METRICS.items():
            print(f"{name:28s} {spec.description}  [data: {', '.join(spec.datasets)}]")
        return 0
    out_dir = args.out or (os.path.join(BENCH_DIR, "out", "smoke") if args.smoke else BENCH_DIR)
    results_dir = os.path.join(out_dir, RESULTS_SUBDIR)
    plots_dir = os.path.join(out_dir, "plots")
    os.makedirs(out_dir, exist_ok=True)
    meta = {
        "command": "python -m benchmarks.run" + ("" if not argv else " " + " ".join(shlex.quote(a) for a in argv)),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "commit": _git_commit(),
    }

    datasets: Dict[str, BenchDataset] = {}
    if args.render_only:
        args.metrics, args.datasets = [], []
    for name in args.datasets:
        try:
            datasets[name] = load_dataset(name, smoke=args.smoke)
            print(f"data set {name}: {len(datasets[name])} examples", flush=True)
        except DatasetMissing as e:
            print(f"SKIP data set {name}: {e}", flush=True)

    options = Options(models=args.models, device=args.device, show_progress=args.progress, bertscore_layer=args.bertscore_layer)
    results = load_stored(results_dir)
    skipped: Dict[str, str] = {}
    failed: List[str] = []
    for name in args.metrics:
        spec = METRICS[name]
        try:
            runs = run_metric(spec, options, datasets, args, meta)
        except MetricUnavailable as e:
            print(f"SKIP metric {name}: {e}", flush=True)
            skipped[name] = str(e)
            continue
        except Exception:  # keep the other metrics' results; report and fail at the end
            traceback.print_exc()
            print(f"FAILED metric {name}", flush=True)
            failed.append(name)
            continue
        record = results.get(name) or {"metric": name, "description": spec.description, "datasets": {}}
        record["description"] = spec.description
        record["datasets"].update(runs)
        results[name] = record
        _save(results_dir, name, record)

    results = load_stored(results_dir)
    plots = [] if args.no_plots else write_plots(results, plots_dir)
    results_md = os.path.join(out_dir, "RESULTS.md")
    for section, markdown in report.render_all(results, METRICS, skipped, plots).items():
        write_section(section, markdown, path=results_md)
        print("\n" + markdown)
    print(f"\nwrote {results_md}" + (f" and {len(plots)} plots in {plots_dir}" if plots else ""))
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
