"""Throughput of ``d2t-metrics score`` in one process and sharded over several (torchrun), side by side.

    python -m benchmarks.sharding [--metric nli_semantic_accuracy] [--examples 400] [--processes 2] [--repeats 1]
                                  [--write-results]

The first ``--examples`` WebNLG 2017 human-evaluation outputs (prediction and
table, with their references) are written as a JSONL file and scored by the
command line three times, one run after the other, as a user runs it:

* **1 process, torch's default threads** (one per core):
  ``python -m d2t_metrics.cli score ...``, the baseline;
* **1 process, 1 thread** (``OMP_NUM_THREADS=1``): what one shard gets;
* **N processes**: ``python -m torch.distributed.run --nproc_per_node N -m
  d2t_metrics.cli score ...`` (torchrun gives each process one thread).

All use the metric's default model (``checkpoints/<metric>/``), its default
batch size (or ``--batch-size``), and the CPU only. Reported per run: wall
seconds of the whole command (start-up, model loading, scoring, writing) and
outputs per second on it; the scoring seconds of the first process (``--timing``: its ``compute``
stage, plus its ``gather``, the wait for the other shards) and outputs per
second on those; the speed-up of each over the baseline. The N-process output
is compared with the baseline's byte for byte; where they differ (a float32
model's scores move in the last digits with the batch an example is padded
in), the largest difference of any per-example number is given. The
machine's load average before and after is printed, since a busy machine
changes every figure. A metric whose file does not define ``corpus_scores``
yet is scored from a copy that does (:data:`OVERRIDES`), and the table says
so. ``--write-results`` writes the table as section ``sharding_<metric>`` of
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, List, Optional, Tuple

from benchmarks.data import load_webnlg
from benchmarks.results_md import markdown_table, write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# How each metric's _compute makes its corpus scores from the per-example dicts (D2TMetric.corpus_scores),
# appended to a copy of the metric when its own file does not define corpus_scores yet: without it, the
# command line scores the metric in one process even under torchrun.
OVERRIDES = {
    "parent": "Parent.corpus_scores = lambda self, examples: corpus_scores(examples)",
    "nli_semantic_accuracy": "NLISemanticAccuracy.corpus_scores = lambda self, examples: corpus_summary(examples)",
    "fact_accuracy": "FactAccuracy.corpus_scores = lambda self, examples: corpus_scores(examples)",
}


def metrics_with_corpus_scores(folder: str, metric: str) -> Tuple[str, str]:
    """``(metrics folder, note)``: a copy of ``metric`` that defines ``corpus_scores``, where needed."""
    source = os.path.join(ROOT, "metrics", metric)
    with open(os.path.join(source, f"{metric}.py"), encoding="utf-8") as f:
        if "def corpus_scores(self" in f.read():
            return os.path.join(ROOT, "metrics"), f"{metric} defines corpus_scores"
    if metric not in OVERRIDES:
        raise SystemExit(f"{metric} does not define corpus_scores, and this benchmark has no stand-in for it")
    target = os.path.join(folder, "metrics", metric)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(target, f"{metric}.py"), "a", encoding="utf-8") as f:
        f.write("\n\n" + OVERRIDES[metric] + "\n")
    return os.path.dirname(target), f"{metric} scored from a copy with `{OVERRIDES[metric]}` (its file lacks corpus_scores)"


def write_input(path: str, n_examples: int) -> int:
    """The first ``n_examples`` WebNLG 2017 outputs as score's JSONL; the number written."""
    items = load_webnlg().items[:n_examples]
    with open(path, "w", encoding="utf-8") as f:
        for i, item in enumerate(items):
            f.write(json.dumps({"id": i, "prediction": item.prediction, "table": item.table, "references": item.references}) + "\n")
    return len(items)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scoring_seconds(stderr: str, metric: str) -> float:
    """The first process's ``<metric>: compute`` and ``<metric>: gather`` (its wait for the other
    shards; none in one process) rows of the --timing report, summed."""
    seconds = {stage: float(value) for stage, value in re.findall(rf"^{re.escape(metric)}: (compute|gather)\s+([0-9.]+)", stderr, re.M)}
    if "compute" not in seconds:
        raise RuntimeError(f"no timing of {metric}: compute in:\n{stderr[-3000:]}")
    return seconds["compute"] + seconds.get("gather", 0.0)


def score(metric: str, metrics_dir: str, inp: str, out: str, processes: int, threads: Optional[int],
          batch_size: Optional[int] = None) -> Tuple[float, float, str]:
    """``(wall seconds, scoring seconds of the first process, stdout)`` of one scoring command; ``threads``
    per process (``None``: torch's default in one process, one per process under torchrun)."""
    args = ["score", "--metrics", metric, "--metrics-dir", metrics_dir, "--input", inp, "--output", out, "--overwrite", "--json", "--no-progress", "--timing"]
    if batch_size is not None:
        args += ["--batch-size", str(batch_size)]
    if processes == 1:
        command = [sys.executable, "-m", "d2t_metrics.cli", *args]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
                   "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "-m", "d2t_metrics.cli", *args]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", D2T_NO_PROGRESS="1")
    env.pop("OMP_NUM_THREADS", None)  # one process: torch's default; torchrun sets 1 per process itself
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    if processes > 1 and f"on {processes} processes" not in proc.stderr:
        raise RuntimeError(f"{metric} was not sharded:\n{proc.stderr[-3000:]}")
    return wall, scoring_seconds(proc.stderr, metric), proc.stdout


def largest_difference(a: Any, b: Any) -> float:
    """The largest absolute difference between numbers at the same place of two JSON values
    (``inf`` where their shapes differ)."""
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or a is None:
        return 0.0 if a == b else float("inf")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b)
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return max((largest_difference(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return max((largest_difference(x, y) for x, y in zip(a, b)), default=0.0)
    return float("inf")


def compare(single_path: str, sharded_path: str) -> str:
    with open(single_path, "rb") as f1, open(sharded_path, "rb") as f2:
        single, sharded = f1.read(), f2.read()
    if single == sharded:
        return "byte-identical to the 1-process one"
    rows = lambda data: [json.loads(line) for line in data.decode("utf-8").splitlines()]  # noqa: E731
    return (f"not byte-identical to the 1-process one (largest per-example difference "
            f"{largest_difference(rows(single), rows(sharded)):.2e})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metric", default="nli_semantic_accuracy")
    parser.add_argument("--examples", type=int, default=400)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the three runs, one after the other")
    parser.add_argument("--batch-size", type=int, help="the metric's batch size (default: its own); 1 makes a float32 model's "
                        "scores independent of the batch, so the outputs byte-identical")
    parser.add_argument("--write-results", action="store_true", help="write section 'sharding_<metric>' of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    rows: List[List[Any]] = []
    notes: List[str] = []
    with tempfile.TemporaryDirectory(prefix="d2t-sharding-") as tmp:
        inp = os.path.join(tmp, "in.jsonl")
        n = write_input(inp, args.examples)
        metrics_dir, note = metrics_with_corpus_scores(tmp, args.metric)
        notes.append(note)
        configurations = [(1, None), (1, 1), (args.processes, None)]  # (processes, threads per process)
        for repeat in range(args.repeats):
            runs = []
            for processes, threads in configurations:
                out = os.path.join(tmp, f"out{len(runs)}.jsonl")
                wall, scoring, stdout = score(args.metric, metrics_dir, inp, out, processes, threads, args.batch_size)
                runs.append((processes, threads, wall, scoring, stdout, out))
                print(f"run {repeat + 1}, {processes} process(es), threads {threads or 'default'}: {wall:.1f} s wall, "
                      f"{scoring:.1f} s scoring", file=sys.stderr)
            base_wall, base_scoring, base_stdout, base_out = runs[0][2], runs[0][3], runs[0][4], runs[0][5]
            sharded = runs[-1]
            same_scores = json.loads(base_stdout) == json.loads(sharded[4])
            notes.append(f"run {repeat + 1}: {args.processes}-process output {compare(base_out, sharded[5])}; "
                         f"corpus scores {'identical' if same_scores else 'not identical'}")
            for processes, threads, wall, scoring, _, _ in runs:
                rows.append([repeat + 1, processes, threads or ("torch default" if processes == 1 else "1 (torchrun)"),
                             f"{wall:.1f}", f"{n / wall:.2f}", f"{base_wall / wall:.2f}x",
                             f"{scoring:.1f}", f"{n / scoring:.2f}", f"{base_scoring / scoring:.2f}x"])
    load_after = os.getloadavg()

    table = markdown_table(["run", "processes", "threads/process", "wall s", "outputs/s (wall)", "speed-up (wall)",
                            "scoring s", "outputs/s (scoring)", "speed-up (scoring)"], rows)
    text = "\n".join([
        f"### Sharding `d2t-metrics score`: {args.metric}, {n} WebNLG 2017 outputs, 1 vs {args.processes} CPU processes",
        "",
        f"`python -m benchmarks.sharding --metric {args.metric} --examples {args.examples} --processes {args.processes} "
        f"--repeats {args.repeats}{f' --batch-size {args.batch_size}' if args.batch_size else ''}` on {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores; "
        f"load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in load_before)} before, "
        f"{', '.join(f'{x:.2f}' for x in load_after)} after.",
        "",
        table,
        "",
        *[f"- {note}" for note in notes],
    ])
    print(text)
    if args.write_results:
        print(f"wrote {write_section(f'sharding_{args.metric}', text)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
