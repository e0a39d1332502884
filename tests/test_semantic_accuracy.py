"""metrics/semantic_accuracy: the combination, the labels, the per-fact merge, the input checks
before any component loads, and the out-of-fold fit (training/semantic_accuracy/fit.py)."""

import json
import os
import sys

import numpy as np
import pytest

from d2t_metrics.runner import load_metric_class

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "metrics", "semantic_accuracy")
TABLE = ["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot"]
BORN, PILOT = TABLE

# Weights of a made-up two-component feature set (not the shipped ones): the arithmetic is checked by hand.
FAKE_WEIGHTS = {"version": "test", "feature_sets": {name: {
    "features": ["nli_semantic_accuracy", "fact_accuracy"],
    "components": {"nli_semantic_accuracy": {"metric": "nli_semantic_accuracy", "config": "default", "options": {}, "score": "score"},
                   "fact_accuracy": {"metric": "fact_accuracy", "config": "default", "options": {"ground_truth": "table"},
                                     "score": "accuracy_recall_f1"}},
    "mean": [0.5, 0.4], "scale": [0.25, 0.5], "coef": [0.3, 0.2], "intercept": 2.0, "threshold": 0.6,
} for name in ("default", "fast")}}


def nli_example(born=0.9, pilot=0.1, hallucination_entailment=0.8):
    checks = [{"type": "omission", "fact": BORN, "hypothesis": "Alan Bean was born in Wheeler, Texas.",
               "probabilities": {"entailment": born}, "entailed": born > 0.5, "truncated": False},
              {"type": "omission", "fact": PILOT, "hypothesis": "Alan Bean was a test pilot.",
               "probabilities": {"entailment": pilot}, "entailed": pilot > 0.5},
              {"type": "hallucination", "hypothesis": "text", "probabilities": {"entailment": hallucination_entailment},
               "entailed": hallucination_entailment > 0.5}]
    omitted = [{"fact": c["fact"]} for c in checks[:2] if not c["entailed"]]
    return {"score": min(born, pilot, hallucination_entailment), "omitted_facts": omitted,
            "hallucination": hallucination_entailment <= 0.5, "checks": checks, "extra_key": 1}


def fa_example(contradicted=False):
    stated = {"subject": "Alan Bean", "relation": "birthPlace", "object": "Wheeler, Texas", "evidence": "born in Wheeler"}
    wrong = {"subject": "Alan Bean", "relation": "occupation", "object": "cook", "expected": ["Test_pilot"], "evidence": "a cook"}
    return {"score": 0.5 if contradicted else 1.0, "recall": 0.5, "supported": [stated],
            "contradicted": [wrong] if contradicted else [], "unverifiable": [{"subject": "Alan Bean", "relation": "likes", "object": "tea"}],
            "missing": [{"subject": "Alan_Bean", "relation": "occupation", "object": "Test_pilot"}], "truncated": False}


class FakeComponent:
    """Returns given per-example dicts; counts its calls."""

    def __init__(self, examples):
        self.examples, self.calls = examples, []

    def compute(self, predictions, tables, **options):
        self.calls.append((len(predictions), options))
        return {"examples": [dict(e) for e in self.examples[: len(predictions)]]}

    def signature(self, **options):
        return "fake|" + ",".join(f"{k}:{v}" for k, v in sorted(options.items()))


def metric_class():
    cls, _ = load_metric_class(FOLDER)
    return cls


def module_of(cls):
    return sys.modules[cls.__module__]


def construct(components=None, weights=FAKE_WEIGHTS, config="default", **kwargs):
    """The metric built directly (no download_and_prepare), its components replaced by fakes."""
    cls = metric_class()
    metric = cls(config_name=config, weights=weights, **kwargs)
    if components is not None:
        metric.components = components
    return metric


# ---------------------------------------------------------------- combination


def test_combined_score_is_the_weights_applied_by_hand():
    nli = [nli_example(born=0.9, pilot=0.2), nli_example(born=0.7, pilot=0.9)]
    fa = [fa_example(), fa_example(contradicted=True)]
    metric = construct({"nli_semantic_accuracy": FakeComponent(nli), "fact_accuracy": FakeComponent(fa)})
    out = metric.compute(predictions=["a", "b"], tables=[TABLE, TABLE], per_example=True, show_progress=False)
    w = FAKE_WEIGHTS["feature_sets"]["default"]
    expected = []
    for n, f in zip(nli, fa):
        f1 = 2 * f["score"] * f["recall"] / (f["score"] + f["recall"])
        rating = w["intercept"] + (n["score"] - 0.5) / 0.25 * 0.3 + (f1 - 0.4) / 0.5 * 0.2
        expected.append(min(1.0, max(0.0, (rating - 1) / 2)))
    assert [e["score"] for e in out["examples"]] == pytest.approx(expected, abs=1e-12)
    assert out["score"] == pytest.approx(np.mean(expected), abs=1e-12)
    assert out["examples"][0]["components"]["fact_accuracy"] == pytest.approx(2 * 0.5 / 1.5)
    # each component ran once for the whole batch, with its fitted options and per_example
    calls = metric.components["fact_accuracy"].calls
    assert len(calls) == 1 and calls[0][0] == 2 and calls[0][1]["ground_truth"] == "table" and calls[0][1]["per_example"]
    assert metric.corpus_scores(out["examples"]) == {k: v for k, v in out.items() if k != "examples"}


def test_fact_accuracy_none_scores_count_as_zero():
    from metrics.semantic_accuracy.combine import accuracy_recall_f1

    assert accuracy_recall_f1({"score": None, "recall": None}) == 0.0
    assert accuracy_recall_f1({"score": 1.0, "recall": None}) == 0.0
    assert accuracy_recall_f1({"score": 0.5, "recall": 1.0}) == pytest.approx(2 / 3)


# ---------------------------------------------------------------- labels


@pytest.mark.parametrize("parts, label, basis", [
    ({"nli_semantic_accuracy": {"omitted_facts": [{"fact": PILOT}]}}, "omission", "located evidence"),
    ({"data_questeval": {"missing": ["Test pilot"]}}, "omission", "located evidence"),
    ({"nli_semantic_accuracy": {"hallucination": True}}, "hallucination", "located evidence"),
    ({"fact_accuracy": {"contradicted": [{"object": "cook"}]}}, "hallucination", "located evidence"),
    ({"data_questeval": {"unsupported": ["Boston"]}}, "hallucination", "located evidence"),
    ({"data_questeval": {"missing": ["x"], "unsupported": ["y"]}}, "omission+hallucination", "located evidence"),
    # nothing located: the lower of the coverage and support evidence decides
    ({"data_questeval": {"recall": 0.2, "precision": 0.9}}, "omission", "likelier side (no located evidence)"),
    ({"fact_accuracy": {"recall": 0.9, "score": 0.3}}, "hallucination", "likelier side (no located evidence)"),
    ({"dae": {"score": 0.1}}, "hallucination", "likelier side (no located evidence)"),
])
def test_labels_below_the_threshold_follow_the_documented_rule(parts, label, basis):
    from metrics.semantic_accuracy.combine import label_of

    got = label_of(0.3, 0.5, parts)
    assert (got["label"], got["label_basis"]) == (label, basis)
    assert label_of(0.5, 0.5, parts)["label"] == "OK"  # at or above the threshold: OK whatever the evidence


def test_module_labels_and_rates():
    nli = [nli_example(born=0.9, pilot=0.9), nli_example(born=0.9, pilot=0.1), nli_example(hallucination_entailment=0.1, pilot=0.1)]
    fa = [fa_example(), fa_example(), fa_example(contradicted=True)]
    weights = json.loads(json.dumps(FAKE_WEIGHTS))
    weights["feature_sets"]["default"]["threshold"] = 0.7
    metric = construct({"nli_semantic_accuracy": FakeComponent(nli), "fact_accuracy": FakeComponent(fa)}, weights=weights)
    out = metric.compute(predictions=["a", "b", "c"], tables=[TABLE] * 3, per_example=True, show_progress=False)
    labels = [e["label"] for e in out["examples"]]
    assert [e["score"] >= 0.7 for e in out["examples"]] == [label == "OK" for label in labels]
    assert labels[1:] == ["omission", "omission+hallucination"]
    assert out["examples"][2]["hallucination_by"] == ["nli_semantic_accuracy", "fact_accuracy"]
    assert out["ok_rate"] == pytest.approx(labels.count("OK") / 3) and out["both_rate"] == pytest.approx(1 / 3)


# ---------------------------------------------------------------- per-fact merge


def test_each_components_evidence_lands_on_its_fact():
    from metrics.semantic_accuracy.evidence import fact_verdicts, text_claims

    dqe = {"missing": ["Test pilot"], "unsupported": ["Boston"], "sources": [{"source": "table", "from_source": [
        {"question": "Where was Alan Bean born?", "answer": "Wheeler , Texas", "predicted": "Wheeler, Texas", "score": 0.9},
        {"question": "What was Alan Bean?", "answer": "Test pilot", "predicted": "", "score": 0.1},
        {"question": "Who was born in Wheeler?", "answer": "Alan Bean", "predicted": "Alan Bean", "score": 1.0}]}]}
    parts = {"nli_semantic_accuracy": nli_example(born=0.9, pilot=0.1), "data_questeval": dqe, "fact_accuracy": fa_example(contradicted=True)}
    born, pilot = fact_verdicts(TABLE, parts)
    assert (born["fact"], pilot["fact"]) == (BORN, PILOT)
    assert born["nli"]["entailment"] == 0.9 and pilot["nli"]["entailment"] == 0.1
    assert [q["question"] for q in born["qa"]["questions"]] == ["Where was Alan Bean born?"] and born["qa"]["answered"]
    assert [q["question"] for q in pilot["qa"]["questions"]] == ["What was Alan Bean?"] and not pilot["qa"]["answered"]
    assert born["fact_accuracy"] == {"status": "found", "text_fact": parts["fact_accuracy"]["supported"][0]}
    assert pilot["fact_accuracy"]["status"] == "contradicted" and pilot["fact_accuracy"]["text_fact"]["object"] == "cook"
    assert (born["verdict"], pilot["verdict"]) == ("stated", "contradicted")
    assert "dae" not in born  # no DAE part, no DAE evidence
    # DAE's per-fact check (direction="both") is shown on its fact, and does not vote
    dae = {"facts": [{"fact": PILOT, "sentence": "Alan Bean was a test pilot.", "score": 0.2, "covered": False, "arcs": []}]}
    with_dae = fact_verdicts(TABLE, {**parts, "dae": dae})
    assert "dae" not in with_dae[0] and with_dae[1]["dae"] == {"sentence": "Alan Bean was a test pilot.", "score": 0.2, "covered": False}
    assert [f["verdict"] for f in with_dae] == [born["verdict"], pilot["verdict"]]
    claims = text_claims(parts)
    assert [(c["by"], c["status"]) for c in claims] == [("fact_accuracy", "contradicted"), ("fact_accuracy", "unverifiable"),
                                                         ("data_questeval", "unsupported")]
    # without a contradiction, a fact the components call missing is omitted; a split vote is unsure
    parts["fact_accuracy"] = fa_example()
    assert fact_verdicts(TABLE, parts)[1]["verdict"] == "omitted"
    only_two = {"nli_semantic_accuracy": nli_example(born=0.1), "fact_accuracy": {"missing": [], "supported": []}}
    assert fact_verdicts([BORN], only_two)[0]["verdict"] == "unsure"


# ---------------------------------------------------------------- inputs and options


def test_bad_inputs_are_refused_before_any_component_loads(monkeypatch):
    cls = metric_class()

    def must_not_load(*args, **kwargs):
        raise AssertionError("a component loaded")

    monkeypatch.setattr(module_of(cls), "load_component", must_not_load)
    metric = cls(config_name="default")
    with pytest.raises(ValueError, match="example 1: prediction is None"):
        metric.compute(predictions=["fine", None], tables=[TABLE, TABLE])
    with pytest.raises(ValueError, match="example 1"):
        metric.compute(predictions=["fine", "fine"], tables=[TABLE, ""])
    with pytest.raises(ValueError):
        metric.compute(predictions=["fine"], tables=[TABLE, TABLE])
    with pytest.raises(ValueError, match="batch_size"):
        metric.compute(predictions=["fine"], tables=[TABLE], batch_size=0)
    assert metric.components is None


def test_components_option_picks_only_a_fitted_feature_set():
    cls = metric_class()
    fast = cls(config_name="default", components=["fact_accuracy_openie", "dae_rule", "nli_semantic_accuracy"])
    assert fast.feature_set == "fast"
    with pytest.raises(ValueError, match="not a fitted feature set"):
        cls(config_name="default", components=["nli_semantic_accuracy"])
    with pytest.raises(ValueError, match="unknown config"):
        cls(config_name="nope")


def test_model_goes_to_each_component(tmp_path, monkeypatch):
    cls = metric_class()
    for name in ("nli_semantic_accuracy", "data_questeval", "fact_accuracy", "dae"):
        (tmp_path / name).mkdir()
    metric = cls(config_name="default", model=str(tmp_path))
    assert metric.models == {n: str(tmp_path / n) for n in ("nli_semantic_accuracy", "data_questeval", "fact_accuracy", "dae")}
    fast = cls(config_name="fast", model={"nli_semantic_accuracy": "/nli"})
    assert fast.models == {"nli_semantic_accuracy": "/nli", "dae_rule": None, "fact_accuracy_openie": None}
    assert cls(config_name="default").models == dict.fromkeys(metric.models)  # the components' own defaults
    partial = tmp_path / "partial"
    (partial / "nli_semantic_accuracy").mkdir(parents=True)
    with pytest.raises(ValueError, match="no data_questeval/"):
        cls(config_name="default", model=str(partial))
    loaded = []
    monkeypatch.setattr(module_of(cls), "load_component", lambda m, c, **kw: loaded.append((m, c, kw)) or FakeComponent([]))
    fast.load_model()
    assert loaded == [("nli_semantic_accuracy", "default", {"model": "/nli"}), ("dae", "rule", {}), ("fact_accuracy", "openie", {})]
    assert "weights:1.0@" in fast.signature() and "fact_accuracy_openie=[fake|ground_truth:table]" in fast.signature()


def test_fast_config_runs_with_real_model_free_components_and_a_tiny_nli(tiny_nli):
    pytest.importorskip("spacy")
    import d2t_metrics

    try:
        metric = d2t_metrics.load("semantic_accuracy", "fast", model={"nli_semantic_accuracy": tiny_nli})
    except OSError as e:  # spaCy's pipeline missing
        pytest.skip(str(e))
    out = metric.compute(predictions=["Alan Bean was born in Boston."], tables=[TABLE], per_example=True, show_progress=False)
    example = out["examples"][0]
    assert set(example["components"]) == {"nli_semantic_accuracy", "dae_rule", "fact_accuracy_openie"}
    assert [f["fact"] for f in example["facts"]] == TABLE and 0.0 <= example["score"] <= 1.0
    assert any(c["status"] == "contradicted" and c["object"] == "Boston" for c in example["text_claims"])


# ---------------------------------------------------------------- the fit


def test_out_of_fold_never_trains_on_the_held_out_category(monkeypatch):
    from training.semantic_accuracy import fit

    rng = np.random.default_rng(0)
    groups = np.repeat(["A", "B", "C", "D"], 25)
    X = np.column_stack([np.repeat([0.0, 1.0, 2.0, 3.0], 25), rng.random(100)])  # column 0 names the group
    y = 1 + 2 * rng.random(100)
    seen = []
    real = fit.fit_combined
    monkeypatch.setattr(fit, "fit_combined", lambda Xt, yt: seen.append(set(Xt[:, 0])) or real(Xt, yt))
    oof = fit.out_of_fold(X, y, groups)
    assert seen == [{1.0, 2.0, 3.0}, {0.0, 2.0, 3.0}, {0.0, 1.0, 3.0}, {0.0, 1.0, 2.0}]
    assert not np.isnan(oof["score"]).any() and oof["ok"].dtype == bool


def test_threshold_matches_the_training_ok_share():
    from training.semantic_accuracy import fit

    rng = np.random.default_rng(1)
    X = rng.random((200, 2))
    y = 1 + 2 * (0.6 * X[:, 0] + 0.4 * X[:, 1])
    model = fit.fit_combined(X, y)
    ok = fit.predict_scores(model, X) >= model["threshold"]
    assert abs(ok.mean() - np.mean(y >= 2.5)) <= 0.01


def test_shipped_weights_are_complete():
    with open(os.path.join(FOLDER, "weights.json"), encoding="utf-8") as f:
        weights = json.load(f)
    for name, entry in weights["feature_sets"].items():
        n = len(entry["features"])
        assert len(entry["mean"]) == len(entry["scale"]) == len(entry["coef"]) == n, name
        assert set(entry["components"]) == set(entry["features"]) and 0 < entry["threshold"] < 1
        assert all(c["signature"] for c in entry["components"].values())
        assert {"all", "seen", "unseen"} <= set(entry["out_of_fold"])


def test_fit_reproduces_the_shipped_weights(shared, tmp_path):
    from training.semantic_accuracy import fit

    out = tmp_path / "weights.json"
    assert fit.main(["--out", str(out)]) == 0
    with open(out, encoding="utf-8") as f:
        refit = json.load(f)
    with open(os.path.join(FOLDER, "weights.json"), encoding="utf-8") as f:
        shipped = json.load(f)
    for name, entry in shipped["feature_sets"].items():
        assert refit["feature_sets"][name]["coef"] == pytest.approx(entry["coef"], abs=1e-9)
        assert refit["feature_sets"][name]["out_of_fold"] == entry["out_of_fold"]
