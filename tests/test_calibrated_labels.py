"""Calibrated labels (issue #34, item 3): nli_semantic_accuracy's decision and threshold file,
the leave-category-out fit of training.nli_semantic_accuracy.calibrate, fact_accuracy's OK label
and benchmarks.nli_labels' reading of the E2E slot-error script."""

import importlib.util
import json
import os
import sys
import warnings

import evaluate
import numpy as np
import pytest

from conftest import ROOT, metric_path

NLI = metric_path("nli_semantic_accuracy")
TRIPLES = ["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot", "Alan_Bean | nationality | United_States"]
TEXTS = ["Alan Bean was born in Wheeler, Texas.", "Alan Bean was a test pilot from the United States.", "Wheeler is in Texas.",
         "Alan Bean, an American test pilot, was born in Wheeler, Texas."]


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


checks = _module(os.path.join(NLI, "checks.py"), "nli_checks")
fa_labels = _module(os.path.join(metric_path("fact_accuracy"), "labels.py"), "fa_labels")


@pytest.fixture(scope="module")
def tiny(tiny_nli):
    return evaluate.load(NLI, "default", model=tiny_nli)


def _run(metric, **options):
    return metric.compute(predictions=TEXTS, tables=[TRIPLES] * len(TEXTS), per_example=True, show_progress=False, **options)["examples"]


# ---------------------------------------------------------------- the threshold files


def test_nli_threshold_file_loads_and_holds_for_the_shipped_checkpoint():
    from d2t_metrics.checkpoints import checkpoint_fingerprint

    data = checks.load_calibration()
    entries = {(e["config"], e.get("verbalizer")): e for e in data["thresholds"]}
    assert ("default", None) in entries and data["rater_ok"] == "mean semantics >= 2.0"
    default = entries[("default", None)]  # templates, the metric's default
    assert 0.0 <= default["threshold"] <= 1.0
    assert default["model_fingerprint"] == checkpoint_fingerprint(os.path.join(ROOT, "checkpoints", "nli_semantic_accuracy"))
    assert set(default["out_of_fold"]["fold_thresholds"]) and len(default["out_of_fold"]["fold_thresholds"]) == 15
    assert checks.fitted_threshold(data, "default", default["model_fingerprint"]) == default["threshold"]
    assert checks.fitted_threshold(data, "default", "00000000") is None  # other weights: no threshold
    assert checks.fitted_threshold(data, "nonsense", default["model_fingerprint"]) is None
    assert checks.fitted_threshold(data, "default", None) is None
    # a verbalizer's sentences need their own threshold: none is fitted for one not shipped
    assert checks.fitted_threshold(data, "default", default["model_fingerprint"], "learned@00000000") is None


def test_shipped_checkpoint_signature_names_the_calibrated_decision():
    metric = evaluate.load(NLI, "default", model=os.path.join(ROOT, "checkpoints", "nli_semantic_accuracy"))
    t = {(e["config"], e.get("verbalizer")): e for e in checks.load_calibration()["thresholds"]}[("default", None)]["threshold"]
    assert metric.decision_rule() == ("calibrated", t)
    assert metric.signature().endswith(f"|decision:calibrated|t:{t:.6g}|pooling:mean_min")
    assert metric.signature(decision="paper").endswith("|decision:paper|pooling:mean_min")


def test_a_bad_threshold_file_is_refused(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"thresholds": [{"config": "default", "model_fingerprint": "ab", "threshold": 1.5}]}))
    with pytest.raises(ValueError, match="thresholds\\[0\\]"):
        checks.load_calibration(str(path))
    assert checks.load_calibration(str(tmp_path / "absent.json")) == {"thresholds": []}


def test_fact_accuracy_threshold_file_loads():
    data = fa_labels.load_calibration()
    entries = {e["config"]: e for e in data["thresholds"]}
    assert "default" in entries and 0.0 <= entries["default"]["threshold"] <= 1.0
    e = entries["default"]
    assert fa_labels.fitted_label_threshold(data, "default", e["model_fingerprint"], e["fuzzy_threshold"]) == e["threshold"]
    assert fa_labels.fitted_label_threshold(data, "default", e["model_fingerprint"], e["fuzzy_threshold"], "references") is None


# ---------------------------------------------------------------- the decision


def test_labels_follow_the_threshold_on_a_tiny_model(tiny):
    probe = _run(tiny, decision="paper")
    entailment = sorted(c["probabilities"]["entailment"] for ex in probe for c in ex["checks"])
    t = float(np.median(entailment))  # some checks on each side
    examples = _run(tiny, ok_threshold=t)
    n_pass = n_fail = 0
    for ex in examples:
        for c in ex["checks"]:
            assert c["entailed"] == (c["probabilities"]["entailment"] >= t)
            n_pass += c["entailed"]
            n_fail += not c["entailed"]
        omitted = {c["fact"] for c in ex["checks"] if c["type"] == "omission" and c["probabilities"]["entailment"] < t}
        assert {o["fact"] for o in ex["omitted_facts"]} == omitted
        hallucination = [c for c in ex["checks"] if c["type"] == "hallucination"][0]
        assert ex["hallucination"] == (hallucination["probabilities"]["entailment"] < t)
        assert ex["ok"] == (ex["confidence"] >= t)  # OK exactly when the confidence (lowest check) reaches t
    assert n_pass and n_fail
    assert all(ex["ok"] for ex in _run(tiny, ok_threshold=0.0))
    assert not any(ex["ok"] for ex in _run(tiny, ok_threshold=1.0))


def test_paper_decision_reproduces_the_argmax_labels_and_scores_do_not_change(tiny):
    paper = _run(tiny, decision="paper")
    for ex in paper:
        for c in ex["checks"]:
            assert c["entailed"] == (max(c["probabilities"], key=c["probabilities"].get) == "entailment")
        # the old rule, recomputed: the label from the argmax of each check
        omission = any(not c["entailed"] for c in ex["checks"] if c["type"] == "omission")
        hallucination = any(not c["entailed"] for c in ex["checks"] if c["type"] == "hallucination")
        assert ex["label"] == checks.label_of(omission, hallucination)
    calibrated = _run(tiny, ok_threshold=0.2)
    assert [e["score"] for e in calibrated] == [e["score"] for e in paper]
    assert [[c["probabilities"] for c in e["checks"]] for e in calibrated] == [[c["probabilities"] for c in e["checks"]] for e in paper]


def test_a_model_without_a_fitted_threshold_falls_back_to_the_paper_decision(tiny_nli):
    metric = evaluate.load(NLI, "default", model=tiny_nli)
    assert metric.decision_rule() == ("paper", None)
    assert metric.signature().endswith("|decision:paper|pooling:mean_min")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        default = _run(metric)
        _run(metric)
    assert sum("no OK threshold was fitted" in str(w.message) for w in caught) == 1  # once per metric object
    assert [e["label"] for e in default] == [e["label"] for e in _run(metric, decision="paper")]


@pytest.mark.parametrize("options, message", [
    ({"decision": "strict"}, "decision must be one of"),
    ({"ok_threshold": 1.5}, "ok_threshold must be a number in \\[0, 1\\]"),
    ({"ok_threshold": True}, "ok_threshold must be a number"),
    ({"decision": "paper", "ok_threshold": 0.3}, "calibrated"),
])
def test_bad_decision_options_are_refused_before_the_model_loads(tiny_nli, options, message):
    metric = evaluate.load(NLI, "default", model=tiny_nli)
    metric.scorer = None
    metric.load_model = lambda: pytest.fail("the model was loaded")
    with pytest.raises(ValueError, match=message):
        metric.compute(predictions=TEXTS[:1], tables=[TRIPLES], **options)


# ---------------------------------------------------------------- the fit is leave-category-out


def test_calibration_fit_never_sees_the_held_out_category():
    from training.nli_semantic_accuracy import calibrate

    rng = np.random.default_rng(0)
    categories = np.repeat(np.array(["A", "B", "C", "D"]), 25)
    # each category's scores lie in its own interval, so a fit's inputs tell which categories it saw
    offset = {"A": 0.0, "B": 0.25, "C": 0.5, "D": 0.75}
    scores = np.array([offset[c] + 0.2 * rng.random() for c in categories])
    gold = rng.random(100) < 0.5
    seen_by = {}

    def spy(s, g):
        seen = {c for c, lo in offset.items() if np.any((s >= lo) & (s < lo + 0.25))}
        seen_by[len(seen_by)] = seen
        return float(np.min(s))

    folds = calibrate.loco_thresholds(scores, gold, categories, fitter=spy)
    assert sorted(folds) == ["A", "B", "C", "D"]
    for (held, _), seen in zip(sorted(folds.items()), seen_by.values()):
        assert held not in seen and len(seen) == 3
    # each output is labelled by its own category's fold threshold
    ok = calibrate.loco_ok(scores, categories, folds)
    assert ok.tolist() == [s >= folds[c] for s, c in zip(scores, categories)]


def test_fit_calibration_reports_out_of_fold_and_ships_the_all_data_fit():
    from benchmarks import generalization as gen
    from training.nli_semantic_accuracy import calibrate

    rng = np.random.default_rng(1)
    categories = np.repeat(np.array(["A", "B", "C", "D", "E"]), 40)
    semantics = rng.uniform(1, 3, size=200)
    scores = np.clip((semantics - 1) / 2 + rng.normal(0, 0.2, size=200), 0, 1)
    report = calibrate.fit_calibration(scores, semantics, categories, unseen=["D", "E"])
    assert report["threshold"] == gen.share_matching_threshold(scores, semantics >= 2.0)
    oof = report["out_of_fold"]["vs raters >= 2.0"]
    expected = calibrate.loco_ok(scores, categories, report["out_of_fold"]["fold_thresholds"])
    unseen = np.isin(categories, ["D", "E"])
    assert oof["unseen"]["metric_ok_share"] == pytest.approx(expected[unseen].mean())
    assert oof["seen"]["metric_ok_share"] == pytest.approx(expected[~unseen].mean())
    assert oof["all"]["rater_ok_share"] == pytest.approx(np.mean(semantics >= 2.0))
    for c, t in report["out_of_fold"]["fold_thresholds"].items():
        assert t == gen.share_matching_threshold(scores[categories != c], semantics[categories != c] >= 2.0)


# ---------------------------------------------------------------- fact_accuracy's label


def test_fact_accuracy_label_follows_the_threshold():
    example = {"score": 0.5, "recall": 1.0}
    assert fa_labels.label_score(example) == pytest.approx(2 / 3)
    assert fa_labels.label_score({"score": None, "recall": 0.5}) == 0.0
    assert fa_labels.ok_label(example, 0.6) == {"label_score": pytest.approx(2 / 3), "ok": True, "label": "OK"}
    assert fa_labels.ok_label(example, 0.7)["label"] == "not OK"
    assert fa_labels.ok_label(example, None) == {"label_score": pytest.approx(2 / 3)}  # no threshold: no label


# ---------------------------------------------------------------- E2E slot errors


def test_slot_error_diff_is_read_per_fact():
    from benchmarks import nli_labels

    diff = nli_labels.read_diff('"{""family_friendly"": {""yes"": 1, ""no"": -1}, ""rating"": {""5 out of 5"": -1}}"')
    assert nli_labels.fact_status("familyFriendly", "no", diff) == nli_labels.WRONG_VALUE
    assert nli_labels.fact_status("customer rating", "5 out of 5", diff) == nli_labels.MISSING
    assert nli_labels.fact_status("area", "riverside", diff) == nli_labels.STATED
    assert nli_labels.read_diff("{}") == {}
    with pytest.raises(ValueError, match="unknown E2E attribute"):
        nli_labels.fact_status("colour", "red", diff)
    examples = [{"checks": [{"type": "omission", "fact": "X | familyFriendly | no", "entailed": True},
                            {"type": "omission", "fact": "X | customer rating | 5 out of 5", "entailed": False},
                            {"type": "hallucination", "entailed": False}], "hallucination": True, "ok": False}]
    rows = [{"diff": json.dumps({"family_friendly": {"yes": 1, "no": -1}, "rating": {"5 out of 5": -1}}),
             "added": "0", "valerr": "1", "slot_error_ok": "0"}]
    facts = nli_labels.per_fact_rows(examples, rows)
    assert [(f["status"], f["flagged"]) for f in facts] == [("wrong value", False), ("missing", True)]
    measures = nli_labels.compare(examples, rows)["omission_per_fact"]
    assert measures["precision"] == 1.0 and measures["recall"] == 0.5 and measures["recall_missing"] == 1.0


# ---------------------------------------------------------------- labels in bf16: the float32 re-check

nli_model = _module(os.path.join(NLI, "nli_model.py"), "nli_model_for_tests")


def test_near_decision_reads_log_probabilities_against_each_decision():
    near = nli_model.near_decision
    margin = nli_model.EXACT_MARGIN
    e = 0
    assert near([0.5, 0.4, 0.1], e, ["argmax"])  # log 0.5 - log 0.4 = 0.22 < 2 x 0.3
    assert not near([0.7, 0.2, 0.1], e, ["argmax"])  # 1.25 apart
    assert not near([0.7, 0.2, 0.1], e, [0.04])  # log 0.7 - log 0.04 = 2.9
    assert near([0.05, 0.9, 0.05], e, [0.04]) and not near([0.05, 0.9, 0.05], e, ["argmax"])
    just_in, just_out = 0.04 * math_exp(margin * 0.99), 0.04 * math_exp(margin * 1.01)
    assert near([just_in, 0.5, 0.5 - just_in], e, [0.04]) and not near([just_out, 0.5, 0.5 - just_out], e, [0.04])
    assert not near([0.0, 1.0, 0.0], e, [0.04, "argmax"]) and near([0.0, 1.0, 0.0], e, [0.0])  # no log(0) error
    assert not near([0.5, 0.4, 0.1], e, [])  # no decision, nothing near


def math_exp(x):
    import math

    return math.exp(x)


@pytest.fixture(scope="module")
def pairs_and_exact(tiny_nli):
    premises = [t for t in TEXTS for _ in TRIPLES]
    hypotheses = [f"{t.split(' | ')[0]} {t.split(' | ')[1]} {t.split(' | ')[2]}." for _ in TEXTS for t in TRIPLES]
    exact = nli_model.NLIScorer(tiny_nli)(premises, hypotheses, show_progress=False)
    return premises, hypotheses, exact


def test_rows_near_a_decision_are_scored_again_in_float32(tiny_nli, pairs_and_exact):
    import torch

    premises, hypotheses, exact = pairs_and_exact
    halved = nli_model.NLIScorer(tiny_nli, dtype=torch.bfloat16)
    e = halved.entailment_index
    plain = halved(premises, hypotheses, show_progress=False)
    assert halved.rescored == 0 and max(abs(a - b) for x, y in zip(plain, exact) for a, b in zip(x, y)) > 1e-5  # bf16 moves them
    far = halved(premises, hypotheses, show_progress=False, exact_near=[1e-12])
    assert halved.rescored == 0 and far == plain
    # which rows go back: those near the decision, by their probabilities (the tiny model's are all
    # near a third, so the rows are made up here), scored again from their features in float32
    features = [f for feats, _, _ in halved._plan(premises, hypotheses) for f in feats]
    assert len(features) == len(premises)  # short pairs: one window each, in order
    made_up = [[0.05] * 3 for _ in features]
    for i, row in enumerate(made_up):
        row[e] = 0.045 if i in (2, 5) else 0.9  # near t = 0.04 (log-distance 0.12) or far from it (3.1)
    back = halved.rescore_near_decisions(features, made_up, [0.04])
    assert halved.rescored == 2
    for i, (got, made, want) in enumerate(zip(back, made_up, exact)):
        assert got == (pytest.approx(want, abs=1e-6) if i in (2, 5) else made)
    # the tiny model's labels are near-uniform: every row is near its argmax, and comes back float32
    argmax = halved(premises, hypotheses, show_progress=False, exact_near=["argmax"])
    assert halved.rescored == len(plain) and all(got == pytest.approx(want, abs=1e-6) for got, want in zip(argmax, exact))


def test_metric_labels_in_bf16_are_the_float32_ones_unless_asked_otherwise(tiny, tiny_nli):
    import torch

    halved = evaluate.load(NLI, "default", model=tiny_nli, dtype=torch.bfloat16)
    exact, kept = _run(tiny, decision="paper"), _run(halved, decision="paper")
    assert [[c["entailed"] for c in ex["checks"]] for ex in kept] == [[c["entailed"] for c in ex["checks"]] for ex in exact]
    assert [ex["label"] for ex in kept] == [ex["label"] for ex in exact]
    assert halved.scorer.rescored > 0
    as_computed = _run(halved, decision="paper", exact_labels=False)
    assert halved.scorer.rescored == 0 and as_computed != kept
    assert halved.signature(exact_labels=False).endswith("|dtype:bfloat16|labels:as-computed")
    assert halved.signature().endswith("|dtype:bfloat16") and "labels:" not in tiny.signature(exact_labels=False)
    with pytest.raises(ValueError, match="exact_labels must be True or False"):
        halved.compute(predictions=TEXTS[:1], tables=[TRIPLES], exact_labels="yes")
