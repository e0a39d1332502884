"""Generalization on WebNLG 2017: seen vs unseen categories, and fitting on ratings out of fold (issue #34).

    python -m benchmarks.generalization
    python -m benchmarks.generalization --nli-dump DIR/nli_semantic_accuracy.webnlg.jsonl

Three measurements, all from stored per-output scores (nothing is rescored):

1. **Seen vs unseen categories.** WebNLG 2017's test set has 15 categories; 5
   never occur in its training data (found from ``shared/data/webnlg2017/xml/train``
   and checked against ``human_eval.csv``'s ``type`` column). For every metric
   stored in ``meta_eval/*.json`` the 2,007 rated system outputs'
   scores (``measures.webnlg.scatter.score``, in the loader's order: checked by
   recomputing the stored segment correlations) are split by category, and the
   segment Pearson / Spearman (95% CIs from bootstrap resamples of the inputs)
   and system-level Pearson (``stats.system_level_bootstrap``) reported on each half,
   with the gap unseen - seen.
2. **A combined score, out of fold.** A ridge regression (and an isotonic-then-ridge
   variant) from the reference-less metrics' scores to the mean semantics rating,
   fitted with leave-one-category-out folds (15 folds): each output's prediction
   comes from a model that never saw its category. Also fitted on the 10 seen
   categories only and applied to the 5 unseen ones.
3. **NLI label calibration** (needs ``--nli-dump``, the per-output file of
   ``python -m benchmarks.run --metrics nli_semantic_accuracy --datasets webnlg
   --dump-examples DIR``): the raters' share of OK outputs (mean semantics >= 2.5,
   and >= 2.0 for comparison) against NLI's, with the metric's own labels and with an OK threshold on its
   score fitted out of fold.

Results go to ``meta_eval/generalization.json`` (not a metric record, so
``benchmarks.run`` leaves it alone) and the ``generalization`` section of
RESULTS.md. Without ``--nli-dump`` the stored calibration results are kept.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import glob
import json
import os
import re
import shlex
import sys
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from benchmarks import stats
from benchmarks.results_md import markdown_table, write_section

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
META_DIR = os.path.join(BENCH_DIR, "meta_eval")
OUTPUT_NAME = "generalization.json"
SECTION = "generalization"

# The categories WebNLG 2017 lists as unseen (Gardent et al. 2017); the script
# derives them from the training XML and fails if they differ.
EXPECTED_UNSEEN = ("Artist", "Athlete", "CelestialBody", "MeanOfTransportation", "Politician")
# Metrics that need no reference text: the issue's targets apply to these.
REFERENCE_LESS = (
    "nli_semantic_accuracy", "nli_semantic_accuracy_backoff", "data_questeval",
    "fact_accuracy", "fact_accuracy_relations", "fact_accuracy_openie", "dae", "dae_rule",
)
# Raters' OK: mean semantics rating >= 2.5 (1-3 scale), the stricter of the
# harness's two binary thresholds (benchmarks.meta.WEBNLG_THRESHOLDS); the
# label calibration is also reported against the other one, 2.0.
RATER_OK_THRESHOLD = 2.5
# The shipped labels (nli_semantic_accuracy's calibrated decision, fact_accuracy's label) are
# fitted to >= 2.0: issue #34's held-out evaluation calls an output OK at >= 50/100, its scale's
# midpoint, and 2.0 is the midpoint of the 1-3 semantics scale (chosen from the issue's text
# before any result was seen). 2.5 is reported beside it.
RATER_OK_THRESHOLDS = (2.0, 2.5)
# A held-out-like view (issue #34's held-out evaluation rates 16 strong systems, 95 % of whose outputs
# its raters call correct): each half re-weighted so that the outputs rated >= 2.0 (the scale's
# midpoint, the analogue of >= 50/100) carry 95 % of the weight. Fixed from the issue's text.
STRONG_OK_THRESHOLD, STRONG_OK_SHARE = 2.0, 0.95
NLI_LABELS_NAME = "nli_labels.json"  # benchmarks.nli_labels' E2E per-fact comparison
# fact_accuracy's stored configs whose per-output OK rule is studied (ground truth: the table)
FACT_ACCURACY_RUNS = ("fact_accuracy", "fact_accuracy_relations", "fact_accuracy_openie")
GAP_TARGET = 0.05        # unseen no more than 0.05 below seen
COMBINED_TARGET = 0.78   # combined score's out-of-fold Pearson on all outputs
COMBINED_MARGIN = 0.05   # combined above the best single metric on each half
SHARE_TARGET = 0.05      # OK share within 5 points of the raters' on unseen categories
RIDGE_ALPHA = 1.0        # fixed in advance (standardized features, ~1,800 rows: it barely matters)
# Stored scores are rounded to 5 decimals: the recomputed Pearson must match to this.
ORDER_TOLERANCE = 1e-5


# ---------------------------------------------------------------- categories


def training_categories(xml_dir: str) -> List[str]:
    """Categories of WebNLG 2017's training data: the file names under ``xml_dir/train``
    (``<n>triples/<Category>.xml``) and every ``category="..."`` attribute in them."""
    files = glob.glob(os.path.join(xml_dir, "train", "**", "*.xml"), recursive=True)
    if not files:
        raise FileNotFoundError(f"no training XML under {os.path.join(xml_dir, 'train')}")
    found = set()
    for path in files:
        found.add(os.path.splitext(os.path.basename(path))[0])
        with open(path, encoding="utf-8") as f:
            found.update(re.findall(r'category="([^"]+)"', f.read()))
    return sorted(found)


def unseen_categories(train: Sequence[str], test: Sequence[str]) -> List[str]:
    """Test categories that never occur in training."""
    return sorted(set(test) - set(train))


def unseen_mask(categories: Sequence[str], unseen: Sequence[str]) -> np.ndarray:
    """True for the outputs whose input is of an unseen category."""
    unseen = set(unseen)
    return np.array([c in unseen for c in categories], dtype=bool)


def webnlg_categories(dataset, shared: str) -> Tuple[List[str], List[str]]:
    """Each loaded item's category (from ``human_eval_references.jsonl``) and the unseen categories.

    Checks that ``human_eval.csv`` lists the same inputs in the loader's order,
    with the same category, and that its ``type`` column (seen / unseen) agrees
    with the split derived from the training XML.
    """
    base = os.path.join(shared, "data", "webnlg2017")
    category_of = {}
    with open(os.path.join(base, "human_eval_references.jsonl"), encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            category_of[entry["mr"]] = entry["category"]
    with open(os.path.join(base, "human_eval.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if len(rows) != len(dataset.items):
        raise ValueError(f"human_eval.csv has {len(rows)} rows, the loader {len(dataset.items)} items")
    categories = []
    for i, (row, item) in enumerate(zip(rows, dataset.items)):
        if row["mr"] != item.table or row["team"] != item.system:
            raise ValueError(f"item {i}: human_eval.csv row is ({row['team']}, {row['mr']!r}), the loader's ({item.system}, {item.table!r})")
        category = category_of[item.table]
        if row["category"] != category:
            raise ValueError(f"item {i}: category {row['category']!r} in human_eval.csv, {category!r} in the references file")
        categories.append(category)
    unseen = unseen_categories(training_categories(os.path.join(base, "xml")), categories)
    for i, (row, category) in enumerate(zip(rows, categories)):
        if (row["type"] == "unseen") != (category in unseen):
            raise ValueError(f"item {i}: human_eval.csv says {row['type']!r} for {category}; the training XML says otherwise")
    if tuple(unseen) != EXPECTED_UNSEEN:
        raise ValueError(f"unseen categories {unseen} differ from WebNLG 2017's {list(EXPECTED_UNSEEN)}")
    return categories, unseen


def rated_system_outputs():
    """``(items, categories, unseen)``: WebNLG 2017's rated system outputs in the loader's order
    (the references left out), each one's category and the unseen categories. Raises
    ``benchmarks.data.DatasetMissing`` when ../shared is absent."""
    from benchmarks.data import DatasetMissing, load_webnlg
    from d2t_metrics.datasets import shared_dir

    shared = shared_dir()
    if shared is None:
        raise DatasetMissing("../shared is absent (set D2T_SHARED to its path)")
    dataset = load_webnlg()
    categories, unseen = webnlg_categories(dataset, shared)
    keep = [i for i, it in enumerate(dataset.items) if it.system != dataset.reference_system]
    return [dataset.items[i] for i in keep], [categories[i] for i in keep], unseen


def rated_system_outputs_or_none(who: str):
    """:func:`rated_system_outputs`, or None after saying why there is nothing to measure."""
    from benchmarks.data import DatasetMissing

    try:
        return rated_system_outputs()
    except DatasetMissing as e:
        print(f"{who}: nothing to measure: {e}", file=sys.stderr)
        return None


# ---------------------------------------------------------------- stored scores


def stored_scatter(meta_dir: str) -> Dict[str, Dict]:
    """``{metric: webnlg measures}`` for every stored metric record with per-output scores."""
    out = {}
    for path in sorted(glob.glob(os.path.join(meta_dir, "*.json"))):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not (isinstance(data, dict) and "metric" in data and "datasets" in data):
            continue  # other benchmarks' files (this one's included)
        run = data["datasets"].get("webnlg")
        if run and run.get("measures", {}).get("scatter"):
            out[data["metric"]] = run
    return out


def check_order(run: Dict, human: Dict[str, np.ndarray]) -> Optional[str]:
    """Why the stored per-output scores are not in the loader's order, or None when they are.

    The stored semantics must equal the loader's (rounded as stored), and the
    Pearson of the stored scores with the loader's semantics *and grammar*
    (grammar is not stored beside the scores: an independent check of the
    order) must equal the stored segment Pearson.
    """
    scatter, measures = run["measures"]["scatter"], run["measures"]
    if len(scatter["score"]) != len(human["semantics"]):
        return f"{len(scatter['score'])} stored scores for {len(human['semantics'])} outputs"
    if [round(float(v), 4) for v in human["semantics"]] != list(scatter["semantics"]):
        return "stored semantics differ from the loader's"
    for aspect in ("semantics", "grammar"):
        r = stats.correlations(scatter["score"], human[aspect])["pearson"]
        stored = measures["segment"][aspect]["pearson"]["value"]
        if not abs(r - stored) <= ORDER_TOLERANCE:
            return f"recomputed {aspect} Pearson {r:.6f} differs from the stored {stored:.6f}"
    return None


# ---------------------------------------------------------------- correlations on a half


def half_measures(scores, semantics, input_ids, systems, mask, n_boot: int, n_sys_boot: int, seed: int) -> Dict:
    """Segment Pearson / Spearman with input-bootstrap CIs and system-level Pearson over ``mask``."""
    scores, semantics = np.asarray(scores, dtype=float), np.asarray(semantics, dtype=float)
    ids, systems = np.asarray(input_ids), np.asarray(systems)
    seg = stats.bootstrap_correlations(scores[mask], semantics[mask], ids[mask], n_boot, seed)
    order = sorted(set(systems[mask]))
    metric_grid = stats.grid(list(ids[mask]), list(systems[mask]), list(scores[mask]), order)
    human_grid = stats.grid(list(ids[mask]), list(systems[mask]), list(semantics[mask]), order)
    system = stats.system_level_bootstrap(metric_grid, human_grid, n_sys_boot, seed)
    return {"n": int(mask.sum()), "n_inputs": int(len(set(ids[mask]))), "pearson": seg["pearson"],
            "spearman": seg["spearman"], "system_pearson": system}


def bootstrap_gap(scores, semantics, input_ids, unseen, n_boot: int, seed: int, level: float = 0.95) -> Dict:
    """Pearson(unseen) - Pearson(seen) with a percentile CI: inputs resampled within each half."""
    x, y, ids = np.asarray(scores, dtype=float), np.asarray(semantics, dtype=float), np.asarray(input_ids)
    halves = []
    for mask in (~unseen, unseen):
        blocks = [np.flatnonzero(mask & (ids == i)) for i in sorted(set(ids[mask]))]
        halves.append(blocks)
    rng = np.random.default_rng(seed)
    gaps = np.empty(n_boot)
    for r in range(n_boot):
        values = []
        for blocks in halves:
            idx = np.concatenate([blocks[b] for b in rng.integers(0, len(blocks), size=len(blocks))])
            values.append(stats.correlations(x[idx], y[idx])["pearson"])
        gaps[r] = values[1] - values[0]
    point = stats.correlations(x[unseen], y[unseen])["pearson"] - stats.correlations(x[~unseen], y[~unseen])["pearson"]
    alpha = (1 - level) / 2
    ok = gaps[~np.isnan(gaps)]
    low, high = np.quantile(ok, [alpha, 1 - alpha])
    return {"value": float(point), "low": float(low), "high": float(high)}


def ok_weighted_pearson(scores, semantics, unseen) -> Dict[str, float]:
    """Segment Pearson on all outputs and on each half, each re-weighted so that the outputs the
    raters call OK carry :data:`STRONG_OK_SHARE` of the weight (see the constant)."""
    scores, semantics, unseen = np.asarray(scores, dtype=float), np.asarray(semantics, dtype=float), np.asarray(unseen, dtype=bool)
    out = {}
    for half, m in (("all", np.ones(len(scores), dtype=bool)), ("seen", ~unseen), ("unseen", unseen)):
        w = stats.ok_weights(semantics[m], STRONG_OK_THRESHOLD, STRONG_OK_SHARE)
        out[half] = stats.weighted_pearson(scores[m], semantics[m], w)
    return out


def rating_spread(semantics, unseen) -> Dict[str, Dict[str, float]]:
    """Mean, standard deviation and OK share of the semantics ratings on each half:
    a half with a wider spread of quality tends to give higher correlations by itself."""
    semantics, unseen = np.asarray(semantics, dtype=float), np.asarray(unseen, dtype=bool)
    return {half: {"mean": float(semantics[m].mean()), "sd": float(semantics[m].std()),
                   "ok_share": float(np.mean(semantics[m] >= RATER_OK_THRESHOLD))}
            for half, m in (("seen", ~unseen), ("unseen", unseen))}


# ---------------------------------------------------------------- fitting out of fold


def leave_one_group_out(groups: Sequence) -> Iterator[Tuple[object, np.ndarray, np.ndarray]]:
    """``(held-out group, train indices, test indices)`` per group, in sorted group order."""
    groups = np.asarray(groups)
    for held in sorted(set(groups.tolist())):
        test = np.flatnonzero(groups == held)
        train = np.flatnonzero(groups != held)
        yield held, train, test


def out_of_fold(X, y, groups, fit: Callable, predict: Callable) -> np.ndarray:
    """Each row's prediction from a model fitted on the other groups only (leave one group out)."""
    X, y = np.asarray(X, dtype=float), np.asarray(y)
    oof = np.full(len(y), np.nan)
    for _, train, test in leave_one_group_out(groups):
        model = fit(X[train], y[train])
        oof[test] = predict(model, X[test])
    return oof


def fit_then_predict(X, y, train_mask, fit: Callable, predict: Callable) -> np.ndarray:
    """Predictions for the rows outside ``train_mask`` from a model fitted on the rows in it (NaN inside)."""
    X, y, train_mask = np.asarray(X, dtype=float), np.asarray(y), np.asarray(train_mask, dtype=bool)
    out = np.full(len(y), np.nan)
    model = fit(X[train_mask], y[train_mask])
    out[~train_mask] = predict(model, X[~train_mask])
    return out


def fit_ridge(X, y, alpha: float = RIDGE_ALPHA) -> Dict:
    """Ridge regression on standardized features (closed form); the intercept is not penalized."""
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0
    Z = (X - mean) / scale
    coef = np.linalg.solve(Z.T @ Z + alpha * np.eye(X.shape[1]), Z.T @ (y - y.mean()))
    return {"mean": mean, "scale": scale, "coef": coef, "intercept": float(y.mean())}


def predict_ridge(model: Dict, X) -> np.ndarray:
    return ((np.asarray(X, dtype=float) - model["mean"]) / model["scale"]) @ model["coef"] + model["intercept"]


def fit_isotonic(x, y) -> Tuple[np.ndarray, np.ndarray]:
    """Non-decreasing least-squares fit of ``y`` on ``x``: its knots (distinct x, fitted y)."""
    from scipy.optimize import isotonic_regression

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    knots, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=y) / counts  # tied x values share one fitted value
    fitted = isotonic_regression(means, weights=counts, increasing=True).x
    return knots, fitted


def predict_isotonic(model: Tuple[np.ndarray, np.ndarray], x) -> np.ndarray:
    knots, fitted = model
    return np.interp(np.asarray(x, dtype=float), knots, fitted)  # flat beyond the ends


def fit_isotonic_ridge(X, y, alpha: float = RIDGE_ALPHA) -> Dict:
    """Each feature mapped to the rating by its own isotonic fit, then a ridge over the mapped features."""
    X = np.asarray(X, dtype=float)
    curves = [fit_isotonic(X[:, j], y) for j in range(X.shape[1])]
    mapped = np.column_stack([predict_isotonic(c, X[:, j]) for j, c in enumerate(curves)])
    return {"curves": curves, "ridge": fit_ridge(mapped, y, alpha)}


def predict_isotonic_ridge(model: Dict, X) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    mapped = np.column_stack([predict_isotonic(c, X[:, j]) for j, c in enumerate(model["curves"])])
    return predict_ridge(model["ridge"], mapped)


MODELS = {
    "ridge": (fit_ridge, predict_ridge, "ridge regression (alpha 1) on standardized scores"),
    "isotonic+ridge": (fit_isotonic_ridge, predict_isotonic_ridge, "each score mapped by an isotonic fit to the rating, then ridge"),
}


# ---------------------------------------------------------------- thresholds


def share_matching_threshold(scores, gold_ok) -> float:
    """The threshold t whose share of ``scores >= t`` is closest to the share of ``gold_ok``."""
    s, share = np.sort(np.asarray(scores, dtype=float)), float(np.mean(gold_ok))
    candidates = np.append(np.unique(s), np.inf)
    shares = 1.0 - np.searchsorted(s, candidates, side="left") / len(s)
    return float(candidates[int(np.argmin(np.abs(shares - share)))])


def accuracy_threshold(scores, gold_ok) -> float:
    """The threshold that maximizes agreement with ``gold_ok`` on these data."""
    return stats.best_threshold_agreement(scores, gold_ok)["threshold"]


THRESHOLD_FITS = {"share": share_matching_threshold, "accuracy": accuracy_threshold}


def threshold_fit(fitter: Callable[[np.ndarray, np.ndarray], float]):
    """``(fit, predict)`` for :func:`out_of_fold` from a threshold fitter: OK when score >= t."""
    return (lambda X, y: fitter(X[:, 0], y.astype(bool))), (lambda t, X: (X[:, 0] >= t).astype(float))


def fold_thresholds(scores, gold_ok, groups, fitter) -> Dict[str, float]:
    """The threshold each leave-one-group-out fold fitted (for the report)."""
    scores, gold_ok = np.asarray(scores, dtype=float), np.asarray(gold_ok, dtype=bool)
    return {str(g): fitter(scores[train], gold_ok[train]) for g, train, _ in leave_one_group_out(groups)}


def label_measures(pred_ok, gold_ok) -> Dict:
    """OK shares (metric and raters), their gap in points, and agreement on the not-OK class."""
    pred_ok, gold_ok = np.asarray(pred_ok, dtype=bool), np.asarray(gold_ok, dtype=bool)
    agreement = stats.binary_agreement(pred_ok, gold_ok)
    return {"metric_ok_share": float(pred_ok.mean()), "rater_ok_share": float(gold_ok.mean()),
            "gap_points": float(100 * (pred_ok.mean() - gold_ok.mean())), **agreement}


# ---------------------------------------------------------------- the runs


def correlation_tables(dataset, categories, unseen, runs: Dict[str, Dict], n_boot, n_sys_boot, seed) -> Dict[str, Dict]:
    items = [it for it in dataset.items if it.system != dataset.reference_system]
    cats = [c for c, it in zip(categories, dataset.items) if it.system != dataset.reference_system]
    unseen_m = unseen_mask(cats, unseen)
    cats_a = np.array(cats)
    semantics = np.array([it.human["semantics"] for it in items])
    ids = [it.input_id for it in items]
    systems = [it.system for it in items]
    out = {}
    for metric, run in runs.items():
        scores = np.asarray(run["measures"]["scatter"]["score"], dtype=float)
        out[metric] = {
            "reference_less": metric in REFERENCE_LESS,
            "signature": run.get("signature"), "command": run.get("command"), "date": run.get("date"), "commit": run.get("commit"),
            "all": {"pearson": run["measures"]["segment"]["semantics"]["pearson"]["value"]},
            "seen": half_measures(scores, semantics, ids, systems, ~unseen_m, n_boot, n_sys_boot, seed),
            "unseen": half_measures(scores, semantics, ids, systems, unseen_m, n_boot, n_sys_boot, seed),
            "gap_pearson": bootstrap_gap(scores, semantics, ids, unseen_m, n_boot, seed),
            "ok_weighted_pearson": ok_weighted_pearson(scores, semantics, unseen_m),
            # Per category, no CI (75-135 outputs each): where a gap comes from.
            "by_category": {c: stats.correlations(scores[cats_a == c], semantics[cats_a == c])["pearson"] for c in sorted(set(cats))},
        }
        print(f"[generalization] {metric}: seen {out[metric]['seen']['pearson']['value']:.3f}, "
              f"unseen {out[metric]['unseen']['pearson']['value']:.3f}", flush=True)
    return out


def combination_study(dataset, categories, unseen, runs: Dict[str, Dict], correlations: Dict, n_boot, seed) -> Dict:
    """The reference-less scores combined by each model in MODELS, predicted out of fold."""
    keep = [it.system != dataset.reference_system for it in dataset.items]
    items = [it for it, k in zip(dataset.items, keep) if k]
    cats = np.array([c for c, k in zip(categories, keep) if k])
    unseen_m = unseen_mask(cats, unseen)
    semantics = np.array([it.human["semantics"] for it in items])
    ids = np.array([it.input_id for it in items])
    features = [m for m in REFERENCE_LESS if m in runs]
    X = np.column_stack([runs[m]["measures"]["scatter"]["score"] for m in features])

    def best_single(half: str, pool: Sequence[str]) -> Dict:
        name = max(pool, key=lambda m: correlations[m][half]["pearson"]["value"])
        return {"metric": name, "pearson": correlations[name][half]["pearson"]["value"]}

    result = {"features": features, "target": "mean semantics rating", "n": int(len(items)),
              "best_single_reference_less": {h: best_single(h, features) for h in ("seen", "unseen")},
              "best_single_any": {h: best_single(h, list(correlations)) for h in ("seen", "unseen")},
              "models": {}}
    for name, (fit, predict, description) in MODELS.items():
        loco = out_of_fold(X, semantics, cats, fit, predict)
        seen_to_unseen = fit_then_predict(X, semantics, ~unseen_m, fit, predict)
        entry = {"description": description,
                 "loco": {"all": stats.bootstrap_correlations(loco, semantics, ids, n_boot, seed)["pearson"],
                          "seen": stats.bootstrap_correlations(loco[~unseen_m], semantics[~unseen_m], ids[~unseen_m], n_boot, seed)["pearson"],
                          "unseen": stats.bootstrap_correlations(loco[unseen_m], semantics[unseen_m], ids[unseen_m], n_boot, seed)["pearson"]},
                 "seen_only_fit": {"unseen": stats.bootstrap_correlations(seen_to_unseen[unseen_m], semantics[unseen_m], ids[unseen_m], n_boot, seed)["pearson"]},
                 "loco_ok_weighted": ok_weighted_pearson(loco, semantics, unseen_m)}
        if name == "ridge":
            # The weights of each fold's model, to show how stable they are across folds.
            weights = [fit_ridge(X[train], semantics[train])["coef"] for _, train, _ in leave_one_group_out(cats)]
            entry["fold_weights"] = {f: {"min": float(np.min(w)), "max": float(np.max(w))} for f, w in zip(features, np.array(weights).T)}
        result["models"][name] = entry
        print(f"[generalization] combined ({name}), out of fold: all {entry['loco']['all']['value']:.3f}, "
              f"seen {entry['loco']['seen']['value']:.3f}, unseen {entry['loco']['unseen']['value']:.3f}", flush=True)
    return result


def read_dump(path: str, dataset) -> List[Dict]:
    """The per-output rows of a ``--dump-examples`` file, checked against the loader's items."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if len(rows) != len(dataset.items):
        raise ValueError(f"{path}: {len(rows)} rows for {len(dataset.items)} items")
    for i, (row, item) in enumerate(zip(rows, dataset.items)):
        if row["input_id"] != item.input_id or row["system"] != item.system or row["prediction"] != item.prediction:
            raise ValueError(f"{path}: row {i} is ({row['input_id']}, {row['system']}), the loader's item ({item.input_id}, {item.system})")
        if not isinstance(row.get("example"), dict) or "ok" not in row["example"]:
            raise ValueError(f"{path}: row {i} has no per-example 'ok' label")
    return rows


def calibration_study(dataset, categories, unseen, dump_rows: List[Dict], stored_nli: Optional[Dict]) -> Dict:
    """NLI's OK labels vs the raters' OK share, before and after an out-of-fold OK threshold,
    for each definition of the raters' OK in RATER_OK_THRESHOLDS."""
    keep = np.array([it.system != dataset.reference_system for it in dataset.items])
    cats = np.array(categories)[keep]
    unseen_m = unseen_mask(cats, unseen)
    rows = [r for r, k in zip(dump_rows, keep) if k]
    # labels follow the confidence (the lowest check's entailment), not the pooled score
    scores = np.array([r["example"].get("confidence", r["score"]) for r in rows], dtype=float)
    pooled = np.array([r["score"] for r in rows], dtype=float)
    own_ok = np.array([bool(r["example"]["ok"]) for r in rows])
    semantics = np.array([it.human["semantics"] for it, k in zip(dataset.items, keep) if k])
    halves = {"all": np.ones(len(rows), dtype=bool), "seen": ~unseen_m, "unseen": unseen_m}
    result = {"n": int(len(rows)), "by_rater_threshold": {}}
    if stored_nli is not None:
        stored = np.asarray(stored_nli["measures"]["scatter"]["score"], dtype=float)
        result["dump_vs_stored_scores"] = {"max_abs_diff": float(np.max(np.abs(stored - pooled))),
                                           "pearson": stats.correlations(stored, pooled)["pearson"]}
    for threshold in RATER_OK_THRESHOLDS:
        gold_ok = semantics >= threshold
        rules = {"paper's decision (argmax)": {"fitted_on": "nothing (a check passes when entailment is its most likely label)",
                                               **{h: label_measures(own_ok[m], gold_ok[m]) for h, m in halves.items()}}}
        rules.update(threshold_rules(scores, gold_ok, cats, unseen_m))
        result["by_rater_threshold"][str(threshold)] = {
            "rater_ok": f"mean semantics >= {threshold}", "rules": rules,
            "auc": {h: stats.auc_not_ok(scores[m], gold_ok[m]) for h, m in halves.items()}}
    return result


def stored_scores_are_confidence(stored_nli: Dict) -> bool:
    """Whether NLI's stored scores are its confidence (the labels' number): ``pooling:min``, or a
    record from before the pooling option. Otherwise the label study needs ``--nli-dump``."""
    signature = str(stored_nli.get("signature") or "")
    return "|pooling:" not in signature or "|pooling:min" in signature


def calibration_from_stored(dataset, categories, unseen, stored_nli: Dict, calibration_entry: Dict) -> Dict:
    """:func:`calibration_study` without a per-output file: the threshold rules on the stored
    per-output scores, the paper's decision from the calibration run of the same code
    (``training.nli_semantic_accuracy.calibrate`` stores its per-half measures)."""
    keep = np.array([it.system != dataset.reference_system for it in dataset.items])
    cats = np.array(categories)[keep]
    unseen_m = unseen_mask(cats, unseen)
    scores = np.asarray(stored_nli["measures"]["scatter"]["score"], dtype=float)
    semantics = np.array([it.human["semantics"] for it, k in zip(dataset.items, keep) if k])
    halves = {"all": np.ones(len(scores), dtype=bool), "seen": ~unseen_m, "unseen": unseen_m}
    result = {"n": int(len(scores)), "by_rater_threshold": {},
              "source": {"command": stored_nli.get("command"), "date": stored_nli.get("date"), "commit": stored_nli.get("commit"),
                         "paper_labels": f"{calibration_entry.get('command')} ({calibration_entry.get('date')}, commit "
                                         f"{calibration_entry.get('commit')})"}}
    for threshold in RATER_OK_THRESHOLDS:
        gold_ok = semantics >= threshold
        paper = calibration_entry["paper_decision"][f"vs raters >= {threshold}"]
        rules = {"paper's decision (argmax)": {"fitted_on": "nothing (a check passes when entailment is its most likely label)", **paper}}
        rules.update(threshold_rules(scores, gold_ok, cats, unseen_m))
        result["by_rater_threshold"][str(threshold)] = {
            "rater_ok": f"mean semantics >= {threshold}", "rules": rules,
            "auc": {h: stats.auc_not_ok(scores[m], gold_ok[m]) for h, m in halves.items()}}
    # the paper's labels are only comparable if the calibration run scored what is stored: its
    # out-of-fold OK shares (same fit, same folds) must equal those recomputed here
    here = result["by_rater_threshold"][str(RATER_OK_THRESHOLDS[0])]["rules"]["t fitted (share), leave-category-out"]
    there = calibration_entry["out_of_fold"][f"vs raters >= {RATER_OK_THRESHOLDS[0]}"]
    result["same_scores_as_calibration_run"] = all(
        abs(here[h]["metric_ok_share"] - there[h]["metric_ok_share"]) < 1e-9 for h in ("all", "seen", "unseen"))
    return result


def threshold_rules(scores, gold_ok, cats, unseen_m, fits: Sequence[str] = tuple(THRESHOLD_FITS)) -> Dict[str, Dict]:
    """OK when score >= t, t fitted by each objective in ``fits`` leave-category-out and on the seen half."""
    halves = {"all": np.ones(len(scores), dtype=bool), "seen": ~unseen_m, "unseen": unseen_m}
    rules = {}
    for fit_name in fits:
        fitter = THRESHOLD_FITS[fit_name]
        fit, predict = threshold_fit(fitter)
        loco = out_of_fold(scores[:, None], gold_ok, cats, fit, predict).astype(bool)
        rules[f"t fitted ({fit_name}), leave-category-out"] = {
            "fitted_on": "the other 14 categories' outputs",
            "fold_thresholds": fold_thresholds(scores, gold_ok, cats, fitter),
            **{h: label_measures(loco[m], gold_ok[m]) for h, m in halves.items()}}
        seen_fit = fit_then_predict(scores[:, None], gold_ok, ~unseen_m, fit, predict)
        rules[f"t fitted ({fit_name}) on seen categories"] = {
            "fitted_on": "the 10 seen categories' outputs",
            "threshold": fitter(scores[~unseen_m], gold_ok[~unseen_m]),
            "unseen": label_measures(seen_fit[unseen_m].astype(bool), gold_ok[unseen_m])}
    return rules


def fact_accuracy_label_study(dataset, categories, unseen, runs: Dict[str, Dict]) -> Dict:
    """fact_accuracy's per-output OK (label_score >= t, the share objective) out of fold, from its stored scores."""
    keep = np.array([it.system != dataset.reference_system for it in dataset.items])
    cats = np.array(categories)[keep]
    unseen_m = unseen_mask(cats, unseen)
    semantics = np.array([it.human["semantics"] for it, k in zip(dataset.items, keep) if k])
    out = {}
    for metric in FACT_ACCURACY_RUNS:
        if metric not in runs:
            continue
        scores = np.asarray(runs[metric]["measures"]["scatter"]["score"], dtype=float)
        out[metric] = {"signature": runs[metric].get("signature"), "command": runs[metric].get("command"),
                       "date": runs[metric].get("date"), "commit": runs[metric].get("commit"), "by_rater_threshold": {
                           str(t): {"rules": threshold_rules(scores, semantics >= t, cats, unseen_m, fits=("share",)),
                                    "auc_unseen": stats.auc_not_ok(scores[unseen_m], (semantics >= t)[unseen_m])}
                           for t in RATER_OK_THRESHOLDS}}
    return out


def nli_calibration_entry() -> Optional[Dict]:
    """The default config's entry of nli_semantic_accuracy's calibration.json, when it has the paper's labels."""
    path = os.path.join(os.path.dirname(BENCH_DIR), "metrics", "nli_semantic_accuracy", "calibration.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        entry = next((e for e in json.load(f).get("thresholds", []) if e.get("config") == "default"), None)
    return entry if entry and "paper_decision" in entry else None


def shipped_thresholds() -> Dict[str, Optional[float]]:
    """The thresholds the metrics ship (their calibration.json files), for the report."""
    root = os.path.dirname(BENCH_DIR)
    out = {}
    for name, metric, config in (("nli_semantic_accuracy", "nli_semantic_accuracy", "default"),
                                 ("fact_accuracy", "fact_accuracy", "default")):
        path = os.path.join(root, "metrics", metric, "calibration.json")
        entry = None
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                entry = next((e for e in json.load(f).get("thresholds", []) if e.get("config") == config), None)
        out[name] = None if entry is None else {
            "threshold": entry["threshold"], "command": entry.get("command"), "date": entry.get("date"),
            "commit": entry.get("commit"), "scores_from": entry.get("scores_from"),
            "out_of_fold": {k: v for k, v in entry.get("out_of_fold", {}).items() if k.startswith("vs raters")}}
    return out


# ---------------------------------------------------------------- rendering


def _f(v, digits=3, sign=False) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "—"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def _ci(d: Dict, sign=False) -> str:
    return f"{_f(d['value'], sign=sign)} [{_f(d['low'], sign=sign)}, {_f(d['high'], sign=sign)}]"


def render(results: Dict) -> str:
    split = results["split"]
    sp = split["semantics"]
    lines = [
        "## Generalization: seen vs unseen categories",
        "",
        f"WebNLG 2017's human evaluation split by category: the {len(split['unseen'])} categories that never occur in "
        f"WebNLG 2017's training data ({', '.join(split['unseen'])}; read from `shared/data/webnlg2017/xml/train`, checked "
        f"against `human_eval.csv`'s `type` column) vs the {len(split['seen'])} seen ones. {split['n_seen']} seen and "
        f"{split['n_unseen']} unseen rated system outputs (references excluded). Scores are each metric's stored per-output "
        "scores (`meta_eval/<metric>.json`, `scatter`), whose order was checked against the loader's: the Pearson with the "
        "loader's semantics and grammar recomputed from them equals the stored figure to 1e-5 "
        f"({', '.join(results['order_failed']) or 'no metric'} failed). Correlations are with the mean semantics rating; "
        f"95% CIs from {results['settings']['bootstrap']} bootstrap resamples of the inputs (the gap's: inputs resampled within each half); "
        f"system Pearson as in the main table ({results['settings']['system_bootstrap']} resamples, mean of per-output scores: "
        "BLEU's is mean sentence BLEU here, not corpus BLEU). Stored scores are rounded to 5 decimals, which can move a Spearman "
        "by about 1e-4. The halves differ in more than their categories: the systems did worse on unseen inputs, so their "
        "ratings spread wider (semantics mean / s.d. / share ≥ 2.5: seen "
        f"{sp['seen']['mean']:.2f} / {sp['seen']['sd']:.2f} / {100 * sp['seen']['ok_share']:.0f}%, unseen "
        f"{sp['unseen']['mean']:.2f} / {sp['unseen']['sd']:.2f} / {100 * sp['unseen']['ok_share']:.0f}%), which by itself "
        "tends to raise correlations on the unseen half: a positive gap does not show that a metric is better there.",
        "",
        f"Target (#34): every reference-less metric's unseen segment Pearson no more than {GAP_TARGET} below its seen one.",
        "",
    ]
    rows = []
    for metric, r in results["correlations"].items():
        gap = r["gap_pearson"]["value"]
        target = ("yes" if gap >= -GAP_TARGET else "**no**") if r["reference_less"] else "(ref.-based)"
        rows.append([f"`{metric}`", _f(r["all"]["pearson"]), _ci(r["seen"]["pearson"]), _ci(r["unseen"]["pearson"]),
                     _ci(r["gap_pearson"], sign=True), _f(r["seen"]["spearman"]["value"]), _f(r["unseen"]["spearman"]["value"]),
                     _f(r["unseen"]["spearman"]["value"] - r["seen"]["spearman"]["value"], sign=True),
                     _f(r["seen"]["system_pearson"]["value"]), _f(r["unseen"]["system_pearson"]["value"]), target])
    lines.append(markdown_table(["Metric", "Pearson, all", "Pearson, seen [95% CI]", "Pearson, unseen [95% CI]",
                                 "Gap unseen − seen [95% CI]", "Spearman, seen", "Spearman, unseen", "Gap",
                                 "System P., seen", "System P., unseen", "Within 0.05"], rows))
    weighted = [(m, r["ok_weighted_pearson"]) for m, r in results["correlations"].items() if r.get("ok_weighted_pearson")]
    if weighted:
        lines += [
            "",
            f"**A view like an evaluation of strong systems** (no target; issue #34's held-out evaluation rates systems whose "
            f"outputs its raters call correct 95 % of the time): the same Pearson with each half re-weighted so that the outputs "
            f"rated ≥ {STRONG_OK_THRESHOLD} carry {STRONG_OK_SHARE:.0%} of the weight, equally among them. A metric must then "
            "rank good outputs among themselves, which the plain figures hardly ask; the weighting was fixed from the issue's "
            "text, and nothing is fitted on it.",
            "",
            markdown_table(["Metric", "OK-weighted Pearson, all", "seen", "unseen", "plain Pearson, all"],
                           [[f"`{m}`", _f(w["all"]), _f(w["seen"]), _f(w["unseen"]),
                             _f(results["correlations"][m]["all"]["pearson"])] for m, w in weighted]
                           + [[f"combined reference-less ({name}, leave-category-out; below)", _f(model["loco_ok_weighted"]["all"]),
                               _f(model["loco_ok_weighted"]["seen"]), _f(model["loco_ok_weighted"]["unseen"]),
                               _f(model["loco"]["all"]["value"])]
                              for name, model in (results.get("combination") or {}).get("models", {}).items()
                              if "loco_ok_weighted" in model]),
        ]
    combo = results.get("combination")
    if combo:
        best = combo["best_single_reference_less"]
        lines += [
            "",
            "### Combined reference-less score, out of fold",
            "",
            f"The reference-less metrics' scores ({', '.join(f'`{m}`' for m in combo['features'])}) combined into one "
            f"prediction of the mean semantics rating ({combo['n']} outputs). **Leave-category-out (LOCO)**: 15 folds, each "
            "category's outputs predicted by a model fitted on the other 14 categories only; the correlations are over the "
            "pooled out-of-fold predictions. **Fit on seen**: fitted on the 10 seen categories, applied to the 5 unseen ones (the situation of "
            "a new domain). Nothing here is fitted and scored on the same outputs. The models and their settings were fixed before "
            f"any was scored (ridge alpha {RIDGE_ALPHA}); both are reported. Best single reference-less metric (for comparison; "
            f"picked on each half's own data, which favours it): seen `{best['seen']['metric']}` {_f(best['seen']['pearson'])}, "
            f"unseen `{best['unseen']['metric']}` {_f(best['unseen']['pearson'])}.",
            "",
            f"Targets (#34): out-of-fold Pearson on all outputs ≥ {COMBINED_TARGET}; ≥ {COMBINED_MARGIN} above the best single metric on both halves.",
            "",
        ]
        rows = []
        for name, m in combo["models"].items():
            d_seen = m["loco"]["seen"]["value"] - best["seen"]["pearson"]
            d_unseen = m["loco"]["unseen"]["value"] - best["unseen"]["pearson"]
            met = (m["loco"]["all"]["value"] >= COMBINED_TARGET and d_seen >= COMBINED_MARGIN and d_unseen >= COMBINED_MARGIN)
            rows.append([name, _ci(m["loco"]["all"]), _ci(m["loco"]["seen"]), _ci(m["loco"]["unseen"]),
                         _f(d_seen, sign=True), _f(d_unseen, sign=True), _ci(m["seen_only_fit"]["unseen"]), "yes" if met else "**no**"])
        lines.append(markdown_table(["Model", "LOCO Pearson, all", "LOCO, seen", "LOCO, unseen", "Δ best single, seen",
                                     "Δ best single, unseen", "Fit on seen → unseen", "Targets met"], rows))
        w = combo["models"].get("ridge", {}).get("fold_weights")
        if w:
            lines += ["", "Ridge weights (standardized scores) across the 15 folds: " +
                      ", ".join(f"`{f}` {v['min']:+.2f}…{v['max']:+.2f}" for f, v in w.items()) + "."]
    cal = results.get("calibration")
    if cal:
        by = cal["by_rater_threshold"]
        lines += [
            "",
            "### NLI labels: share of OK outputs vs the raters'",
            "",
            (f"`nli_semantic_accuracy`'s stored per-output scores ({cal['n']} system outputs) from `{cal['source']['command']}` "
             f"({cal['source']['date']}, commit {cal['source']['commit']}), the paper's decision's labels from "
             f"`{cal['source']['paper_labels']}` ("
             + ("the same scores: its out-of-fold OK shares equal those recomputed from the stored ones). "
                if cal.get("same_scores_as_calibration_run") else "**its scores differ from the stored ones**). ")
             if cal["source"].get("paper_labels") else
             f"`nli_semantic_accuracy`'s per-output labels and scores ({cal['n']} system outputs) from `{cal['source']['command']}` "
             f"({cal['source']['date']}, commit {cal['source']['commit']}; its scores vs the stored ones: max difference "
             f"{_f(cal.get('dump_vs_stored_scores', {}).get('max_abs_diff'), 5)}). ") + "Raters' OK: mean semantics ≥ 2.0, the "
            "definition the shipped labels are fitted to (issue #34's held-out evaluation calls an output OK at ≥ 50/100, the "
            "midpoint of its scale; 2.0 is the midpoint of the 1–3 semantics scale: chosen from the issue's text before any "
            "result was seen), and ≥ 2.5 beside it. A calibrated rule labels an output OK when its score (the smallest "
            "entailment probability over its checks) is ≥ t, with t fitted either to match the training outputs' rater OK share "
            "(*share*) or to maximize agreement on them (*accuracy*); *leave-category-out*: each category's t fitted on the "
            "other 14 categories; *on seen*: one t fitted on the 10 seen categories, applied to the unseen ones. Precision / "
            "recall / F1 are of the not-OK label against the raters'. Per-fact precision / recall cannot be measured here: "
            "WebNLG 2017's ratings are per output, not per fact (see the E2E table below). ROC AUC of the score (OK vs not OK) on unseen categories: "
            + ", ".join(f"raters' OK ≥ {k}: {_f(v['auc']['unseen'])}" for k, v in by.items()) + ".",
            "",
            shipped_text(results.get("shipped", {}).get("nli_semantic_accuracy"), "nli_semantic_accuracy",
                         "`decision=\"calibrated\"`, the default for the project's checkpoint: a check whose entailment probability "
                         "is < t marks its fact omitted (text→table: the text hallucinated), the output is OK when no check fails "
                         "(`decision=\"paper\"` keeps the argmax rule)"),
            "",
            f"Target (#34): on unseen categories the share labelled OK within {int(100 * SHARE_TARGET)} points of the raters'.",
            "",
        ]
        rows = label_rows(by)
        lines.append(markdown_table(["Raters' OK", "Rule", "t", "Unseen: raters OK", "metric OK", "gap (points)", "within 5",
                                     "accuracy", "precision not OK", "recall not OK", "F1 not OK", "Seen: gap", "All: gap"], rows))
    if results.get("nli_labels"):
        lines += ["", *render_nli_labels(results["nli_labels"])]
    if results.get("fact_accuracy_labels"):
        lines += ["", *render_fact_accuracy_labels(results["fact_accuracy_labels"], results.get("shipped", {}).get("fact_accuracy"))]
    lines += ["", "Which choices were made on which data: the split is fixed by WebNLG 2017's training data; the raters' OK "
              f"thresholds ({' and '.join(map(str, RATER_OK_THRESHOLDS))}) are the harness's existing ones (the shipped labels fit 2.0, the midpoint of the scale, chosen from issue #34's text before any result was seen); the shipped thresholds are fitted on all 15 categories, their out-of-fold rows above show how such a fit does on a category it never saw; the models, their features, ridge alpha and the two "
              "threshold objectives were fixed before scoring; every fitted weight, curve and threshold above was fitted on "
              "categories other than the ones it is scored on. The metrics themselves were developed on all of WebNLG 2017 "
              "(see their history pages), unseen categories included: these figures are not free of that.", "",
              f"Produced by `{results['command']}` ({results['date']}, commit {results['commit']})."]
    return "\n".join(lines)


def label_rows(by_rater: Dict, prefix: Sequence[str] = ()) -> List[List[str]]:
    """One table row per (raters' OK, rule) of a threshold study, unseen half first."""
    rows = []
    for threshold, entry in by_rater.items():
        for rule, r in entry["rules"].items():
            u = r["unseen"]
            t = (f"{min(r['fold_thresholds'].values()):.3f}–{max(r['fold_thresholds'].values()):.3f}" if "fold_thresholds" in r
                 else f"{r['threshold']:.3f}" if "threshold" in r else "—")
            rows.append([*prefix, f"≥ {threshold}", rule, t, f"{100 * u['rater_ok_share']:.1f}%", f"{100 * u['metric_ok_share']:.1f}%",
                         f"{u['gap_points']:+.1f}", "yes" if abs(u["gap_points"]) <= 100 * SHARE_TARGET else "**no**",
                         f"{100 * u['accuracy']:.1f}%", _f(u["precision_not_ok"]), _f(u["recall_not_ok"]), _f(u["f1_not_ok"]),
                         f"{r['seen']['gap_points']:+.1f}" if "seen" in r else "—",
                         f"{r['all']['gap_points']:+.1f}" if "all" in r else "—"])
    return rows


def shipped_text(entry: Optional[Dict], metric: str, what: str) -> str:
    if not entry:
        return f"Shipped: no threshold file for `{metric}` (`metrics/{metric}/calibration.json`) yet."
    text = (f"**Shipped** ({what}): t = {entry['threshold']:.4g}, fitted with the *share* objective to raters' OK ≥ 2.0 on all "
            f"2,007 rated outputs (`metrics/{metric}/calibration.json`, by `{entry['command']}`, {entry['date']}, commit "
            f"{entry['commit']}; scores from `{entry.get('scores_from')}`).")
    oof = entry.get("out_of_fold", {})
    if oof:
        # the same procedure, leave-category-out, on the scores the shipped t was fitted on
        text += " Out of fold on those scores (leave-category-out), OK share metric / raters, gap: " + "; ".join(
            f"raters' OK {k.replace('vs raters ', '')}: unseen {100 * v['unseen']['metric_ok_share']:.1f}% / "
            f"{100 * v['unseen']['rater_ok_share']:.1f}% ({v['unseen']['gap_points']:+.1f}), seen {v['seen']['gap_points']:+.1f}, "
            f"all {v['all']['gap_points']:+.1f}; not-OK precision / recall on unseen {_f(v['unseen']['precision_not_ok'])} / "
            f"{_f(v['unseen']['recall_not_ok'])}" for k, v in oof.items()) + "."
    return text


def _pct(v) -> str:
    return "—" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{100 * v:.1f}"


def render_nli_labels(data: Dict) -> List[str]:
    """The E2E per-fact table of benchmarks.nli_labels."""
    rows = []
    for decision, r in data["decisions"].items():
        o, h, ok = r["omission_per_fact"], r["hallucination_per_output"], r["ok_per_output"]
        rows.append([decision, f"{o['flagged']} / {o['gold']} of {o['n']}", _pct(o["precision"]), _pct(o["recall"]), _pct(o["f1"]),
                     _pct(o.get("recall_missing")), _pct(o.get("recall_wrong_value")),
                     f"{h['flagged']} / {h['gold']}", _pct(h["precision"]), _pct(h["recall"]), _pct(h["f1"]),
                     f"{_pct(ok['metric_ok_share'])} / {_pct(ok['script_ok_share'])}", _pct(ok["accuracy"])])
    sigs = "; ".join(f"`{r['signature']}`" for r in data["decisions"].values())
    return [
        "#### NLI labels per fact on E2E: paper vs calibrated decision",
        "",
        f"{data['n']} E2E primary-system outputs drawn at random (seed {data['seed']}) from `shared/data/e2e/primary_slot_errors.tsv`, "
        "scored by the metric once per decision (project checkpoint, config `default`, strict about `eatType[restaurant]`), "
        f"against the E2E slot-error script, the NLI forward passes shared by the two runs (the decision reads only the "
        f"probabilities); their scores differ by at most {data['max_score_difference']:.1e}. **Omission, per fact** (one fact per MR slot but `name`): the script omits a fact "
        "when the slot's MR value counts < 0 in its `diff`: *missing*, or a *wrong value* in its place (a valerr, which "
        "the script's 4-way label counts as omission and hallucination); the metric when the fact's check fails. "
        "**Hallucination, per output**: the metric's text→table check reads the whole text against all facts, one check "
        "per output, so it has no per-fact verdict to score; the script's: an added slot or a wrong value. **OK**: the "
        "shares of outputs labelled OK, metric / script, and their agreement. The calibrated t was fitted on WebNLG 2017 "
        "ratings, not on E2E: these E2E figures are out of domain for it.",
        "",
        markdown_table(["Decision", "omitted: flagged / script of facts", "P %", "R %", "F1 %", "R % on missing",
                        "R % on wrong value", "hallucinated: flagged / script", "P %", "R %", "F1 %", "OK share %, metric / script",
                        "OK accuracy %"], rows),
        "",
        f"Signatures: {sigs}. `{data['command']}` ({data['date']}, commit {data['commit']}; load average "
        f"{data['load_average']:.1f}).",
    ]


def render_fact_accuracy_labels(study: Dict, shipped: Optional[Dict]) -> List[str]:
    rows = []
    for metric, entry in study.items():
        rows += label_rows(entry["by_rater_threshold"], prefix=(f"`{metric}`",))
    first = next(iter(study.values()))
    return [
        "### fact_accuracy labels: share of OK outputs vs the raters'",
        "",
        "fact_accuracy's per-fact verdicts (supported / contradicted / unverifiable / missing) are joined into one per-output "
        "OK label through its score, the F1 of the output's accuracy and recall (the number correlated above): OK when it "
        "is ≥ t. The per-fact counts are not stored with the per-output scores (`meta_eval/<metric>.json`), so no rule on "
        "counts is studied here. Fitted and reported as NLI's threshold above (share objective; leave-category-out; on seen). "
        "Scores from: " + "; ".join(f"`{m}` `{e['signature']}` ({e['date']}, commit {e['commit']})" for m, e in study.items()) + ". "
        "ROC AUC of the score on unseen categories, raters' OK ≥ 2.0: "
        + ", ".join(f"`{m}` {_f(e['by_rater_threshold']['2.0']['auc_unseen'])}" for m, e in study.items() if '2.0' in e['by_rater_threshold']) + ".",
        "",
        shipped_text(shipped, "fact_accuracy", "per example `label_score`, `ok` and `label` (`OK` / `not OK`) for the "
                     "default config with the table as ground truth; other settings get no label") if first else "",
        "",
        markdown_table(["Metric", "Raters' OK", "Rule", "t", "Unseen: raters OK", "metric OK", "gap (points)", "within 5",
                        "accuracy", "precision not OK", "recall not OK", "F1 not OK", "Seen: gap", "All: gap"], rows),
    ]


# ---------------------------------------------------------------- main


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.generalization", description=__doc__.split("\n\n")[0])
    p.add_argument("--meta-dir", default=META_DIR, help="folder of the stored metric results (default: benchmarks/meta_eval)")
    p.add_argument("--nli-dump", default=None, help="nli_semantic_accuracy.webnlg.jsonl from benchmarks.run --dump-examples")
    p.add_argument("--nli-dump-command", default=None, help="the command that wrote --nli-dump (reported)")
    p.add_argument("--nli-dump-date", default=None, help="when --nli-dump was written (default: today)")
    p.add_argument("--nli-dump-commit", default=None, help="the code state that wrote --nli-dump (default: the current one)")
    p.add_argument("--output", default=None, help=f"JSON to write (default: <meta-dir>/{OUTPUT_NAME})")
    p.add_argument("--results", default=None, help="RESULTS.md to update (default: benchmarks/RESULTS.md)")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--system-bootstrap", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    from benchmarks.data import DatasetMissing, load_webnlg
    from benchmarks.run import _git_commit
    from d2t_metrics.datasets import shared_dir

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    shared = shared_dir()
    try:
        dataset = load_webnlg()
    except DatasetMissing as e:
        print(f"generalization: WebNLG 2017 is not available ({e})", file=sys.stderr)
        return 2
    categories, unseen = webnlg_categories(dataset, shared)
    systems_items = [it for it in dataset.items if it.system != dataset.reference_system]
    human = {a: np.array([it.human[a] for it in systems_items]) for a in ("semantics", "grammar")}

    runs, order_failed = {}, []
    for metric, run in stored_scatter(args.meta_dir).items():
        problem = check_order(run, human)
        if problem:
            print(f"[generalization] SKIP {metric}: {problem}", flush=True)
            order_failed.append(metric)
        else:
            runs[metric] = run
    seen_cats = sorted(set(categories) - set(unseen))
    cats_sys = [c for c, it in zip(categories, dataset.items) if it.system != dataset.reference_system]
    n_unseen = int(unseen_mask(cats_sys, unseen).sum())
    out_path = args.output or os.path.join(args.meta_dir, OUTPUT_NAME)
    previous = {}
    if os.path.exists(out_path):
        with open(out_path, encoding="utf-8") as f:
            previous = json.load(f)
    results = {
        "benchmark": "generalization",
        "command": "python -m benchmarks.generalization" + ("" if not argv else " " + " ".join(shlex.quote(a) for a in argv)),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "commit": _git_commit(),
        "settings": {"bootstrap": args.bootstrap, "system_bootstrap": args.system_bootstrap, "seed": args.seed},
        "split": {"unseen": unseen, "seen": seen_cats, "n_seen": len(cats_sys) - n_unseen, "n_unseen": n_unseen,
                  "semantics": rating_spread(human["semantics"], unseen_mask(cats_sys, unseen))},
        "order_failed": order_failed,
    }
    results["correlations"] = correlation_tables(dataset, categories, unseen, runs, args.bootstrap, args.system_bootstrap, args.seed)
    results["combination"] = combination_study(dataset, categories, unseen, runs, results["correlations"], args.bootstrap, args.seed)
    if args.nli_dump:
        rows = read_dump(args.nli_dump, dataset)
        cal = calibration_study(dataset, categories, unseen, rows, runs.get("nli_semantic_accuracy"))
        cal["source"] = {"command": args.nli_dump_command or f"(per-output file {args.nli_dump})",
                         "date": args.nli_dump_date or results["date"], "commit": args.nli_dump_commit or results["commit"]}
        results["calibration"] = cal
    elif runs.get("nli_semantic_accuracy") and nli_calibration_entry() and stored_scores_are_confidence(runs["nli_semantic_accuracy"]):
        # the stored scores and the calibration run's paper labels (the same code: see shipped_thresholds)
        results["calibration"] = calibration_from_stored(dataset, categories, unseen, runs["nli_semantic_accuracy"],
                                                         nli_calibration_entry())
    elif previous.get("calibration", {}).get("by_rater_threshold"):
        print("[generalization] no --nli-dump: keeping the stored NLI calibration results", flush=True)
        results["calibration"] = previous["calibration"]
    results["fact_accuracy_labels"] = fact_accuracy_label_study(dataset, categories, unseen, runs)
    results["shipped"] = shipped_thresholds()
    nli_labels_path = os.path.join(args.meta_dir, NLI_LABELS_NAME)
    if os.path.isfile(nli_labels_path):
        with open(nli_labels_path, encoding="utf-8") as f:
            results["nli_labels"] = json.load(f)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, default=float)
        f.write("\n")
    markdown = render(results)
    path = write_section(SECTION, markdown, path=args.results)
    print("\n" + markdown + f"\n\nwrote {out_path} and {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
