"""Meta-evaluation statistics: correlations with bootstrap CIs, the PARENT paper's
system-level bootstrap, binary agreement and pairwise reranking.

Everything is deterministic given ``seed``.
"""

from __future__ import annotations

import math
import random
import warnings
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

CORRELATIONS = ("pearson", "spearman", "kendall")


def _corr(name: str, x: np.ndarray, y: np.ndarray) -> float:
    from scipy import stats

    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "pearson":
            return float(stats.pearsonr(x, y)[0])
        if name == "spearman":
            return float(stats.spearmanr(x, y)[0])
        if name == "kendall":
            return float(stats.kendalltau(x, y)[0])  # tau-b
    raise ValueError(f"unknown correlation {name!r}")


def correlations(x: Sequence[float], y: Sequence[float]) -> Dict[str, float]:
    """Pearson, Spearman and Kendall (tau-b) between two equally long sequences."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"length mismatch: {x.shape} vs {y.shape}")
    return {name: _corr(name, x, y) for name in CORRELATIONS}


def _group_indices(groups: Sequence) -> List[np.ndarray]:
    index: Dict[object, List[int]] = {}
    for i, g in enumerate(groups):
        index.setdefault(g, []).append(i)
    return [np.asarray(v) for v in index.values()]


def bootstrap_correlations(
    x: Sequence[float],
    y: Sequence[float],
    groups: Sequence,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Dict[str, Dict[str, float]]:
    """Segment-level correlations with percentile bootstrap CIs.

    The bootstrap resamples *inputs* (``groups``: the input each output came
    from) with replacement and keeps all outputs of a drawn input, since outputs
    of one input are not independent.
    Returns ``{name: {"value", "low", "high"}}``.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    point = correlations(x, y)
    blocks = _group_indices(groups)
    rng = np.random.default_rng(seed)
    samples = {name: np.empty(n_resamples) for name in CORRELATIONS}
    for r in range(n_resamples):
        drawn = rng.integers(0, len(blocks), size=len(blocks))
        idx = np.concatenate([blocks[b] for b in drawn])
        for name in CORRELATIONS:
            samples[name][r] = _corr(name, x[idx], y[idx])
    alpha = (1 - level) / 2
    out = {}
    for name in CORRELATIONS:
        s = samples[name][~np.isnan(samples[name])]
        low, high = (np.quantile(s, [alpha, 1 - alpha]) if len(s) else (float("nan"), float("nan")))
        out[name] = {"value": point[name], "low": float(low), "high": float(high)}
    return out


def _mean_aggregate(sums: np.ndarray, counts: int) -> np.ndarray:
    return sums[..., 0] / counts


def system_level_bootstrap(
    metric_values: np.ndarray,
    human: np.ndarray,
    n_resamples: int = 500,
    seed: int = 0,
    aggregate: Optional[Callable[[np.ndarray, int], np.ndarray]] = None,
    level: float = 0.95,
) -> Dict[str, float]:
    """System-level Pearson as Dhingra et al.'s ``webnlg_correlations.py`` computes it.

    ``metric_values``: shape (inputs, systems) or (inputs, systems, k) of
    per-example values; ``human``: (inputs, systems). Each resample draws the
    inputs with replacement (Python's ``random`` seeded with ``seed``, as the
    reference does), takes per-system means (or ``aggregate(sums, n)`` of
    per-example statistics, e.g. corpus BLEU from summed n-gram counts), and
    computes Pearson across systems. Returns the mean over resamples (the
    reported figure), its percentile interval, its Monte-Carlo standard error,
    and the Pearson on the full sample without resampling.
    """
    from scipy import stats

    values = np.asarray(metric_values, dtype=float)
    if values.ndim == 2:
        values = values[..., None]
    human = np.asarray(human, dtype=float)
    n_inputs = values.shape[0]
    if human.shape != values.shape[:2]:
        raise ValueError(f"shape mismatch: metric {values.shape[:2]} vs human {human.shape}")
    aggregate = aggregate or _mean_aggregate
    rng = random.Random(seed)
    inputs = list(range(n_inputs))
    corrs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n_resamples):
            sample = [rng.choice(inputs) for _ in range(n_inputs)]
            m = aggregate(values[sample].sum(axis=0), n_inputs)
            h = human[sample].mean(axis=0)
            corrs.append(stats.pearsonr(m, h)[0] if np.ptp(m) > 0 and np.ptp(h) > 0 else float("nan"))
        full_m = aggregate(values.sum(axis=0), n_inputs)
        full = stats.pearsonr(full_m, human.mean(axis=0))[0] if np.ptp(full_m) > 0 else float("nan")
    corrs = np.asarray(corrs, dtype=float)
    ok = corrs[~np.isnan(corrs)]
    alpha = (1 - level) / 2
    low, high = np.quantile(ok, [alpha, 1 - alpha]) if len(ok) else (float("nan"), float("nan"))
    return {
        "value": float(ok.mean()) if len(ok) else float("nan"),
        "low": float(low),
        "high": float(high),
        "mc_se": float(ok.std(ddof=1) / math.sqrt(len(ok))) if len(ok) > 1 else float("nan"),
        "full_sample": float(full),
        "n_systems": int(values.shape[1]),
        "n_inputs": int(n_inputs),
        "n_resamples": int(n_resamples),
    }


def grid(input_ids: Sequence[int], systems: Sequence[str], values: Sequence, system_order: Sequence[str]) -> np.ndarray:
    """Arrange per-example values into an (inputs, systems[, k]) array; every cell must be filled."""
    inputs = sorted(set(input_ids))
    row = {v: i for i, v in enumerate(inputs)}
    col = {s: j for j, s in enumerate(system_order)}
    first = np.asarray(values[0], dtype=float)
    out = np.full((len(inputs), len(system_order)) + first.shape, np.nan)
    for i, s, v in zip(input_ids, systems, values):
        if s in col:
            out[row[i], col[s]] = v
    if np.isnan(out).any():
        raise ValueError("every (input, system) cell needs a value for system-level statistics")
    return out


def ok_weights(ratings: Sequence[float], ok_threshold: float, ok_share: float = 0.95) -> np.ndarray:
    """Weights (summing to 1) that give the outputs rated at least ``ok_threshold`` ``ok_share`` of
    the total and the rest the remainder, equally within each group: a corpus re-weighted to look
    like an evaluation of strong systems, where most outputs are fine and a metric must rank
    good outputs among themselves. A group that is empty gets no weight."""
    ok = np.asarray(ratings, dtype=float) >= ok_threshold
    if not 0.0 < ok_share < 1.0:
        raise ValueError(f"ok_share must be in (0, 1), got {ok_share}")
    if ok.all() or not ok.any():
        return np.full(len(ok), 1.0 / max(len(ok), 1))
    return np.where(ok, ok_share / ok.sum(), (1.0 - ok_share) / (~ok).sum())


def weighted_pearson(x: Sequence[float], y: Sequence[float], w: Sequence[float]) -> float:
    """Pearson correlation of ``x`` and ``y`` with observation weights ``w``."""
    x, y, w = (np.asarray(v, dtype=float) for v in (x, y, w))
    w = w / w.sum()
    mx, my = (w * x).sum(), (w * y).sum()
    return float((w * (x - mx) * (y - my)).sum() / math.sqrt((w * (x - mx) ** 2).sum() * (w * (y - my) ** 2).sum()))


def binary_agreement(pred_ok: Sequence[bool], gold_ok: Sequence[bool]) -> Dict[str, float]:
    """Accuracy, and precision/recall/F1 of the not-OK class."""
    p = np.asarray(pred_ok, dtype=bool)
    g = np.asarray(gold_ok, dtype=bool)
    tp = int(np.sum(~p & ~g))
    fp = int(np.sum(~p & g))
    fn = int(np.sum(p & ~g))
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return {
        "accuracy": float(np.mean(p == g)) if len(g) else float("nan"),
        "precision_not_ok": precision,
        "recall_not_ok": recall,
        "f1_not_ok": f1,
        "n": int(len(g)),
        "gold_not_ok": int(np.sum(~g)),
        "majority_accuracy": float(max(np.mean(g), 1 - np.mean(g))) if len(g) else float("nan"),
    }


def auc_not_ok(scores: Sequence[float], gold_ok: Sequence[bool]) -> float:
    """ROC AUC of telling OK from not-OK by score: P(score(OK) > score(not OK)), ties count half."""
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=float)
    g = np.asarray(gold_ok, dtype=bool)
    n_ok, n_bad = int(g.sum()), int((~g).sum())
    if n_ok == 0 or n_bad == 0:
        return float("nan")
    ranks = rankdata(s)
    return float((ranks[g].sum() - n_ok * (n_ok + 1) / 2) / (n_ok * n_bad))


def best_threshold_agreement(scores: Sequence[float], gold_ok: Sequence[bool]) -> Dict[str, float]:
    """Binary agreement at the score threshold that maximizes accuracy on these data.

    An *oracle* upper bound for score-only metrics (the threshold is fitted on
    the test data); ``score >= threshold`` counts as OK.
    """
    s = np.asarray(scores, dtype=float)
    g = np.asarray(gold_ok, dtype=bool)
    candidates = np.unique(s)
    candidates = np.append(candidates, np.inf)  # everything not OK
    order = np.argsort(s)
    s_sorted, g_sorted = s[order], g[order]
    # Items below the threshold are predicted not-OK: correct where gold is not-OK.
    cum_bad = np.concatenate([[0], np.cumsum(~g_sorted)])
    cum_ok = np.concatenate([[0], np.cumsum(g_sorted)])
    below = np.searchsorted(s_sorted, candidates, side="left")
    correct = cum_bad[below] + (g.sum() - cum_ok[below])
    best = int(np.argmax(correct))
    threshold = float(candidates[best])
    result = binary_agreement(s >= threshold, g)
    result["threshold"] = threshold
    result["auc"] = auc_not_ok(s, g)
    return result


def label_accuracy(pred: Sequence[str], gold: Sequence[str]) -> Dict[str, object]:
    """Accuracy over multi-way labels, with the confusion counts."""
    pairs: Dict[str, int] = {}
    for p, g in zip(pred, gold):
        key = f"{g} -> {p}"
        pairs[key] = pairs.get(key, 0) + 1
    correct = sum(p == g for p, g in zip(pred, gold))
    return {"accuracy": correct / len(gold) if gold else float("nan"), "n": len(gold), "confusion": pairs}


def reranking(correct: Sequence[float], incorrect: Sequence[float], seed: int = 0) -> Dict[str, float]:
    """How often the correct candidate scores higher; ties broken at random (fixed seed)."""
    c, i = np.asarray(correct, dtype=float), np.asarray(incorrect, dtype=float)
    wins, ties = int(np.sum(c > i)), int(np.sum(c == i))
    rng = np.random.default_rng(seed)
    tie_wins = int(rng.integers(0, 2, size=ties).sum())
    n = len(c)
    return {
        "accuracy": (wins + tie_wins) / n if n else float("nan"),
        "accuracy_ties_half": (wins + ties / 2) / n if n else float("nan"),
        "wins": wins,
        "ties": ties,
        "losses": n - wins - ties,
        "n": n,
    }
