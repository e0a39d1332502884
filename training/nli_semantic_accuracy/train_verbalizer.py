"""Train the learned fact verbalizer (``checkpoints/nli_semantic_accuracy/verbalizer``): the shared small
generator (SmolLM2-135M-Instruct + LoRA, ``d2t_metrics.generator``) fine-tuned to write
one fact as one sentence, on WebNLG's single-triple lexicalisations.

    # the shipped checkpoint: WebNLG 3.0 train + dev, without any entry whose triple set is a
    # WebNLG 2017 test input (the metrics are measured on those inputs)
    python -m training.nli_semantic_accuracy.train_verbalizer --out checkpoints/nli_semantic_accuracy/verbalizer \\
        --data webnlg-dataset/release_v3.0/en/train --data webnlg-dataset/release_v3.0/en/dev \\
        --exclude-inputs ../shared/data/webnlg2017/xml/test

    # the generalization check of benchmarks/history/nli_semantic_accuracy.md: WebNLG 2017
    # train only, whose categories exclude the 5 unseen ones of its test set
    python -m training.nli_semantic_accuracy.train_verbalizer --out /tmp/verbalizer17 --data ../shared/data/webnlg2017/xml/train

Pairs come from ``training.nli_semantic_accuracy.verbalizer_data.training_pairs``. The run is resumable
(``--max-minutes``; state in ``OUT.work/``). After training, the dev score is the share
of ``--dev`` single-triple facts whose generated sentence passes ``states_only`` (the
metric would use it), overall and for predicates the training data lacks; it goes to
the recipe (``d2t_config.json``) and the checkpoint's README.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

import torch

from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.datasets import shared_dir
from d2t_metrics.extract_templates import without_inputs
from d2t_metrics.generator import generate
from d2t_metrics.generator import load_generator
from d2t_metrics.generator import train_generator
from d2t_metrics.learned_verbalizer import fact_fields
from d2t_metrics.learned_verbalizer import prompt
from d2t_metrics.learned_verbalizer import states_only
from d2t_metrics.learned_verbalizer import MAX_NEW_TOKENS
from training.nli_semantic_accuracy.verbalizer_data import training_pairs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _webnlg(split: str) -> str:
    shared = shared_dir()
    return os.path.join(shared, "data", "webnlg2017", "xml", split) if shared else ""


def dev_scores(path: str, dev_entries, train_predicates, show_progress: bool = True) -> dict:
    """The share of dev facts whose generated sentence passes ``states_only``, with examples."""
    facts = sorted({fact_fields(e.table[0]) for e in dev_entries if len(e.table) == 1})
    tokenizer, model, _ = load_generator(path)
    sentences = generate(model, tokenizer, [prompt(*f) for f in facts], max_new_tokens=MAX_NEW_TOKENS,
                         show_progress=show_progress, desc="dev facts")
    passed = [states_only(s, *f) for f, s in zip(facts, sentences)]
    new = [p for f, p in zip(facts, passed) if f[1] not in train_predicates]
    return {"facts": len(facts), "passes": round(sum(passed) / max(1, len(facts)), 4),
            "facts_new_predicate": len(new), "passes_new_predicate": round(sum(new) / max(1, len(new)), 4),
            "examples": [{"fact": " | ".join(f), "sentence": s, "used": p} for f, s, p in list(zip(facts, sentences, passed))[:: max(1, len(facts) // 12)][:12]]}


def _base_of(out: str, recipe: dict) -> str:
    with open(os.path.join(out, "adapter_config.json"), encoding="utf-8") as f:
        return recipe.get("base") or json.load(f).get("base_model_name_or_path", "?")


def _write_card(out: str, recipe: dict) -> None:
    t, dev = recipe["training"], recipe["dev_scores"]
    cell = lambda text: str(text).replace("|", "\\|")  # a fact's "|" would split the table's cell
    rows = "\n".join(f"| {cell(e['fact'])} | {cell(e['sentence'])} | {'yes' if e['used'] else 'no (back-off)'} |" for e in dev["examples"])
    text = f"""# d2t-metrics fact verbalizer

Writes one fact (`subject | predicate | object`) as one sentence, for the facts whose predicate
has no template (`d2t_metrics.learned_verbalizer`; `nli_semantic_accuracy` with
`verbalizer="learned"`). Base: `{_base_of(out, recipe)}` with LoRA adapters (PEFT layout, float16).
A sentence is used only when it holds the subject and object verbatim and adds no other name
or number (`states_only`); otherwise the metric uses "The <predicate> of <subject> is <object>.".

## Training

    {t["command"]}

{t["pairs_kept"]} (prompt, sentence) pairs from {t["single_triple_entries"]} single-triple entries
({t["predicates"]} predicates; {t["entries_excluded"]} entries excluded as WebNLG 2017 test inputs),
the lexicalisations that pass `states_only`; {t["steps"]} steps of batch {t["batch_size"]}, learning
rate {t["learning_rate"]}, seed {t["seed"]}.

## Dev ({dev["facts"]} single-triple facts of `{t["dev"]}`)

Share of facts whose sentence is used (passes `states_only`): {dev["passes"]:.1%}; for the
{dev["facts_new_predicate"]} facts whose predicate the training data lacks: {dev["passes_new_predicate"]:.1%}.
{t.get("note_dev", "")}

| fact | sentence | used |
|---|---|---|
{rows}

Data: WebNLG (CC BY-NC-SA 4.0).
"""
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.nli_semantic_accuracy.train_verbalizer", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", action="append", default=None, help="WebNLG XML folder or file (repeatable; default WebNLG 2017 train)")
    ap.add_argument("--exclude-inputs", action="append", default=[], help="WebNLG XML whose inputs no training entry may be")
    ap.add_argument("--dev", default=_webnlg("dev"), help="WebNLG XML for the dev score (default WebNLG 2017 dev)")
    ap.add_argument("--base", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=4e-4)
    ap.add_argument("--max-length", type=int, default=96)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--max-minutes", type=float, default=None)
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    data = args.data or [_webnlg("train")]
    if not all(d and os.path.exists(d) for d in data):
        ap.error(f"no training data at {data!r}; pass --data (a WebNLG XML folder)")
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.time()
    command = shlex.join(["python", "-m", "training.nli_semantic_accuracy.train_verbalizer"] + list(sys.argv[1:] if argv is None else argv))
    entries = [e for d in data for e in load_webnlg_xml(d)]
    n_read = len(entries)
    if args.exclude_inputs:
        entries = without_inputs(entries, [e for p in args.exclude_inputs for e in load_webnlg_xml(p)])
    pairs, counts = training_pairs(entries, seed=args.seed)
    meta = {"kind": "d2t-fact-verbalizer",
            "training": {"command": command, "data": [os.path.relpath(d, ROOT) for d in data],
                         "entries_excluded": n_read - len(entries), "single_triple_entries": counts["entries"],
                         "lexicalisations": counts["lexicalisations"], "pairs_kept": counts["kept"],
                         "predicates": counts["predicates"],
                         "dev": os.path.relpath(args.dev, ROOT) if args.dev else None}}
    log = train_generator(pairs, args.out, meta, base=args.base, steps=args.steps, batch_size=args.batch_size,
                          learning_rate=args.lr, max_length=args.max_length, seed=args.seed, max_minutes=args.max_minutes,
                          save_every=args.save_every, show_progress=not args.no_progress)
    if log["finished"] and args.dev and os.path.exists(args.dev):
        train_predicates = {fact_fields(e.table[0])[1] for e in entries if len(e.table) == 1}
        scores = dev_scores(args.out, load_webnlg_xml(args.dev), train_predicates, show_progress=not args.no_progress)
        config_path = os.path.join(args.out, "d2t_config.json")
        with open(config_path, encoding="utf-8") as f:
            recipe = json.load(f)
        recipe["dev_scores"] = scores
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(recipe, f, indent=2, ensure_ascii=False)
            f.write("\n")
        _write_card(args.out, recipe)
        log["dev_scores"] = {k: v for k, v in scores.items() if k != "examples"}
    log["minutes"] = round((time.time() - start) / 60, 1)
    print(json.dumps(log, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
