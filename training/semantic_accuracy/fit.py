"""Fit the weights of ``metrics/semantic_accuracy`` on WebNLG 2017's stored per-output scores.

    python -m training.semantic_accuracy.fit [--meta-dir DIR] [--out metrics/semantic_accuracy/weights.json]

Nothing is rescored: the features are the reference-less metrics' per-output
scores stored by ``benchmarks.run`` (``benchmarks/meta_eval/<metric>.json``,
``datasets.webnlg.measures.scatter.score``), in the loader's order, which
``benchmarks.generalization.check_order`` verifies before a metric is used.
For each feature set (:data:`FEATURE_SETS`, fixed before any fit was scored):

1. **Out of fold.** Leave one category out (15 folds): each fold fits the
   standardization + ridge (alpha fixed at 1.0, as the generalization study)
   and the OK threshold on the other 14 categories only, and predicts the held-out
   one. Reported: segment Pearson of the combined score with the mean semantics
   rating on all outputs and on the seen / unseen halves, and the OK-share gap
   (points) of the threshold on each half.
2. **Shipped model.** The same fit on all 15 categories.

The OK threshold is fitted as ``benchmarks.generalization`` fits NLI's: the
score at which the share of training outputs labelled OK is closest to the raters'
OK share (mean semantics >= 2.5) on the training outputs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from benchmarks import generalization as gen
from benchmarks import stats

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEIGHTS_PATH = os.path.join(ROOT, "metrics", "semantic_accuracy", "weights.json")
VERSION = "1.0"

# Feature sets, fixed before fitting. "fast" runs no generative model: DAE's
# rule config and fact_accuracy's OpenIE extractor load no model at all, so
# only the NLI cross-encoder runs (dae_rule chosen over dae beforehand for that reason).
FEATURE_SETS = {
    "default": ("nli_semantic_accuracy", "data_questeval", "fact_accuracy", "dae"),
    "fast": ("nli_semantic_accuracy", "dae_rule", "fact_accuracy_openie"),
}
# How the module runs each stored feature: (metric, config, compute options, per-example score rule).
# The rules are those of benchmarks.adapters, which produced the stored scores.
COMPONENTS = {
    # the pooling named: the weights hold for the scores they were fitted on, whatever the default becomes
    "nli_semantic_accuracy": {"metric": "nli_semantic_accuracy", "config": "default", "options": {"pooling": "mean_min"}, "score": "score"},
    "data_questeval": {"metric": "data_questeval", "config": None, "options": {"use_references": False}, "score": "score"},
    "fact_accuracy": {"metric": "fact_accuracy", "config": "default", "options": {"ground_truth": "table"}, "score": "accuracy_recall_f1"},
    "fact_accuracy_openie": {"metric": "fact_accuracy", "config": "openie", "options": {"ground_truth": "table"}, "score": "accuracy_recall_f1"},
    "dae": {"metric": "dae", "config": "default", "options": {"direction": "both"}, "score": "score"},
    "dae_rule": {"metric": "dae", "config": "rule", "options": {}, "score": "score"},
}


def to_unit(rating):
    """A predicted mean semantics rating (1-3) as the module's score in [0, 1]."""
    return np.clip((np.asarray(rating, dtype=float) - 1.0) / 2.0, 0.0, 1.0)


def fit_combined(X, semantics, alpha: float = gen.RIDGE_ALPHA) -> Dict:
    """Ridge on standardized features, and the OK threshold on its in-sample scores
    matching the raters' OK share of these rows."""
    ridge = gen.fit_ridge(X, semantics, alpha)
    scores = to_unit(gen.predict_ridge(ridge, X))
    gold_ok = np.asarray(semantics, dtype=float) >= gen.RATER_OK_THRESHOLD
    return {"ridge": ridge, "threshold": gen.share_matching_threshold(scores, gold_ok)}


def predict_scores(model: Dict, X) -> np.ndarray:
    return to_unit(gen.predict_ridge(model["ridge"], X))


def out_of_fold(X, semantics, categories) -> Dict[str, np.ndarray]:
    """Each output's score and OK flag from the model of the fold that held its category out."""
    X, semantics = np.asarray(X, dtype=float), np.asarray(semantics, dtype=float)
    scores, ok = np.full(len(semantics), np.nan), np.zeros(len(semantics), dtype=bool)
    for _, train, test in gen.leave_one_group_out(categories):
        model = fit_combined(X[train], semantics[train])
        scores[test] = predict_scores(model, X[test])
        ok[test] = scores[test] >= model["threshold"]
    return {"score": scores, "ok": ok}


def best_single(single: Dict[str, np.ndarray], semantics, mask) -> Tuple[str, float]:
    name = max(single, key=lambda f: stats.correlations(single[f][mask], semantics[mask])["pearson"])
    return name, round(stats.correlations(single[name][mask], semantics[mask])["pearson"], 4)


def oof_report(X, semantics, categories, unseen_m, single: Dict[str, np.ndarray], any_single: Dict[str, np.ndarray]) -> Dict:
    """Out-of-fold Pearson (all / seen / unseen), the best single feature's and the best single
    reference-less metric's (stored, in or out of the set), and the OK-share gaps."""
    oof = out_of_fold(X, semantics, categories)
    gold_ok = semantics >= gen.RATER_OK_THRESHOLD
    out = {}
    for half, m in (("all", np.ones(len(semantics), dtype=bool)), ("seen", ~unseen_m), ("unseen", unseen_m)):
        best, best_r = best_single(single, semantics, m)
        best_any, best_any_r = best_single(any_single, semantics, m)
        out[half] = {"n": int(m.sum()), "pearson": round(stats.correlations(oof["score"][m], semantics[m])["pearson"], 4),
                     "best_single": best, "best_single_pearson": best_r,
                     "best_reference_less": best_any, "best_reference_less_pearson": best_any_r,
                     "ok_share": round(float(oof["ok"][m].mean()), 4), "rater_ok_share": round(float(gold_ok[m].mean()), 4),
                     "ok_share_gap_points": round(100 * float(oof["ok"][m].mean() - gold_ok[m].mean()), 2)}
    return out


def load_features(meta_dir: str, names: Sequence[str], human: Dict[str, np.ndarray]) -> Dict[str, Dict]:
    """The stored runs of ``names``, each verified to be in the loader's order."""
    runs = gen.stored_scatter(meta_dir)
    out = {}
    for name in names:
        if name not in runs:
            raise ValueError(f"no stored WebNLG scores for {name} in {meta_dir}")
        problem = gen.check_order(runs[name], human)
        if problem:
            raise ValueError(f"{name}: stored scores not in the loader's order: {problem}")
        out[name] = runs[name]
    return out


def shipped_entry(name: str, features: Sequence[str], runs: Dict[str, Dict], X, semantics, report: Dict) -> Dict:
    model = fit_combined(X, semantics)
    ridge = model["ridge"]
    return {
        "features": list(features),
        "components": {f: {**COMPONENTS[f], "signature": runs[f].get("signature"), "stored_run": runs[f].get("command"),
                           "stored_commit": runs[f].get("commit")} for f in features},
        "mean": [float(v) for v in ridge["mean"]], "scale": [float(v) for v in ridge["scale"]],
        "coef": [float(v) for v in ridge["coef"]], "intercept": float(ridge["intercept"]),
        "threshold": float(model["threshold"]),
        "out_of_fold": report,
    }


def fit_all(meta_dir: str) -> Dict:
    from benchmarks.data import load_webnlg
    from d2t_metrics.datasets import shared_dir

    dataset = load_webnlg()
    categories, unseen = gen.webnlg_categories(dataset, shared_dir())
    keep = [it.system != dataset.reference_system for it in dataset.items]
    items = [it for it, k in zip(dataset.items, keep) if k]
    cats = np.array([c for c, k in zip(categories, keep) if k])
    human = {a: np.array([it.human[a] for it in items]) for a in ("semantics", "grammar")}
    semantics, unseen_m = human["semantics"], gen.unseen_mask(cats, unseen)
    stored = gen.stored_scatter(meta_dir)
    runs = load_features(meta_dir, sorted({f for fs in FEATURE_SETS.values() for f in fs} | (set(gen.REFERENCE_LESS) & set(stored))), human)
    any_single = {f: np.asarray(runs[f]["measures"]["scatter"]["score"], dtype=float) for f in gen.REFERENCE_LESS if f in runs}
    sets = {}
    for name, features in FEATURE_SETS.items():
        X = np.column_stack([runs[f]["measures"]["scatter"]["score"] for f in features])
        single = {f: X[:, j] for j, f in enumerate(features)}
        report = oof_report(X, semantics, cats, unseen_m, single, any_single)
        sets[name] = shipped_entry(name, features, runs, X, semantics, report)
        print(f"[fit] {name}: out of fold Pearson all {report['all']['pearson']:.3f}, seen {report['seen']['pearson']:.3f}, "
              f"unseen {report['unseen']['pearson']:.3f}; OK share gap on unseen {report['unseen']['ok_share_gap_points']:+.1f} points",
              flush=True)
    return {"version": VERSION, "fitted_on": "WebNLG 2017 human evaluation, 2,007 rated system outputs, 15 categories",
            "target": "mean semantics rating (1-3) mapped to [0, 1] as (r - 1) / 2, clipped",
            "rater_ok": f"mean semantics >= {gen.RATER_OK_THRESHOLD}", "ridge_alpha": gen.RIDGE_ALPHA,
            "protocol": "leave one category out (15 folds): ridge and threshold fitted on 14 categories, scored on the 15th",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "command": "python -m training.semantic_accuracy.fit", "feature_sets": sets}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.semantic_accuracy.fit", description=__doc__.split("\n\n")[0])
    p.add_argument("--meta-dir", default=gen.META_DIR)
    p.add_argument("--out", default=WEIGHTS_PATH)
    args = p.parse_args(argv)
    weights = fit_all(args.meta_dir)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(weights, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
