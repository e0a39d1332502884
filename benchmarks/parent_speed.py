"""Speed and parity of metrics/parent against the reference PARENT implementation.

Times our PARENT on the two golden sets (pre-tokenized inputs, one
whole-corpus call, lambda_weight=None) in one process and with n_jobs=2, and,
when the reference code is at hand, the reference ``parent()`` of
google-research/language ``table_text_eval.py`` side by side in the same run.
Also checks every per-example precision, recall and F against the golden
values and against the reference's own per-example F-scores.

The reference is read from a git checkout or bare mirror of
google-research/language (``$PARENT_REFERENCE_REPO``, default
``/work/.mirror/google-research+language/repo``), written to a temporary
directory and imported with its absl/six/tensorflow imports stubbed; it is never
copied into this repository. Without it, the timings quoted in
``shared/golden/README.md`` (measured on the project's 2-core machine type)
stand in, and the table says so.

    python -m benchmarks.parent_speed               # full run (reference takes ~1.5 min)
    python -m benchmarks.parent_speed --no-reference
"""

from __future__ import annotations

import argparse
import gc
import gzip
import importlib.util
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import types

import evaluate

from benchmarks.results_md import markdown_table, write_section
from d2t_metrics.datasets import shared_dir
from metrics.parent import scoring

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REFERENCE_PATH = "language/table_text_eval/table_text_eval.py"
DEFAULT_MIRROR = "/work/.mirror/google-research+language/repo"
# Quoted in shared/golden/README.md: reference, one process, project machine type.
README_SECONDS = {"webnlg2017": 5.2, "e2e": 86.6}
GOLDEN_FILES = {"webnlg2017": "parent_webnlg2017.jsonl", "e2e": "parent_e2e.jsonl.gz"}


def load_golden(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _stub_modules():
    """Dummy absl/six/tensorflow modules, enough for table_text_eval.py to import."""
    absl = types.ModuleType("absl")
    app = types.ModuleType("absl.app")
    flags = types.ModuleType("absl.flags")
    flags.FLAGS = types.SimpleNamespace()
    for name in ("DEFINE_string", "DEFINE_float", "DEFINE_integer", "DEFINE_bool", "mark_flags_as_required"):
        setattr(flags, name, lambda *args, **kwargs: None)
    app.run = lambda main: None
    absl.app, absl.flags = app, flags
    six = types.ModuleType("six")
    moves = types.ModuleType("six.moves")
    moves.range, moves.zip = range, zip
    six.moves = moves
    tf = types.ModuleType("tensorflow")
    compat = types.ModuleType("tensorflow.compat")
    v1 = types.ModuleType("tensorflow.compat.v1")
    tf.compat, compat.v1 = compat, v1
    return {
        "absl": absl, "absl.app": app, "absl.flags": flags, "six": six, "six.moves": moves,
        "tensorflow": tf, "tensorflow.compat": compat, "tensorflow.compat.v1": v1,
    }


def load_reference(repo):
    """Import the reference table_text_eval module from a checkout or bare git repo, or return None."""
    if not repo or not os.path.exists(repo):
        return None
    source = None
    work_tree_file = os.path.join(repo, REFERENCE_PATH)
    if os.path.isfile(work_tree_file):
        with open(work_tree_file, encoding="utf-8") as f:
            source = f.read()
    else:
        try:
            source = subprocess.run(
                ["git", "-C", repo, "show", f"HEAD:{REFERENCE_PATH}"], check=True, capture_output=True, text=True
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
    tmp = tempfile.mkdtemp(prefix="parent_reference_")
    path = os.path.join(tmp, "table_text_eval.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    saved = {name: sys.modules.get(name) for name in _stub_modules()}
    sys.modules.update(_stub_modules())
    try:
        spec = importlib.util.spec_from_file_location("parent_reference_table_text_eval", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, mod in saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
        os.remove(path)
        os.rmdir(tmp)
    return module


def _worker_cpu(indices):
    start = time.process_time()
    scoring._score_chunk(indices)
    return time.process_time() - start


def projected_scaling(P, R, T, n_jobs=2):
    """Speed-up n_jobs workers would give on idle cores, from CPU times (insensitive to other load).

    Splits the examples as ``n_jobs`` does and runs the chunks in forked
    workers (each prepares and scores its share), timing each worker's CPU;
    the whole set is timed the same way in this process. Projected speed-up =
    serial CPU / (CPU of the split + slowest worker's CPU).
    """
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    options = dict(lambda_weight=None, smoothing=scoring.DEFAULT_SMOOTHING, max_order=scoring.DEFAULT_MAX_ORDER,
                   entailment=scoring.OVERLAP, counts=None, keep_tokens=False)
    was_enabled = gc.isenabled()
    scoring._SHARED = (P, R, T, options)
    try:
        serial_cpu = _worker_cpu(list(range(len(P))))
        start = time.process_time()
        chunks = scoring._balanced_chunks(R, n_jobs)
        split_cpu = time.process_time() - start
        gc.freeze()
        try:
            with multiprocessing.get_context("fork").Pool(n_jobs) as pool:
                worker_cpu = pool.map(_worker_cpu, chunks, chunksize=1)
        finally:
            gc.unfreeze()
    finally:
        scoring._SHARED = None
        if was_enabled:
            gc.enable()
    return serial_cpu / (split_cpu + max(worker_cpu))


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-reference", action="store_true", help="do not run the reference implementation")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of our metric (best is reported)")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    shared = shared_dir()
    if shared is None:
        sys.exit("../shared is absent (set D2T_SHARED); the golden files are needed")
    reference = None if args.no_reference else load_reference(os.environ.get("PARENT_REFERENCE_REPO", DEFAULT_MIRROR))

    metric = evaluate.load(os.path.join(ROOT, "metrics", "parent"))
    rows, e2e_rows, notes = [], [], []
    for name, filename in GOLDEN_FILES.items():
        golden = load_golden(os.path.join(shared, "golden", filename))
        P = [g["prediction_tokens"] for g in golden]
        R = [g["reference_tokens"] for g in golden]
        T = [g["table_tokens"] for g in golden]
        n = len(golden)

        ours, best_wall, best_cpu = None, float("inf"), float("inf")
        for _ in range(max(1, args.repeats)):
            ours, wall, cpu = timed(lambda: scoring.parent_tokenized(P, R, T, lambda_weight=None))
            best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        par, par_wall, _ = timed(lambda: scoring.parent_tokenized(P, R, T, lambda_weight=None, n_jobs=2))
        same_parallel = all(a == b for a, b in zip(ours, par))
        projected = projected_scaling(P, R, T)

        diff_golden = max(abs(o[m] - g["lambda_none"][m]) for o, g in zip(ours, golden) for m in ("precision", "recall", "f1"))

        if reference is not None:
            ref_out, ref_wall, ref_cpu = timed(lambda: reference.parent(P, R, T, lambda_weight=None))
            ref_f = ref_out[3]
            diff_ref = max(abs(o["f1"] - f) for o, f in zip(ours, ref_f))
            ref_means = ref_out[:3]
            our_means = scoring.corpus_scores(ours)
            diff_ref = max([diff_ref] + [abs(a - our_means[k]) for a, k in zip(ref_means, ("precision", "recall", "f1"))])
            ref_label, ref_seconds = "reference, same run", ref_wall
            ratio_cpu = f"{ref_cpu / best_cpu:.1f}x"
        else:
            diff_ref, ref_label, ref_seconds, ratio_cpu = None, "golden README (not this run)", README_SECONDS[name], "n/a"

        # End to end: raw strings through evaluate, tokenized with NLTK as the golden values were.
        raw, raw_wall, _ = timed(lambda: metric.compute(
            predictions=[g["prediction"] for g in golden], references=[g["references"] for g in golden],
            tables=[g["mr"] for g in golden], tokenizer="nltk", per_example=True, show_progress=False))
        diff_raw = max(abs(o[m] - g["lambda_none"][m]) for o, g in zip(raw["examples"], golden) for m in ("precision", "recall", "f1"))
        e2e_rows.append([name, n, f"{raw_wall:.2f}", f"{n / raw_wall:,.0f}", f"{ref_seconds / raw_wall:.1f}x", f"{diff_raw:.1e}"])

        rows.append([
            name, n, ref_label, f"{ref_seconds:.2f}", f"{best_wall:.2f}", f"{n / best_wall:,.0f}",
            f"{ref_seconds / best_wall:.1f}x", ratio_cpu, f"{par_wall:.2f}", f"{best_wall / par_wall:.2f}x", "n/a" if projected is None else f"{projected:.2f}x",
            "yes" if same_parallel else "NO", f"{diff_golden:.1e}", "n/a" if diff_ref is None else f"{diff_ref:.1e}",
        ])
        print(f"{name}: ours {best_wall:.2f} s (cpu {best_cpu:.2f} s), n_jobs=2 {par_wall:.2f} s, reference {ref_seconds:.2f} s "
              f"({ref_label}); max |diff| vs golden {diff_golden:.1e}" + ("" if diff_ref is None else f", vs reference {diff_ref:.1e}"),
              flush=True)

    headers = [
        "data", "examples", "reference timing", "reference s", "ours s (1 proc)", "ours ex/s",
        "speed-up (wall)", "speed-up (cpu)", "ours s (n_jobs=2)", "n_jobs=2 scaling (wall)", "n_jobs=2 scaling on idle cores (from CPU times)", "n_jobs=2 identical",
        "max abs diff vs golden", "max abs diff vs reference",
    ]
    table = markdown_table(headers, rows)
    e2e_table = markdown_table(
        ["data", "examples", "seconds", "ex/s", "speed-up vs reference (wall)", "max abs diff vs golden"], e2e_rows
    )
    print()
    print(table)
    print()
    print(e2e_table)
    if reference is None:
        notes.append("The reference code was not available, so its timings are those quoted in `shared/golden/README.md` for the project's 2-core machine type, not measured in this run.")
    else:
        notes.append("Reference and ours ran one after the other in the same process on the same inputs; 'ours' is the best of "
                     f"{max(1, args.repeats)} runs, the reference ran once. CPU speed-up compares process CPU time, which is less "
                     "sensitive to other load on the machine than wall time.")
    if load_before is not None:
        load_after = os.getloadavg()[0]
        notes.append(f"Machine: {os.cpu_count()} cores, 1-minute load average {load_before:.1f} at the start and "
                     f"{load_after:.1f} at the end (other jobs share the cores; with load above the core count, "
                     "wall times stretch and n_jobs=2 cannot scale).")
    notes.append("n_jobs=2 scaling on idle cores is projected from CPU times: serial CPU / (CPU of splitting the examples "
                 "+ CPU of the slowest of the 2 forked workers), each worker preparing and scoring its share as n_jobs=2 does. "
                 "Measured wall-clock scaling needs two idle cores.")
    notes.append("Inputs are the golden files' tokens (`prediction_tokens`, `reference_tokens`, `table_tokens`), "
                 "lambda_weight=None, word-overlap entailment, one whole-corpus call. "
                 "'max abs diff vs golden' is over per-example precision, recall and F; 'vs reference' over per-example F and the corpus means.")
    markdown = (
        "## PARENT speed and parity (`metrics/parent`)\n\n"
        "Command: `python -m benchmarks.parent_speed" + (" --no-reference" if args.no_reference else "") + "`\n\n"
        + table + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n\n"
        "End to end through `evaluate.load(\"metrics/parent\")` from the raw strings (predictions, references, "
        "E2E MRs / WebNLG `mr`), `tokenizer=\"nltk\"`, which includes tokenization and evaluate's Arrow round trip "
        "(the reference timing above excludes tokenization):\n\n" + e2e_table + "\n"
    )
    if not args.no_write:
        print("wrote", write_section("parent_speed", markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
