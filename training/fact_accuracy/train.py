"""Train fact_accuracy's two learned extractors (checkpoints in ``checkpoints/fact_accuracy/``).

    # the end-to-end text-to-triples extractor: the shared small generator
    # (d2t_metrics.generator, SmolLM2-135M-Instruct + LoRA) trained on WebNLG 2017 train in reverse
    python -m training.fact_accuracy.train triples --out checkpoints/fact_accuracy/triples

    # the relation classifier over entity pairs (MiniLM + LoRA), distant supervision on WebNLG 2017 train
    python -m training.fact_accuracy.train relations --out checkpoints/fact_accuracy/relations

``triples --extra-data FOLDER`` (repeatable) adds the entries of a further WebNLG release (e.g.
WebNLG 3.0 train) whose triple set is neither an input of ``--exclude-inputs`` (default: WebNLG 2017
test and dev, the inputs the metrics are measured on) nor one of ``--data``; the recipe records how
many were read, left out and kept.

Both take ``--seed`` and are resumable: the run's state is saved every
``--save-every`` steps to ``OUT.work/`` and a rerun with the same arguments
goes on from there (``--max-minutes`` stops a run cleanly for that). The
data default to ``../shared/data/webnlg2017/xml/train`` (``--data``).

``relations`` builds its examples with ``relation_data.build_examples`` (sentences
of the train lexicalizations, each pair of a triple's subject and object
labelled with the predicate, ``--negatives`` "none" pairs per positive,
predicates with fewer than ``--min-examples`` positives dropped), keeps them
in ``OUT.work/relation_data.json`` (a resumed run trains on the same data),
and trains all-MiniLM-L6-v2 as a sequence classifier: LoRA adapters plus a
fully trained classifier, transformers' ``Trainer``, batches padded to
their longest input (at most ``--max-length`` sub-tokens, windowed around
the pair). ``--max-minutes`` counts from the start of the run (data building
included); the dev scores (accuracy, macro-F1, relation P/R/F1 on WebNLG
2017 dev pairs built the same way, ``--dev``) are computed once the steps
are done, then the checkpoint is saved (``kind``
``fact-accuracy-relation-classifier``). The default ``--steps 1200`` (batch
32; WebNLG sentences with their markers average 28 sub-tokens, so a step
costs about a third of one over 128 tokens: ~0.35 s on 2 CPU cores) with
~1.5 minutes of data building fits a run of about 10 minutes there.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import time

import torch
import transformers

from d2t_metrics.bases import resolve_base
from d2t_metrics.checkpoints import apply_lora
from d2t_metrics.checkpoints import checkpoint_size
from d2t_metrics.checkpoints import save_checkpoint
from d2t_metrics.checkpoints import warm_start
from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.datasets import shared_dir
from d2t_metrics.generator import TimeBudget
from d2t_metrics.generator import last_trainer_checkpoint
from d2t_metrics.generator import train_generator
from d2t_metrics.hub import hub_offline
from d2t_metrics.hub import quiet_loading
from d2t_metrics.hub import resolve_model_name
from d2t_metrics.untrusted import literal_tokenizer
from metrics.fact_accuracy import relations as rel
from training.fact_accuracy.relation_data import build_examples
from training.fact_accuracy.relation_data import relation_scores
from training.fact_accuracy.triples_data import training_pairs
from training.webnlg_extra import default_exclude_inputs
from training.webnlg_extra import extra_entries

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository root, where recipes' paths are relative to


def _default_data(split: str) -> str:
    shared = shared_dir()
    return os.path.join(shared, "data", "webnlg2017", "xml", split) if shared else ""


def train_triples(args, command: str) -> dict:
    entries = load_webnlg_xml(args.data)
    if args.max_entries:
        entries = entries[: args.max_entries]
    pairs = training_pairs(entries, seed=args.seed, per_entry=args.per_entry, listed_share=args.listed_share,
                           distractors=args.distractors, lowercase_share=args.lowercase_share)
    extra, extra_counts = extra_entries(entries, args.extra_data, args.exclude_inputs) if args.extra_data else ([], None)
    if extra:  # their relations' distractors come from their own categories in their own release
        pairs += training_pairs(extra, seed=args.seed + 1000, per_entry=args.extra_per_entry, listed_share=args.listed_share,
                                distractors=args.distractors, lowercase_share=args.lowercase_share)
        random.Random(args.seed).shuffle(pairs)
    meta = {"kind": "fact-accuracy-text-to-triples",
            # the extractor lists a table's relations in the prompt only for a model trained on such prompts
            "listed_relations": args.listed_share > 0,
            "training": {"command": command,
                         "data": os.path.relpath(args.data, ROOT) if args.data else None, "entries": len(entries),
                         "listed_share": args.listed_share, "distractors": args.distractors,
                         "lowercase_share": args.lowercase_share}}
    if extra_counts:
        meta["training"]["extra_data"] = list(args.extra_data)  # as given: a download, not part of the checkout
        meta["training"]["extra_entries"] = extra_counts
        meta["training"]["extra_per_entry"] = args.extra_per_entry
        meta["training"]["excluded_inputs"] = [os.path.relpath(p, ROOT) for p in args.exclude_inputs]
    return train_generator(pairs, args.out, meta, base=args.base, steps=args.steps, batch_size=args.batch_size,
                           learning_rate=args.lr, max_length=args.max_length, seed=args.seed, max_minutes=args.max_minutes,
                           save_every=args.save_every, warm_start_from=args.init, show_progress=not args.no_progress)


RELATION_BASE = "sentence-transformers/all-MiniLM-L6-v2"
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024


def _relation_data(args, work_dir: str) -> dict:
    """The relation examples (train, dev) and labels, built once and kept in
    ``OUT.work/relation_data.json``: a resumed run trains on the very same data."""
    key = {"data": os.path.abspath(args.data), "dev": os.path.abspath(args.dev), "max_entries": args.max_entries,
           "negatives": args.negatives, "min_examples": args.min_examples, "max_dev": args.max_dev, "seed": args.seed,
           "max_candidates": rel.MAX_CANDIDATES, "max_pairs": rel.MAX_PAIRS, "format": 1}
    path = os.path.join(work_dir, "relation_data.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            cached = json.load(f)
        if cached.get("key") == key:
            return cached
    nlp = rel.load_spacy()
    entries = load_webnlg_xml(args.data)
    if args.max_entries:
        entries = entries[: args.max_entries]
    train, labels, stats = build_examples(entries, nlp, negative_ratio=args.negatives, min_examples=args.min_examples, seed=args.seed)
    if len(labels) < 2:
        raise ValueError(f"no predicate has --min-examples {args.min_examples} positive examples in {args.data}")
    dev, _, dev_stats = build_examples(load_webnlg_xml(args.dev), nlp, labels=labels, negative_ratio=args.negatives, seed=args.seed)
    if args.max_dev:
        dev = dev[: args.max_dev]  # build_examples shuffled them: a random sample
    data = {"key": key, "train": train, "dev": dev, "labels": labels, "stats": stats, "dev_stats": dev_stats}
    os.makedirs(work_dir, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    os.replace(path + ".tmp", path)
    return data


def _check_markers(tokenizer) -> None:
    """The pair markers must be single known tokens of the base (no new embeddings are trained)."""
    for marker in dict.fromkeys(rel.SUBJECT_MARKERS + rel.OBJECT_MARKERS):
        ids = tokenizer(marker, add_special_tokens=False)["input_ids"]
        if len(ids) != 1 or ids[0] == tokenizer.unk_token_id:
            raise ValueError(f"the base's tokenizer has no token for the pair marker {marker!r}; choose a BERT-style base")


def _encoded_rows(tokenizer, examples, labels, max_length: int):
    label_ids = {label: i for i, label in enumerate(labels)}
    ids = rel.encode(tokenizer, [(e["text"], e["lo"], e["hi"]) for e in examples], max_length)
    return [{"input_ids": x, "attention_mask": [1] * len(x), "labels": label_ids[e["label"]]} for x, e in zip(ids, examples) if x is not None]


def _dev_scores(model, tokenizer, examples, labels, max_length: int, show_progress: bool) -> dict:
    ids = rel.encode(tokenizer, [(e["text"], e["lo"], e["hi"]) for e in examples], max_length)
    kept = [(x, e) for x, e in zip(ids, examples) if x is not None]
    model.eval()
    probs = rel.classify(model, tokenizer, [x for x, _ in kept], batch_size=64, show_progress=show_progress, desc="dev")
    predicted = [labels[max(range(len(p)), key=p.__getitem__)] for p in probs]
    scores = relation_scores([e["label"] for _, e in kept], predicted)
    scores["pairs_not_fitting"] = len(examples) - len(kept)
    return scores


def _write_card(out: str, recipe: dict) -> None:
    t, dev = recipe["training"], recipe["dev_scores"]
    text = f"""# fact_accuracy relation classifier

The relation classifier of the `fact_accuracy` metric (Goodrich et al., KDD 2019, Sec. 4.1):
given a sentence with a candidate subject marked `@ ... @` and a candidate object marked
`# ... #`, it predicts the WebNLG predicate the sentence states between them, or `none`
({len(recipe["id2label"])} classes). Base: `{recipe["base"]}` with LoRA adapters and a fully trained
classifier (PEFT layout; labels in `d2t_config.json`). Load it with
`metrics/fact_accuracy/relations.py` (`RelationExtractor(path)`) or
`d2t_metrics.checkpoints.load_checkpoint(path)`.

## Training

    {t["command"]}

Distant supervision on WebNLG 2017 train ({t["entries"]} entries): {t["positives"]} positive pairs,
{t["negatives"]} `none` pairs ({t["negative_ratio"]} per positive), predicates with fewer than
{t["min_examples"]} positives dropped; {t["steps"]} steps of batch {t["batch_size"]}, learning rate
{t["learning_rate"]}, seed {t["seed"]}, at most {recipe["max_length"]} sub-tokens.

## Dev scores (WebNLG 2017 dev pairs built the same way, {dev["pairs"]} pairs)

accuracy {dev["accuracy"]}, macro-F1 {dev["macro_f1"]}, relation precision {dev["relation_precision"]},
recall {dev["relation_recall"]}, F1 {dev["relation_f1"]}.

Data: WebNLG 2017 (CC BY-NC-SA 4.0).
"""
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)


def train_relations(args, command: str) -> dict:
    start = time.time()
    work_dir = args.out.rstrip("/") + ".work"
    data = _relation_data(args, work_dir)
    labels = data["labels"]
    id2label = {i: label for i, label in enumerate(labels)}

    transformers.set_seed(args.seed)
    base = resolve_model_name(resolve_base(args.base))
    local_only = hub_offline() and not os.path.isdir(base)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # the classifier is reported "newly initialized": it is trained here
    try:
        with quiet_loading():
            tokenizer = literal_tokenizer(transformers.AutoTokenizer.from_pretrained(base, local_files_only=local_only))
            model = transformers.AutoModelForSequenceClassification.from_pretrained(
                base, num_labels=len(labels), id2label=id2label, label2id={v: k for k, v in id2label.items()},
                use_safetensors=True, local_files_only=local_only)
    finally:
        transformers.logging.set_verbosity(verbosity)
    _check_markers(tokenizer)
    model = apply_lora(model, trainable=("classifier",))
    if args.init:
        init = rel.read_recipe(args.init) if os.path.isdir(args.init) else {}
        init_labels = init.get("id2label") or {}
        if init.get("kind") != rel.KIND or [init_labels.get(str(i)) for i in range(max(len(labels), len(init_labels)))] != labels:
            raise ValueError(f"--init {args.init} is not a relation classifier with this run's {len(labels)} labels")
        warm_start(model, args.init)
    rows = _encoded_rows(tokenizer, data["train"], labels, args.max_length)
    if not rows:
        raise ValueError("no training pairs")
    targs = transformers.TrainingArguments(
        output_dir=work_dir, max_steps=args.steps, per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
        lr_scheduler_type="linear", warmup_steps=max(1, args.steps * 6 // 100), weight_decay=0.01, logging_steps=10,
        save_steps=args.save_every, save_total_limit=1, seed=args.seed, data_seed=args.seed, report_to=[],
        disable_tqdm=args.no_progress, remove_unused_columns=False, use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0, label_names=["labels"],
    )
    # the time budget counts from the start of the run: what data building took is no longer there
    budget = None if args.max_minutes is None else max(0.0, args.max_minutes - (time.time() - start) / 60)
    trainer = transformers.Trainer(model=model, args=targs, train_dataset=rows,
                                   data_collator=transformers.DataCollatorWithPadding(tokenizer),
                                   callbacks=[TimeBudget(budget)])
    resume = last_trainer_checkpoint(work_dir)
    result = trainer.train(resume_from_checkpoint=resume)
    state = trainer.state
    finished = state.global_step >= args.steps
    losses = [h["loss"] for h in state.log_history if "loss" in h]
    stats = data["stats"]
    log = {"steps_done": state.global_step, "steps": args.steps, "finished": finished, "resumed_from": resume,
           "final_loss": losses[-1] if losses else None, "train_loss": result.training_loss, "pairs": len(rows),
           "positives": stats["positives"], "negatives": stats["negatives"], "labels": len(labels), "dev_pairs": len(data["dev"])}
    if not finished:
        return log
    scores = _dev_scores(model, tokenizer, data["dev"], labels, args.max_length, show_progress=not args.no_progress)
    training = {"command": command, "data": os.path.relpath(args.data, ROOT), "dev": os.path.relpath(args.dev, ROOT),
                "entries": stats["entries"], "texts": stats["texts"], "sentences": stats["sentences"],
                "steps": args.steps, "batch_size": args.batch_size, "learning_rate": args.lr, "seed": args.seed,
                "negative_ratio": args.negatives, "min_examples": args.min_examples, "pairs": len(rows),
                "positives": stats["positives"], "negatives": stats["negatives"], "dropped_positives": stats["dropped_positives"],
                "predicates_seen": stats["predicates_seen"], "label_counts": stats["label_counts"],
                "final_loss": log["final_loss"], "warm_start": os.path.basename(args.init.rstrip("/")) if args.init else None,
                "minutes": round((time.time() - start) / 60, 1)}
    dev_stats = data["dev_stats"]
    recipe = {"kind": rel.KIND, "task": "sequence-classification", "base": args.base,
              "id2label": {str(i): label for i, label in id2label.items()}, "max_length": args.max_length,
              "markers": {"subject": list(rel.SUBJECT_MARKERS), "object": list(rel.OBJECT_MARKERS)},
              "candidates": {"spacy_model": rel.DEFAULT_SPACY_MODEL, "max_candidates": rel.MAX_CANDIDATES,
                             "max_pairs": rel.MAX_PAIRS, "max_chunk_chars": rel.MAX_CHUNK_CHARS},
              "training": training, "dev_scores": scores,
              "dev_data": {k: dev_stats[k] for k in ("entries", "texts", "positives", "negatives", "dropped_positives")}}
    save_checkpoint(model, args.out, recipe, tokenizer=tokenizer)
    _write_card(args.out, recipe)
    size = checkpoint_size(args.out)
    log.update(dev_scores=scores, checkpoint_bytes=size)
    if size > MAX_CHECKPOINT_BYTES:
        print(f"warning: the checkpoint's weights take {size} bytes, over the project's 16 MB", file=sys.stderr)
    return log


def _check_relation_args(ap, args) -> None:
    for name in ("steps", "batch_size", "max_length", "min_examples", "save_every"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.max_length < 16 or args.max_length > 512:
        ap.error("--max-length must be in [16, 512]")
    if not args.negatives >= 0 or args.negatives == float("inf"):
        ap.error("--negatives must be a number >= 0")
    if not args.lr > 0:
        ap.error("--lr must be > 0")
    if args.max_dev < 0 or args.max_entries < 0:
        ap.error("--max-dev and --max-entries must be >= 0")
    if not args.dev or not os.path.exists(args.dev):
        ap.error(f"no dev data at {args.dev!r}; pass --dev (WebNLG 2017 XML folder)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.fact_accuracy.train", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("triples", help="the end-to-end text-to-triples generator")
    t.add_argument("--base", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--batch-size", type=int, default=8)
    t.add_argument("--lr", type=float, default=4e-4)
    t.add_argument("--max-length", type=int, default=160)
    t.add_argument("--per-entry", type=int, default=1, help="lexicalizations used per WebNLG entry")
    t.add_argument("--listed-share", type=float, default=0.8,
                   help="share of prompts that list the entry's relations among distractors (0: the schema-free prompt only)")
    t.add_argument("--lowercase-share", type=float, default=0.0,
                   help="share of texts given lower-cased with punctuation split off, as WebNLG 2017's system outputs are")
    t.add_argument("--distractors", type=int, default=3, help="at most this many relations of the category the text does not state, per listed prompt")
    t.add_argument("--extra-data", action="append", default=[],
                   help="a further WebNLG XML folder (e.g. WebNLG 3.0 train), its entries added unless --exclude-inputs or --data has their input (repeatable)")
    t.add_argument("--extra-per-entry", type=int, default=1, help="lexicalizations used per --extra-data entry")
    t.add_argument("--exclude-inputs", action="append", default=None,
                   help="a WebNLG XML folder whose inputs no --extra-data entry may have (repeatable; default: WebNLG 2017 test and dev)")
    r = sub.add_parser("relations", help="the relation classifier over entity pairs")
    r.add_argument("--base", default=RELATION_BASE)
    r.add_argument("--steps", type=int, default=1200)
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--lr", type=float, default=5e-4)
    r.add_argument("--max-length", type=int, default=128)
    r.add_argument("--negatives", type=float, default=1.0, help="'none' pairs per positive pair")
    r.add_argument("--min-examples", type=int, default=20, help="predicates with fewer positive pairs are dropped")
    r.add_argument("--dev", default=_default_data("dev"), help="WebNLG 2017 dev XML folder for the dev scores")
    r.add_argument("--max-dev", type=int, default=4000, help="dev pairs scored (0: all)")
    for p in (t, r):
        p.add_argument("--out", required=True)
        p.add_argument("--data", default=_default_data("train"))
        p.add_argument("--max-entries", type=int, default=0, help="use the first N entries only (0: all)")
        p.add_argument("--seed", type=int, default=13)
        p.add_argument("--max-minutes", type=float, default=None)
        p.add_argument("--save-every", type=int, default=25)
        p.add_argument("--init", default=None, help="warm-start from a checkpoint of the same kind")
        p.add_argument("--threads", type=int, default=0)
        p.add_argument("--no-progress", action="store_true")
    r.set_defaults(save_every=50)
    args = ap.parse_args(argv)
    if not args.data or not os.path.exists(args.data):
        ap.error(f"no training data at {args.data!r}; pass --data (WebNLG 2017 XML folder)")
    if args.command == "relations":
        _check_relation_args(ap, args)
    elif not 0 <= args.listed_share <= 1 or not 0 <= args.lowercase_share <= 1 or args.distractors < 0:
        ap.error("--listed-share and --lowercase-share must be in [0, 1] and --distractors >= 0")
    elif args.extra_data:
        if args.extra_per_entry < 1:
            ap.error("--extra-per-entry must be >= 1")
        if args.exclude_inputs is None:
            args.exclude_inputs = default_exclude_inputs()
        missing = [p for p in args.extra_data + args.exclude_inputs if not p or not os.path.exists(p)]
        if missing:
            ap.error(f"no WebNLG XML folder at {missing[0]!r} (--extra-data / --exclude-inputs)")
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.time()
    command = shlex.join(["python", "-m", "training.fact_accuracy.train"] + list(sys.argv[1:] if argv is None else argv))
    if args.command == "triples":
        log = train_triples(args, command)
    else:
        log = train_relations(args, command)
    log["minutes"] = round((time.time() - start) / 60, 1)
    print(json.dumps(log, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
