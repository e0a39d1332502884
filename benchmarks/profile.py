"""Where each model-based metric's time goes: a profile by stage, model loading apart.

    python -m benchmarks.profile [--metrics nli_semantic_accuracy,dae] [--webnlg N]
        [--device cpu|cuda] [--no-cli] [--out DIR]

Each metric is prepared and run as ``d2t-metrics score`` does (:mod:`d2t_metrics.runner`: the
same model choice, the same compute arguments from the input lines), in one process: imports
first (timed apart, once), then per metric its loading (construction and
``download_and_prepare``) and one ``compute`` call per input set: the 20 bundled lines
(``examples/examples.jsonl``) and, with ``--webnlg N``, N WebNLG 2017 rated system outputs (the
robustness benchmark's fixed sample, seed 0). The stages are what the metrics mark with
``d2t_metrics.timing.stage``; the profile reads ``timing.totals()`` after loading and after
each compute, and adds the time spent outside any marked stage. CPU seconds (user + system,
this process) are given next to the wall clock, since the machine may be shared.

Unless ``--no-cli``, it also runs the whole command line as a user does,
``/usr/bin/time -v d2t-metrics score --input examples/examples.jsonl --output ... --overwrite
--no-progress`` (every metric, a fresh process), against issue #35's target of 120 CPU-seconds.

``--device cpu`` hides any GPU (``CUDA_VISIBLE_DEVICES=""``, as a user would; the command line
has no device option); ``--device cuda`` requires one. Results are merged into
``DIR/meta_eval/profile.json`` (one record per metric, input set and device) and section
``profile`` of ``DIR/RESULTS.md`` is rendered from everything stored.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

from .adapters import model_assignments
from .results_md import load_records, markdown_table, write_json, write_section

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
SECTION = "profile"
RESULTS_FILE = os.path.join("meta_eval", "profile.json")
EXAMPLES = os.path.join(ROOT, "examples", "examples.jsonl")
MODEL_BASED = ("nli_semantic_accuracy", "dae", "fact_accuracy", "data_questeval")
CLI_CPU_SECONDS_TARGET = 120.0  # issue #35: all five metrics on the 20 bundled lines
OUTSIDE = "(outside any marked stage)"


# ---------------------------------------------------------------- stages


def stage_rows(totals: Dict[Tuple[str, ...], Tuple[float, int]], wall_seconds: float) -> List[Dict]:
    """Rows for a stage table from ``timing.totals()``: each stage path with its seconds, calls and
    share of ``wall_seconds``, in the order recorded, then the time outside any outermost stage
    (never below zero: stages timed in other threads can add up to more than the wall clock)."""
    rows = [{"stage": list(path), "seconds": seconds, "calls": calls,
             "share": seconds / wall_seconds if wall_seconds > 0 else None}
            for path, (seconds, calls) in totals.items()]
    outer = sum(seconds for path, (seconds, _calls) in totals.items() if len(path) == 1)
    rest = max(0.0, wall_seconds - outer)
    rows.append({"stage": [OUTSIDE], "seconds": rest, "calls": None, "share": rest / wall_seconds if wall_seconds > 0 else None})
    return rows


def ordered_for_display(rows: List[Dict]) -> List[Dict]:
    """Rows with each stage under its parent (parents first, children in the order recorded)."""
    first_seen = {tuple(r["stage"]): i for i, r in enumerate(rows)}

    def key(row):
        path = tuple(row["stage"])
        return [first_seen.get(path[: i + 1], len(rows)) for i in range(len(path))]

    return sorted(rows, key=key)


# ---------------------------------------------------------------- /usr/bin/time -v


TIME_FIELDS = {
    "User time (seconds)": "user_seconds",
    "System time (seconds)": "system_seconds",
    "Elapsed (wall clock) time (h:mm:ss or m:ss)": "wall_seconds",
    "Maximum resident set size (kbytes)": "max_rss_kb",
    "Exit status": "exit_status",
}


def _clock_seconds(text: str) -> float:
    """``1:02:03.5``, ``2:03.5`` or ``3.5`` as seconds."""
    seconds = 0.0
    for part in text.strip().split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def parse_time_verbose(stderr: str) -> Dict[str, float]:
    """The figures of GNU time's ``-v`` report (the last one in ``stderr``)."""
    out: Dict[str, float] = {}
    for line in stderr.splitlines():
        label, sep, value = line.strip().rpartition(": ")
        if not sep or label not in TIME_FIELDS:
            continue
        name = TIME_FIELDS[label]
        out[name] = _clock_seconds(value) if name == "wall_seconds" else float(value)
    if "user_seconds" in out and "system_seconds" in out:
        out["cpu_seconds"] = out["user_seconds"] + out["system_seconds"]
    return out


def cli_command(output: str) -> List[str]:
    exe = shutil.which("d2t-metrics") or os.path.join(os.path.dirname(sys.executable), "d2t-metrics")
    return [exe, "score", "--input", EXAMPLES, "--output", output, "--overwrite", "--no-progress"]


def measure_cli(env: Dict[str, str], timeout: Optional[float] = None) -> Dict:
    """Run the whole command line on the bundled lines under ``/usr/bin/time -v``."""
    with tempfile.TemporaryDirectory(prefix="d2t-profile-") as tmp:
        command = cli_command(os.path.join(tmp, "scores.jsonl"))
        load_before = os.getloadavg()[0]
        done = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
        figures = parse_time_verbose(done.stderr)
    ran = [line.split("running ", 1)[1] for line in done.stderr.splitlines() if line.startswith("d2t-metrics: running ")]
    skipped = [line for line in done.stderr.splitlines() if line.startswith("d2t-metrics: skipped ")]
    return dict(figures, returncode=done.returncode, metrics_run=ran, skipped=skipped,
                command="/usr/bin/time -v d2t-metrics score --input examples/examples.jsonl --output /tmp/x.jsonl --overwrite --no-progress",
                load_average_before=load_before, load_average_after=os.getloadavg()[0], date=_now(),
                stderr_tail=done.stderr[-2000:] if done.returncode else "")


# ---------------------------------------------------------------- profiling a metric


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


class Clock:
    """Wall and CPU seconds of a block, and the stages recorded in it (``timing`` reset at the start)."""

    def __enter__(self):
        from d2t_metrics import timing

        timing.reset()
        self.previous_sync = timing.set_sync(timing.cuda_sync)  # a GPU stage's time is its own (d2t_metrics.timing)
        self.wall0, self.cpu0 = time.perf_counter(), _cpu_seconds()
        return self

    def __exit__(self, *exc):
        from d2t_metrics import timing

        timing.cuda_sync()
        timing.set_sync(self.previous_sync)
        self.wall = time.perf_counter() - self.wall0
        self.cpu = _cpu_seconds() - self.cpu0
        self.stages = stage_rows(timing.totals(), self.wall)
        return False


def profile_metric(prepared, inputs: Sequence[Tuple[str, object]]) -> Dict:
    """Load ``prepared`` (a :class:`d2t_metrics.runner.PreparedMetric`, not loaded yet) and run
    one compute per ``(name, corpus)``; the loading and each compute with their stages."""
    from d2t_metrics.runner import build_compute_kwargs

    with Clock() as load:
        prepared.metric.download_and_prepare()  # where evaluate.load loads models
    record = {"load": {"seconds": load.wall, "cpu_seconds": load.cpu, "stages": load.stages}, "runs": {}}
    for name, corpus in inputs:
        # The inputs this corpus gives, planned as the command line plans them (no options: the defaults).
        kwargs = build_compute_kwargs(prepared.metric, corpus, None, False)
        with Clock() as run:
            result = prepared.metric.compute(**kwargs)
        record["runs"][name] = {"n": len(corpus), "seconds": run.wall, "cpu_seconds": run.cpu, "stages": run.stages,
                                "examples_per_second": len(corpus) / run.wall if run.wall > 0 else None,
                                "returned": len(result.get("examples", [])) if isinstance(result, dict) else None}
    return record


def webnlg_corpus(n: int):
    """The robustness benchmark's fixed sample of ``n`` WebNLG 2017 outputs, as the runner's corpus."""
    from d2t_metrics.runner import parse_corpus

    from .data import load_webnlg
    from .robustness import sample_rows

    dataset = load_webnlg()
    lines = [json.dumps({"id": i, "prediction": dataset.items[i].prediction, "references": dataset.items[i].references,
                         "table": dataset.items[i].table}) for i in sample_rows(dataset, n)]
    return parse_corpus("\n".join(lines), f"webnlg2017 sample of {n}")


def hardware(device: str) -> Dict:
    info = {"machine": platform.machine(), "cpu_count": os.cpu_count(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = re.findall(r"^model name\s*:\s*(.+)$", f.read(), flags=re.M)
        info["cpu"] = names[0].strip() if names else platform.processor()
    except OSError:
        info["cpu"] = platform.processor()
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if device.startswith("cuda") and torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


# ---------------------------------------------------------------- stored results and rendering


def load_results(path: str) -> Dict:
    return load_records(path, groups=("records", "cli"))


def store(path: str, key: str, record: Dict, group: str = "records") -> Dict:
    """Merge one record into the stored results under ``group`` / ``key`` (replacing only that one)."""
    data = load_results(path)
    data[group][key] = record
    write_json(path, data)
    return data


def record_key(metric: str, device: str) -> str:
    return f"{metric}|{device}"


def _stage_table(stages: List[Dict]) -> str:
    rows = []
    for r in ordered_for_display(stages):
        depth = len(r["stage"]) - 1
        share = "-" if r["share"] is None else f"{100 * r['share']:.1f}%"
        rows.append(["&nbsp;&nbsp;" * depth + r["stage"][-1], f"{r['seconds']:.2f}", share, "" if r["calls"] is None else r["calls"]])
    return markdown_table(["stage", "seconds", "share", "calls"], rows)


def render_record(metric: str, rec: Dict) -> str:
    load = rec["load"]
    parts = [f"#### `{metric}` on {rec['device']} ({rec['date']}, commit {rec['commit']}, load average "
             f"{rec['load_average_before']:.1f} → {rec['load_average_after']:.1f})",
             f"Loading: {load['seconds']:.1f} s wall, {load['cpu_seconds']:.1f} CPU-s" + (f"; model: `{rec['model']}`" if rec.get("model") else "")]
    if len(load["stages"]) > 1:
        parts.append(_stage_table(load["stages"]))
    for name, run in rec["runs"].items():
        parts.append(f"Compute on {name} ({run['n']} outputs): {run['seconds']:.1f} s wall, {run['cpu_seconds']:.1f} CPU-s, "
                     f"{run['examples_per_second']:.2f} outputs/s")
        parts.append(_stage_table(run["stages"]))
    return "\n\n".join(parts)


def render(data: Dict) -> str:
    records = data.get("records", {})
    cli = data.get("cli", {})
    if not records and not cli:
        return "No profile stored yet. Command: `python -m benchmarks.profile`"
    parts = ["Each model-based metric's time by stage (the stages its code marks with `d2t_metrics.timing.stage`; "
             "time outside them is listed as such), model loading apart, run as `d2t-metrics score` runs it, one process "
             "per profile run. Shares are of the call's wall time; the machine may be shared (load averages given), so "
             "CPU seconds (user + system, the whole process) are given too."]
    for key, cli_rec in cli.items():
        verdict = "PASS" if cli_rec.get("cpu_seconds", float("inf")) <= CLI_CPU_SECONDS_TARGET and cli_rec.get("returncode") == 0 else "FAIL"
        parts.append(
            f"**Whole command line on the 20 bundled lines** ({key}; {cli_rec['date']}, commit {cli_rec.get('commit', '?')}, "
            f"{cli_rec.get('hardware_text', '')}, load average {cli_rec['load_average_before']:.1f} → {cli_rec['load_average_after']:.1f}): "
            f"`{cli_rec['command']}` → {cli_rec.get('user_seconds', float('nan')):.1f} s user + {cli_rec.get('system_seconds', float('nan')):.1f} s sys "
            f"= **{cli_rec.get('cpu_seconds', float('nan')):.1f} CPU-s** (target ≤ {CLI_CPU_SECONDS_TARGET:.0f}: **{verdict}**), "
            f"{cli_rec.get('wall_seconds', float('nan')):.1f} s wall, {cli_rec.get('max_rss_kb', float('nan')) / 1e6:.2f} GB max RSS, "
            f"exit {cli_rec.get('returncode')}; metrics run: {', '.join(cli_rec.get('metrics_run', [])) or 'none'}"
            + (f"; skipped: {'; '.join(cli_rec['skipped'])}" if cli_rec.get("skipped") else "") + "."
        )
    hardware_lines = sorted({rec.get("hardware_text", "") for rec in records.values()})
    if hardware_lines:
        parts.append("Hardware: " + "; ".join(h for h in hardware_lines if h) + ".")
    commands = sorted({rec.get("command", "") for rec in records.values()} | {rec.get("profile_command", "") for rec in cli.values()} - {""})
    parts.append("Commands: " + "; ".join(f"`{c}`" for c in commands) + ".")
    summary = []
    for key, rec in records.items():
        for name, run in rec["runs"].items():
            summary.append([f"`{rec['metric']}`", rec["device"], f"{rec['load']['seconds']:.1f}", name, str(run["n"]),
                            f"{run['seconds']:.1f}", f"{run['cpu_seconds']:.1f}", f"{run['examples_per_second']:.2f}"])
    if summary:
        parts.append(markdown_table(["metric", "device", "load s", "inputs", "n", "compute s", "compute CPU-s", "outputs/s"], summary))
    for key, rec in records.items():
        parts.append(render_record(rec["metric"], rec))
    return "\n\n".join(parts)


def hardware_text(info: Dict) -> str:
    text = f"{info.get('cpu', '?')}, {info.get('cpu_count', '?')} cores, torch {info.get('torch', '-')} with {info.get('torch_threads', '?')} threads"
    return text + (f", GPU {info['gpu']}" if info.get("gpu") else "")


# ---------------------------------------------------------------- the run


def _csv(value: str) -> List[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__.split("\n\n")[0])
    p.add_argument("--metrics", type=_csv, default=list(MODEL_BASED), help=f"comma-separated (default {','.join(MODEL_BASED)})")
    p.add_argument("--webnlg", type=int, default=0, metavar="N", help="also profile N WebNLG 2017 outputs (fixed sample, seed 0)")
    p.add_argument("--no-examples", action="store_true", help="skip the 20 bundled lines (only with --webnlg)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cpu hides any GPU; cuda requires one")
    p.add_argument("--model", action="append", default=[], metavar="NAME=PATH", help="model for a metric (default: its checkpoint)")
    p.add_argument("--no-cli", action="store_true", help="do not measure the whole command line")
    p.add_argument("--cli-only", action="store_true", help="only measure the whole command line")
    p.add_argument("--out", default=BENCH_DIR, help="folder holding RESULTS.md and meta_eval/profile.json (default: benchmarks/)")
    p.add_argument("--render-only", action="store_true")
    args = p.parse_args(argv)
    if args.no_examples and not args.webnlg:
        p.error("--no-examples needs --webnlg N")
    if args.webnlg < 0:
        p.error("--webnlg must be ≥ 0")
    args.models = model_assignments(args.model, p.error)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    path = os.path.join(args.out, RESULTS_FILE)
    md_path = os.path.join(args.out, "RESULTS.md")
    if args.render_only:
        write_section(SECTION, render(load_results(path)), md_path)
        return 0
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch is imported: the metrics choose cuda when they see one
    command = "python -m benchmarks.profile " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    from .robustness import git_commit

    commit = git_commit()
    status = 0
    if not args.cli_only:
        t0 = time.perf_counter()
        import evaluate  # noqa: F401  (the slow first imports, paid once, kept out of every metric's figures)
        import torch
        import transformers  # noqa: F401

        import_seconds = time.perf_counter() - t0
        if args.device == "cuda" and not torch.cuda.is_available():
            print("--device cuda: no GPU here", file=sys.stderr)
            return 2
        from d2t_metrics.runner import find_checkpoints_dir, find_metrics_dir, prepare_metric, read_corpus

        info = hardware(args.device)
        inputs = [] if args.no_examples else [("examples/examples.jsonl", read_corpus(EXAMPLES))]
        if args.webnlg:
            inputs.append((f"WebNLG 2017 sample ({args.webnlg})", webnlg_corpus(args.webnlg)))
        metrics_dir = find_metrics_dir()
        checkpoints = find_checkpoints_dir(None, metrics_dir)
        for name in args.metrics:
            print(f"[profile] {name}", file=sys.stderr, flush=True)
            try:
                prepared = prepare_metric(name, os.path.join(metrics_dir, name), None, args.models.get(name), checkpoints,
                                          inputs[0][1], None, False)
            except Exception as e:  # noqa: BLE001 - a Skip (what the machine lacks) or a metric that does not load
                print(f"[profile] {name} skipped: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                status = 1
                continue
            load_before = os.getloadavg()[0]
            try:
                rec = profile_metric(prepared, inputs)
            except Exception as e:  # noqa: BLE001 - one broken metric must not stop the others
                print(f"[profile] {name} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                status = 1
                continue
            model = prepared.model
            if isinstance(model, str) and model.startswith(ROOT + os.sep):
                model = os.path.relpath(model, ROOT)
            rec.update(metric=name, device=args.device, model=model, commit=commit, command=command.strip(), date=_now(),
                       import_seconds=import_seconds, hardware=info, hardware_text=hardware_text(info),
                       load_average_before=load_before, load_average_after=os.getloadavg()[0])
            store(path, record_key(name, args.device), rec)
            write_section(SECTION, render(load_results(path)), md_path)
            for run_name, run in rec["runs"].items():
                print(f"[profile] {name}: load {rec['load']['seconds']:.1f} s; {run_name}: {run['seconds']:.1f} s wall, "
                      f"{run['cpu_seconds']:.1f} CPU-s", file=sys.stderr, flush=True)
    if not args.no_cli:
        print("[profile] the whole command line on examples/examples.jsonl", file=sys.stderr, flush=True)
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        cli_rec = measure_cli(env)
        info = hardware(args.device)
        cli_rec.update(commit=commit, hardware=info, hardware_text=hardware_text(info), profile_command=command.strip())
        store(path, args.device, cli_rec, group="cli")
        write_section(SECTION, render(load_results(path)), md_path)
        print(f"[profile] CLI: {cli_rec.get('cpu_seconds', float('nan')):.1f} CPU-s, {cli_rec.get('wall_seconds', float('nan')):.1f} s wall, "
              f"exit {cli_rec['returncode']}", file=sys.stderr, flush=True)
        if cli_rec["returncode"] != 0:
            print(cli_rec["stderr_tail"], file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
