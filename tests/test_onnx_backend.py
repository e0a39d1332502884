"""backend="onnx" (d2t_metrics.onnx_backend): ONNX Runtime runs the same batches as PyTorch,
with the same probabilities (to float32 rounding) and labels, and a bad backend is refused
before the model runs."""

import importlib.util

import evaluate
import numpy as np
import pytest

from conftest import metric_path

from d2t_metrics.onnx_backend import OnnxClassifier, check_backend

METRIC = metric_path("nli_semantic_accuracy")
TABLES = [["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot"]] * 4
TEXTS = ["Alan Bean was born in Wheeler, Texas and worked as a test pilot.", "Alan Bean was born in Boston.",
         "Alan Bean [SEP] was a test pilot <|endoftext|>.", "A much longer text that says nothing about the table " * 5]


@pytest.mark.parametrize("bad", ["tf", "ONNX", "", None, 3, ["onnx"], "onnx\ud800", "x" * 1_000_000, [[["onnx"]]]])
def test_an_unknown_backend_is_refused(bad):
    with pytest.raises(ValueError, match="backend must be one of 'torch', 'onnx'") as refused:
        check_backend(bad)
    assert len(str(refused.value)) < 200  # a megabyte value is not echoed whole


def test_onnx_is_refused_off_the_cpu_and_without_onnxruntime(monkeypatch):
    assert check_backend("onnx", "cpu") == "onnx" and check_backend("torch", "cuda") == "torch"
    with pytest.raises(ValueError, match="runs on the CPU.*'cuda:0'"):
        check_backend("onnx", "cuda:0")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(ValueError, match=r"needs onnxruntime: pip install \"d2t-metrics\[onnx\]\""):
        check_backend("onnx")


@pytest.mark.parametrize("model_type", ["bert", "roberta"])
def test_the_onnx_copy_gives_the_models_logits(tmp_path, model_type):
    import torch

    from d2t_metrics.models import load_model
    from d2t_metrics.testing import make_tiny_classifier

    path = make_tiny_classifier(str(tmp_path / model_type), model_type=model_type)
    tokenizer, model = load_model(path, device="cpu", metric="test")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tokenizer.model_input_names]
    onnx = OnnxClassifier(model, names, threads=1)
    # padded batches of other sizes and lengths than the traced one
    for texts in (["a"], ["a b c d e f g h i j k l m n", "b", "c d"], [f"w{i} " * (i + 1) for i in range(9)]):
        np_batch = tokenizer(texts, ["x y"] * len(texts), padding=True, return_tensors="np")
        with torch.inference_mode():
            expected = model(**{k: torch.from_numpy(v) for k, v in np_batch.items()}).logits.numpy()
        got = onnx(np_batch)
        assert got.shape == expected.shape and np.abs(got - expected).max() < 1e-4


def test_the_metric_with_onnx_gives_the_same_labels_and_scores(tiny_nli):
    metric = evaluate.load(METRIC, model=tiny_nli)
    torch_run = metric.compute(predictions=TEXTS, tables=TABLES, per_example=True, show_progress=False)
    onnx_run = metric.compute(predictions=TEXTS, tables=TABLES, per_example=True, show_progress=False, backend="onnx")
    assert [e["label"] for e in onnx_run["examples"]] == [e["label"] for e in torch_run["examples"]]
    assert np.allclose([e["score"] for e in onnx_run["examples"]], [e["score"] for e in torch_run["examples"]], atol=1e-5)
    assert onnx_run["score"] == pytest.approx(torch_run["score"], abs=1e-5)
    assert metric.signature(backend="onnx").endswith("|backend:onnx") and "backend" not in metric.signature()


class _MustNotRun:
    def __call__(self, *args, **kwargs):
        raise AssertionError("the model ran")


def test_a_bad_backend_is_refused_before_the_model_runs(tiny_nli):
    metric = evaluate.load(METRIC, model=tiny_nli)
    metric.scorer = _MustNotRun()
    for bad in ("tf", 1):
        with pytest.raises(ValueError, match="backend must be one of"):
            metric.compute(predictions=TEXTS[:1], tables=TABLES[:1], backend=bad)
    metric.device_name = "cuda"  # where the model would run (no GPU needed to check the refusal)
    with pytest.raises(ValueError, match="runs on the CPU"):
        metric.compute(predictions=TEXTS[:1], tables=TABLES[:1], backend="onnx")
