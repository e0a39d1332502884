"""Signatures: what each metric's scores depend on, its arithmetic included, and the command line
printing them beside the scores (as sacrebleu does)."""

import json
import os
import textwrap

import evaluate
import pytest
import torch

from d2t_metrics import models
from d2t_metrics.cli import main
from d2t_metrics.models import arithmetic_label, arithmetic_part

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "examples.jsonl")


def metric_path(name):
    return os.path.join(ROOT, "metrics", name)


def pretend_gpu(monkeypatch):
    """The defaults a GPU with bf16 gives (``get_device(None)`` -> cuda, bf16), on this CPU; after
    the metrics are loaded (DAE loads its model with the metric)."""
    monkeypatch.setattr(models.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(models.torch.cuda, "is_bf16_supported", lambda: True)


@pytest.fixture
def lower_matmul_precision():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def test_exact_float32_is_named_by_nothing_and_everything_else_by_its_name(lower_matmul_precision):
    assert arithmetic_label("cpu", torch.float32) == "float32:high"  # TF32 on a GPU, bf16 passes on some CPUs
    torch.set_float32_matmul_precision("highest")
    assert arithmetic_label() is None and arithmetic_label("cpu") is None and arithmetic_part("cpu") == ""
    assert arithmetic_label("cpu", torch.bfloat16) == "bfloat16"
    assert arithmetic_label("cpu", "float16") == "float16"
    assert arithmetic_part("cpu", torch.bfloat16) == "|dtype:bfloat16"


def test_a_gpu_default_is_bf16_and_says_so(monkeypatch):
    pretend_gpu(monkeypatch)
    assert arithmetic_label() == "bfloat16" and arithmetic_label("cuda:1") == "bfloat16"
    assert arithmetic_label("cuda", torch.float32) is None  # asked for float32: the CPU's numbers
    assert arithmetic_label("cpu") is None


def test_nli_signature_names_a_dtype_other_than_float32():
    checkpoint = os.path.join(ROOT, "checkpoints", "nli_semantic_accuracy")
    default = evaluate.load(metric_path("nli_semantic_accuracy"), model=checkpoint).signature()
    assert "dtype:" not in default  # the recorded signatures stay as they were
    halved = evaluate.load(metric_path("nli_semantic_accuracy"), model=checkpoint, dtype=torch.bfloat16).signature()
    assert halved == default + "|dtype:bfloat16"


def test_dae_signature_names_the_arithmetic_of_its_model_and_none_for_the_rule(monkeypatch):
    neural, on_cpu, rule = (evaluate.load(metric_path("dae")), evaluate.load(metric_path("dae"), device="cpu"),
                            evaluate.load(metric_path("dae"), "rule"))
    assert "dtype:" not in neural.signature()
    assert neural.signature(pooling="min") == evaluate.load(metric_path("dae"), dtype=torch.bfloat16).signature(
        pooling="min").replace("|dtype:bfloat16", "")
    pretend_gpu(monkeypatch)
    assert neural.signature().endswith("|version:1.6|dtype:bfloat16")
    assert "dtype:" not in on_cpu.signature()
    assert "dtype:" not in rule.signature()  # no model: no arithmetic


def test_generative_metrics_name_the_gpu_default(monkeypatch):
    fact, fact_cpu, openie = (evaluate.load(metric_path("fact_accuracy")), evaluate.load(metric_path("fact_accuracy"), device="cpu"),
                              evaluate.load(metric_path("fact_accuracy"), "openie"))
    checkpoints = os.path.join(ROOT, "checkpoints", "data_questeval")  # the API's default is QuestEval's T5 models
    questeval, questeval_cpu = (evaluate.load(metric_path("data_questeval"), model=checkpoints),
                                evaluate.load(metric_path("data_questeval"), model=checkpoints, device="cpu"))
    assert "dtype:" not in fact.signature() and "dtype:" not in questeval.signature()
    pretend_gpu(monkeypatch)
    assert fact.signature().endswith("|version:1.8|dtype:bfloat16")
    assert "dtype:" not in fact_cpu.signature()
    assert "dtype:" not in openie.signature()  # spaCy only
    assert questeval.signature().endswith("|dtype:bfloat16")
    assert "dtype:" not in questeval_cpu.signature()


def test_parent_signature_names_its_settings():
    parent = evaluate.load(metric_path("parent"))
    assert parent.signature() == "parent|entailment:overlap|lambda:auto|smoothing:1e-05|max_order:4|tok:nltk"
    assert parent.signature(lambda_weight=0.5, tokenizer=str.split, batch_size=8) == (
        "parent|entailment:overlap|lambda:0.5|smoothing:1e-05|max_order:4|tok:custom")
    assert parent.signature(entailment="cooccurrence", cooccurrence_counts="/x/counts.json").endswith("|counts:counts.json")


def test_score_prints_each_signature_beside_the_scores(capsys, tmp_path):
    parent = evaluate.load(metric_path("parent"))
    assert main(["score", "--metrics", "parent", "--input", EXAMPLES, "--json", "--no-progress",
                 "--option", "parent.lambda_weight=0.5"]) == 0
    scores = json.loads(capsys.readouterr().out)["parent"]
    assert scores["signature"] == parent.signature(lambda_weight=0.5)  # the options it ran with
    assert set(scores) == {"precision", "recall", "f1", "signature"}
    assert main(["score", "--metrics", "parent", "--input", EXAMPLES, "--no-progress"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[-2] == "signatures" and table[-1].split() == ["parent", parent.signature()]


UNSIGNABLE = '''
import datasets
import evaluate


class Unsignable(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="fake", citation="", inputs_description="",
                                   features=datasets.Features({"predictions": datasets.Value("string")}))

    def signature(self, **options):
        raise RuntimeError("no idea")

    def _compute(self, predictions, per_example=False):
        out = {"n": len(predictions)}
        if per_example:
            out["examples"] = [{"length": len(p)} for p in predictions]
        return out
'''


def test_a_signature_that_fails_costs_a_warning_not_the_scores(capsys, tmp_path):
    folder = tmp_path / "metrics" / "unsignable"
    folder.mkdir(parents=True)
    (folder / "unsignable.py").write_text(textwrap.dedent(UNSIGNABLE), encoding="utf-8")
    (tmp_path / "checkpoints").mkdir()
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"prediction": "a"}\n{"prediction": "bcd"}\n', encoding="utf-8")
    assert main(["score", "--metrics", "unsignable", "--metrics-dir", str(tmp_path / "metrics"), "--input", str(inp),
                 "--json", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"unsignable": {"n": 2}}
    assert "unsignable could not say its signature (RuntimeError: no idea)" in err


MODELLED = """
import evaluate

from d2t_metrics.metric import D2TMetric


class Modelled(D2TMetric):
    CHECKPOINT = "modelled"

    def __init__(self, model=None, **kwargs):  # runs a model, takes no dtype
        super().__init__(**kwargs)

    def _info(self):
        return evaluate.MetricInfo(description="", citation="", inputs_description="", features=self.declared_features())

    def _compute(self, predictions, per_example=False, batch_size=None, show_progress=True):
        out = {"n": len(predictions)}
        if per_example:
            out["examples"] = [{"length": len(p)} for p in predictions]
        return out
"""


def test_dtype_reaches_the_model_metrics_and_their_signatures(capsys, tmp_path):
    args = ["score", "--metrics", "parent,nli_semantic_accuracy", "--input", EXAMPLES, "--json", "--no-progress"]
    assert main(args) == 0
    exact = json.loads(capsys.readouterr().out)
    assert main(args + ["--dtype", "bfloat16"]) == 0
    out, err = capsys.readouterr()
    halved = json.loads(out)
    assert "warning" not in err  # PARENT runs no model: nothing to tell it
    assert halved["parent"] == exact["parent"]
    assert halved["nli_semantic_accuracy"]["signature"] == exact["nli_semantic_accuracy"]["signature"] + "|dtype:bfloat16"
    assert halved["nli_semantic_accuracy"]["score"] == pytest.approx(exact["nli_semantic_accuracy"]["score"], abs=0.05)


def test_dtype_is_checked_and_a_metric_that_cannot_take_it_is_named(capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        main(["score", "--metrics", "parent", "--input", EXAMPLES, "--dtype", "int8"])
    assert stop.value.code == 2 and "invalid choice: 'int8'" in capsys.readouterr().err
    folder = tmp_path / "metrics" / "modelled"
    folder.mkdir(parents=True)
    (folder / "modelled.py").write_text(textwrap.dedent(MODELLED), encoding="utf-8")
    (tmp_path / "checkpoints" / "modelled").mkdir(parents=True)
    assert main(["score", "--metrics", "modelled", "--metrics-dir", str(tmp_path / "metrics"), "--input", EXAMPLES,
                 "--json", "--no-progress", "--dtype", "float16"]) == 0
    out, err = capsys.readouterr()
    assert "modelled takes no dtype: --dtype float16 does not apply to it" in err and json.loads(out)["modelled"]["n"] == 20


@pytest.mark.parametrize("metric", ["nli_semantic_accuracy", "dae", "fact_accuracy", "data_questeval", "semantic_accuracy"])
@pytest.mark.parametrize("bad", ["int8", 16, ["bfloat16"], "\ud800", "x" * 1_000_000])
def test_a_bad_dtype_is_refused_before_anything_loads(metric, bad):
    with pytest.raises(ValueError, match="dtype must be one of float32, bfloat16, float16") as e:
        evaluate.load(metric_path(metric), dtype=bad)
    assert len(str(e.value)) < 400


def test_explain_passes_dtype_on_too(capsys, monkeypatch):
    from d2t_metrics import runner

    told = []
    real = runner.arithmetic_arguments
    monkeypatch.setattr(runner, "arithmetic_arguments", lambda *a: told.append(real(*a)) or told[-1])
    assert main(["explain", "--input", EXAMPLES, "--metrics", "parent,nli_semantic_accuracy", "--dtype", "bfloat16",
                 "--width", "100"]) == 0
    assert told == [{}, {"dtype": "bfloat16"}]  # PARENT runs no model


def test_semantic_accuracy_passes_dtype_to_its_model_components_only():
    combined = evaluate.load(metric_path("semantic_accuracy"), "fast", model=os.path.join(ROOT, "checkpoints"), dtype="bfloat16")
    dtypes = {feature: getattr(metric, "dtype", None) for feature, metric in combined.load_model().items()}
    assert sorted(dtypes.values(), key=str) == [None, None, torch.bfloat16]  # NLI; DAE's rule and OpenIE run no model
    signature = combined.signature()
    assert signature.count("|dtype:bfloat16") == 1 and "nli_semantic_accuracy" in signature.split("|dtype:bfloat16")[0]
