"""A per-output OK label for fact_accuracy, calibrated on WebNLG 2017's ratings (issue #34).

The per-fact verdicts (supported / contradicted / unverifiable / missing) stay
as they are; the output's label joins them through its score: the F1 of its
accuracy and recall (``label_score``, a missing accuracy or recall counted as
0, the number ``benchmarks.run`` correlates), OK when it is at least a
threshold ``t`` fitted so that the share of WebNLG 2017's rated outputs
labelled OK matches the raters' (mean semantics >= 2.0), per extractor
config and checkpoint (``calibration.json``, written by
``python -m training.fact_accuracy.calibrate_label``, which also reports it
out of fold, leave one category out).

A threshold holds for the extractor, checkpoint, matching settings and ground
truth it was fitted with: other settings get no label (no ``label`` / ``ok``
keys), rather than a label from another score distribution.
"""

from typing import Dict, Mapping, Optional

from d2t_metrics import calibration

OK = "OK"
NOT_OK = "not OK"


def label_score(example: Mapping) -> float:
    """The F1 of an example's accuracy (``score``) and ``recall``, None counted as 0."""
    accuracy, recall = example.get("score") or 0.0, example.get("recall") or 0.0
    return 0.0 if accuracy + recall == 0 else 2 * accuracy * recall / (accuracy + recall)


def calibration_file() -> str:
    """calibration.json beside this file, or in the metric's own folder (d2t_metrics.calibration)."""
    return calibration.calibration_file("fact_accuracy", __file__)


def load_calibration(path: Optional[str] = None) -> Dict:
    """The fitted thresholds and their provenance; ``{"thresholds": []}`` when the file is absent."""
    return calibration.load_calibration(path or calibration_file())


def fitted_label_threshold(calibration: Dict, config: str, model_fingerprint: Optional[str],
                           fuzzy_threshold: Optional[float], ground_truth: str = "table") -> Optional[float]:
    """The threshold fitted for these settings, or None."""
    for entry in calibration.get("thresholds", []):
        if (entry.get("config") == config and entry.get("model_fingerprint") == model_fingerprint
                and entry.get("fuzzy_threshold") == fuzzy_threshold and entry.get("ground_truth", "table") == ground_truth):
            return float(entry["threshold"])
    return None


def ok_label(example: Mapping, threshold: Optional[float]) -> Dict:
    """``label_score`` always; ``ok`` and ``label`` (``OK`` / ``not OK``) when a threshold applies."""
    score = label_score(example)
    if threshold is None:
        return {"label_score": score}
    ok = score >= threshold
    return {"label_score": score, "ok": ok, "label": OK if ok else NOT_OK}
