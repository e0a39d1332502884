"""The two generative metrics before and after a change of their decoding, side by side.

    python -m benchmarks.generation_speed [--metrics data_questeval,fact_accuracy] [--webnlg N]
        [--no-examples] [--baseline REF] [--rounds R] [--out DIR]

The baseline is a clean export of the repository at ``REF`` (default ``HEAD``: ``git archive``,
read-only), the candidate is the working tree. For each input set (the 20 bundled lines
``examples/examples.jsonl`` and, with ``--webnlg N``, N WebNLG 2017 outputs: the robustness
benchmark's fixed sample) and each metric, the whole command line ``d2t-metrics score --metrics
<metric> --timing`` runs in a fresh child process on each tree, back to back (baseline first,
``R`` rounds alternating), with the same checkpoints (this tree's ``checkpoints/``). A child's
CPU seconds (user + system, its resource usage) include its imports and model loading, as a user
pays them; its wall clock and the machine's load averages (before and after) are given since the
machine may be shared: compare the two trees within one row, not rows of different runs.

The per-example outputs of the two trees must be identical (every field of every output line, as
JSON); the benchmark says how many lines differ. Results are merged into
``DIR/meta_eval/generation_speed.json`` and section ``generation_speed`` of ``DIR/RESULTS.md`` is
rendered from it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

from .results_md import load_records, markdown_table, write_json, write_section

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
SECTION = "generation_speed"
RESULTS_FILE = os.path.join("meta_eval", "generation_speed.json")
EXAMPLES = os.path.join(ROOT, "examples", "examples.jsonl")
METRICS = ("data_questeval", "fact_accuracy")
# the stages of --timing's report worth a column: where the generators run
GENERATION_STAGES = ("table questions", "text questions", "extraction")


def export_tree(ref: str, into: str) -> str:
    """A clean copy of the repository at ``ref`` in ``into`` (``git archive``: git state untouched)."""
    os.makedirs(into, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", ref], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
    return into


def candidate_tree(ref: str, files: Sequence[str], into: str) -> str:
    """The tree at ``ref`` with ``files`` (paths relative to the repository) taken from the working tree."""
    export_tree(ref, into)
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(into, rel)), exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, rel), os.path.join(into, rel))
    return into


def webnlg_lines(n: int) -> List[str]:
    """The robustness benchmark's fixed sample of ``n`` WebNLG 2017 outputs as input lines."""
    from .data import load_webnlg
    from .robustness import sample_rows

    dataset = load_webnlg()
    return [json.dumps({"id": i, "prediction": dataset.items[i].prediction, "references": dataset.items[i].references,
                        "table": dataset.items[i].table}) for i in sample_rows(dataset, n)]


_STAGE_LINE = re.compile(r"^(?P<indent>\s*)(?P<name>\S.*?)\s+(?P<seconds>\d+\.\d+)\s+(?:[\d.]+%|-)\s+(?P<calls>\d+)\s*$")


def parse_stages(report: str) -> Dict[str, float]:
    """Seconds of each stage named in ``--timing``'s report (innermost name; repeated names summed)."""
    out: Dict[str, float] = {}
    for line in report.splitlines():
        m = _STAGE_LINE.match(line)
        if m:
            out[m.group("name")] = out.get(m.group("name"), 0.0) + float(m.group("seconds"))
    return out


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(tree: str, metric: str, input_path: str, output: str, checkpoints: str, timeout: Optional[float] = None) -> Dict:
    """One ``d2t-metrics score`` child on ``tree``'s code: wall, CPU seconds, stages, exit status."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=tree)
    command = [sys.executable, "-m", "d2t_metrics.cli", "score", "--metrics", metric, "--checkpoints-dir", checkpoints,
               "--input", input_path, "--output", output, "--overwrite", "--no-progress", "--timing"]
    load_before, cpu_before, wall_before = os.getloadavg(), _children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree, timeout=timeout)
    wall, cpu = time.perf_counter() - wall_before, _children_cpu() - cpu_before
    return {"wall_seconds": wall, "cpu_seconds": cpu, "returncode": done.returncode, "stages": parse_stages(done.stderr),
            "load_before": load_before[0], "load_after": os.getloadavg()[0],
            "stderr_tail": done.stderr[-1500:] if done.returncode else ""}


def read_outputs(path: str) -> List[Dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def differing_lines(first: Sequence[Dict], second: Sequence[Dict]) -> List[int]:
    """Indices of the output lines that differ in any field (a missing line differs)."""
    n = max(len(first), len(second))
    return [i for i in range(n) if i >= len(first) or i >= len(second) or first[i] != second[i]]


def compare(metric: str, input_name: str, input_path: str, n: int, trees: Dict[str, str], rounds: int, checkpoints: str,
            scratch: str, tag: str = "") -> Dict:
    """Both trees on one input set and metric, ``rounds`` times each, alternating (baseline first)."""
    runs: Dict[str, List[Dict]] = {"baseline": [], "candidate": []}
    outputs: Dict[str, List[Dict]] = {}
    for r in range(rounds):
        for name in ("baseline", "candidate"):
            output = os.path.join(scratch, f"{metric}.{tag}{name}.{r}.jsonl")
            print(f"[generation_speed] {metric} on {input_name}: {name} (round {r + 1})", file=sys.stderr, flush=True)
            run = run_cli(trees[name], metric, input_path, output, checkpoints)
            runs[name].append(run)
            outputs.setdefault(name, read_outputs(output))
            print(f"[generation_speed]   {run['wall_seconds']:.1f} s wall, {run['cpu_seconds']:.1f} CPU-s, exit {run['returncode']}, "
                  f"load {run['load_before']:.1f} → {run['load_after']:.1f}", file=sys.stderr, flush=True)
    differ = differing_lines(outputs["baseline"], outputs["candidate"])
    best = {name: min(rs, key=lambda x: x["cpu_seconds"]) for name, rs in runs.items()}
    return {"metric": metric, "inputs": input_name, "n": n, "rounds": rounds, "runs": runs,
            "cpu_ratio": best["baseline"]["cpu_seconds"] / best["candidate"]["cpu_seconds"],
            "wall_ratio": best["baseline"]["wall_seconds"] / best["candidate"]["wall_seconds"],
            "lines": len(outputs["candidate"]), "differing_lines": differ,
            "ok": all(r["returncode"] == 0 for rs in runs.values() for r in rs) and not differ}


# ---------------------------------------------------------------- stored results and rendering


def load_results(path: str) -> Dict:
    return load_records(path)


def store(path: str, key: str, record: Dict) -> Dict:
    data = load_results(path)
    data["records"][key] = record
    write_json(path, data)
    return data


def _best(rec: Dict, name: str) -> Dict:
    return min(rec["runs"][name], key=lambda x: x["cpu_seconds"])


def render(data: Dict) -> str:
    records = data.get("records", {})
    if not records:
        return "No comparison stored yet. Command: `python -m benchmarks.generation_speed`"
    parts = ["The two generative metrics' whole command line (`d2t-metrics score --metrics <metric> --timing`, a fresh "
             "process each: imports and model loading included) on the baseline's code (a clean `git archive` of the "
             "reference named) and on the working tree, back to back in one run, same checkpoints, same inputs. CPU-s: "
             "user + system of the child (the machine is shared: compare within a row; load averages before → after "
             "each child). Generation stages: seconds of the `--timing` stages where the generators run (table and text "
             "question generation; fact extraction). Outputs: lines whose per-example output differs between the two "
             "trees (every field, as JSON)."]
    rows = []
    for rec in records.values():
        b, c = _best(rec, "baseline"), _best(rec, "candidate")
        stages = lambda run: ", ".join(f"{s} {run['stages'][s]:.1f}" for s in GENERATION_STAGES if s in run["stages"]) or "-"  # noqa: E731
        files = rec.get("candidate_files")
        candidate = "working tree" if not isinstance(files, list) else f"{rec['baseline_ref']} + " + ", ".join(f"`{f}`" for f in files)
        rows.append([f"`{rec['metric']}`", f"{rec['inputs']} ({rec['n']})", f"{rec['baseline_ref']} vs {candidate}",
                     f"{b['cpu_seconds']:.1f} / {b['wall_seconds']:.1f}", f"{c['cpu_seconds']:.1f} / {c['wall_seconds']:.1f}",
                     f"**{rec['cpu_ratio']:.2f}×** / {rec['wall_ratio']:.2f}×",
                     f"{rec['n'] / b['cpu_seconds']:.2f} → {rec['n'] / c['cpu_seconds']:.2f}",
                     f"{stages(b)} → {stages(c)}",
                     f"{b['load_before']:.1f}→{b['load_after']:.1f}; {c['load_before']:.1f}→{c['load_after']:.1f}",
                     ("identical" if not rec["differing_lines"] else f"**{len(rec['differing_lines'])} differ**") + f" ({rec['lines']} lines)",
                     rec["date"]])
    parts.append(markdown_table(["metric", "inputs (n)", "baseline vs candidate", "baseline CPU-s / wall s", "candidate CPU-s / wall s",
                                 "speed-up CPU / wall", "outputs per CPU-s", "generation stages, s (baseline → candidate)",
                                 "load avg (baseline; candidate)", "outputs", "date"], rows))
    hardware = sorted({rec.get("hardware", "") for rec in records.values()} - {""})
    commands = sorted({rec.get("command", "") for rec in records.values()} - {""})
    parts.append("Hardware: " + "; ".join(hardware) + ". Commands: " + "; ".join(f"`{c}`" for c in commands) + ".")
    return "\n\n".join(parts)


def _hardware() -> str:
    from .profile import hardware, hardware_text

    return hardware_text(hardware("cpu"))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.generation_speed", description=__doc__.split("\n\n")[0])
    p.add_argument("--metrics", default=",".join(METRICS), help=f"comma-separated (default {','.join(METRICS)})")
    p.add_argument("--webnlg", type=int, default=0, metavar="N", help="also N WebNLG 2017 outputs (fixed sample, seed 0)")
    p.add_argument("--no-examples", action="store_true", help="skip the 20 bundled lines (only with --webnlg)")
    p.add_argument("--baseline", default="HEAD", metavar="REF", help="git reference of the baseline (default HEAD)")
    p.add_argument("--rounds", type=int, default=1, help="runs of each tree, alternating (default 1; the least CPU kept)")
    p.add_argument("--out", default=BENCH_DIR, help="folder holding RESULTS.md and meta_eval/ (default: benchmarks/)")
    p.add_argument("--candidate-files", default="", metavar="PATHS",
                   help="comma-separated: the candidate is the baseline with only these files taken from the working "
                        "tree (isolates one change from others in progress); default: the whole working tree")
    p.add_argument("--keep", metavar="DIR", help="keep both trees' output lines in DIR (default: discarded)")
    p.add_argument("--render-only", action="store_true")
    args = p.parse_args(argv)
    args.metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    args.candidate_files = [f.strip() for f in args.candidate_files.split(",") if f.strip()]
    missing = [f for f in args.candidate_files if not os.path.isfile(os.path.join(ROOT, f))]
    if missing:
        p.error(f"--candidate-files: not in the working tree: {missing}")
    if args.no_examples and not args.webnlg:
        p.error("--no-examples needs --webnlg N")
    if args.webnlg < 0 or args.rounds < 1:
        p.error("--webnlg must be ≥ 0 and --rounds ≥ 1")
    unknown = sorted(set(args.metrics) - set(METRICS))
    if unknown:
        p.error(f"unknown metrics {unknown}; choose from {list(METRICS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    path = os.path.join(args.out, RESULTS_FILE)
    md_path = os.path.join(args.out, "RESULTS.md")
    if args.render_only:
        write_section(SECTION, render(load_results(path)), md_path)
        return 0
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # a CPU comparison, as on a laptop
    command = "python -m benchmarks.generation_speed " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    from .robustness import git_commit

    status = 0
    with tempfile.TemporaryDirectory(prefix="d2t-generation-speed-") as tmp:
        scratch = os.path.abspath(args.keep) if args.keep else tmp
        os.makedirs(scratch, exist_ok=True)
        trees = {"baseline": export_tree(args.baseline, os.path.join(tmp, "baseline")), "candidate": ROOT}
        if args.candidate_files:
            trees["candidate"] = candidate_tree(args.baseline, args.candidate_files, os.path.join(tmp, "candidate"))
        inputs: List[Tuple[str, str, int]] = [] if args.no_examples else [("examples/examples.jsonl", EXAMPLES, 20)]
        if args.webnlg:
            lines = webnlg_lines(args.webnlg)
            webnlg_path = os.path.join(scratch, "webnlg_inputs.jsonl")
            with open(webnlg_path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
            inputs.append(("WebNLG 2017 sample", webnlg_path, len(lines)))
        if not args.no_examples:
            with open(EXAMPLES, encoding="utf-8") as f:
                inputs[0] = (inputs[0][0], EXAMPLES, sum(1 for line in f if line.strip()))
        for input_name, input_path, n in inputs:
            for metric in args.metrics:
                tag = "examples." if input_path == EXAMPLES else "webnlg."
                rec = compare(metric, input_name, input_path, n, trees, args.rounds, os.path.join(ROOT, "checkpoints"), scratch, tag)
                rec.update(baseline_ref=args.baseline, candidate=git_commit(),
                           candidate_files=args.candidate_files or "the working tree", command=command.strip(), hardware=_hardware(),
                           date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
                store(path, f"{metric}|{input_name}", rec)
                write_section(SECTION, render(load_results(path)), md_path)
                print(f"[generation_speed] {metric} on {input_name}: {rec['cpu_ratio']:.2f}x CPU, {rec['wall_ratio']:.2f}x wall, "
                      f"{len(rec['differing_lines'])} differing lines", file=sys.stderr, flush=True)
                status = status or (0 if rec["ok"] else 1)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
