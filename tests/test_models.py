"""Model loading (cache, errors, device, dtype) and length-sorted batching."""

import os

import pytest
import torch

from d2t_metrics import models
from d2t_metrics.models import (
    ModelNotAvailableError,
    default_dtype,
    get_device,
    length_sorted_batches,
    load_model,
    progress,
    run_batched,
    token_lengths,
)


def test_load_model_is_cached(tiny_nli):
    tok1, model1 = load_model(tiny_nli, device="cpu")
    tok2, model2 = load_model(tiny_nli, device="cpu")
    assert model1 is model2 and tok1 is tok2
    # A relative path to the same directory hits the same cache entry.
    rel = os.path.relpath(tiny_nli)
    assert load_model(rel, device="cpu")[1] is model1
    assert not model1.training
    assert model1.config.id2label == {0: "contradiction", 1: "neutral", 2: "entailment"}


def test_load_model_dtype_and_device(tiny_nli):
    _, fp32 = load_model(tiny_nli, device="cpu")
    _, bf16 = load_model(tiny_nli, device="cpu", dtype=torch.bfloat16)
    assert fp32 is not bf16
    assert next(fp32.parameters()).dtype == torch.float32
    assert next(bf16.parameters()).dtype == torch.bfloat16
    assert next(bf16.parameters()).device.type == "cpu"
    assert load_model(tiny_nli, device="cpu", dtype=torch.bfloat16)[1] is bf16


def test_load_model_tasks(tiny_seq2seq, tiny_encoder):
    _, seq2seq = load_model(tiny_seq2seq, task="seq2seq", device="cpu")
    assert seq2seq.config.is_encoder_decoder
    _, encoder = load_model(tiny_encoder, task="encoder", device="cpu")
    assert type(encoder).__name__ == "BertModel"
    with pytest.raises(ValueError, match="unknown task 'summarize'"):
        load_model(tiny_encoder, task="summarize")


@pytest.mark.parametrize("name", ["roberta-large-mnli", "/no/such/model/dir"])
def test_missing_model_says_how_to_pass_a_path(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailableError) as info:
        load_model(name, device="cpu", metric="nli_semantic_accuracy")
    message = str(info.value)
    assert name in message
    assert "Pass a local directory instead" in message
    assert "evaluate.load('./metrics/nli_semantic_accuracy'" in message
    assert "--model nli_semantic_accuracy=/path/to/model" in message
    assert "checkpoints/<metric>/" in message
    # It is an OSError, so code that catches loading failures generally still works.
    assert isinstance(info.value, OSError)


def test_get_device():
    assert get_device("cpu") == "cpu"
    assert get_device("cuda:1") == "cuda:1"
    assert get_device() == ("cuda" if torch.cuda.is_available() else "cpu")


def test_default_dtype(monkeypatch):
    assert default_dtype("cpu") is torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert default_dtype("cuda") is torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert default_dtype("cuda:0") is torch.float16


def test_length_sorted_batches():
    lengths = [3, 10, 1, 7, 7, 2]
    batches = length_sorted_batches(lengths, 4)
    assert batches == [[1, 3, 4, 0], [5, 2]]
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        length_sorted_batches(lengths, 0)


def test_run_batched_returns_input_order():
    items = ["ccc", "a", "eeeee", "bb", "dddd", "", "ffffff"]
    seen_batches = []

    def fn(batch):
        seen_batches.append(list(batch))
        return [s.upper() + "!" for s in batch]

    out = run_batched(items, [len(s) for s in items], fn, batch_size=3, show_progress=False)
    assert out == [s.upper() + "!" for s in items]
    # Batches were built longest first, so padding within a batch is small.
    assert seen_batches[0] == ["ffffff", "eeeee", "dddd"]
    assert [len(b) for b in seen_batches] == [3, 3, 1]


def test_run_batched_checks_result_count():
    with pytest.raises(RuntimeError, match="returned 1 results for 2 items"):
        run_batched(["a", "b"], [1, 1], lambda batch: [0], batch_size=2, show_progress=False)


def test_run_batched_empty():
    assert run_batched([], [], lambda b: b, show_progress=False) == []


def test_progress_switch(monkeypatch):
    data = [1, 2, 3]
    assert progress(data, enabled=False) is data
    monkeypatch.setenv("D2T_NO_PROGRESS", "1")
    assert progress(data) is data
    monkeypatch.delenv("D2T_NO_PROGRESS")
    bar = progress(data, total=3, desc="x")
    assert bar is not data and list(bar) == data


def test_token_lengths(tiny_nli):
    tokenizer, _ = load_model(tiny_nli, device="cpu")
    single = token_lengths(tokenizer, ["the city", "the city is near the river"])
    assert single[0] < single[1]
    pairs = token_lengths(tokenizer, ["the city"], ["a pub"])
    assert pairs[0] > single[0]


def test_clear_model_cache(tiny_encoder):
    _, first = load_model(tiny_encoder, task="encoder", device="cpu")
    models.clear_model_cache()
    _, second = load_model(tiny_encoder, task="encoder", device="cpu")
    assert first is not second
