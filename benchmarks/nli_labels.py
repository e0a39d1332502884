"""nli_semantic_accuracy's labels per fact against the E2E slot-error script: paper vs calibrated decision (issue #34).

    python -m benchmarks.nli_labels                  # 600 E2E outputs drawn at random, seed 0
    python -m benchmarks.nli_labels --sample 0        # all 13,230

Data: ``shared/data/e2e/primary_slot_errors.tsv`` (the 21 primary E2E systems'
outputs, labelled by the E2E slot-error script; its ``diff`` column gives, per
slot, the values the text has too many (> 0) or too few (< 0) of). The metric
runs once per decision on the same outputs (project checkpoint, config
``default``, ``e2e_ignore_restaurant=False``), the NLI forward passes shared
between the two runs (:class:`SharedPasses`: the decision reads only the
probabilities), and the two runs' scores are compared.

* **Omission, per fact.** One fact per MR slot but ``name`` (the subject of every
  fact, as in the metric). Script: the slot's MR value counts < 0 in ``diff``:
  *missing* (no other value of that slot in the text) or *wrong value* (another
  value instead: a valerr, which the script's 4-way label counts as omission
  and hallucination). Metric: the fact's omission check failed (``entailed``
  false). Precision / recall / F1 of "omitted", with the recall on each kind.
* **Hallucination, per output.** The metric's hallucination check reads the
  whole text against all facts (one check per output), so it cannot be
  scored per fact. Script: ``added`` > 0 or ``valerr`` > 0. Metric: the
  output's ``hallucination``.
* **OK, per output**, against the script's ``slot_error_ok``.

Results go to ``meta_eval/nli_labels.json``; ``python -m benchmarks.generalization``
renders them in its NLI-labels part of RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import sys
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from benchmarks.stats import binary_agreement

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(BENCH_DIR, "meta_eval", "nli_labels.json")
DECISIONS = ("paper", "calibrated")
# The MR attribute of a fact (spaces, underscores and case ignored) -> the slot-error script's slot name.
SLOT_KEYS = {"eattype": "eat_type", "food": "food", "pricerange": "price_range", "customerrating": "rating",
             "area": "area", "familyfriendly": "family_friendly", "near": "near"}
MISSING, WRONG_VALUE, STATED = "missing", "wrong value", "stated"


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def slot_key(attribute: str) -> str:
    key = attribute.replace(" ", "").replace("_", "").lower()
    if key not in SLOT_KEYS:
        raise ValueError(f"unknown E2E attribute {attribute!r}")
    return SLOT_KEYS[key]


def read_diff(value: str) -> Dict[str, Dict[str, int]]:
    """The ``diff`` column: JSON, in the file possibly CSV-quoted (``"{""a"": ...}"``)."""
    value = value.strip()
    if value.startswith('"') and value.endswith('"'):
        value = value[1:-1].replace('""', '"')
    return json.loads(value) if value else {}


def fact_status(attribute: str, value: str, diff: Dict[str, Dict[str, int]]) -> str:
    """What the script says of one MR fact: ``stated``, ``missing`` or ``wrong value``."""
    counts = {_norm(v): c for v, c in diff.get(slot_key(attribute), {}).items()}
    if counts.get(_norm(value), 0) >= 0:
        return STATED
    return WRONG_VALUE if any(c > 0 for v, c in counts.items() if v != _norm(value)) else MISSING


def split_fact(fact: str):
    """``"subject | attribute | value"`` -> (attribute, value)."""
    parts = [p.strip() for p in fact.split(" | ")]
    if len(parts) != 3:
        raise ValueError(f"not a triple: {fact!r}")
    return parts[1], parts[2]


def per_fact_rows(examples: Sequence[Dict], rows: Sequence[Dict[str, str]]) -> List[Dict]:
    """One row per omission check: the script's status of its fact and whether the metric flagged it."""
    out = []
    for i, (ex, row) in enumerate(zip(examples, rows)):
        diff = read_diff(row["diff"])
        for check in ex["checks"]:
            if check["type"] != "omission":
                continue
            attribute, value = split_fact(check["fact"])
            out.append({"output": i, "status": fact_status(attribute, value, diff), "flagged": not check["entailed"]})
    return out


def flag_measures(flags: Sequence[bool], gold: Sequence[bool]) -> Dict:
    """Precision / recall / F1 of a flag against the script's (``binary_agreement`` with "flagged" as not OK)."""
    r = binary_agreement([not f for f in flags], [not g for g in gold])
    return {"n": len(gold), "flagged": int(np.sum(flags)), "gold": int(np.sum(gold)), "precision": r["precision_not_ok"],
            "recall": r["recall_not_ok"], "f1": r["f1_not_ok"], "accuracy": r["accuracy"]}


def compare(examples: Sequence[Dict], rows: Sequence[Dict[str, str]]) -> Dict:
    facts = per_fact_rows(examples, rows)
    flagged = [f["flagged"] for f in facts]
    omission = flag_measures(flagged, [f["status"] != STATED for f in facts])
    for kind in (MISSING, WRONG_VALUE):
        kind_flags = [f["flagged"] for f in facts if f["status"] == kind]
        omission[f"recall_{kind.replace(' ', '_')}"] = float(np.mean(kind_flags)) if kind_flags else float("nan")
        omission[f"n_{kind.replace(' ', '_')}"] = len(kind_flags)
    hallucination = flag_measures([bool(ex["hallucination"]) for ex in examples],
                                  [int(r["added"]) > 0 or int(r["valerr"]) > 0 for r in rows])
    ok = binary_agreement([bool(ex["ok"]) for ex in examples], [r["slot_error_ok"] == "1" for r in rows])
    ok["metric_ok_share"] = float(np.mean([bool(ex["ok"]) for ex in examples]))
    ok["script_ok_share"] = float(np.mean([r["slot_error_ok"] == "1" for r in rows]))
    return {"omission_per_fact": omission, "hallucination_per_output": hallucination, "ok_per_output": ok}


def load_rows(shared: str, sample: int, seed: int) -> List[Dict[str, str]]:
    from benchmarks.data import _strip_single_quotes
    from benchmarks.fact_accuracy_e2e import load_rows as read_all
    from benchmarks.fact_accuracy_e2e import sample_rows

    rows = sample_rows(read_all(shared), sample, seed)
    # as benchmarks.data.load_e2e reads them: tnt1/tnt2 rows keep quotes, some outputs trailing spaces
    return [{**r, "mr": _strip_single_quotes(r["mr"]), "output": _strip_single_quotes(r["output"]).strip()} for r in rows]


class SharedPasses:
    """The metric's NLI scorer, its forward passes shared between calls on the same pairs: the
    decisions only read the probabilities, so the second run's labels come from the metric's own
    code on the very same numbers (and the machine does the model's work once)."""

    def __init__(self, scorer):
        self.scorer = scorer
        self.memo = {}
        self.forward_calls = 0

    def __call__(self, premises, hypotheses, **kwargs):
        key = (tuple(premises), tuple(hypotheses))
        if key not in self.memo:
            self.forward_calls += 1
            self.memo[key] = self.scorer(premises, hypotheses, **kwargs)
        return self.memo[key]

    def __getattr__(self, name):  # as_dict, is_entailed, cap_texts, ...
        return getattr(self.scorer, name)


def run(rows: Sequence[Dict[str, str]], model: str, batch_size: int) -> Dict:
    import d2t_metrics

    metric = d2t_metrics.load("nli_semantic_accuracy", "default", model=model)
    metric.scorer = shared = SharedPasses(metric.load_model())
    predictions, tables = [r["output"] for r in rows], [r["mr"] for r in rows]
    out, examples = {}, {}
    for decision in DECISIONS:
        t0 = time.perf_counter()
        result = metric.compute(predictions=predictions, tables=tables, per_example=True, batch_size=batch_size,
                                show_progress=False, decision=decision)
        examples[decision] = result["examples"]
        out[decision] = {"signature": metric.signature(decision=decision), "seconds": time.perf_counter() - t0,
                         **compare(result["examples"], rows)}
        print(f"[nli_labels] {decision}: {out[decision]['signature']}", flush=True)
    diffs = [abs(a["score"] - b["score"]) for a, b in zip(*(examples[d] for d in DECISIONS))]
    return {"decisions": out, "max_score_difference": float(max(diffs)) if diffs else 0.0,
            "forward_runs": shared.forward_calls}


def main(argv: Optional[List[str]] = None) -> int:
    from benchmarks.run import _git_commit
    from d2t_metrics import checkpoint_path
    from d2t_metrics.datasets import shared_dir

    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m benchmarks.nli_labels", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=600, help="E2E outputs drawn at random (0: all 13,230)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=None, help="checkpoint folder (default: checkpoints/nli_semantic_accuracy)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--output", default=OUTPUT)
    args = ap.parse_args(argv)
    shared = shared_dir()
    if shared is None or not os.path.isfile(os.path.join(shared, "data", "e2e", "primary_slot_errors.tsv")):
        print("SKIP: shared/data/e2e/primary_slot_errors.tsv not found (set D2T_SHARED)")
        return 0
    rows = load_rows(shared, args.sample, args.seed)
    load = os.getloadavg()[0]
    result = run(rows, args.model or checkpoint_path("nli_semantic_accuracy"), args.batch_size)
    result.update({"benchmark": "nli_labels", "n": len(rows), "sample": args.sample, "seed": args.seed,
                   "load_average": load,
                   "command": "python -m benchmarks.nli_labels" + "".join(" " + shlex.quote(a) for a in argv),
                   "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "commit": _git_commit()})
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, default=float)
        f.write("\n")
    for d, r in result["decisions"].items():
        o, h = r["omission_per_fact"], r["hallucination_per_output"]
        print(f"[nli_labels] {d}: omission per fact P {o['precision']:.3f} R {o['recall']:.3f}; "
              f"hallucination per output P {h['precision']:.3f} R {h['recall']:.3f}; OK share {r['ok_per_output']['metric_ok_share']:.3f}")
    print(f"max score difference between the decisions: {result['max_score_difference']:.2e}; wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
