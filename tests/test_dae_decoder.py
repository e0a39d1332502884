"""DAE over a decoder backbone (training/dae/train_decoder.py, metrics/dae/model.py's DecoderPairEncoder):
the input layout, a tiny training run without spaCy, and the checkpoint loading in the scorer and the metric."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, metric_path
from metrics.dae.arcs import ARC_FEATURES, doc_arcs, load_spacy

evaluate = pytest.importorskip("evaluate")


@pytest.fixture(scope="session")
def nlp():
    return load_spacy()


def test_decoder_pair_encoder_layout(tiny_causal_lm):
    import transformers

    from metrics.dae.model import DecoderPairEncoder

    tok = transformers.AutoTokenizer.from_pretrained(tiny_causal_lm)
    enc = DecoderPairEncoder(tok)
    assert enc.separator == "[SEP]" and enc.sep_id == tok.sep_token_id
    src, hyp = ["the", "cat", "sat"], ["the", "cats", "sat", ""]
    ids, pos = enc.encode_ids(src, hyp, 64)
    pieces = enc.piece_ids(src + hyp)
    n_src = sum(len(p) for p in pieces[:3])
    assert ids[n_src] == enc.sep_id and len(ids) == n_src + 1 + sum(len(p) for p in pieces[3:])
    # each word at its last sub-token ("cats" has more than one); an empty word borrows the previous word's
    ends = [n_src + sum(len(p) for p in pieces[3 : 3 + i + 1]) for i in range(3)]
    assert pos[:3] == ends and pos[3] == pos[2]
    assert ids[pos[1]] == pieces[4][-1] and len(pieces[4]) > 1
    # too long: the source is cut at its end first, then the hypothesis; positions stay inside
    ids, pos = enc.encode_ids(src * 50, hyp, 12)
    assert len(ids) == 12 and max(pos) < 12 and ids[12 - 1 - sum(len(p) for p in pieces[3:])] == enc.sep_id
    ids, pos = enc.encode_ids(src, hyp * 10, 8)
    assert len(ids) == 8 and ids[0] == enc.sep_id and max(pos) == 7
    batch, positions = enc.encode([src, src * 2], [hyp, hyp], 64)
    assert batch["input_ids"].shape == batch["attention_mask"].shape and batch["attention_mask"][0].sum() < batch["attention_mask"][1].sum()


def write_arc_data(folder, nlp):
    """Two folders' worth of make_data-style rows: per source a faithful compression (every arc entailed) and
    an edit with a not-entailed arc (a synthetic reranking pair), and an identity."""
    from training.dae.make_data import _example

    pairs = [
        ("The cat sat on the old mat.", "The cat sat on the mat.", "The dog sat on the mat.", "dog"),
        ("Marie won the prize in Paris.", "Marie won the prize.", "Pierre won the prize.", "Pierre"),
        ("The river flows through the city.", "The river flows.", "The road flows through the city.", "road"),
    ]
    rows = []
    for i, (src, good, bad, new) in enumerate(pairs):
        for hyp, kind, wrong in ((good, "compress", None), (bad, "span-delete", new), (src, "identity", None)):
            d = nlp(hyp)
            arcs = doc_arcs(d)
            row = _example(src, d, arcs, [0 if wrong in (a.head, a.child) else 1 for a in arcs], kind, "t")
            row["group"] = f"g{i}"
            rows.append(row)
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        (folder / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return rows


# run the training step with spaCy, evaluate and datasets made unimportable, as on the GPU machine
NO_SPACY = (
    "import sys\n"
    "for name in ('spacy', 'evaluate', 'datasets'):\n"
    "    sys.modules[name] = None\n"
    "from training.dae.train_decoder import main\n"
    "code = main(sys.argv[1:])\n"
    "assert not [m for m in ('spacy', 'evaluate', 'datasets') if sys.modules.get(m) is not None]\n"
    "raise SystemExit(code)\n"
)


@pytest.fixture(scope="module")
def decoder_checkpoint(tmp_path_factory, nlp, tiny_causal_lm):
    from training.dae.train_decoder import main

    tmp = tmp_path_factory.mktemp("dae_decoder")
    write_arc_data(tmp / "a", nlp)
    write_arc_data(tmp / "b", nlp)
    train_file, dev_file = str(tmp / "train.jsonl.gz"), str(tmp / "dev.jsonl.gz")
    assert main(["prepare", "--data", f"{tmp / 'a'},{tmp / 'b'}:6", "--out", train_file, "--oversample", "span-delete=3"]) == 0
    assert main(["prepare", "--split", "dev", "--data", f"{tmp / 'a'}:4,{tmp / 'b'}", "--out", dev_file]) == 0
    out, probs = str(tmp / "ck"), str(tmp / "probs.json")
    cmd = [sys.executable, "-c", NO_SPACY, "train", "--data", train_file, "--dev", dev_file, "--base", tiny_causal_lm,
           "--out", out, "--device", "cpu", "--max-steps", "6", "--batch-size", "4", "--lr", "5e-3", "--head-lr", "5e-2",
           "--warmup-steps", "1", "--log-every", "1", "--threads", "1", "--max-seconds", "120", "--dump-probs", probs,
           "--eval-points", "0.0"]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1")
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return {"out": out, "probs": probs, "dev": dev_file, "train": train_file, "log": run.stdout, "base": tiny_causal_lm}


def test_prepared_file_is_self_contained(decoder_checkpoint):
    with gzip.open(decoder_checkpoint["dev"], "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    meta, rows = rows[0]["_meta"], rows[1:]
    assert meta["arc_features"] == list(ARC_FEATURES) and meta["examples"] == len(rows) == 4 + 9
    assert {r["set"] for r in rows} == {"a", "b"}
    for r in rows:
        assert len(r["feats"]) == len(r["arcs"]) and all(len(f) == len(ARC_FEATURES) for f in r["feats"])
    # the 4 examples kept of folder a are its two first reranking pairs; folder b's three pairs are all there
    pairs = {}
    for r in rows:
        if "rerank" in r:
            pairs.setdefault(r["rerank"][0], set()).add(r["rerank"][1])
    assert len(pairs) == 5 and all(v == {0, 1} for v in pairs.values())


def test_training_log_and_checkpoint(decoder_checkpoint):
    log, out = decoder_checkpoint["log"], decoder_checkpoint["out"]
    assert "step 1 |" in log and "arcs/s" in log and "dev (subset" in log and "dev (full" in log and "saved" in log
    files = set(os.listdir(out))
    assert {"adapter_config.json", "adapter_model.safetensors", "arc_head.safetensors", "d2t_config.json", "tokenizer.json"} <= files
    assert sum(os.path.getsize(os.path.join(out, f)) for f in files) < 16_000_000
    with open(os.path.join(out, "d2t_config.json")) as f:
        config = json.load(f)
    assert config["task"] == "decoder" and config["word_vector"] == "last sub-token" and config["separator"] == "[SEP]"
    assert config["kind"] == "dae-arc-classifier" and config["arc_features"] == list(ARC_FEATURES)
    assert config["training"]["steps"] == 6 and config["training"]["final"] is True
    assert config["dev"]["rerank_dev_labelled_arcs"]["pairs"] == 5 and len(config["dev_curve"]) >= 2
    with open(os.path.join(out, "adapter_config.json")) as f:
        adapter = json.load(f)
    assert adapter["r"] == 16 and adapter["lora_alpha"] == 32
    assert set(adapter["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    from safetensors.torch import load_file

    assert {t.dtype for t in load_file(os.path.join(out, "adapter_model.safetensors")).values()} == {__import__("torch").float16}


def test_loaded_checkpoint_reproduces_training_probabilities(decoder_checkpoint):
    import torch

    from metrics.dae.scorer import DAEScorer
    from training.dae.train_decoder import collate, encode_examples, read_arc_file

    scorer = DAEScorer(decoder_checkpoint["out"], device="cpu", dtype=torch.float32)
    assert scorer.decoder and scorer.pair_encoder.separator == "[SEP]"
    _, rows = read_arc_file(decoder_checkpoint["dev"])
    items = encode_examples(scorer.pair_encoder, rows, scorer.max_length, len(ARC_FEATURES))
    with open(decoder_checkpoint["probs"]) as f:
        trained = json.load(f)["probabilities"]
    assert len(trained) == len(items)
    with torch.inference_mode():
        for x, want in zip(items, trained):
            batch = collate([x], scorer.pair_encoder.pad_id)
            hidden = scorer.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
            logits = scorer.head(hidden[batch["seg"], batch["hpos"]], hidden[batch["seg"], batch["cpos"]], batch["rels"], batch["feats"])
            got = torch.sigmoid(logits).tolist()
            assert got == pytest.approx(want, abs=2e-3)  # the adapters are stored in float16


def _train_again(decoder_checkpoint, out, *extra):
    cmd = [sys.executable, "-c", NO_SPACY, "train", "--data", decoder_checkpoint["train"], "--dev", decoder_checkpoint["dev"],
           "--base", decoder_checkpoint["base"], "--out", out, "--device", "cpu", "--max-steps", "1", "--batch-size", "4",
           "--lr", "0", "--head-lr", "0", "--warmup-steps", "1", "--threads", "1", "--max-seconds", "120",
           "--dump-probs", out + ".probs.json", "--eval-points", "", *extra]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1")
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with open(out + ".probs.json") as f:
        probs = [p for row in json.load(f)["probabilities"] for p in row]
    with open(os.path.join(out, "d2t_config.json")) as f:
        return probs, json.load(f)["training"], run.stdout


def test_training_goes_on_from_a_checkpoint(decoder_checkpoint, tmp_path):
    """--init: a later session continues a checkpoint (its adapters and arc head), counting what it had seen."""
    with open(decoder_checkpoint["probs"]) as f:
        trained = [p for row in json.load(f)["probabilities"] for p in row]
    went_on, training, log = _train_again(decoder_checkpoint, str(tmp_path / "on"), "--init", decoder_checkpoint["out"])
    assert "warm start from" in log and training["warm_start"] == os.path.abspath(decoder_checkpoint["out"])
    with open(os.path.join(decoder_checkpoint["out"], "d2t_config.json")) as f:
        before = json.load(f)["training"]["examples_seen"]  # 6 steps of up to 4
    assert training["examples_seen"] == 4 and training["examples_seen_in_all"] == before + 4
    assert went_on == pytest.approx(trained, abs=2e-3)  # a step at learning rate 0: the weights it started from
    fresh, training, _ = _train_again(decoder_checkpoint, str(tmp_path / "fresh"))
    assert training["warm_start"] is None and max(abs(a - b) for a, b in zip(fresh, trained)) > 0.05


def test_metric_loads_decoder_checkpoint(decoder_checkpoint):
    metric = evaluate.load(metric_path("dae"), model=decoder_checkpoint["out"], device="cpu")
    sources = ["The cat sat on the old mat.", "The cat sat on the old mat."]
    res = metric.compute(predictions=["The dog sat on the mat.", "The cat sat on the mat. " * 40], sources=sources,
                         per_example=True, show_progress=False)
    assert 0.0 <= res["score"] <= 1.0
    for ex in res["examples"]:
        assert ex["num_arcs"] == len(ex["arcs"]) > 0 and all(0.0 <= a["probability"] <= 1.0 for a in ex["arcs"])
        assert {"head", "relation", "child", "head_index", "child_index"} <= set(ex["arcs"][0])
    scorer = metric.scorer
    assert scorer.decoder and scorer.max_length == 256  # the recipe's 320, capped by the tiny base's positions
    # one pair scored alone gives what it gets in a batch (right padding, causal attention)
    alone = metric.compute(predictions=["The dog sat on the mat."], sources=sources[:1], per_example=True, show_progress=False)
    assert alone["examples"][0]["score"] == pytest.approx(res["examples"][0]["score"], abs=1e-5)
    with pytest.raises(ValueError):
        metric.compute(predictions=[3], sources=["x"])


def test_decoder_segments_fit(decoder_checkpoint, nlp):
    """A long source is windowed so that every segment fits max_length with its separator."""
    from metrics.dae.scorer import DAEScorer

    scorer = DAEScorer(decoder_checkpoint["out"], spacy_model=nlp, device="cpu", max_length=40)
    src = nlp(" ".join(f"The river number {i} flows through the old city of Prague." for i in range(30)))
    hyp = nlp("The river flows through the city of Prague. The old city has a river.")
    sents, lens = scorer._source_sentences(src)
    for _off, hw, sw, _cut in scorer.segments(hyp, sents, lens):
        ids, _ = scorer.pair_encoder.encode_ids(sw, hw, 10_000)
        assert len(ids) <= 40
    res = scorer.score([src.text], [hyp.text])
    assert res[0]["truncated"] and 0.0 <= res[0]["score"] <= 1.0


def test_a_separator_written_in_a_text_stays_characters(tiny_causal_lm):
    """The separator goes in by id; the same string in a source or a hypothesis is text (the
    checkpoint loader's tokenizer is literal, d2t_metrics.untrusted.literal_tokenizer)."""
    import transformers

    from d2t_metrics.untrusted import literal_tokenizer
    from metrics.dae.model import DecoderPairEncoder

    enc = DecoderPairEncoder(literal_tokenizer(transformers.AutoTokenizer.from_pretrained(tiny_causal_lm)))
    ids, pos = enc.encode_ids(["the", "[SEP]", "cat"], ["a", "[SEP]", "dog"], 64)
    assert ids.count(enc.sep_id) == 1 and len(pos) == 3


def test_score_reads_a_dev_file_with_either_backbone(decoder_checkpoint, tiny_encoder, tmp_path):
    """`train_decoder score`: any DAE checkpoint on a prepared dev file, so that the decoder and the MiniLM encoder
    compare on the same arcs (the checkpoint card's dev table); the decoder's tally is the training's own."""
    from test_dae import save_tiny_dae
    from training.dae.train_decoder import ArcTally, main, read_arc_file, score_checkpoint

    _, rows = read_arc_file(decoder_checkpoint["dev"])
    decoder = score_checkpoint(decoder_checkpoint["out"], rows, batch_size=3)
    with open(os.path.join(decoder_checkpoint["out"], "d2t_config.json")) as f:
        trained_dev = json.load(f)["dev"]
    assert decoder["arcs"] == trained_dev["arcs"] and decoder["examples"] == len(rows)
    assert decoder["rerank_dev_labelled_arcs"]["pairs"] == 5 and set(decoder["by_set"]) == {"a", "b"}
    with open(decoder_checkpoint["probs"]) as f:
        trained = json.load(f)["probabilities"]
    tally = ArcTally()
    for row, probs in zip(rows, trained):
        tally.add(probs, [a[3] for a in row["arcs"]], row["set"], row.get("rerank"))
    # the adapters are stored in float16: an arc within 2e-3 of 0.5 may fall on the other side
    assert abs(decoder["accuracy"] - tally.scores()["accuracy"]) <= 2 / decoder["arcs"]
    encoder = score_checkpoint(save_tiny_dae(tiny_encoder, tmp_path / "enc"), rows)
    assert encoder["arcs"] == decoder["arcs"] and 0.0 <= encoder["accuracy"] <= 1.0
    assert main(["score", "--checkpoint", decoder_checkpoint["out"], "--dev", decoder_checkpoint["dev"]]) == 0


def test_arc_tally_counts_both_classes_and_reranking_pairs():
    from training.dae.train_decoder import ArcTally

    tally = ArcTally()
    tally.add([0.9, 0.2, 0.7], [1, 0, 0], "news", rerank=[3, 0])  # one false positive
    tally.add([0.8, 0.9], [1, 1], "d2t", rerank=[3, 1])
    scores = tally.scores()
    assert scores["arcs"] == 5 and scores["accuracy"] == pytest.approx(0.8) and scores["examples"] == 2
    assert scores["by_set"]["d2t"]["accuracy"] == 1.0 and scores["by_set"]["news"]["arcs"] == 3
    # pair 3: the faithful text's mean 0.85 beats the unfaithful one's 0.6; lowest 0.8 beats 0.2
    assert scores["rerank_dev_labelled_arcs"] == {"mean": 1.0, "min": 1.0, "pairs": 1}
