"""Decision thresholds fitted on human ratings, shipped beside a metric as ``calibration.json``.

A metric's labels (NLI's OK / omission / hallucination, fact_accuracy's OK / not OK) use a
threshold fitted by a training script (``training/<metric>/calibrate*.py``) and stored with its
provenance. The file sits in the metric's folder; ``evaluate.load`` runs a copy of the module's
Python files from its cache without the JSON, so the installed metric folder is the fall-back.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Optional

CALIBRATION_NAME = "calibration.json"


def calibration_file(metric: str, module_file: str) -> str:
    """``calibration.json`` beside ``module_file``, or in metric ``metric``'s own folder."""
    here = os.path.join(os.path.dirname(os.path.abspath(module_file)), CALIBRATION_NAME)
    if os.path.isfile(here):
        return here
    from d2t_metrics.locations import metric_path  # lazy: only when evaluate runs a cached copy

    return os.path.join(metric_path(metric), CALIBRATION_NAME)


def load_calibration(path: Optional[str]) -> Dict:
    """The fitted thresholds and their provenance; ``{"thresholds": []}`` when the file is absent.
    Raises ``ValueError`` naming the entry when a threshold is not a number in [0, 1]."""
    if not path or not os.path.isfile(path):
        return {"thresholds": []}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for i, entry in enumerate(data.get("thresholds", [])):
        t = entry.get("threshold")
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0.0 <= t <= 1.0:
            raise ValueError(f"{path}: thresholds[{i}] has no threshold in [0, 1] ({t!r})")
    return data
