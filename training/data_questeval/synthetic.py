"""The synthetic multimodal QA corpus of Data-QuestEval (steps 2 and 3 of Rebuffel et al., 2021).

Step 2 — synthetic questions. For each WebNLG 2017 *train* entry (a seeded
sample of ``max_texts`` entries, one lexicalization each), the answer
candidates are the table's values (the ``[ … ]`` items of its Data-QuestEval
linearization, :func:`table_values`: entity names and objects) that occur in
the text (:func:`find_in_text`: case-insensitive, whitespace between the
value's tokens optional, so ``Wheeler , Texas`` matches ``Wheeler, Texas``,
and the text read in ASCII as the values are, so ``Suarez`` matches ``Suárez``),
at most ``max_answers`` per text (seeded choice). The textual QG writes a
question for the value's words in the text, and the textual QA answers that
question on the text. A question is kept when

* it is not empty,
* the QA's answer matches the table value: SQuAD token F1 (answer, value) ≥
  ``f1_threshold`` (default :data:`F1_THRESHOLD` = 0.5), so the question asks
  for that value and the text answers it, and
* it does not contain the value itself (normalized), which would make the
  question answer itself.

Step 3 — the corpus. Each kept question becomes a row of (linearized table,
question, answer) where the answer is the table value exactly as it is
written in the linearization and ``answer_start`` its character offset there
(the first ``[ value ]`` item with that value), so table QA can be trained as
span extraction. Rows keep the source text, the text's answer span, the QA's
answer and F1, and a ``split``: ``dev`` for the entries whose key hashes into
the first ``dev_fraction`` (5 %) of the hash space, else ``train``, so the
split does not depend on the sample. :func:`corpus_stats` summarizes a corpus.

:func:`run_synthesis` processes the texts in chunks and keeps each finished
chunk in ``OUT.work/``; a rerun (after a stop, ``max_minutes``, or a crash)
goes on from the first unfinished chunk.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import random
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from d2t_metrics.generator import read_jsonl
from d2t_metrics.generator import write_jsonl
from d2t_metrics.linearize import linearize
from d2t_metrics.linearize import to_ascii
from metrics.data_questeval.qa import normalize_answer
from metrics.data_questeval.qa import squad_f1
from metrics.data_questeval.qg import TableValue
from metrics.data_questeval.qg import table_values
from training.data_questeval.qa_data import QAExample
from training.data_questeval.qa_data import QGPair
from training.data_questeval.qa_data import add_unanswerable
from training.data_questeval.qa_data import may_still_answer
from training.data_questeval.qa_data import without_answer

F1_THRESHOLD = 0.5
MAX_ANSWERS_PER_TEXT = 4
DEV_FRACTION = 0.05
CORPUS_SOURCE = "webnlg-synthetic"
CORPUS_TEXT_SOURCE = "webnlg-synthetic-text"


def _ascii_with_positions(text: str) -> Tuple[str, List[int]]:
    """``text`` transliterated to ASCII as the linearization does (``Suárez`` →
    ``Suarez``), and for each character of the result the index of the character it came from."""
    if text.isascii():
        return text, list(range(len(text)))
    chars, positions = [], []
    for i, ch in enumerate(text):
        out = ch if ch.isascii() else to_ascii(ch)
        chars.append(out)
        positions.extend([i] * len(out))
    return "".join(chars), positions


def find_in_text(value: str, text: str) -> Optional[Tuple[int, int]]:
    """The first character span of ``text`` that spells ``value`` (case-insensitive,
    optional whitespace between the value's tokens, whole words at the edges,
    the text transliterated to ASCII as the table values are), or None."""
    tokens = value.split()
    if not tokens:
        return None
    pattern = r"\s*".join(re.escape(t) for t in tokens)
    if tokens[0][0].isalnum():
        pattern = r"(?<!\w)" + pattern
    if tokens[-1][-1].isalnum():
        pattern = pattern + r"(?!\w)"
    ascii_text, positions = _ascii_with_positions(text)
    m = re.search(pattern, ascii_text, flags=re.IGNORECASE)
    if not m or m.end() == m.start():
        return None
    return positions[m.start()], positions[m.end() - 1] + 1


@dataclass
class SourceText:
    """One (table, text) pair of a data-to-text corpus."""

    key: str  # unique entry key
    category: str
    table: str  # linearized
    text: str
    split: str = "train"


@dataclass
class Candidate:
    item: int  # index into the SourceText list
    value: TableValue
    text_span: Tuple[int, int]


def dev_split(key: str, dev_fraction: float = DEV_FRACTION) -> str:
    """``dev`` for the keys whose hash falls in the first ``dev_fraction`` of the hash space."""
    h = int(hashlib.sha1(key.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "dev" if h < dev_fraction else "train"


def candidates(items: Sequence[SourceText], max_answers: int = MAX_ANSWERS_PER_TEXT, seed: int = 13) -> List[Candidate]:
    """The answer candidates of each text: distinct table values found in it (module docstring)."""
    out = []
    for i, item in enumerate(items):
        found, seen = [], set()
        for v in table_values(item.table):
            norm = normalize_answer(v.value)
            if not norm or norm in seen:
                continue
            span = find_in_text(v.value, item.text)
            if span is not None:
                seen.add(norm)
                found.append(Candidate(i, v, span))
        if max_answers and len(found) > max_answers:
            rng = random.Random(f"{seed}:{item.key}")
            found = sorted(rng.sample(found, max_answers), key=lambda c: c.value.start)
        out.extend(found)
    return out


def synthesize(items: Sequence[SourceText], qg, qa, f1_threshold: float = F1_THRESHOLD, max_answers: int = MAX_ANSWERS_PER_TEXT,
               batch_size: int = 32, seed: int = 13, show_progress: bool = True) -> Tuple[List[Dict[str, Any]], Dict[str, int]]:
    """Steps 2 and 3 on ``items`` with a textual ``qg`` (``generate(answers,
    contexts, batch_size=, show_progress=)``) and ``qa`` (``answer(questions,
    contexts, …)``): the kept corpus rows and the count of each outcome."""
    cands = candidates(items, max_answers, seed)
    counts: Dict[str, int] = collections.Counter(texts=len(items), candidates=len(cands))
    if not cands:
        return [], dict(counts)
    answers = [items[c.item].text[c.text_span[0]: c.text_span[1]] for c in cands]
    contexts = [items[c.item].text for c in cands]
    questions = qg.generate(answers, contexts, batch_size=batch_size, show_progress=show_progress)
    results = qa.answer(questions, contexts, batch_size=batch_size, show_progress=show_progress)
    rows = []
    for c, text_answer, question, result in zip(cands, answers, questions, results):
        item = items[c.item]
        question = question.strip()
        f1 = squad_f1(result.answer, c.value.value)
        if not question:
            counts["dropped_empty_question"] += 1
        elif f1 < f1_threshold:
            counts["dropped_qa_mismatch"] += 1
        elif f" {normalize_answer(c.value.value)} " in f" {normalize_answer(question)} ":
            counts["dropped_answer_in_question"] += 1
        else:
            assert item.table[c.value.start: c.value.end] == c.value.value
            counts["kept"] += 1
            rows.append({"key": item.key, "category": item.category, "split": item.split, "table": item.table,
                         "question": question, "answer": c.value.value, "answer_start": c.value.start, "text": item.text,
                         "text_answer": text_answer, "qa_answer": result.answer,
                         "qa_answerability": round(float(result.answerability), 4), "qa_f1": round(f1, 4)})
    return rows, dict(counts)


# ---------------------------------------------------------------- the resumable driver


def _write_json(path: str, obj: Any) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def stats_path(corpus_path: str) -> str:
    """``<dir>/<name>.stats.json`` beside ``<dir>/<name>.jsonl``."""
    root = corpus_path[: -len(".jsonl")] if corpus_path.endswith(".jsonl") else corpus_path
    return root + ".stats.json"


def run_synthesis(items: Sequence[SourceText], make_models: Callable[[], Tuple[Any, Any]], out: str, settings: Dict[str, Any],
                  chunk_size: int = 128, max_minutes: Optional[float] = None, show_progress: bool = True,
                  **synth_options) -> Dict[str, Any]:
    """:func:`synthesize` over ``items`` in chunks of ``chunk_size`` texts, each
    finished chunk kept in ``out + ".work"``; when all are done, the corpus is
    written to ``out`` (JSONL) and its statistics (with ``settings``) beside it
    (:func:`stats_path`). ``make_models()`` returns ``(qg, qa)``, called only if
    a chunk is left to do. A rerun with other ``settings`` than the stopped run
    is refused (delete ``OUT.work`` to start over); the ``command`` entry of
    ``settings`` may differ (``--max-minutes``, ``--no-progress``). Returns the statistics, or
    ``{"finished": False, ...}`` when ``max_minutes`` ran out first."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    work = out + ".work"
    os.makedirs(work, exist_ok=True)
    manifest = os.path.join(work, "settings.json")
    if os.path.isfile(manifest):
        with open(manifest, encoding="utf-8") as f:
            before = json.load(f)
        same = lambda d: {k: v for k, v in d.items() if k != "command"}  # noqa: E731 - how a run is called may differ
        if same(before) != same(json.loads(json.dumps(settings))):
            raise ValueError(f"{work} holds a run with other settings ({before}); delete it to start over")
    else:
        _write_json(manifest, settings)
    start, models, done_now = time.time(), None, 0
    n_chunks = (len(items) + chunk_size - 1) // chunk_size
    for k in range(n_chunks):
        rows_file, counts_file = os.path.join(work, f"chunk-{k:05d}.jsonl"), os.path.join(work, f"chunk-{k:05d}.counts.json")
        if os.path.isfile(counts_file):
            continue
        if max_minutes is not None and done_now and time.time() - start > max_minutes * 60:  # every run does one chunk at least
            return {"finished": False, "chunks_done": k, "chunks": n_chunks}
        if models is None:
            models = make_models()
        qg, qa = models
        rows, counts = synthesize(items[k * chunk_size: (k + 1) * chunk_size], qg, qa, show_progress=show_progress, **synth_options)
        write_jsonl(rows_file, rows)
        _write_json(counts_file, counts)  # written last: its presence marks the chunk done
        done_now += 1
        if show_progress:
            print(f"synthesis chunk {k + 1}/{n_chunks}: kept {counts.get('kept', 0)} of {counts.get('candidates', 0)}", flush=True)
    rows, counts = [], collections.Counter()
    for k in range(n_chunks):
        rows.extend(read_jsonl(os.path.join(work, f"chunk-{k:05d}.jsonl")))
        with open(os.path.join(work, f"chunk-{k:05d}.counts.json"), encoding="utf-8") as f:
            counts.update(json.load(f))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    write_jsonl(out, rows)
    stats = dict(corpus_stats(rows), outcomes=dict(sorted(counts.items())), settings=settings, finished=True)
    _write_json(stats_path(out), stats)
    return stats


def corpus_stats(rows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Sizes of a synthetic corpus: rows, tables, per split and category, and mean lengths (words)."""
    n = len(rows)

    def mean(values):
        values = list(values)
        return round(sum(values) / len(values), 2) if values else 0.0

    bad_spans = sum(1 for r in rows if r["table"][r["answer_start"]: r["answer_start"] + len(r["answer"])] != r["answer"])
    return {
        "rows": n,
        "tables": len({r["key"] for r in rows}),
        "splits": dict(sorted(collections.Counter(r["split"] for r in rows).items())),
        "categories": dict(sorted(collections.Counter(r["category"] for r in rows).items())),
        "questions_per_table": round(n / max(1, len({r["key"] for r in rows})), 2),
        "mean_question_words": mean(len(r["question"].split()) for r in rows),
        "mean_answer_words": mean(len(r["answer"].split()) for r in rows),
        "mean_table_words": mean(len(r["table"].split()) for r in rows),
        "mean_qa_f1": mean(r["qa_f1"] for r in rows),
        "answers_not_spans_of_table": bad_spans,
    }


# ---------------------------------------------------------------- training data from a corpus


def _closing_bracket(linearized: str, after: int) -> int:
    """The offset just past the ``]`` that closes the item whose value ends at ``after``."""
    return linearized.index("]", after) + 1


def table_without_answer(linearized: str, answer_start: int, answer_end: int, gold: Sequence[str]) -> Optional[str]:
    """The linearized table less the ``key [ value ]`` item that holds
    ``[answer_start, answer_end)``: the same entity's other facts, without
    the one asked about. ``None`` when the answer is in no item, is an
    ``entity [ … ]`` header (dropping it would orphan the entity's facts), or
    the rest may still answer (:func:`qa_data.may_still_answer`: the value
    is stated by another item too).

    >>> table_without_answer("entity [ Alan Bean ] , birthPlace [ Wheeler ] , occupation [ Test pilot ]", 36, 43, ["Wheeler"])
    'entity [ Alan Bean ] , occupation [ Test pilot ]'
    """
    values = table_values(linearized)
    hit = next((k for k, v in enumerate(values) if v.start <= answer_start < v.end and answer_end <= v.end), None)
    if hit is None:
        return None
    item_start = _closing_bracket(linearized, values[hit - 1].end) if hit else 0
    item_end = _closing_bracket(linearized, values[hit].end)
    key = linearized[item_start:values[hit].start].strip(" ,[")
    if key == "entity":
        return None
    rest = (linearized[:item_start] + linearized[item_end:]).strip(" ,")
    if not rest or may_still_answer(rest, gold):
        return None
    return rest


def table_qa_examples(rows: Sequence[Dict[str, Any]], split: Optional[str] = None, unanswerable_ratio: float = 0.5,
                      seed: int = 13, hard_share: float = 0.0) -> List[QAExample]:
    """Table QA examples of the rows of ``split`` (all rows when None): each
    (question, table, value) answerable, plus ``unanswerable_ratio`` × as many
    questions paired with the table of another entry that lacks the value
    (:func:`qa_data.add_unanswerable`), ``hard_share`` of them instead with
    their own table less the fact that holds the answer
    (:func:`table_without_answer`)."""
    chosen = [r for r in rows if split is None or r["split"] == split]
    examples = [QAExample(r["question"], r["table"], r["answer"], int(r["answer_start"]), r["key"], CORPUS_SOURCE, [r["answer"]])
                for r in chosen]
    return add_unanswerable(examples, unanswerable_ratio, seed=seed, hard_share=hard_share, remove_answer=table_without_answer)


def table_subject(linearized: str) -> str:
    """The first entity of a linearized table (its leading ``entity [ X ]``
    item, read by :func:`table_values`), "" when it does not start with one."""
    values = table_values(linearized)
    if not values or linearized[:values[0].start].strip(" [") != "entity":
        return ""
    return values[0].value


def same_subject_text(rows: Sequence[Dict[str, Any]], seed: int = 13) -> Callable[[str, int, int, Sequence[str]], Optional[str]]:
    """A ``remove_answer`` for :func:`qa_data.add_unanswerable` on the corpus's
    texts: the text less its answer's sentence (:func:`qa_data.without_answer`)
    where it has another sentence, else the text of another entry about the
    same first entity that does not contain the answer (normalized, nor half
    its words). WebNLG texts are one to three sentences, so the second is
    most of them: a text about the right entity that omits the fact asked
    about, which is what a system output that omits a fact looks like."""
    rng = random.Random(seed)
    subject_of: Dict[str, str] = {}
    texts_of: Dict[str, List[str]] = collections.defaultdict(list)
    for r in rows:
        if r["text"] not in subject_of:
            subject_of[r["text"]] = subj = table_subject(r["table"])
            if subj:
                texts_of[subj].append(r["text"])

    def remove(text: str, answer_start: int, answer_end: int, gold: Sequence[str]) -> Optional[str]:
        rest = without_answer(text, answer_start, answer_end, gold)
        if rest is not None:
            return rest
        others = [t for t in texts_of.get(subject_of.get(text, ""), []) if t != text and not may_still_answer(t, gold)]
        return rng.choice(others) if others else None

    return remove


def text_qa_examples(rows: Sequence[Dict[str, Any]], split: Optional[str] = None, unanswerable_ratio: float = 0.5,
                     seed: int = 13, hard_share: float = 0.0) -> List[QAExample]:
    """In-domain textual QA examples of the rows of ``split``: each question
    asked on the WebNLG text it was written from, answered by the text's span
    of the value (``text_answer``), plus unanswerable ones as
    :func:`qa_data.add_unanswerable` makes them, ``hard_share`` of them
    from :func:`same_subject_text`. These are the texts Data-QuestEval's
    textual QA reads at evaluation time (short descriptions of a few facts),
    which SQuAD's Wikipedia paragraphs are not."""
    chosen = [r for r in rows if split is None or r["split"] == split]
    examples = []
    for r in chosen:
        start = r["text"].find(r["text_answer"])
        if start >= 0:
            examples.append(QAExample(r["question"], r["text"], r["text_answer"], start, r["key"], CORPUS_TEXT_SOURCE,
                                      [r["text_answer"]]))
    # negatives come from the same split's texts, so that no dev text is seen in training
    return add_unanswerable(examples, unanswerable_ratio, seed=seed, hard_share=hard_share,
                            remove_answer=same_subject_text(chosen, seed))


def table_qg_pairs(rows: Sequence[Dict[str, Any]], split: Optional[str] = None) -> List[QGPair]:
    """(value, table, question) for the rows of ``split`` (all rows when None)."""
    return [QGPair(r["answer"], r["table"], r["question"], r["key"]) for r in rows if split is None or r["split"] == split]


def webnlg_items(entries: Sequence, max_texts: int = 0, seed: int = 13, dev_fraction: float = DEV_FRACTION,
                 linearize_fn: Optional[Callable[[Any], str]] = None) -> List[SourceText]:
    """One :class:`SourceText` per WebNLG entry (``d2t_metrics.datasets.WebNLGEntry``),
    a seeded sample of ``max_texts`` of them (0: all), each with one seeded
    lexicalization and its table linearized by ``d2t_metrics.linearize.linearize``."""
    if linearize_fn is None:
        linearize_fn = linearize
    rng = random.Random(seed)
    order = list(range(len(entries)))
    rng.shuffle(order)
    items = []
    for i in order:
        entry = entries[i]
        if not entry.lexicalizations:
            continue
        key = f"{entry.size}triples/{entry.category}/{entry.eid}"
        text = rng.choice(entry.lexicalizations)
        items.append(SourceText(key, entry.category, linearize_fn(entry.table), text, dev_split(key, dev_fraction)))
        if max_texts and len(items) >= max_texts:
            break
    return items

