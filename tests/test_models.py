"""Model loading (cache, errors, device, dtype) and length-sorted batching."""

import os

import pytest
import torch

from d2t_metrics import hub, models
from d2t_metrics.batching import length_sorted_batches, run_batched
from d2t_metrics.hub import ModelNotAvailableError, progress
from d2t_metrics.models import default_batch_size, default_dtype, get_device, load_model, token_lengths


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
    # a hub id that cannot be had: use a local copy; a path that does not exist: give one that does
    assert ("Pass an existing directory" if name.startswith("/") else "pass a local directory instead") in message
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


def test_default_batch_size_is_gpu_sized_on_a_gpu_only(monkeypatch):
    assert default_batch_size("cpu") == models.CPU_BATCH_SIZE == 32
    assert default_batch_size("cuda:1") == default_batch_size(torch.device("cuda")) == models.GPU_BATCH_SIZE == 256
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_batch_size() == 32  # no device given: the one get_device picks
    # greedy decoding's larger GPU default (fact_accuracy) is a GPU's only
    assert default_batch_size("cuda", gpu=models.GPU_GREEDY_BATCH_SIZE) == 1024
    assert default_batch_size("cpu", gpu=models.GPU_GREEDY_BATCH_SIZE) == 32


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


# ---------------------------------------------------------------- fast failures (issue #14)


@pytest.fixture()
def hub_must_not_be_asked(monkeypatch):
    """Online as far as huggingface_hub knows, and any from_pretrained call, or
    any request to the Hub (its reachability check included), fails the test:
    a failure that asks nothing is immediate, without timing it."""
    import huggingface_hub.constants
    import transformers

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)

    def asked(*args, **kwargs):
        raise AssertionError(f"the Hub was asked for {args[:1]}")

    for auto in ("AutoTokenizer", "AutoModelForSequenceClassification", "AutoModel"):
        monkeypatch.setattr(getattr(transformers, auto), "from_pretrained", asked)
    monkeypatch.setattr(huggingface_hub.utils, "get_session", asked)
    monkeypatch.setattr(hub, "_REACHABLE", {})


@pytest.mark.parametrize("name", ["/no/such/model/dir", "./no_such_model", "../no_such_model", "~/no_such_d2t_model", "models/x", "a/b/c"])
def test_missing_path_fails_at_once(name, tmp_path, monkeypatch, hub_must_not_be_asked):
    """A path used to be sent to the Hub: 'Repo id must be in the form...' for an
    absolute one, 19 DNS lookups over about 64 s for a relative one."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()  # so "models/x" names a local directory, not the hub id models/x
    with pytest.raises(ModelNotAvailableError) as info:
        load_model(name, device="cpu", metric="nli_semantic_accuracy")
    message = str(info.value)
    assert f"no such directory: {os.path.abspath(os.path.expanduser(name))}" in message
    assert "the Hugging Face Hub was not asked" in message and "--model nli_semantic_accuracy=/path/to/model" in message


def test_offline_hub_id_not_in_cache_fails_at_once(monkeypatch, hub_must_not_be_asked):
    """Set after huggingface_hub was imported (a test, a notebook), HF_HUB_OFFLINE
    used to be ignored: roberta-large-mnli retried the Hub for about 47 s."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailableError, match="not in the local Hugging Face cache") as info:
        load_model("no-such-org/no-such-model", device="cpu", metric="nli_semantic_accuracy")
    assert "model='/path/to/model'" in str(info.value)


def test_unreachable_hub_fails_at_once_with_the_fix(monkeypatch, hub_must_not_be_asked):
    """Online but without a network, a hub id missing from the cache used to
    spend about 49 s on transformers' retries before a hint; one quick check
    of the Hub now fails it at once, naming a local path and the project's checkpoint."""
    monkeypatch.setattr(hub, "hub_reachable", lambda *a, **k: False)
    with pytest.raises(ModelNotAvailableError, match="cannot be reached") as info:
        load_model("no-such-org/no-such-model", device="cpu", metric="nli_semantic_accuracy")
    message = str(info.value)
    assert "--model nli_semantic_accuracy=/path/to/model" in message
    assert "d2t_metrics.checkpoint_path('nli_semantic_accuracy')" in message


def test_the_hub_is_asked_once_per_process(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    heads = []

    class Session:
        def head(self, url, timeout):
            heads.append((url, timeout))
            raise OSError("no network")

    monkeypatch.setattr(hub.hub_utils, "get_session", Session)
    monkeypatch.setattr(hub, "_REACHABLE", {})
    assert not hub.hub_reachable() and not hub.hub_reachable()
    assert heads == [(hub.hub_endpoint(), hub.REACHABILITY_TIMEOUT_S)]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # off: nothing is asked
    monkeypatch.setattr(hub, "_REACHABLE", {})
    assert not hub.hub_reachable() and len(heads) == 1


def test_hub_ids_and_paths_are_told_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    assert not hub.looks_like_path("roberta-large-mnli")
    assert not hub.looks_like_path("FacebookAI/roberta-large-mnli")  # no local FacebookAI/ directory
    for name in ("/abs/x", "./x", "../x", "~/x", ".x", "models/x", "a/b/c", "models\\x"):
        assert hub.looks_like_path(name), name


def test_offline_cached_hub_id_is_kept(tmp_path, monkeypatch):
    import huggingface_hub.constants

    snapshot = tmp_path / "models--some-org--cached-model" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "models--some-org--cached-model" / "refs").mkdir()
    (tmp_path / "models--some-org--cached-model" / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.resolve_model_name("some-org/cached-model") == "some-org/cached-model"
    with pytest.raises(ModelNotAvailableError):
        hub.resolve_model_name("some-org/other-model")


def test_online_hub_id_goes_through_from_pretrained(monkeypatch):
    """Without HF_HUB_OFFLINE a hub id takes transformers' normal path."""
    import huggingface_hub.constants
    import transformers

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "hub_reachable", lambda *a, **k: True)
    asked = []

    def unreachable(name, **kwargs):
        asked.append((name, kwargs.get("local_files_only")))
        raise OSError("We couldn't connect to 'https://huggingface.co'")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", unreachable)
    with pytest.raises(ModelNotAvailableError, match="Hub may be unreachable"):
        load_model("some-org/some-model", device="cpu")
    assert [name for name, _ in asked] == ["some-org/some-model"] and not asked[0][1]


# ---------------------------------------------------------------- progress bars


def test_loading_bars_follow_d2t_no_progress(tiny_encoder, monkeypatch, capfd):
    """transformers' "Loading weights" bar is hidden under D2T_NO_PROGRESS=1 (the
    command line's --no-progress), and the previous settings come back after."""
    from transformers.utils import logging as transformers_logging

    monkeypatch.setenv("D2T_NO_PROGRESS", "1")
    transformers_logging.enable_progress_bar()
    models.clear_model_cache()
    capfd.readouterr()
    load_model(tiny_encoder, task="encoder", device="cpu")
    assert "Loading weights" not in capfd.readouterr().err
    assert transformers_logging.is_progress_bar_enabled()
    with hub.quiet_loading():
        assert not transformers_logging.is_progress_bar_enabled()
    with hub.quiet_loading(enabled=False):
        assert transformers_logging.is_progress_bar_enabled()
    monkeypatch.setenv("D2T_NO_PROGRESS", "0")
    assert not hub.progress_disabled()


def test_progress_bar_ends_its_line_in_a_captured_log(capsys, monkeypatch):
    monkeypatch.delenv("D2T_NO_PROGRESS", raising=False)
    for _ in hub.progress(range(3), total=3, desc="scoring"):
        pass
    import sys

    print("next log line", file=sys.stderr)
    err = capsys.readouterr().err
    assert "scoring" in err
    # The line after the bar starts on its own line, not after a bare "\r".
    assert "\nnext log line" in err


def test_token_embeddings_are_unit_vectors_per_token_in_input_order(tiny_encoder):
    from d2t_metrics.models import token_embeddings

    tokenizer, encoder = load_model(tiny_encoder, task="encoder", device="cpu")
    texts = ["a much longer text about the city and the river", "the city", ""]
    vectors = token_embeddings(encoder, tokenizer, texts, batch_size=2, show_progress=False)
    expected = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    assert [len(v) for v in vectors] == expected  # special tokens dropped, order kept
    assert all(abs(float(n) - 1.0) < 1e-4 for v in vectors[:2] for n in v.norm(dim=-1))
    capped = token_embeddings(encoder, tokenizer, texts[:1], max_length=5, show_progress=False)
    assert len(capped[0]) == 3  # truncated to 5 tokens, two of them special


def test_a_gpu_pads_encoder_batches_to_a_multiple_within_the_models_positions():
    from d2t_metrics.models import GPU_PAD_MULTIPLE, padded_length

    assert GPU_PAD_MULTIPLE == 32
    assert [padded_length(n, "cpu") for n in (1, 33, 500)] == [1, 33, 500]  # a CPU: the longest row, as always
    assert [padded_length(n, "cuda") for n in (1, 32, 33, 500)] == [32, 32, 64, 512]
    assert padded_length(500, torch.device("cuda", 1), limit=510) == 510  # never past the model's positions
    assert padded_length(511, "cuda", limit=510) == 511  # (a row already longer stays as it is)
