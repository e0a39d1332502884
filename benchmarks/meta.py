"""Turn one metric's scores on one data set into the meta-evaluation measures.

Plain dicts of floats come out, so they can be stored as JSON and rendered
later together with other metrics' stored results.
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from . import stats
from .adapters import Scores
from .data import HUMAN_ASPECTS, BenchDataset

WEBNLG_THRESHOLDS = (2.5, 2.0)


def _system_level(dataset: BenchDataset, sc: Scores, human: np.ndarray, mask: np.ndarray, n_resamples: int, seed: int) -> Dict[str, Dict]:
    """System-level Pearson (bootstrap mean) of metric vs ``human``, over items in ``mask``."""
    items = [it for it, keep in zip(dataset.items, mask) if keep]
    systems = sorted({it.system for it in items})
    ids = [it.input_id for it in items]
    sys_names = [it.system for it in items]
    human_grid = stats.grid(ids, sys_names, list(human[mask]), systems)
    out = {}
    mean_grid = stats.grid(ids, sys_names, list(sc.scores[mask]), systems)
    if sc.stats is not None:
        stat_grid = stats.grid(ids, sys_names, list(sc.stats[mask]), systems)
        out["pearson"] = stats.system_level_bootstrap(stat_grid, human_grid, n_resamples, seed, aggregate=sc.aggregate)
        out["pearson_mean_of_segments"] = stats.system_level_bootstrap(mean_grid, human_grid, n_resamples, seed)
    else:
        out["pearson"] = stats.system_level_bootstrap(mean_grid, human_grid, n_resamples, seed)
    return out


def _binary(sc: Scores, gold_ok: np.ndarray, mask: np.ndarray) -> Dict[str, Dict]:
    out = {"threshold": stats.best_threshold_agreement(sc.scores[mask], gold_ok[mask])}
    if sc.ok is not None:
        out["labels"] = stats.binary_agreement(np.asarray(sc.ok)[mask], gold_ok[mask])
    return out


def analyze_webnlg(dataset: BenchDataset, sc: Scores, uses_references: bool, n_boot: int = 1000, n_sys_boot: int = 500, seed: int = 0) -> Dict:
    items = dataset.items
    scores = sc.scores
    systems_mask = np.array([it.system != dataset.reference_system for it in items])
    ids = np.array([it.input_id for it in items])
    result: Dict = {"n": len(items), "n_systems_outputs": int(systems_mask.sum()), "n_bootstrap": n_boot, "segment": {}, "system": {}, "binary": {}}
    for aspect in HUMAN_ASPECTS:
        human = np.array([it.human[aspect] for it in items])
        result["segment"][aspect] = stats.bootstrap_correlations(scores[systems_mask], human[systems_mask], ids[systems_mask], n_boot, seed)
        result["system"][aspect] = _system_level(dataset, sc, human, systems_mask, n_sys_boot, seed)
    semantics = np.array([it.human["semantics"] for it in items])
    # The references' own text is one of their references: reference-based
    # metrics are judged on the 9 systems only; reference-free ones also on all
    # 2,230 outputs, as Dušek & Kasner did.
    subsets = {"systems": systems_mask}
    if not uses_references:
        subsets["all"] = np.ones(len(items), dtype=bool)
    for threshold in WEBNLG_THRESHOLDS:
        gold_ok = semantics >= threshold
        result["binary"][str(threshold)] = {name: _binary(sc, gold_ok, mask) for name, mask in subsets.items()}
    result["scatter"] = {
        "score": [round(float(v), 5) for v in scores[systems_mask]],
        "semantics": [round(float(v), 4) for v in semantics[systems_mask]],
    }
    return result


def analyze_e2e(dataset: BenchDataset, sc: Scores, n_sys_boot: int = 500, seed: int = 0) -> Dict:
    items = dataset.items
    gold_ok = np.array([bool(it.human["ok"]) for it in items])
    everything = np.ones(len(items), dtype=bool)
    result: Dict = {"n": len(items), "binary": {"2way": _binary(sc, gold_ok, everything)}}
    if sc.labels is not None:
        result["binary"]["4way"] = stats.label_accuracy(sc.labels, [it.human["label"] for it in items])
    # System level: metric vs each system's share of slot-error-free outputs.
    result["system"] = {"ok_rate": _system_level(dataset, sc, gold_ok.astype(float), everything, n_sys_boot, seed)}
    return result


def analyze_pairs(dataset: BenchDataset, sc: Scores, seed: int = 0) -> Dict:
    correct: Dict[int, float] = {}
    incorrect: Dict[int, float] = {}
    for it, s in zip(dataset.items, sc.scores):
        (correct if it.human["correct"] else incorrect)[it.input_id] = float(s)
    keys = sorted(correct)
    return {"n": len(keys), "rerank": stats.reranking([correct[k] for k in keys], [incorrect[k] for k in keys], seed)}


def analyze(dataset: BenchDataset, sc: Scores, uses_references: bool, n_boot: int, n_sys_boot: int, seed: int) -> Optional[Dict]:
    if dataset.name == "webnlg":
        return analyze_webnlg(dataset, sc, uses_references, n_boot, n_sys_boot, seed)
    if dataset.name == "e2e":
        return analyze_e2e(dataset, sc, n_sys_boot, seed)
    if dataset.name == "dae_pairs":
        return analyze_pairs(dataset, sc, seed)
    raise ValueError(f"no analysis for data set {dataset.name!r}")
