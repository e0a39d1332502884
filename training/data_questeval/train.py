"""Train Data-QuestEval's QA and QG models (checkpoints in ``checkpoints/data_questeval/``).

The four steps of Rebuffel et al. (2021), one command each, run in this order::

    # step 1: textual QA (MiniLM span extraction + no answer) and QG (SmolLM2 + LoRA) on SQuAD v1.1
    python -m training.data_questeval.train text-qa --out checkpoints/data_questeval/text_qa
    python -m training.data_questeval.train text-qg --out checkpoints/data_questeval/text_qg
    # steps 2-3: synthetic (table, question, answer) corpus from WebNLG 2017 train texts
    python -m training.data_questeval.train synthesize --qg checkpoints/data_questeval/text_qg \\
        --qa checkpoints/data_questeval/text_qa --out /tmp/data_questeval/synthetic_webnlg.jsonl
    # step 4: table QA and QG, warm-started from the text models
    python -m training.data_questeval.train table-qa --corpus /tmp/data_questeval/synthetic_webnlg.jsonl \\
        --init checkpoints/data_questeval/text_qa --out checkpoints/data_questeval/table_qa
    python -m training.data_questeval.train table-qg --corpus /tmp/data_questeval/synthetic_webnlg.jsonl \\
        --init checkpoints/data_questeval/text_qg --out checkpoints/data_questeval/table_qg

Data: SQuAD v1.1 from ``../shared/data/squad`` (``dev-v1.1.json`` trains,
``test-v1.1.json`` is held out for dev scores; :mod:`.qa_data`), WebNLG 2017
train from ``../shared/data/webnlg2017/xml/train`` (:mod:`.synthetic`);
``--shared`` / ``--data`` point elsewhere.

QA models: all-MiniLM-L6-v2 with the project's LoRA recipe and a fully
trained span head (``qa_outputs``), transformers ``Trainer``, windows of
``--max-length`` tokens sharing ``--stride`` tokens (:mod:`metrics.data_questeval.qa`), batches of
similar length. QG models: the shared generator
(``d2t_metrics.generator.train_generator``) on the prompts of :mod:`metrics.data_questeval.qg`.
QA examples go through the LoRA model rather than peft's question-answering
wrapper, whose ``forward`` drops ``token_type_ids``; the recipe records
whether the model read them (``"token_type_ids"``), and ``SpanQA`` reads a
checkpoint the same way. ``text-qa --hard-share`` makes that share of the
unanswerable examples from the question's own paragraph without its answer
sentence (:func:`.qa_data.without_answer`): a text about the right entity
that omits the fact asked about, which is what Data-QuestEval's table
questions meet in an incomplete output. ``text-qa --corpus`` adds the
synthetic corpus's questions asked on the WebNLG texts they were written
from (:func:`.synthetic.text_qa_examples`): short descriptions of a few
facts, the texts the textual QA reads at evaluation time, whose hard
unanswerable examples are the text without its answer's sentence or
another text about the same entity (:func:`.synthetic.same_subject_text`).
``table-qa --hard-share`` does the
same on the table side: the question's own table without the fact that
holds the answer (:func:`.synthetic.table_without_answer`), what a text's
questions meet when the text states something the table does not.
The table models start from the text models (``--init``) and mix in
``--text-mix`` (25 %) of SQuAD examples so that they keep reading
questions well; their texts are marked in the data sizes.

Every command is seeded (``--seed``) and resumable: the Trainer's state is
saved every ``--save-every`` steps in ``OUT.work/`` and a rerun with the same
arguments goes on from there (``--max-minutes`` stops a run cleanly for
that, and the command then exits with status 3; synthesis keeps finished
chunks in ``OUT.work/``). Delete ``OUT.work/`` once a checkpoint is final:
it is no part of it. Each checkpoint's
``d2t_config.json`` records the exact command, the data sizes and held-out
dev scores: for QA, F1 / exact match on answerable questions and the
answerability accuracy on answerable vs unanswerable ones; for QG, the token
F1 and BLEU of the generated questions against the gold ones and the
round-trip share (the QA given by ``--qa`` answers the generated question
with the intended answer, F1 ≥ 0.5).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shlex
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import transformers

from d2t_metrics.bases import resolve_base
from d2t_metrics.checkpoints import DEFAULT_LORA
from d2t_metrics.checkpoints import apply_lora
from d2t_metrics.checkpoints import build_base_model
from d2t_metrics.checkpoints import load_checkpoint
from d2t_metrics.checkpoints import save_checkpoint
from d2t_metrics.checkpoints import warm_start
from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.datasets import shared_dir
from d2t_metrics.generator import TimeBudget
from d2t_metrics.generator import last_trainer_checkpoint
from d2t_metrics.generator import train_generator
from d2t_metrics.hub import quiet_loading
from d2t_metrics.hub import resolve_model_name
from d2t_metrics.untrusted import literal_tokenizer
from metrics.data_questeval.qa import QA_TASK
from metrics.data_questeval.qa import SPAN_MAX_ANSWER_TOKENS
from metrics.data_questeval.qa import SPAN_MAX_QUESTION_TOKENS
from metrics.data_questeval.qa import SpanQA
from metrics.data_questeval.qa import effective_stride
from metrics.data_questeval.qa import encode_windows
from metrics.data_questeval.qa import load_qa
from metrics.data_questeval.qa import squad_em
from metrics.data_questeval.qa import squad_f1
from metrics.data_questeval.qg import PROMPTS
from metrics.data_questeval.qg import GeneratorQG
from metrics.data_questeval.qg import load_qg
from metrics.data_questeval.qg import qg_prompt
from training.data_questeval.qa_data import QAExample
from training.data_questeval.qa_data import QGPair
from training.data_questeval.qa_data import add_unanswerable
from training.data_questeval.qa_data import load_squad
from training.data_questeval.qa_data import qa_examples
from training.data_questeval.qa_data import qg_pairs
from training.data_questeval.qa_data import sample
from training.data_questeval.qa_data import squad_file
from training.data_questeval.synthetic import read_jsonl
from training.data_questeval.synthetic import run_synthesis
from training.data_questeval.synthetic import stats_path
from training.data_questeval.synthetic import table_qa_examples
from training.data_questeval.synthetic import table_qg_pairs
from training.data_questeval.synthetic import text_qa_examples
from training.data_questeval.synthetic import webnlg_items

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository root, where recipes' paths are relative to
PROG = "python -m training.data_questeval.train"
# Recipes keep each command as it was run; until training moved out of the
# metric folder that was this module path. Cards show the command that runs today.
FORMER_PROG = "python -m metrics.data_questeval.train"
DEFAULT_QA_BASE = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_QG_BASE = "HuggingFaceTB/SmolLM2-135M-Instruct"
QA_KIND = "data-questeval-qa"
QG_KIND = "data-questeval-qg"
ROUND_TRIP_F1 = 0.5


# ---------------------------------------------------------------- small helpers


def command_line(argv: Sequence[str]) -> str:
    return f"{PROG} {shlex.join(list(argv))}"


def current_commands(text: str) -> str:
    """``text`` with the commands a recipe recorded under the former module path written as they run today."""
    return text.replace(FORMER_PROG, PROG)


def shown_path(path: Optional[str]) -> Optional[str]:
    """A path as recorded in a recipe: relative to the repository when inside it."""
    if not path:
        return path
    full = os.path.abspath(path)
    return os.path.relpath(full, ROOT) if full.startswith(ROOT + os.sep) else path


def update_recipe(path: str, **fields) -> Dict[str, Any]:
    """Add ``fields`` to a checkpoint's ``d2t_config.json`` (written atomically)."""
    f = os.path.join(path, "d2t_config.json")
    with open(f, encoding="utf-8") as fh:
        recipe = json.load(fh)
    recipe.update(fields)
    with open(f + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(recipe, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
    os.replace(f + ".tmp", f)
    return recipe


def _shared(args) -> str:
    shared = args.shared or shared_dir()
    if not shared or not os.path.isdir(shared):
        raise SystemExit("the shared data folder was not found: pass --shared or set D2T_SHARED")
    return shared


def _mean(values: Sequence[float]) -> Optional[float]:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else None


# ---------------------------------------------------------------- QA training


def qa_features(tokenizer, examples: Sequence[QAExample], max_length: int, stride: int,
                max_question_tokens: int = SPAN_MAX_QUESTION_TOKENS, max_windows: int = 8) -> List[Dict[str, Any]]:
    """Training windows with their span labels: the answer's first and last
    tokens when the window holds the whole answer, else the ``[CLS]`` position 0
    (no answer), as in SQuAD 2.0 training."""
    windows, contexts = encode_windows(tokenizer, [e.question for e in examples], [e.context for e in examples], max_length,
                                       stride, max_question_tokens, max_windows)
    features = []
    for w in windows:
        e = examples[w.example]
        start_pos = end_pos = 0
        a_start, a_end = e.answer_start, e.answer_start + len(e.answer)
        if e.answerable and w.context_end >= w.context_start and a_end <= len(contexts[w.example]):
            lo, hi = w.context_start, w.context_end
            if w.offsets[lo][0] <= a_start and w.offsets[hi][1] >= a_end:
                i = lo
                while i <= hi and w.offsets[i][0] <= a_start:
                    i += 1
                j = hi
                while j >= lo and w.offsets[j][1] >= a_end:
                    j -= 1
                start_pos, end_pos = i - 1, j + 1
        row = {"input_ids": w.input_ids, "start_positions": start_pos, "end_positions": end_pos}
        if w.token_type_ids is not None:
            row["token_type_ids"] = w.token_type_ids
        features.append(row)
    return features


def _qa_collate(pad_id: int):
    def collate(rows):
        n = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), n), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), n), dtype=torch.long)
        types = torch.zeros((len(rows), n), dtype=torch.long)
        for i, r in enumerate(rows):
            k = len(r["input_ids"])
            ids[i, :k] = torch.tensor(r["input_ids"])
            mask[i, :k] = 1
            if "token_type_ids" in r:
                types[i, :k] = torch.tensor(r["token_type_ids"])
        batch = {"input_ids": ids, "attention_mask": mask,
                 "start_positions": torch.tensor([r["start_positions"] for r in rows]),
                 "end_positions": torch.tensor([r["end_positions"] for r in rows])}
        if "token_type_ids" in rows[0]:
            batch["token_type_ids"] = types
        return batch

    return collate


def _training_arguments(work_dir: str, steps: int, batch_size: int, learning_rate: float, seed: int, save_every: int,
                        show_progress: bool):
    params = inspect.signature(transformers.TrainingArguments.__init__).parameters
    extra: Dict[str, Any] = {}
    if "train_sampling_strategy" in params:  # transformers 5
        extra["train_sampling_strategy"] = "group_by_length"
    elif "group_by_length" in params:
        extra["group_by_length"] = True
    return transformers.TrainingArguments(
        output_dir=work_dir, max_steps=steps, per_device_train_batch_size=batch_size, learning_rate=learning_rate,
        lr_scheduler_type="linear", warmup_steps=max(1, steps // 16), weight_decay=0.01, logging_steps=10,
        save_steps=save_every, save_total_limit=1, seed=seed, data_seed=seed, report_to=[], disable_tqdm=not show_progress,
        remove_unused_columns=False, use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0,
        label_names=["start_positions", "end_positions"], **extra)


def train_span_qa(train: Sequence[QAExample], dev: Sequence[QAExample], output: str, meta: Dict[str, Any],
                  base: str = DEFAULT_QA_BASE, init: Optional[str] = None, steps: int = 500, batch_size: int = 16,
                  learning_rate: float = 5e-4, max_length: int = 256, stride: int = 96, lora_r: int = 16, seed: int = 13,
                  max_minutes: Optional[float] = None, save_every: int = 50, show_progress: bool = True,
                  eval_batch_size: int = 32, extra_dev: Optional[Dict[str, Sequence[QAExample]]] = None) -> Dict[str, Any]:
    """Fine-tune the span QA model (LoRA + ``qa_outputs``) with transformers'
    ``Trainer``, resumable from ``output + ".work"``; when all ``steps`` are
    done, score ``dev`` and save the checkpoint (task ``question-answering``)
    with the scores in its recipe (and each ``extra_dev`` set's, as
    ``dev_scores_<name>``). Returns the training log."""
    stride = effective_stride(max_length, stride, SPAN_MAX_QUESTION_TOKENS)  # what the windows really share, recorded
    transformers.set_seed(seed)
    lora = dict(DEFAULT_LORA, r=lora_r, lora_alpha=2 * lora_r)
    with quiet_loading():
        tokenizer = literal_tokenizer(transformers.AutoTokenizer.from_pretrained(resolve_model_name(resolve_base(base))))
        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()  # the fresh span head is reported "newly initialized": it is trained here
        try:
            model = apply_lora(build_base_model({"base": base, "task": QA_TASK}), lora, trainable=("qa_outputs",))
        finally:
            transformers.logging.set_verbosity(verbosity)
    if init:
        warm_start(model, init, lora)
    features = qa_features(tokenizer, train, max_length, stride)
    if not features:
        raise ValueError("no training examples")
    work_dir = output.rstrip("/") + ".work"
    args = _training_arguments(work_dir, steps, batch_size, learning_rate, seed, save_every, show_progress)
    # peft's PeftModelForQuestionAnswering.forward (0.21) drops token_type_ids, so a model trained through
    # it never sees the context's segment ids that it gets at inference; its LoRA model (the same
    # parameters) passes every input on. The Trainer then keeps whole weights in OUT.work (resume only).
    reads_types = "token_type_ids" in features[0]  # the tokenizer makes them for every window or for none
    trainer = transformers.Trainer(model=model.base_model, args=args, train_dataset=features,
                                   data_collator=_qa_collate(tokenizer.pad_token_id or 0),
                                   callbacks=[TimeBudget(max_minutes)])
    resume = last_trainer_checkpoint(work_dir)
    result = trainer.train(resume_from_checkpoint=resume)
    state = trainer.state
    losses = [h["loss"] for h in state.log_history if "loss" in h]
    log = {"steps_done": state.global_step, "steps": steps, "finished": state.global_step >= steps, "resumed_from": resume,
           "final_loss": losses[-1] if losses else None, "train_loss": result.training_loss,
           "examples": len(train), "windows": len(features)}
    if not log["finished"]:
        return log
    model.eval()
    recipe = dict(meta, task=QA_TASK, base=base, max_length=max_length, stride=stride, max_answer_tokens=SPAN_MAX_ANSWER_TOKENS,
                  max_question_tokens=SPAN_MAX_QUESTION_TOKENS, token_type_ids=reads_types)
    recipe["training"] = dict(meta.get("training", {}), steps=steps, batch_size=batch_size, learning_rate=learning_rate,
                              lora_r=lora_r, seed=seed, windows=len(features), final_loss=log["final_loss"],
                              warm_start=shown_path(init) if init else None)
    qa = SpanQA.from_model(tokenizer, model.base_model, recipe)  # base_model: as trained (token types passed on)
    recipe["dev_scores"] = qa_dev_scores(qa, dev, batch_size=eval_batch_size)
    for name, examples in (extra_dev or {}).items():
        recipe[f"dev_scores_{name}"] = qa_dev_scores(qa, examples, batch_size=eval_batch_size)
    tokenizer.model_max_length = max_length
    save_checkpoint(model, output, recipe, tokenizer=tokenizer)
    log.update({k: v for k, v in recipe.items() if k.startswith("dev_scores")})
    return log


def qa_dev_scores(qa, examples: Sequence[QAExample], batch_size: int = 32) -> Dict[str, Any]:
    """F1 / exact match (best over the gold answers) on the answerable
    examples, and how well answering tells answerable from unanswerable ones:
    by the answer (given or not) and by answerability ≥ 0.5."""
    if not examples:
        return {"n": 0}
    results = qa.answer([e.question for e in examples], [e.context for e in examples], batch_size=batch_size, show_progress=False)
    pos = [(e, r) for e, r in zip(examples, results) if e.answerable]
    neg = [(e, r) for e, r in zip(examples, results) if not e.answerable]
    golds = lambda e: e.gold or [e.answer]  # noqa: E731
    removed = [(e, r) for e, r in neg if e.source.endswith(":removed")]
    extra = {"unanswerable_removed": {
        "n": len(removed),
        "abstained": _mean(float(not r.answer) for _, r in removed),
        "mean_answerability": _mean(r.answerability for _, r in removed),
    }} if removed else {}
    return {
        "n": len(examples),
        "answerable": {
            "n": len(pos),
            "f1": _mean(max(squad_f1(r.answer, g) for g in golds(e)) for e, r in pos),
            "exact_match": _mean(max(squad_em(r.answer, g) for g in golds(e)) for e, r in pos),
            "answered": _mean(float(bool(r.answer)) for _, r in pos),
            "mean_answerability": _mean(r.answerability for _, r in pos),
        },
        "unanswerable": {
            "n": len(neg),
            "abstained": _mean(float(not r.answer) for _, r in neg),
            "mean_answerability": _mean(r.answerability for _, r in neg),
        },
        "answerability_accuracy": _mean(float(bool(r.answer) == e.answerable) for e, r in zip(examples, results)),
        "answerability_accuracy_at_0.5": _mean(float((r.answerability >= 0.5) == e.answerable) for e, r in zip(examples, results)),
        **extra,
    }


# ---------------------------------------------------------------- QG training


def _bleu(hypotheses: Sequence[str], references: Sequence[str]) -> Optional[float]:
    try:
        import sacrebleu  # lazy: sacrebleu, an optional extra ("bench")
    except ImportError:  # an optional extra ("bench"); the token F1 is always there
        return None
    return round(float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score), 2)


def qg_dev_scores(qg, pairs: Sequence[QGPair], qa=None, batch_size: int = 32, context_kind: Optional[str] = None) -> Dict[str, Any]:
    """The generated questions against the gold ones (token F1, BLEU) and, with
    a ``qa``, the round trip: the share of generated questions that ``qa``
    answers with the intended answer (F1 ≥ 0.5) on the same context."""
    if not pairs:
        return {"n": 0}
    answers, contexts = [p.answer for p in pairs], [p.context for p in pairs]
    kwargs = {"context_kind": context_kind} if context_kind and isinstance(qg, GeneratorQG) else {}
    questions = qg.generate(answers, contexts, batch_size=batch_size, show_progress=False, **kwargs)
    scores: Dict[str, Any] = {
        "n": len(pairs),
        "token_f1_vs_gold": _mean(squad_f1(q, p.question) for q, p in zip(questions, pairs)),
        "bleu_vs_gold": _bleu(questions, [p.question for p in pairs]),
        "empty_questions": sum(1 for q in questions if not q.strip()),
        "examples": [{"answer": p.answer, "gold": p.question, "generated": q} for p, q in list(zip(pairs, questions))[:3]],
    }
    if qa is not None:
        results = qa.answer(questions, contexts, batch_size=batch_size, show_progress=False)
        f1s = [squad_f1(r.answer, a) for r, a in zip(results, answers)]
        scores["round_trip"] = {"qa": getattr(qa, "name_or_path", None) and shown_path(qa.name_or_path),
                                "f1": _mean(f1s), "share_answered_correctly": _mean(float(f >= ROUND_TRIP_F1) for f in f1s),
                                "mean_answerability": _mean(r.answerability for r in results)}
    return scores


def train_qg(pairs: Sequence[QGPair], dev: Sequence[QGPair], kind_of: Dict[int, str], output: str, meta: Dict[str, Any],
             args, qa_path: Optional[str], context_kind: str) -> Dict[str, Any]:
    """The generator on QG prompts (``kind_of[i]``: the context kind of pair
    ``i``, text or table), then dev scores into its recipe."""
    prompts = [(qg_prompt(p.answer, p.context, kind_of.get(i, context_kind)), p.question) for i, p in enumerate(pairs)]
    meta = dict(meta, kind=QG_KIND, context_kind=context_kind, prompts=PROMPTS)
    log = train_generator(prompts, output, meta, base=args.base, warm_start_from=args.init, steps=args.steps,
                          batch_size=args.batch_size, learning_rate=args.lr, max_length=args.max_length, seed=args.seed,
                          max_minutes=args.max_minutes, save_every=args.save_every, show_progress=not args.no_progress)
    if not log["finished"]:
        return log
    tokenizer, model, recipe, _ = load_checkpoint(output)
    qg = GeneratorQG.from_model(tokenizer, model, recipe)
    qa = load_qa(qa_path) if qa_path else None
    log["dev_scores"] = qg_dev_scores(qg, dev, qa, batch_size=args.eval_batch_size)
    update_recipe(output, dev_scores=log["dev_scores"])
    return log


def _default_checkpoint(name: str) -> Optional[str]:
    path = os.path.join(ROOT, "checkpoints", "data_questeval", name)
    return path if os.path.isfile(os.path.join(path, "d2t_config.json")) else None


# ---------------------------------------------------------------- the commands


def cmd_text_qa(args, argv) -> Dict[str, Any]:
    train_q, dev_q, data, added = _squad_halves(args)
    train = add_unanswerable(qa_examples(train_q), args.unanswerable_ratio, seed=args.seed, hard_share=args.hard_share)
    dev = add_unanswerable(qa_examples(dev_q), args.unanswerable_ratio, seed=args.seed + 1, hard_share=args.hard_share)
    meta = {"kind": QA_KIND, "context_kind": "text", "training": {
        "command": command_line(argv), "data": data,
        "dev_data": "SQuAD v1.1 test-v1.1.json (second half), sampled", "squad_questions": len(train_q),
        "examples": len(train), "unanswerable": sum(not e.answerable for e in train),
        "unanswerable_ratio": args.unanswerable_ratio, "dev_examples": len(dev)}}
    if args.hard_share:  # recorded only when used, so that older recipes read the same
        meta["training"].update(hard_share=args.hard_share, unanswerable_removed=sum(e.source.endswith(":removed") for e in train))
    if args.heldout_train:  # likewise
        meta["training"]["heldout_questions_added"] = len(added)
    extra_dev = {}
    if args.corpus:
        rows = _corpus(args)
        webnlg = text_qa_examples(rows, "train", args.unanswerable_ratio, seed=args.seed, hard_share=args.hard_share)
        extra_dev["webnlg"] = text_qa_examples(rows, "dev", args.unanswerable_ratio, seed=args.seed + 1, hard_share=args.hard_share)
        train = sample(train + webnlg, 0, args.seed)
        meta["training"].update(webnlg_examples=len(webnlg), webnlg_unanswerable=sum(not e.answerable for e in webnlg),
                                webnlg_unanswerable_removed=sum(e.source.endswith(":removed") for e in webnlg),
                                examples=len(train), corpus=_corpus_provenance(args.corpus, rows),
                                webnlg_dev_data=f"{shown_path(args.corpus)} (split dev): questions asked on their WebNLG texts")
    return train_span_qa(train, dev, args.out, meta, base=args.base, init=args.init, steps=args.steps, batch_size=args.batch_size,
                         learning_rate=args.lr, max_length=args.max_length, stride=args.stride, lora_r=args.lora_r, seed=args.seed,
                         max_minutes=args.max_minutes, save_every=args.save_every, show_progress=not args.no_progress,
                         eval_batch_size=args.eval_batch_size, extra_dev=extra_dev)


def heldout_training_questions(heldout: Sequence, dev: Sequence) -> List:
    """The held-out half's questions whose paragraph holds no dev question: more
    training questions, none of them sharing a context with a dev question."""
    dev_contexts = {q.context for q in dev}
    return [q for q in heldout if q.context not in dev_contexts]


def _squad_halves(args) -> Tuple[List, List, str, List]:
    """(training questions, dev questions, description of the training data, the
    held-out half's questions added with ``--heldout-train``)."""
    shared = _shared(args)
    train_q = sample(load_squad(squad_file(shared)), args.max_train, args.seed)
    heldout = load_squad(squad_file(shared, heldout=True))
    dev_q = sample(heldout, args.max_dev, args.seed)
    added = heldout_training_questions(heldout, dev_q) if args.heldout_train else []
    data = "SQuAD v1.1 dev-v1.1.json (first half of the official dev set, by article)"
    if added:
        train_q = sample(train_q + added, 0, args.seed)
        data += " and test-v1.1.json (second half) except the paragraphs of the dev questions"
    return train_q, dev_q, data, added


def cmd_text_qg(args, argv) -> Dict[str, Any]:
    train_q, dev_q, data, added = _squad_halves(args)
    train = qg_pairs(train_q, args.context_words)
    dev = qg_pairs(dev_q, args.context_words)
    qa_path = args.qa or _default_checkpoint("text_qa")
    meta = {"training": {"command": command_line(argv), "data": data,
                         "dev_data": "SQuAD v1.1 test-v1.1.json (second half), sampled", "pairs": len(train),
                         "context_words": args.context_words, "dev_pairs": len(dev)}}
    if args.heldout_train:  # recorded only when used, so that older recipes read the same
        meta["training"]["heldout_pairs_added"] = len(added)
    return train_qg(train, dev, {}, args.out, meta, args, qa_path, "text")


def cmd_synthesize(args, argv) -> Dict[str, Any]:
    data = args.data or os.path.join(_shared(args), "data", "webnlg2017", "xml", "train")
    if not os.path.exists(data):
        raise SystemExit(f"no WebNLG data at {data!r}; pass --data (a WebNLG 2017 XML folder)")
    items = webnlg_items(load_webnlg_xml(data), args.max_texts, seed=args.seed, dev_fraction=args.dev_fraction)
    settings = {"command": command_line(argv), "data": shown_path(data), "qg": shown_path(args.qg), "qa": shown_path(args.qa),
                "max_texts": args.max_texts, "texts": len(items), "max_answers_per_text": args.max_answers,
                "f1_threshold": args.f1_threshold, "dev_fraction": args.dev_fraction, "seed": args.seed,
                "linearization": "d2t_metrics.linearize.linearize (Data-QuestEval format)"}
    return run_synthesis(items, lambda: (load_qg(args.qg), load_qa(args.qa)), args.out, settings, chunk_size=args.chunk_size,
                         max_minutes=args.max_minutes, show_progress=not args.no_progress, f1_threshold=args.f1_threshold,
                         max_answers=args.max_answers, batch_size=args.batch_size, seed=args.seed)


def _corpus(args):
    if not os.path.isfile(args.corpus):
        raise SystemExit(f"no synthetic corpus at {args.corpus!r}; run the synthesize command first")
    rows = read_jsonl(args.corpus)
    if not rows:
        raise SystemExit(f"{args.corpus} is empty")
    return rows


def _corpus_provenance(corpus: str, rows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """What the training recipe keeps of the corpus: its size and how it was made (its statistics file)."""
    out: Dict[str, Any] = {"rows": len(rows), "splits": {}}
    for r in rows:
        out["splits"][r["split"]] = out["splits"].get(r["split"], 0) + 1
    if os.path.isfile(stats_path(corpus)):
        with open(stats_path(corpus), encoding="utf-8") as f:
            out["made_by"] = json.load(f).get("settings")
    return out


def _text_share(n_table: int, mix: float) -> int:
    """How many text examples make ``mix`` of a training set with ``n_table`` table examples."""
    return int(round(mix / (1 - mix) * n_table)) if 0 < mix < 1 else 0


def cmd_table_qa(args, argv) -> Dict[str, Any]:
    rows = _corpus(args)
    train = table_qa_examples(rows, "train", args.unanswerable_ratio, seed=args.seed, hard_share=args.hard_share)
    dev = table_qa_examples(rows, "dev", args.unanswerable_ratio, seed=args.seed + 1, hard_share=args.hard_share)
    dev_is_train = not dev
    if dev_is_train:  # a corpus too small to hold dev entries (tests): scored on training rows, and marked so
        dev = train[: args.max_dev or None]
    dev = dev[: args.max_dev or None]
    n_text = _text_share(len(train), args.text_mix)
    text = []
    if n_text:
        squad = sample(load_squad(squad_file(_shared(args))), n_text, args.seed)
        text = add_unanswerable(qa_examples(squad), args.unanswerable_ratio, seed=args.seed)[:n_text]
    mixed = sample(train + text, 0, args.seed)
    base = args.base or _init_base(args.init) or DEFAULT_QA_BASE
    meta = {"kind": QA_KIND, "context_kind": "table", "training": {
        "command": command_line(argv), "data": f"synthetic WebNLG corpus {shown_path(args.corpus)} (split train)",
        "table_examples": len(train), "table_unanswerable": sum(not e.answerable for e in train), "text_examples": len(text),
        "text_mix": args.text_mix, "unanswerable_ratio": args.unanswerable_ratio, "dev_examples": len(dev),
        "dev_is_train": dev_is_train, "corpus": _corpus_provenance(args.corpus, rows)}}
    if args.hard_share:  # recorded only when used, so that older recipes read the same
        meta["training"].update(hard_share=args.hard_share, table_unanswerable_removed=sum(e.source.endswith(":removed") for e in train))
    return train_span_qa(mixed, dev, args.out, meta, base=base, init=args.init, steps=args.steps, batch_size=args.batch_size,
                         learning_rate=args.lr, max_length=args.max_length, stride=args.stride, lora_r=args.lora_r, seed=args.seed,
                         max_minutes=args.max_minutes, save_every=args.save_every, show_progress=not args.no_progress,
                         eval_batch_size=args.eval_batch_size)


def cmd_table_qg(args, argv) -> Dict[str, Any]:
    rows = _corpus(args)
    train = table_qg_pairs(rows, "train")
    dev = table_qg_pairs(rows, "dev")
    dev_is_train = not dev
    if dev_is_train:
        dev = train
    dev = sample(dev, args.max_dev, args.seed)
    n_text = _text_share(len(train), args.text_mix)
    text = qg_pairs(sample(load_squad(squad_file(_shared(args))), n_text, args.seed), args.context_words) if n_text else []
    pairs = train + text
    kind_of = {i: ("table" if i < len(train) else "text") for i in range(len(pairs))}
    qa_path = args.qa or _default_checkpoint("table_qa")
    if args.base is None:
        args.base = _init_base(args.init) or DEFAULT_QG_BASE
    meta = {"training": {"command": command_line(argv), "data": f"synthetic WebNLG corpus {shown_path(args.corpus)} (split train)",
                         "table_pairs": len(train), "text_pairs": len(text), "text_mix": args.text_mix,
                         "dev_pairs": len(dev), "dev_is_train": dev_is_train,
                         "corpus": _corpus_provenance(args.corpus, rows)}}
    return train_qg(pairs, dev, kind_of, args.out, meta, args, qa_path, "table")


def _init_base(init: Optional[str]) -> Optional[str]:
    """The base a warm-start checkpoint was trained on (its adapter_config.json)."""
    if not init:
        return None
    f = os.path.join(init, "adapter_config.json")
    if not os.path.isfile(f):
        raise SystemExit(f"--init {init!r} is not a checkpoint folder (no adapter_config.json)")
    with open(f, encoding="utf-8") as fh:
        return json.load(fh).get("base_model_name_or_path")


# ---------------------------------------------------------------- checkpoint cards

_ROLE_TEXT = {
    ("question-answering", "text"): ("Text QA", "extractive span QA with a no-answer option, answering questions on texts",
                                     "question-answering", "cc-by-sa-4.0", ["squad"]),
    ("question-answering", "table"): ("Table QA", "extractive span QA with a no-answer option, answering questions on "
                                      "linearized tables", "question-answering", "cc-by-nc-sa-4.0", ["squad", "web_nlg"]),
    ("causal-lm", "text"): ("Text QG", "question generation on texts: the question whose answer is a given span",
                            "text-generation", "cc-by-sa-4.0", ["squad"]),
    ("causal-lm", "table"): ("Table QG", "question generation on linearized tables: the question whose answer is a "
                             "given table value", "text-generation", "cc-by-nc-sa-4.0", ["squad", "web_nlg"]),
}


def card_text(recipe: Dict[str, Any], adapter_base: Optional[str] = None) -> str:
    """The README.md of a checkpoint, from its ``d2t_config.json`` (and the base its adapters name)."""
    task, kind = recipe.get("task"), recipe.get("context_kind", "text")
    title, what, pipeline, licence, data = _ROLE_TEXT.get((task, kind), ("Model", task, "other", "apache-2.0", []))
    base = adapter_base or recipe.get("base") or "?"
    training = dict(recipe.get("training") or {})
    command = current_commands(training.pop("command", "?"))
    front = ["---", "# The weights follow their training data (SQuAD: CC BY-SA 4.0; WebNLG 2017: CC BY-NC-SA 4.0); the code is Apache-2.0.",
             f"license: {licence}", f"base_model: {base}", "library_name: peft", f"pipeline_tag: {pipeline}",
             "language:", "- en", "tags:", "- peft", "- lora", f"- base_model:adapter:{base}", "- data-to-text", "- d2t-metrics"]
    if data:
        front += ["datasets:"] + [f"- {d}" for d in data]
    front.append("---")
    dev = json.dumps(recipe.get("dev_scores", {}), indent=2, ensure_ascii=False)
    segments = ""
    if task == QA_TASK:
        segments = ("\nIt reads the context as segment 1 (`token_type_ids`), as it was trained.\n"
                    if recipe.get("token_type_ids", True) else
                    "\nIt was trained with segment 0 everywhere (peft's question-answering wrapper dropped `token_type_ids`), "
                    "so it is read without them (`\"token_type_ids\": false` in `d2t_config.json`).\n")
    sizes = current_commands(json.dumps(training, indent=2, ensure_ascii=False, default=str))
    body = f"""
# {title} for `metrics/data_questeval`

{title} of the project's offline Data-QuestEval (Rebuffel et al., 2021): {what}.
Base `{base}` with LoRA adapters (PEFT layout{'' if task == 'causal-lm' else ' and a fully trained span head'});
the recipe (prompts or window settings) is in `d2t_config.json`.
{segments}
## Training

    {command}

Its data sizes and settings (from `d2t_config.json`):

```json
{sizes}
```

## Dev scores

Held-out data as described above (QA: F1 / exact match on answerable questions and how well
its answer, or its answerability at 0.5, tells answerable from unanswerable ones; QG: token F1 and
BLEU of the generated questions against the gold ones, and the round trip: the share a QA model
answers with the intended answer):

```json
{dev}
```

## How to load

    import evaluate
    dqe = evaluate.load("metrics/data_questeval", model="checkpoints/data_questeval")  # all four models

or one model: `metrics.data_questeval.qa.load_qa(path)` / `metrics.data_questeval.qg.load_qg(path)`.
"""
    return "\n".join(front) + "\n" + body


def write_card(path: str) -> str:
    """Write ``README.md`` of the checkpoint folder ``path`` from its recipe."""
    with open(os.path.join(path, "d2t_config.json"), encoding="utf-8") as f:
        recipe = json.load(f)
    base = None
    adapter = os.path.join(path, "adapter_config.json")
    if os.path.isfile(adapter):
        with open(adapter, encoding="utf-8") as f:
            base = json.load(f).get("base_model_name_or_path")
    out = os.path.join(path, "README.md")
    with open(out, "w", encoding="utf-8") as f:
        f.write(card_text(recipe, base))
    return out


def cmd_card(args, argv) -> Dict[str, Any]:
    return {"card": write_card(args.out)}


# ---------------------------------------------------------------- the command line


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    def common(p, steps, batch_size, lr, max_length, save_every):
        p.add_argument("--out", required=True)
        p.add_argument("--shared", default=None, help="the shared data folder (default: ../shared or $D2T_SHARED)")
        p.add_argument("--steps", type=int, default=steps)
        p.add_argument("--batch-size", type=int, default=batch_size)
        p.add_argument("--eval-batch-size", type=int, default=32)
        p.add_argument("--lr", type=float, default=lr)
        p.add_argument("--max-length", type=int, default=max_length)
        p.add_argument("--seed", type=int, default=13)
        p.add_argument("--max-minutes", type=float, default=None, help="stop cleanly after this long; a rerun resumes")
        p.add_argument("--save-every", type=int, default=save_every)
        p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
        p.add_argument("--no-progress", action="store_true")

    def qa_options(p, base_default):
        p.add_argument("--base", default=base_default)
        p.add_argument("--stride", type=int, default=96, help="context tokens shared by consecutive windows")
        p.add_argument("--lora-r", type=int, default=16)
        p.add_argument("--unanswerable-ratio", type=float, default=0.5, help="unanswerable examples per answerable one")

    p = sub.add_parser("text-qa", help="step 1: the textual span QA on SQuAD v1.1 (+ unanswerable pairs)")
    common(p, steps=500, batch_size=16, lr=5e-4, max_length=256, save_every=50)
    qa_options(p, DEFAULT_QA_BASE)
    p.add_argument("--init", default=None, help="warm-start from a QA checkpoint of the same recipe")
    p.add_argument("--max-train", type=int, default=0, help="SQuAD questions used (0: all 4,961)")
    p.add_argument("--max-dev", type=int, default=600, help="held-out SQuAD questions scored (plus their unanswerable pairs)")
    p.add_argument("--hard-share", type=float, default=0.0,
                   help="share of the unanswerable examples made from the question's own paragraph without its answer "
                        "(qa_data.add_unanswerable; also in the dev set)")
    p.add_argument("--heldout-train", action="store_true",
                   help="also train on the second half's questions, except those whose paragraph holds a dev question")
    p.add_argument("--corpus", default=None,
                   help="also train on the synthetic corpus's questions asked on their WebNLG texts "
                        "(synthetic.text_qa_examples; its dev split is scored as dev_scores_webnlg)")

    p = sub.add_parser("text-qg", help="step 1: the textual QG (the shared generator) on SQuAD v1.1")
    common(p, steps=150, batch_size=8, lr=3e-4, max_length=160, save_every=25)
    p.add_argument("--base", default=DEFAULT_QG_BASE)
    p.add_argument("--init", default=None, help="warm-start from a generator checkpoint")
    p.add_argument("--max-train", type=int, default=0, help="SQuAD questions used (0: all)")
    p.add_argument("--max-dev", type=int, default=64, help="held-out SQuAD questions for the dev scores")
    p.add_argument("--context-words", type=int, default=80, help="words of context around the answer (qa_data.QG_CONTEXT_WORDS)")
    p.add_argument("--qa", default=None, help="QA for the round-trip dev score (default: checkpoints/data_questeval/text_qa if present)")
    p.add_argument("--heldout-train", action="store_true",
                   help="also train on the second half's questions, except those whose paragraph holds a dev pair")

    p = sub.add_parser("synthesize", help="steps 2-3: the synthetic (table, question, answer) corpus from WebNLG train texts")
    p.add_argument("--qg", required=True, help="the textual QG (a generator checkpoint or a T5 QG)")
    p.add_argument("--qa", required=True, help="the textual QA (a span QA checkpoint or a T5 QA)")
    p.add_argument("--out", required=True, help="the corpus, JSONL (its statistics go beside it, NAME.stats.json)")
    p.add_argument("--data", default=None, help="WebNLG 2017 XML folder (default: ../shared/data/webnlg2017/xml/train)")
    p.add_argument("--shared", default=None)
    p.add_argument("--max-texts", type=int, default=1200, help="WebNLG train entries used, one text each (0: all 6,940)")
    p.add_argument("--max-answers", type=int, default=4, help="answer candidates per text")
    p.add_argument("--f1-threshold", type=float, default=0.5, help="SQuAD F1 of the QA's answer vs the table value to keep a question")
    p.add_argument("--dev-fraction", type=float, default=0.05, help="share of entries (by key hash) marked split=dev")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--chunk-size", type=int, default=128, help="texts per resumable chunk")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--max-minutes", type=float, default=None)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")

    p = sub.add_parser("table-qa", help="step 4: the table span QA on the synthetic corpus")
    common(p, steps=560, batch_size=16, lr=3e-4, max_length=256, save_every=50)
    qa_options(p, None)
    p.add_argument("--corpus", required=True)
    p.add_argument("--init", default=None, help="warm-start from the text QA checkpoint (recommended)")
    p.add_argument("--text-mix", type=float, default=0.25, help="share of SQuAD examples in the training set")
    p.add_argument("--max-dev", type=int, default=0, help="dev examples scored (0: all)")
    p.add_argument("--hard-share", type=float, default=0.0,
                   help="share of the table examples' unanswerable ones made from the question's own table without the "
                        "fact that holds the answer (synthetic.table_without_answer; also in the dev set)")

    p = sub.add_parser("table-qg", help="step 4: the table QG on the synthetic corpus")
    common(p, steps=150, batch_size=8, lr=3e-4, max_length=192, save_every=25)
    p.add_argument("--base", default=None, help="default: the --init checkpoint's base, else SmolLM2-135M-Instruct")
    p.add_argument("--corpus", required=True)
    p.add_argument("--init", default=None, help="warm-start from the text QG checkpoint (recommended)")
    p.add_argument("--text-mix", type=float, default=0.25, help="share of SQuAD pairs (text prompts) in the training set")
    p.add_argument("--context-words", type=int, default=80)
    p.add_argument("--max-dev", type=int, default=64)
    p.add_argument("--qa", default=None, help="QA for the round-trip dev score (default: checkpoints/data_questeval/table_qa if present)")
    p = sub.add_parser("card", help="(re)write a checkpoint's README.md from its d2t_config.json")
    p.add_argument("--out", required=True, help="the checkpoint folder")
    p.add_argument("--threads", type=int, default=0)
    return ap


COMMANDS = {"text-qa": cmd_text_qa, "text-qg": cmd_text_qg, "synthesize": cmd_synthesize, "table-qa": cmd_table_qa,
            "table-qg": cmd_table_qg, "card": cmd_card}


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.time()
    log = COMMANDS[args.command](args, argv)
    if args.command in ("text-qa", "text-qg", "table-qa", "table-qg") and log.get("finished"):
        log["card"] = write_card(args.out)
    log["minutes"] = round((time.time() - start) / 60, 2)
    print(json.dumps(log, indent=2, default=str))
    return 0 if log.get("finished", True) else 3


if __name__ == "__main__":
    raise SystemExit(main())
