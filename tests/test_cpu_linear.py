"""d2t_metrics.cpu_linear: the generators' linear layers by oneDNN on packed weights."""

import sys
import threading

import pytest
import torch

from d2t_metrics import cpu_linear, decoding, generator

needs_onednn = pytest.mark.skipif(not cpu_linear.onednn_available(),
                                  reason="this torch or CPU has no oneDNN packed inner product (x86-64 only)")


def _tiny_llama(seed=0):
    import transformers

    config = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
                                      pad_token_id=0, eos_token_id=1, bos_token_id=2)
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).eval()


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
def test_packed_layer_computes_the_linear_product(bias):
    torch.manual_seed(0)
    linear = torch.nn.Linear(40, 24, bias=bias)
    packed = cpu_linear.PackedLinear(linear)
    inputs = [torch.randn(7, 40), torch.randn(3, 5, 40), torch.randn(40, 6).t(), torch.randn(1, 40), torch.randn(0, 40)]
    with torch.inference_mode():
        for x in inputs:  # 2-D, 3-D, non-contiguous, one row, no row
            out = packed(x)
            assert out.shape == x.shape[:-1] + (24,)
            torch.testing.assert_close(out, linear(x), rtol=1e-5, atol=1e-5)
    assert "oneDNN" in repr(packed) and f"bias={bias}" in repr(packed)


@needs_onednn
def test_packed_layer_refuses_other_dtypes_and_keeps_no_parameter():
    packed = cpu_linear.PackedLinear(torch.nn.Linear(8, 4))
    assert list(packed.parameters()) == [] and list(packed.buffers()) == []  # nothing to train or move by mistake
    with pytest.raises(RuntimeError, match="packed CPU layer got a torch.float64"):
        packed(torch.randn(2, 8, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="bfloat16"):
        packed(torch.randn(2, 8).to(torch.bfloat16))


@needs_onednn
def test_packing_a_decoder_keeps_its_logits_continuations_and_tied_embeddings():
    plain, model = _tiny_llama(), _tiny_llama()
    linears = sum(type(m) is torch.nn.Linear for m in model.modules())
    weights_before = sum(p.numel() for p in model.parameters())
    assert cpu_linear.pack_linear_layers(model) == linears == 2 * 7 + 1  # q k v o gate up down per layer, the head
    assert not any(type(m) is torch.nn.Linear for m in model.modules())
    # the head tied to the embedding gets a packed copy; the embedding keeps its weight
    assert type(model.lm_head) is cpu_linear.PackedLinear and model.lm_head.weight.is_mkldnn
    assert model.model.embed_tokens.weight.numel() == 97 * 32 and not model.model.embed_tokens.weight.is_mkldnn
    # the layers' float32 weights are gone from the model's parameters
    assert sum(p.numel() for p in model.parameters()) < weights_before
    ids = torch.tensor([[5, 9, 11, 3, 40], [0, 0, 7, 8, 9]])
    mask = (ids != 0).long()
    with torch.inference_mode():
        torch.testing.assert_close(model(input_ids=ids, attention_mask=mask).logits,
                                   plain(input_ids=ids, attention_mask=mask).logits, rtol=1e-4, atol=1e-4)
        prompts = [(5, 9, 11), (7, 8, 9, 10, 12), (3,)]
        assert (decoding.greedy_continuations(model, prompts, 6, [1], 0, show_progress=False)
                == decoding.greedy_continuations(plain, prompts, 6, [1], 0, show_progress=False))
        assert (decoding.beam_continuations(model, prompts, 3, 5, [1], 0, show_progress=False)
                == decoding.beam_continuations(plain, prompts, 3, 5, [1], 0, show_progress=False))


@needs_onednn
def test_two_threads_share_a_packed_model():
    model = _tiny_llama()
    cpu_linear.pack_linear_layers(model)
    ids = [torch.tensor([[5, 9, 11, 3, 40 + i]]) for i in range(8)]
    with torch.inference_mode():
        alone = [model(input_ids=x).logits for x in ids]
    results, errors = {}, []

    def run(i):
        try:
            with torch.inference_mode():
                results[i] = model(input_ids=ids[i]).logits
        except Exception as e:  # reported below: an assertion in a thread would pass silently
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(torch.equal(results[i], alone[i]) for i in range(8))


def test_packing_needs_float32_on_the_cpu():
    model = _tiny_llama().to(torch.bfloat16)
    with pytest.raises(ValueError, match="float32 weights on the CPU"):
        cpu_linear.pack_linear_layers(model)
    assert sum(type(m) is torch.nn.Linear for m in model.modules()) == 15  # nothing half done
    assert not cpu_linear.use_packed_layers("cuda", torch.float32)
    assert not cpu_linear.use_packed_layers("cpu", torch.bfloat16)


def test_the_environment_chooses_the_kernels(monkeypatch):
    monkeypatch.delenv(cpu_linear.ENV_VAR, raising=False)
    assert cpu_linear.cpu_linear_choice() == "onednn"
    assert cpu_linear.use_packed_layers("cpu", torch.float32) == cpu_linear.onednn_available()
    monkeypatch.setenv(cpu_linear.ENV_VAR, " Torch ")
    assert cpu_linear.cpu_linear_choice() == "torch" and not cpu_linear.use_packed_layers("cpu", torch.float32)
    monkeypatch.setenv(cpu_linear.ENV_VAR, "mkl")
    with pytest.raises(ValueError, match="D2T_CPU_LINEAR='mkl': choose one of onednn, torch"):
        cpu_linear.use_packed_layers("cpu", torch.float32)


def test_not_offered_off_x86(monkeypatch):
    monkeypatch.setattr(cpu_linear.platform, "machine", lambda: "arm64")
    assert not cpu_linear.onednn_available()


# ---------------------------------------------------------------- memory given back to the mapped file

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps and madvise are Linux's")


def _mapped_tensor(tmp_path, values):
    """A float32 tensor that is a view of a privately mapped file holding ``values`` (as transformers maps safetensors)."""
    import mmap

    path = tmp_path / "weights.safetensors"  # the name is what _mapped_checkpoints looks for
    path.write_bytes(values.numpy().tobytes())
    with open(path, "r+b") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    return torch.frombuffer(mapping, dtype=torch.float32), mapping


@linux_only
def test_pages_go_back_to_the_file_only_when_nothing_needs_them(tmp_path):
    values = torch.arange(3 * 4096, dtype=torch.float32)  # 48 KB: whole pages inside
    tensor, mapping = _mapped_tensor(tmp_path, values)
    mapped = cpu_linear._mapped_checkpoints()
    assert any(lo <= tensor.data_ptr() < hi for lo, hi in mapped)
    tensor.mul_(2)  # written: private copies of the file's pages, as a LoRA merge leaves them
    cpu_linear._give_back_pages(tensor, mapped, in_use=True)
    assert torch.equal(tensor, values * 2)  # still in use and written: kept
    cpu_linear._give_back_pages(tensor, mapped, in_use=False)
    first, last = cpu_linear._page_span(tensor)
    start = (first - tensor.data_ptr()) // 4
    stop = (last - tensor.data_ptr()) // 4
    assert stop - start >= 4096  # the pages wholly inside were dropped: they read as the file again
    assert torch.equal(tensor[start:stop], values[start:stop]) and torch.equal(tensor[:start], values[:start] * 2)
    del tensor
    mapping.close()


@linux_only
def test_an_unwritten_weight_in_use_is_read_back_from_the_file(tmp_path):
    values = torch.randn(3 * 4096)
    tensor, mapping = _mapped_tensor(tmp_path, values)
    mapped = cpu_linear._mapped_checkpoints()
    assert float(tensor.sum()) == pytest.approx(float(values.sum()), rel=1e-5)  # read: the pages are present
    first, last = cpu_linear._page_span(tensor)
    assert cpu_linear._unwritten(first, last)
    cpu_linear._give_back_pages(tensor, mapped, in_use=True)
    assert torch.equal(tensor, values)
    del tensor
    mapping.close()


@needs_onednn
def test_a_decoder_loaded_from_its_file_keeps_its_outputs_once_packed(tiny_causal_lm):
    import transformers

    plain = transformers.AutoModelForCausalLM.from_pretrained(tiny_causal_lm, use_safetensors=True).eval()
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_causal_lm, use_safetensors=True).eval()
    embedding = model.model.embed_tokens.weight.detach().clone()
    cpu_linear.pack_linear_layers(model)  # dead weights' pages dropped; the tied embedding's kept or refaulted
    assert torch.equal(model.model.embed_tokens.weight, embedding)
    ids = torch.tensor([[5, 9, 11, 3, 40, 7]])
    with torch.inference_mode():
        torch.testing.assert_close(model(input_ids=ids).logits, plain(input_ids=ids).logits, rtol=1e-4, atol=1e-4)


def test_free_memory_goes_back_through_glibc_when_there_is_one(monkeypatch):
    calls = []

    class Glibc:
        def malloc_trim(self, pad):
            calls.append(pad)

    class Musl:  # no malloc_trim
        pass

    monkeypatch.setattr(cpu_linear.sys, "platform", "linux")
    monkeypatch.setattr(cpu_linear.ctypes, "CDLL", lambda name: Glibc())
    cpu_linear.give_back_free_memory()
    assert calls == [0]
    monkeypatch.setattr(cpu_linear.ctypes, "CDLL", lambda name: Musl())
    cpu_linear.give_back_free_memory()  # nothing to call: no error
    monkeypatch.setattr(cpu_linear.sys, "platform", "darwin")
    monkeypatch.setattr(cpu_linear.ctypes, "CDLL", lambda name: Glibc())
    cpu_linear.give_back_free_memory()
    assert calls == [0]


def test_decoding_gives_memory_back_after_each_chunk(monkeypatch):
    model = _tiny_llama()
    chunks = []
    monkeypatch.setattr(decoding, "give_back_free_memory", lambda: chunks.append(1))
    monkeypatch.setattr(decoding, "CHUNK_TOKENS_PER_ROW", 1)  # a chunk per prefix group
    prompts = [(5, 9, 11), (70, 8, 9, 10, 12), (3, 4)]
    with torch.inference_mode():
        decoding.greedy_continuations(model, prompts, 4, [1], 0, batch_size=1, show_progress=False)
    assert len(chunks) == 3


@linux_only
@needs_onednn
def test_a_weight_shared_through_its_storage_keeps_its_pages(tmp_path, monkeypatch):
    values = torch.randn(8 * 1024)
    flat, mapping = _mapped_tensor(tmp_path, values)
    flat.mul_(2)  # written pages, as after a LoRA merge
    model = torch.nn.Sequential(torch.nn.Linear(64, 128, bias=False), torch.nn.Linear(64, 128, bias=False))
    with torch.no_grad():  # two parameters over one storage: a tie by memory, not by object
        model[0].weight = torch.nn.Parameter(flat.view(128, 64), requires_grad=False)
        model[1].weight = torch.nn.Parameter(flat.view(128, 64), requires_grad=False)
    dropped = []
    monkeypatch.setattr(cpu_linear, "_unwritten", lambda first, last: dropped.append((first, last)) or False)
    cpu_linear.pack_linear_layers(model)
    assert len(dropped) == 2  # each asked whether its pages could go: written, so kept
    assert torch.equal(flat, values * 2)
    del flat, model
    mapping.close()
