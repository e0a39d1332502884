import os

import pytest

torch = pytest.importorskip("torch")

from d2t_metrics import checkpoints
from d2t_metrics.models import load_model


def _meta(base):
    return {
        "base": base,
        "task": "sequence-classification",
        "id2label": {0: "entailment", 1: "not_entailment"},
        "lora": dict(checkpoints.DEFAULT_LORA, r=4),
    }


def _trained_lora_model(meta):
    """A LoRA model whose trainable tensors moved away from their initialisation, as after training."""
    model = checkpoints.apply_lora(checkpoints.build_base_model(meta), meta["lora"])
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    return model


def test_compact_checkpoint_round_trip(tiny_encoder, tmp_path):
    meta = _meta(tiny_encoder)
    model = _trained_lora_model(meta)
    model.eval()
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tiny_encoder)
    batch = tok(["a cat is born"], ["the city"], return_tensors="pt")
    with torch.no_grad():
        before = model(**batch).logits
    checkpoints.save_compact(model, str(tmp_path), meta, extra={"head": torch.ones(3)})
    assert checkpoints.is_compact_checkpoint(str(tmp_path))
    # Only trained tensors travel: far smaller than the base weights.
    base_size = os.path.getsize(os.path.join(tiny_encoder, "model.safetensors"))
    assert os.path.getsize(tmp_path / "model.safetensors") < base_size

    tok2, loaded, meta2, extra = checkpoints.load_compact(str(tmp_path))
    assert meta2["id2label"] == {"0": "entailment", "1": "not_entailment"}
    assert torch.equal(extra["head"], torch.ones(3))
    with torch.no_grad():
        after = loaded(**batch).logits
    assert torch.allclose(before, after, atol=1e-5)
    # load_model recognises the format too.
    _, via_load_model = load_model(str(tmp_path))
    assert via_load_model.config.id2label == {0: "entailment", 1: "not_entailment"}


def test_plain_model_dir_is_not_compact(tiny_encoder):
    assert not checkpoints.is_compact_checkpoint(tiny_encoder)


def test_metadata_is_required(tiny_encoder, tmp_path):
    model = checkpoints.build_base_model({"base": tiny_encoder, "task": "encoder"})
    with pytest.raises(ValueError, match="needs 'task'"):
        checkpoints.save_compact(model, str(tmp_path), {"base": tiny_encoder})


def test_resolve_base_keeps_unknown_names():
    assert checkpoints.resolve_base("roberta-large-mnli") == "roberta-large-mnli"


def test_warm_start_continues_from_a_checkpoint(tiny_encoder, tmp_path):
    meta = _meta(tiny_encoder)
    model = _trained_lora_model(meta)
    checkpoints.save_compact(model, str(tmp_path), meta, extra={"head": torch.ones(3)})

    fresh = checkpoints.apply_lora(checkpoints.build_base_model(meta), meta["lora"])
    extra, meta2 = checkpoints.warm_start(fresh, str(tmp_path))
    assert meta2["lora"] == meta["lora"]
    assert torch.equal(extra["head"], torch.ones(3))
    trained = dict(model.named_parameters())
    for name, p in fresh.named_parameters():
        if p.requires_grad:
            assert torch.equal(p, trained[name]), name

    # The run's LoRA settings must be the checkpoint's: another alpha fits every tensor but rescales them.
    assert checkpoints.warm_start(fresh, str(tmp_path), lora=meta["lora"])[1]["lora"] == meta["lora"]
    with pytest.raises(ValueError, match="was trained with LoRA"):
        checkpoints.warm_start(fresh, str(tmp_path), lora=dict(meta["lora"], lora_alpha=2 * meta["lora"]["lora_alpha"]))

    # Another LoRA setup has no place for the saved adapters.
    other = checkpoints.apply_lora(checkpoints.build_base_model(meta), dict(meta["lora"], target_modules=["query"]))
    with pytest.raises(ValueError, match="does not fit"):
        checkpoints.warm_start(other, str(tmp_path))


def test_loading_prints_no_future_warning(tiny_encoder, tmp_path):
    """peft read transformers' deprecated `is_gradient_checkpointing` on every
    load, printing a FutureWarning; it is silenced at that call only."""
    import warnings

    meta = _meta(tiny_encoder)
    checkpoints.save_compact(_trained_lora_model(meta), str(tmp_path), meta)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checkpoints.load_compact(str(tmp_path))
        checkpoints.apply_lora(checkpoints.build_base_model(meta), meta["lora"])
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]


@pytest.mark.parametrize("missing", ["/no/such/checkpoint", "no_such_dir/inside"])
def test_missing_checkpoint_fails_at_once(missing, tmp_path, monkeypatch):
    from d2t_metrics.models import ModelNotAvailableError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelNotAvailableError, match="no such directory: " + os.path.abspath(missing)):
        checkpoints.load_compact(missing)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotAvailableError, match="no checkpoint file"):
        checkpoints.load_compact(str(tmp_path / "empty"))
