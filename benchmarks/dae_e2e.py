"""DAE against the E2E slot-error script: does a low score find outputs that add a slot or get a value wrong?

    python -m benchmarks.dae_e2e --sample 630 [--nli] [--out /tmp/dae_e2e.json]

Data: ``shared/data/e2e/primary_slot_errors.tsv`` (the 21 primary E2E systems' test
outputs, labelled by the slot-error script), a random sample of them (seed 0). Gold: the
output has an added slot or a wrong-value slot (``added > 0 or valerr > 0``), the errors
DAE is made to see (it cannot see omissions). Reported: ROC AUC of each scorer's
per-example score for telling those outputs from the rest (higher score = faithful),
for ``dae`` with its data-to-text checkpoint (the default for tables), ``dae`` with the
summary checkpoint reading the tables (the behaviour before it), the ``rule`` config,
and, with ``--nli``, ``nli_semantic_accuracy``'s score on the same outputs. Prints and
optionally writes one JSON object; writes nothing into RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gold_added_or_wrong(row: Dict[str, str]) -> bool:
    return int(row["added"]) > 0 or int(row["valerr"]) > 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sample", type=int, default=630, help="outputs drawn at random (0: all 13,230)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nli", action="store_true", help="also score with nli_semantic_accuracy")
    ap.add_argument("--no-summary", action="store_true", help="skip the summary checkpoint on tables")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import d2t_metrics
    from benchmarks.stats import auc_not_ok
    from d2t_metrics.datasets import iter_tsv, shared_dir

    shared = shared_dir()
    if not shared:
        ap.error("no shared data directory: set D2T_SHARED")
    rows = list(iter_tsv(os.path.join(shared, "data", "e2e", "primary_slot_errors.tsv")))
    if args.sample and args.sample < len(rows):
        keep = sorted(random.Random(args.seed).sample(range(len(rows)), args.sample))
        rows = [rows[i] for i in keep]
    preds = [r["output"] for r in rows]
    tables = [r["mr"] for r in rows]
    gold_ok = [not gold_added_or_wrong(r) for r in rows]
    dae_ckpt = d2t_metrics.checkpoint_path("dae")
    scorers = {
        "dae (data-to-text checkpoint)": lambda: d2t_metrics.load("dae", model=dae_ckpt),
        "dae (summary checkpoint on tables)": lambda: d2t_metrics.load("dae", model=dae_ckpt, table_model=dae_ckpt),
        "dae rule": lambda: d2t_metrics.load("dae", "rule"),
    }
    if args.no_summary:
        scorers.pop("dae (summary checkpoint on tables)")
    if args.nli:
        scorers["nli_semantic_accuracy"] = lambda: d2t_metrics.load(
            "nli_semantic_accuracy", model=d2t_metrics.checkpoint_path("nli_semantic_accuracy"))
    out = {"data": "shared/data/e2e/primary_slot_errors.tsv", "n": len(rows), "seed": args.seed,
           "positives (added or wrong-value slot)": sum(not g for g in gold_ok), "auc": {}, "seconds": {}}
    for name, make in scorers.items():
        metric = make()
        t0 = time.time()
        res = metric.compute(predictions=preds, tables=tables, per_example=True, show_progress=False)
        out["seconds"][name] = round(time.time() - t0, 1)
        scores = [float(e["score"]) for e in res["examples"]]
        out["auc"][name] = round(auc_not_ok(scores, gold_ok), 4)
        if hasattr(metric, "signature"):
            out.setdefault("signatures", {})[name] = metric.signature()
        print(f"{name}: AUC {out['auc'][name]:.3f} ({out['seconds'][name]} s)", file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
