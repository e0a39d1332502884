"""The combined score and label of one output, from its components' per-example results.

Pure functions over plain dicts: the weights (``weights.json``, written by
``python -m training.semantic_accuracy.fit``) and each component's per-example
dict as its own module returns it (extra keys are ignored).
"""

import json
import os
from typing import Dict, List, Mapping, Optional, Sequence

WEIGHTS_NAME = "weights.json"

OK = "OK"
OMISSION = "omission"
HALLUCINATION = "hallucination"
BOTH = "omission+hallucination"  # nli_semantic_accuracy's name for it
LABELS = (OK, OMISSION, HALLUCINATION, BOTH)


def weights_file() -> str:
    """weights.json beside this file, or in the metric's own folder: evaluate runs a copy of the
    module's Python files from its cache, without the JSON (d2t_metrics.metric_path finds the folder)."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), WEIGHTS_NAME)
    if os.path.isfile(here):
        return here
    from d2t_metrics import metric_path

    return os.path.join(metric_path("semantic_accuracy"), WEIGHTS_NAME)


def load_weights(path: Optional[str] = None) -> Dict:
    with open(path or weights_file(), encoding="utf-8") as f:
        return json.load(f)


def accuracy_recall_f1(example: Mapping) -> float:
    """fact_accuracy's accuracy and recall joined as an F1, None counted as 0 (benchmarks.adapters'
    rule, which made the stored scores the weights were fitted on)."""
    accuracy, recall = example.get("score") or 0.0, example.get("recall") or 0.0
    return 0.0 if accuracy + recall == 0 else 2 * accuracy * recall / (accuracy + recall)


def component_score(example: Mapping, rule: str) -> float:
    """The number a component contributes for one output (``rule`` from weights.json)."""
    if rule == "accuracy_recall_f1":
        return float(accuracy_recall_f1(example))
    if rule == "score":
        value = example.get("score")
        if value is None:
            raise ValueError(f"a component example has no score: {sorted(example)}")
        return float(value)
    raise ValueError(f"unknown score rule {rule!r} in weights.json")


def combined_score(values: Sequence[float], fitted: Mapping) -> float:
    """Standardize, weigh, add the intercept (a predicted mean semantics rating, 1-3),
    and map to [0, 1] as the fit did: ``(rating - 1) / 2``, clipped."""
    rating = fitted["intercept"] + sum(
        (v - m) / s * c for v, m, s, c in zip(values, fitted["mean"], fitted["scale"], fitted["coef"]))
    return min(1.0, max(0.0, (rating - 1.0) / 2.0))


# ---------------------------------------------------------------- labels


def omission_evidence(parts: Mapping[str, Mapping]) -> List[str]:
    """The components that locate an omission: NLI's omitted facts, data_questeval's missing values."""
    found = []
    if parts.get("nli_semantic_accuracy", {}).get("omitted_facts"):
        found.append("nli_semantic_accuracy")
    if parts.get("data_questeval", {}).get("missing"):
        found.append("data_questeval")
    return found


def hallucination_evidence(parts: Mapping[str, Mapping]) -> List[str]:
    """The components that locate a hallucination: NLI's failed hallucination check,
    fact_accuracy's contradicted facts, data_questeval's unsupported answers."""
    found = []
    if parts.get("nli_semantic_accuracy", {}).get("hallucination"):
        found.append("nli_semantic_accuracy")
    for name, part in parts.items():
        if name.startswith("fact_accuracy") and part.get("contradicted"):
            found.append(name)
    if parts.get("data_questeval", {}).get("unsupported"):
        found.append("data_questeval")
    return found


def side_means(parts: Mapping[str, Mapping]) -> Dict[str, Optional[float]]:
    """Each component's evidence of coverage (recall side) and of support (precision side), averaged:
    NLI's lowest omission-check entailment vs its hallucination-check entailment, data_questeval's
    recall vs precision, fact_accuracy's recall vs accuracy. Missing values are left out."""
    recall, precision = [], []
    nli = parts.get("nli_semantic_accuracy")
    if nli:
        checks = nli.get("checks") or []
        om = [c["probabilities"].get("entailment", 0.0) for c in checks if c.get("type") == "omission"]
        ha = [c["probabilities"].get("entailment", 0.0) for c in checks if c.get("type") == "hallucination"]
        recall += [min(om)] if om else []
        precision += ha[:1]
    dqe = parts.get("data_questeval")
    if dqe:
        recall += [dqe["recall"]] if dqe.get("recall") is not None else []
        precision += [dqe["precision"]] if dqe.get("precision") is not None else []
    for name, part in parts.items():
        if name.startswith("fact_accuracy"):
            recall += [part["recall"]] if part.get("recall") is not None else []
            precision += [part["score"]] if part.get("score") is not None else []
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return {"recall": mean(recall), "precision": mean(precision)}


def label_of(score: float, threshold: float, parts: Mapping[str, Mapping]) -> Dict:
    """The 4-way label and why.

    OK when ``score >= threshold``. Below it: omission when a component locates
    a missing fact (:func:`omission_evidence`), hallucination when one locates
    an unsupported claim (:func:`hallucination_evidence`), both when both. With
    no located evidence, the likelier side: omission when the components' mean
    coverage evidence is lower than their mean support evidence
    (:func:`side_means`), else hallucination (also when neither side has any).
    """
    if score >= threshold:
        return {"label": OK, "label_basis": "score at or above the threshold", "omission_by": [], "hallucination_by": []}
    omission_by, hallucination_by = omission_evidence(parts), hallucination_evidence(parts)
    if omission_by or hallucination_by:
        label = BOTH if omission_by and hallucination_by else OMISSION if omission_by else HALLUCINATION
        return {"label": label, "label_basis": "located evidence", "omission_by": omission_by, "hallucination_by": hallucination_by}
    sides = side_means(parts)
    omission_likelier = sides["recall"] is not None and (sides["precision"] is None or sides["recall"] < sides["precision"])
    return {"label": OMISSION if omission_likelier else HALLUCINATION, "label_basis": "likelier side (no located evidence)",
            "omission_by": [], "hallucination_by": [], "sides": sides}


def corpus_scores(examples: Sequence[Mapping]) -> Dict[str, float]:
    """Mean score, OK rate and the share of each label, in input order."""
    n = len(examples)
    if n == 0:
        return {"score": 0.0, "ok_rate": 0.0, "omission_rate": 0.0, "hallucination_rate": 0.0, "both_rate": 0.0}
    share = lambda label: sum(e["label"] == label for e in examples) / n  # noqa: E731
    return {"score": sum(e["score"] for e in examples) / n, "ok_rate": share(OK), "omission_rate": share(OMISSION),
            "hallucination_rate": share(HALLUCINATION), "both_rate": share(BOTH)}
