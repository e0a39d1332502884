"""fact_accuracy against the E2E slot-error script's labels (issue #13's second check).

    python -m benchmarks.fact_accuracy_e2e --configs openie            # all 13,230 outputs
    python -m benchmarks.fact_accuracy_e2e --configs relations,default --sample 630

Data: ``shared/data/e2e/primary_slot_errors.tsv``, the 21 primary E2E systems'
outputs labelled by the E2E slot-error script (``added``, ``missing`` and
``valerr`` slot counts per output). The metric's explanation is compared with
the script's, one kind of error at a time:

* contradicted generated facts   <->  wrong-value slots (``valerr``)
* unverifiable generated facts   <->  added slots (``added``)
* table facts not found          <->  missing slots (``missing``)

For each pair: how often the metric flags an output (count > 0), precision,
recall and F1 of that flag against the script's (count > 0), and ROC AUC of
the metric's count. Also the 2-way agreement of "no error of any kind" with the
script's OK. The E2E MR is the table: its records become (name, attribute,
value) facts. Each extractor's measures are stored in
``benchmarks/meta_eval/fact_accuracy_e2e.json`` (rerunning one keeps the
others'), and the ``fact_accuracy_e2e`` section of RESULTS.md is rendered from
all of them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import sys
import time
from typing import Dict, List, Sequence

import evaluate

from benchmarks.results_md import markdown_table, write_section
from benchmarks.run import _git_commit
from benchmarks.stats import auc_not_ok, binary_agreement
from d2t_metrics.datasets import iter_tsv, shared_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIG_NAMES = {"default": "end-to-end generator", "relations": "relation classifier", "openie": "OpenIE baseline"}
# (metric's per-example field, script's column, what the pair means)
PAIRS = (
    ("contradicted", "valerr", "contradicted facts vs wrong-value slots"),
    ("unverifiable", "added", "unverifiable facts vs added slots"),
    ("missing", "missing", "table facts not found vs missing slots"),
)


def load_rows(shared: str) -> List[Dict[str, str]]:
    return list(iter_tsv(os.path.join(shared, "data", "e2e", "primary_slot_errors.tsv")))


def sample_rows(rows: List[Dict[str, str]], n: int, seed: int) -> List[Dict[str, str]]:
    """``n`` outputs drawn at random (all of them when ``n`` is 0 or too large), in file order."""
    if not n or n >= len(rows):
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), n))
    return [rows[i] for i in keep]


def flag_agreement(flags: Sequence[bool], gold: Sequence[bool]) -> Dict[str, float]:
    """Precision, recall and F1 of the metric's flag against the script's, and how often each flags:
    :func:`benchmarks.stats.binary_agreement` with "flagged" as its not-OK class."""
    r = binary_agreement([not f for f in flags], [not g for g in gold])
    return {"flagged": int(sum(flags)), "gold": r["gold_not_ok"], "precision": r["precision_not_ok"],
            "recall": r["recall_not_ok"], "f1": r["f1_not_ok"]}


def compare(examples: List[Dict], rows: List[Dict[str, str]]) -> Dict[str, Dict]:
    out = {}
    for field, column, _ in PAIRS:
        counts = [len(ex[field]) for ex in examples]
        gold = [int(r[column]) > 0 for r in rows]
        result = flag_agreement([c > 0 for c in counts], gold)
        # auc_not_ok wants higher = OK: a count is higher for worse outputs.
        result["auc"] = auc_not_ok([-c for c in counts], [not g for g in gold])
        out[field] = result
    clean = [not (ex["contradicted"] or ex["unverifiable"] or ex["missing"]) for ex in examples]
    out["ok"] = binary_agreement(clean, [r["slot_error_ok"] == "1" for r in rows])
    return out


def run_config(config: str, rows: List[Dict[str, str]], model, device, batch_size: int, progress: bool) -> Dict:
    kwargs = {}
    if config != "openie":  # the model-free config takes neither; unset ones keep the metric's defaults
        kwargs = {k: v for k, v in (("model", model), ("device", device)) if v}
    metric = evaluate.load(os.path.join(ROOT, "metrics", "fact_accuracy"), config, **kwargs)
    t0 = time.perf_counter()
    result = metric.compute(predictions=[r["output"] for r in rows], tables=[r["mr"] for r in rows],
                            per_example=True, batch_size=batch_size, show_progress=progress)
    seconds = time.perf_counter() - t0
    return {"signature": metric.signature(), "seconds": seconds, "n": len(rows),
            "measures": compare(result["examples"], rows)}


STORE = os.path.join(ROOT, "benchmarks", "meta_eval", "fact_accuracy_e2e.json")


def load_store(path: str = STORE) -> Dict[str, Dict]:
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("configs", {})


def save_store(results: Dict[str, Dict], path: str = STORE) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ordered = {c: results[c] for c in CONFIG_NAMES if c in results}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"benchmark": "fact_accuracy_e2e", "configs": ordered}, f, indent=1)
        f.write("\n")


def _pct(x: float) -> str:
    return "—" if x != x else f"{100 * x:.1f}"


def render(results: Dict[str, Dict]) -> str:
    rows = []
    for config, r in results.items():
        for field, column, meaning in PAIRS:
            m = r["measures"][field]
            rows.append([f"`{config}` ({CONFIG_NAMES[config]})", r["n"], meaning, f"{m['flagged']} / {m['gold']}",
                         _pct(m["precision"]), _pct(m["recall"]), _pct(m["f1"]), f"{m['auc']:.3f}"])
        ok = r["measures"]["ok"]
        rows.append([f"`{config}` ({CONFIG_NAMES[config]})", r["n"], "no error of any kind vs the script's OK",
                     f"{ok['gold_not_ok']} not OK", _pct(ok["precision_not_ok"]), _pct(ok["recall_not_ok"]),
                     _pct(ok["f1_not_ok"]), f"accuracy {_pct(ok['accuracy'])} (majority {_pct(ok['majority_accuracy'])})"])
    table = markdown_table(["Extractor", "Outputs", "Metric's explanation vs script", "flagged / script",
                            "P %", "R %", "F1 %", "ROC AUC of the count"], rows)
    signatures = "\n".join(
        f"- `{c}`: {_drawn(r)}; `{r['signature']}`; {r['n'] / max(r['seconds'], 1e-9):.1f} outputs/s (CPU); "
        f"`{r['command']}` ({r['date']}, commit {r['commit']})" for c, r in results.items())
    return (
        "## fact_accuracy on E2E: explanations against the slot-error script\n\n"
        "The metric's per-example explanation against the E2E slot-error script's labels on the 13,230 "
        "primary system outputs, or a random sample of them (`shared/data/e2e/primary_slot_errors.tsv`; the MR is the table). A flag is a "
        "count above 0; P/R/F1 are those of the metric's flag against the script's; the last row's P/R/F1 are of the "
        "not-OK class. The extractors were trained on WebNLG only, whose schema has no E2E attribute: the OpenIE "
        "baseline maps its relations onto the MR's attributes, the trained extractors mostly cannot.\n\n"
        f"{table}\n\nProduced by:\n{signatures}"
    )


def _drawn(r: Dict) -> str:
    return f"{r['n']} outputs drawn at random (seed {r['seed']})" if r.get("sample") else f"all {r['n']} outputs"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fact_accuracy_e2e", description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="openie", help="comma-separated, from " + ",".join(CONFIG_NAMES))
    ap.add_argument("--sample", type=int, default=0, help="outputs drawn at random (0: all 13,230)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=None, help="checkpoint folder (default: checkpoints/fact_accuracy)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    for c in configs:
        if c not in CONFIG_NAMES:
            ap.error(f"unknown config {c!r}; choose from {', '.join(CONFIG_NAMES)}")

    shared = shared_dir()
    if shared is None or not os.path.isfile(os.path.join(shared, "data", "e2e", "primary_slot_errors.tsv")):
        print("SKIP: shared/data/e2e/primary_slot_errors.tsv not found (set D2T_SHARED)")
        return 0
    rows = sample_rows(load_rows(shared), args.sample, args.seed)
    command = "python -m benchmarks.fact_accuracy_e2e" + "".join(" " + a for a in (sys.argv[1:] if argv is None else argv))
    meta = {"sample": args.sample, "seed": args.seed, "command": command,
            "date": datetime.date.today().isoformat(), "commit": _git_commit()}
    results = load_store()
    for config in configs:
        print(f"[fact_accuracy/{config}] {len(rows)} E2E outputs ...", flush=True)
        results[config] = {**run_config(config, rows, args.model, args.device, args.batch_size, args.progress), **meta}
        for field, _, meaning in PAIRS:
            m = results[config]["measures"][field]
            print(f"  {meaning}: P {_pct(m['precision'])} R {_pct(m['recall'])} F1 {_pct(m['f1'])} AUC {m['auc']:.3f}", flush=True)
    results = {c: results[c] for c in CONFIG_NAMES if c in results}
    markdown = render(results)
    print("\n" + markdown)
    if not args.no_write:
        save_store(results)
        write_section("fact_accuracy_e2e", markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
