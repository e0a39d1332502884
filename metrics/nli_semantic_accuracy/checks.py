"""The two NLI checks of Dušek & Kasner (2020) and how their results combine.

For one example (a table and a text):

* omission check — premise: the text; hypothesis: each fact's sentence. A
  fact whose most likely label is not entailment is omitted;
* hallucination check — premise: all fact sentences joined by spaces;
  hypothesis: the text. If entailment is not the most likely label, the text
  says something the data does not.

The label is ``OK``, ``omission``, ``hallucination`` or
``omission+hallucination``; the confidence is the smallest entailment
probability over all checks (the paper's ``OK_confidence``).

**When does a check fail?** Two decisions (:data:`DECISIONS`):

* ``"paper"``: entailment is not the most likely label (Dušek & Kasner);
* ``"calibrated"`` (the metric's default where a threshold was fitted for
  its model): the entailment probability is below a threshold ``t``, fitted
  on WebNLG 2017's rated outputs so that the share of outputs labelled OK
  matches the raters' (``calibration.json``, written by
  ``python -m training.nli_semantic_accuracy.calibrate``). An output is OK
  exactly when its confidence is >= t, so the scores are the same under
  both decisions; only the labels differ.

A pair too long for the model is windowed by the scorer (``nli_model``: the
text in overlapping windows for the omission check, in sentence parts for
the hallucination check); the example's ``truncated`` is True only when a
check still had to cut something it never read (a single sentence longer
than half the model's window), and every check reports its own
``truncated`` and the number of ``windows`` it was read in.

This module holds no model: :func:`plan_checks` lists the pairs to score and
:func:`combine` turns their probabilities into the example's result, so the
logic is testable with any scorer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from d2t_metrics import calibration
from d2t_metrics.tables import short_repr

OK = "OK"
PAPER = "paper"
CALIBRATED = "calibrated"
DECISIONS = (CALIBRATED, PAPER)
OMISSION = "omission"
HALLUCINATION = "hallucination"
BOTH = "omission+hallucination"
LABELS_4WAY = (OK, OMISSION, HALLUCINATION, BOTH)


@dataclass(frozen=True)
class Fact:
    triple: str  # "subject | predicate | object"
    sentence: str
    optional: bool = False
    source: str = "template"  # what wrote the sentence: "template", "learned" or "backoff"


@dataclass(frozen=True)
class Check:
    example: int
    kind: str  # "omission" or "hallucination"
    premise: str
    hypothesis: str
    fact: Optional[int] = None  # index into the example's facts (omission checks)


def is_optional(triple, kind: str, e2e_ignore_restaurant: bool) -> bool:
    """E2E's ``eatType[restaurant]`` is optional under the paper's lenient switch:
    an omitted "X is a restaurant" is not an omission."""
    return (
        e2e_ignore_restaurant
        and kind == "e2e"
        and triple.predicate.replace(" ", "").replace("_", "").lower() == "eattype"
        and triple.object.strip().lower() == "restaurant"
    )


def make_facts(table, verbalizer: Callable, e2e_ignore_restaurant: bool = False) -> List[Fact]:
    """One :class:`Fact` per triple of ``table`` (E2E: the name is the subject of every fact).
    ``verbalizer`` is a ``d2t_metrics.verbalize.Verbalizer`` (its sentences say where they came
    from) or any callable from a triple to its sentence."""
    triples = table.to_triples()
    if hasattr(verbalizer, "table_sentences"):
        written = verbalizer.table_sentences(triples)
    else:
        written = [(verbalizer(t), "template") for t in triples]
    return [Fact(str(t), sentence, is_optional(t, table.kind, e2e_ignore_restaurant), source)
            for t, (sentence, source) in zip(triples, written)]


def plan_checks(example: int, facts: Sequence[Fact], text: str) -> List[Check]:
    """The NLI pairs of one example: one omission check per non-optional fact, one hallucination check."""
    checks = [Check(example, OMISSION, text, f.sentence, j) for j, f in enumerate(facts) if not f.optional]
    # Optional facts stay in the premise: a text that mentions them is no hallucination.
    checks.append(Check(example, HALLUCINATION, " ".join(f.sentence for f in facts), text))
    return checks


def passes_threshold(probabilities: Dict[str, float], threshold: float) -> bool:
    """The calibrated decision for one check: its entailment probability is at least ``threshold``."""
    return float(probabilities.get("entailment", 0.0)) >= threshold


def check_decision(decision: str, ok_threshold: Optional[float]) -> None:
    """``ValueError`` for a decision or threshold the metric cannot apply (before any model loads)."""
    if decision not in DECISIONS:
        raise ValueError(f"decision must be one of {list(DECISIONS)}, got {decision!r}")
    if ok_threshold is None:
        return
    if decision == PAPER:
        raise ValueError("ok_threshold is used by decision='calibrated' only; the paper's decision takes none")
    if isinstance(ok_threshold, bool) or not isinstance(ok_threshold, (int, float)) or not 0.0 <= float(ok_threshold) <= 1.0:
        raise ValueError(f"ok_threshold must be a number in [0, 1], got {ok_threshold!r}")


def calibration_file() -> str:
    """calibration.json beside this file, or in the metric's own folder (d2t_metrics.calibration)."""
    return calibration.calibration_file("nli_semantic_accuracy", __file__)


def load_calibration(path: Optional[str] = None) -> Dict:
    """The fitted thresholds and their provenance; ``{"thresholds": []}`` when the file is absent."""
    return calibration.load_calibration(path or calibration_file())


def fitted_threshold(calibration: Dict, config: str, model_fingerprint: Optional[str],
                     verbalizer: Optional[str] = None) -> Optional[float]:
    """The threshold fitted for this config, these model weights and this verbalizer (None:
    templates only; else the learned verbalizer's fingerprint), or None: a threshold is only
    valid for the model whose probabilities it was fitted on, and the sentences it read."""
    if not model_fingerprint:
        return None
    for entry in calibration.get("thresholds", []):
        if (entry.get("config") == config and entry.get("model_fingerprint") == model_fingerprint
                and entry.get("verbalizer") == verbalizer):
            return float(entry["threshold"])
    return None


# How an example's checks make its score (the label and the confidence never change):
# "min", the paper's confidence (the lowest entailment probability); "mean" over all checks;
# "mean_min", the average of the two (the default: chosen by leaving one WebNLG 2017 category
# out in all 15 folds, benchmarks.nli_pooling). One failed check of many then lowers the score
# without zeroing it, as raters lower their rating.
POOLINGS = ("mean_min", "mean", "min")
DEFAULT_POOLING = "mean_min"


def check_pooling(pooling) -> None:
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {list(POOLINGS)}, got {short_repr(pooling)}")


def pooled_score(entailment: Sequence[float], pooling: str = DEFAULT_POOLING) -> float:
    """The example's score from its checks' entailment probabilities (0.0 without checks).

    >>> pooled_score([0.9, 0.1, 0.8], "min"), round(pooled_score([0.9, 0.1, 0.8], "mean"), 3)
    (0.1, 0.6)
    >>> round(pooled_score([0.9, 0.1, 0.8]), 3)
    0.35
    """
    check_pooling(pooling)
    values = [float(v) for v in entailment]
    if not values:
        return 0.0
    low, mean = min(values), sum(values) / len(values)
    return {"min": low, "mean": mean, "mean_min": (low + mean) / 2}[pooling]


def label_of(omission: bool, hallucination: bool) -> str:
    if omission and hallucination:
        return BOTH
    if omission:
        return OMISSION
    if hallucination:
        return HALLUCINATION
    return OK


def combine(
    facts: Sequence[Fact],
    checks: Sequence[Check],
    probabilities: Sequence[Dict[str, float]],
    passed: Sequence[bool],
    pooling: str = DEFAULT_POOLING,
) -> Dict:
    """The per-example result from its checks' probabilities and pass/fail decisions;
    ``score`` pools the entailment probabilities by ``pooling`` (:func:`pooled_score`).

    ``probabilities`` are ``{label: probability}`` dicts; those of the NLI
    scorer (``nli_model.LabelProbabilities``) also carry ``truncated`` and
    ``windows``, plain dicts count as read whole in one window."""
    omitted, raw = [], []
    hallucination = False
    for check, probs, ok in zip(checks, probabilities, passed):
        entry = {
            "type": check.kind, "hypothesis": check.hypothesis, "probabilities": dict(probs), "entailed": bool(ok),
            "truncated": bool(getattr(probs, "truncated", False)), "windows": int(getattr(probs, "windows", 1)),
        }
        if check.kind == OMISSION:
            fact = facts[check.fact]
            entry["fact"] = fact.triple
            if not ok:
                omitted.append({"fact": fact.triple, "sentence": fact.sentence, "probabilities": dict(probs)})
        else:
            hallucination = not ok
        raw.append(entry)
    entailment = [p.get("entailment", 0.0) for p in probabilities]
    confidence = min(entailment) if entailment else 0.0
    label = label_of(bool(omitted), hallucination)
    return {
        "score": pooled_score(entailment, pooling),
        "confidence": float(confidence),
        "label": label,
        "ok": label == OK,
        "omission": bool(omitted),
        "hallucination": hallucination,
        "omitted_facts": omitted,
        "facts": [f.sentence for f in facts],
        "verbalized_by": [f.source for f in facts],
        "truncated": any(entry["truncated"] for entry in raw),
        "checks": raw,
    }


def corpus_summary(examples: Sequence[Dict]) -> Dict[str, float]:
    """Corpus rates of the 4-way labels, the mean score and the mean confidence."""
    n = len(examples)
    if n == 0:
        return {"score": 0.0, "ok_rate": 0.0, "omission_rate": 0.0, "hallucination_rate": 0.0, "confidence": 0.0}
    return {
        "score": sum(e["score"] for e in examples) / n,
        "ok_rate": sum(e["ok"] for e in examples) / n,
        "omission_rate": sum(e["omission"] for e in examples) / n,
        "hallucination_rate": sum(e["hallucination"] for e in examples) / n,
        "confidence": sum(e["confidence"] for e in examples) / n,
    }
