"""One Data-QuestEval compute call: questions generated on every text and table, all
answered in a few batched model calls, then each example's scores (QuestEval's recipe)."""

import os

from d2t_metrics.checkpoints import checkpoint_fingerprint
from d2t_metrics.timing import stage

from .qa import ANSWERABLE_F1
from .qa import UNANSWERABLE
from .qa import answerable
from .qa import squad_f1
from .qg import answer_context
from .qg import TABLE_QG_CONTEXT_WORDS
from .qg import table_answer_context
from .qg import table_values
from .scoring import EXPLAIN_THRESHOLD
from .scoring import candidate_scores
from .scoring import mean_or_none
from .scoring import question_score
from .scoring import reduce_sources
from .scoring import side_score
from .scoring import source_score


# Table QG prompts asked at a time where a huge table is read around each value: each prompt holds
# its own ~150 tokens (no beginning shared), and with five beams each a batch of 32 held GBs of keys
# and values (5.4 GB peak for a 500-triple table, with 120-word contexts).
LONG_TABLE_BATCH = 8


# Characters of a text that spaCy reads for answer candidates. WebNLG 2017 outputs and references have at
# most 583; a 100,000-character text took 4.5 CPU-s and 0.8 GB in spaCy for candidates that max_answers
# then cuts to the first 32 (the span QA reads about 4,500 characters of a context, 8 windows, anyway).
MAX_CANDIDATE_CHARS = 20_000


def candidate_part(text, max_chars=MAX_CANDIDATE_CHARS):
    """The start of ``text`` that answer candidates are taken from: all of it within ``max_chars``
    characters, else up to the last whitespace before that (no word cut in two)."""
    if len(text) <= max_chars:
        return text
    space = max(text.rfind(" ", 0, max_chars + 1), text.rfind("\n", 0, max_chars + 1))
    return text[: space if space > 0 else max_chars]


def model_label(path):
    """A model's name in the signature: a hub id as it is; a local checkpoint by its folder name and
    the fingerprint of its weights (two checkpoints both called text_qa must not share a signature)."""
    if not isinstance(path, (str, os.PathLike)):
        return getattr(path, "name_or_path", None) or type(path).__name__
    path = str(path)
    folder = os.path.expanduser(path)
    if not os.path.isdir(folder):
        return path
    fingerprint = checkpoint_fingerprint(folder)
    return os.path.basename(os.path.normpath(path)) + (f"@{fingerprint}" if fingerprint else "")


def check_answerable(table_qa, questions, values, tables, threshold=ANSWERABLE_F1, batch_size=32, show_progress=False):
    """The batched answerability step: each question, generated about ``values[i]`` on ``tables[i]`` (a
    linearized table), is asked to ``table_qa`` on that table; → ``(kept, QAResult)`` per question, in
    order, ``kept`` by :func:`qa.answerable`. Each distinct (question, table) is answered once."""
    if not len(questions) == len(values) == len(tables):
        raise ValueError(f"questions, values and tables differ in length: {len(questions)}, {len(values)}, {len(tables)}")
    distinct = list(dict.fromkeys(zip(questions, tables)))
    got = table_qa.answer([q for q, _ in distinct], [t for _, t in distinct], batch_size=batch_size,
                          show_progress=show_progress) if distinct else []
    result_of = dict(zip(distinct, got))
    out = []
    for question, value, table in zip(questions, values, tables):
        result = result_of[(question, table)]
        out.append((answerable(question, value, result.answer, threshold), result))
    return out


class Run:
    """One compute call: questions for every text and table, all answered in a
    few batched model calls, then each example's scores.

    Work is bounded (the card's *Limits*): at most ``max_table_values`` values of a table and
    ``max_answers`` answer candidates of a text are asked about, and the QA reads at most its
    ``max_windows`` windows of a context; an example for which any of these bound is marked
    ``truncated``.

    With ``answerable_f1`` set (``filter_table_questions``), a table question is kept only when the
    table QA, asked it on its own table, answers with its value (:func:`check_answerable`): the
    verdict depends on the table alone, so a text cannot change which of its facts are asked about."""

    def __init__(self, metric, backends, batch_size, show_progress, max_answers, use_cache, questions_per_value=1,
                 questions_per_text_answer=1, max_table_values=None, answerable_f1=None, penalize_wrong_answers=False):
        self.metric, self.backends = metric, backends
        self.penalize_wrong_answers = bool(penalize_wrong_answers)  # scoring.question_score(matched=) on the recall side
        self.batch_size, self.show_progress = int(batch_size), bool(show_progress)
        self.max_answers, self.use_cache = int(max_answers), bool(use_cache)
        self.max_table_values = int(max_table_values if max_table_values is not None else max_answers)
        self.per_value = {"table": int(questions_per_value), "text": int(questions_per_text_answer)}
        self.answerable_f1 = None if answerable_f1 is None else float(answerable_f1)

    # questions -------------------------------------------------------------
    def _text_answer_spans(self, texts):
        """(answer, start, end) candidates of each text (at most ``max_answers``, from its first
        :data:`MAX_CANDIDATE_CHARS` characters), and whether a cap left any out."""
        nlp = self.metric._nlp
        read = [candidate_part(t) for t in texts]
        docs = nlp.pipe(read, batch_size=64)
        out, cut = [], []
        for doc, whole, part in zip(docs, texts, read):
            spans, seen = [], set()
            for span in list(doc.ents) + list(doc.noun_chunks):
                text = " ".join(span.text.split())
                if text and text not in seen:
                    seen.add(text)
                    spans.append((text, span.start_char, span.end_char))
            out.append(spans[: self.max_answers])
            cut.append(len(spans) > self.max_answers or len(part) < len(whole))
        return out, cut

    def _qg_inputs(self, kind, contexts, qg):
        """The (answer, context) pairs QG reads for each source of ``kind``, and whether each source had
        more values or candidates than the cap."""
        generator = getattr(qg, "backend", "") == "generator"
        if kind == "table":
            out, cut = [], []
            for c in contexts:
                values = table_values(c)
                kept = values[: self.max_table_values]
                # the project's table QG reads a table too long for its prompt around the value (never on WebNLG/E2E)
                out.append([(v.value, table_answer_context(c, v.start, v.end) if generator else c) for v in kept])
                cut.append(len(values) > len(kept))
            return out, cut
        out = []
        with stage("answer candidates (spaCy)"):
            spans_of, cut = self._text_answer_spans(contexts)
        for context, spans in zip(contexts, spans_of):
            if generator:
                # the project's QG was trained on the answer's sentences (about 80 words), not on whole documents
                out.append([(a, answer_context(context, s, e)) for a, s, e in spans])
            else:
                out.append([(a, context) for a, _, _ in spans])
        return out, cut

    def _ask(self, kind, pairs):
        """The questions of each (answer, context) pair: a list each. Pairs whose table was read around
        the value (a huge table: each prompt its own long context, no beginning shared with the others)
        are asked :data:`LONG_TABLE_BATCH` at a time, which bounds the beams' memory; the others as before."""
        if kind != "table":
            return self._ask_batched(kind, pairs, self.batch_size)
        long_ones = [i for i, (_, context) in enumerate(pairs) if len(context.split()) >= TABLE_QG_CONTEXT_WORDS]
        if not long_ones:
            return self._ask_batched(kind, pairs, self.batch_size)
        short_ones = sorted(set(range(len(pairs))) - set(long_ones))
        out = [None] * len(pairs)
        for chosen, batch_size in ((short_ones, self.batch_size), (long_ones, min(self.batch_size, LONG_TABLE_BATCH))):
            for i, questions in zip(chosen, self._ask_batched(kind, [pairs[i] for i in chosen], batch_size)):
                out[i] = questions
        return out

    def _ask_batched(self, kind, pairs, batch_size):
        qg, n = self.backends[f"{kind}_qg"], self.per_value[kind]
        if not pairs:
            return []
        answers, contexts = [a for a, _ in pairs], [c for _, c in pairs]
        if n > 1:
            return qg.generate_alternatives(answers, contexts, n, batch_size=batch_size, show_progress=self.show_progress)
        generated = qg.generate(answers, contexts, batch_size=batch_size, show_progress=self.show_progress)
        return [[q.strip()] if q.strip() else [] for q in generated]

    def questions(self, items):
        """``items``: (kind, context) pairs → for each, ``(questions, cut, dropped)``: the questions asked
        about its answer candidates as (answer, question, candidate index), whether a cap left candidates
        out, and the table questions the answerability filter removed (``None`` without the filter)."""
        generated = self._generated(items)
        if self.answerable_f1 is None:
            return [(questions, cut, None) for questions, cut in generated]
        return self._answerable_only(items, generated)

    def _answerable_only(self, items, generated):
        """``generated`` with each table's questions split into those its table QA answers with their value
        (kept) and the others (dropped, with what the QA answered); cached per table like the questions."""
        cache = self.metric.question_cache
        label = ("answerable", self.answerable_f1, model_label(self.metric.models["table_qa"]),
                 model_label(self.metric.models["table_qg"]), self.max_table_values, self.per_value["table"])
        out = [(questions, cut, None) for questions, cut in generated]
        todo = {}
        for n, ((kind, context), (questions, cut)) in enumerate(zip(items, generated)):
            if kind != "table":
                continue
            key = label + (context,)
            if self.use_cache and key in cache:
                kept, dropped = cache.get(key)
                out[n] = (kept, cut, dropped)
            else:
                todo.setdefault(key, []).append(n)
        if not todo:
            return out
        jobs = []  # (key, answer, question, candidate)
        for key, owners in todo.items():
            jobs.extend((key,) + q for q in generated[owners[0]][0])
        with stage("table question answerability (table QA)"):
            verdicts = check_answerable(self.backends["table_qa"], [j[2] for j in jobs], [j[1] for j in jobs],
                                        [j[0][-1] for j in jobs], self.answerable_f1, self.batch_size, self.show_progress)
        split = {key: ([], []) for key in todo}
        for (key, answer, question, candidate), (keep, result) in zip(jobs, verdicts):
            if keep:
                split[key][0].append((answer, question, candidate))
            else:
                split[key][1].append({"question": question, "answer": answer, "candidate": candidate,
                                      "predicted": result.answer, "f1": round(squad_f1(result.answer, answer), 6)})
        for key, owners in todo.items():
            kept, dropped = split[key]
            if self.use_cache:
                cache[key] = (kept, dropped)
            for n in owners:
                out[n] = (kept, generated[n][1], dropped)
        return out

    def _generated(self, items):
        """``items``: (kind, context) pairs → for each, ``(questions, cut)``: the questions generated about
        its answer candidates as (answer, question, candidate index), and whether a cap left candidates out."""
        qg_of = {"table": self.backends["table_qg"], "text": self.backends["text_qg"]}
        cache = self.metric.question_cache
        cap = {"table": self.max_table_values, "text": self.max_answers}
        keys = [(kind, model_label(self.metric.models[f"{kind}_qg"]), cap[kind], self.per_value[kind], context)
                for kind, context in items]
        todo = {}
        for n, (key, (kind, context)) in enumerate(zip(keys, items)):
            if self.use_cache and (key in cache or key in todo):
                continue
            todo[key if self.use_cache else (n,) + key] = (kind, context)
        found = {}
        for kind in ("table", "text"):
            jobs = [(k, ctx) for k, (knd, ctx) in todo.items() if knd == kind]
            if not jobs:
                continue
            pairs, owners = [], []
            inputs_of, cut_of = self._qg_inputs(kind, [ctx for _, ctx in jobs], qg_of[kind])
            for (k, _), inputs, cut in zip(jobs, inputs_of, cut_of):
                found[k] = ([], cut)
                for candidate, (answer, qg_context) in enumerate(inputs):
                    pairs.append((answer, qg_context))
                    owners.append((k, candidate))
            with stage(f"{kind} questions"):
                asked = self._ask(kind, pairs)
            for (k, candidate), (answer, _), questions in zip(owners, pairs, asked):
                found[k][0].extend((answer, question, candidate) for question in questions)
        if self.use_cache:
            for k, v in found.items():
                cache[k] = v
            return [cache.get(k) if k in cache else found[k] for k in keys]
        return [found[(n,) + k] for n, k in enumerate(keys)]

    # answers ---------------------------------------------------------------
    def answers(self, jobs):
        """``jobs``: (qa kind, question, context) → QAResult each, one batched call per kind."""
        results = [None] * len(jobs)
        for kind in ("table", "text"):
            idx = [i for i, j in enumerate(jobs) if j[0] == kind]
            if not idx:
                continue
            if self.use_cache:
                distinct = list(dict.fromkeys((jobs[i][1], jobs[i][2]) for i in idx))
            else:
                distinct = [(jobs[i][1], jobs[i][2]) for i in idx]
            with stage(f"{kind} QA"):
                got = self.backends[f"{kind}_qa"].answer([q for q, _ in distinct], [c for _, c in distinct],
                                                         batch_size=self.batch_size, show_progress=self.show_progress)
            if self.use_cache:
                table = dict(zip(distinct, got))
                for i in idx:
                    results[i] = table[(jobs[i][1], jobs[i][2])]
            else:
                for i, r in zip(idx, got):
                    results[i] = r
        return results

    # scores ----------------------------------------------------------------
    def score(self, predictions, sources, reduction, pooling="mean"):
        # every question of every text and source, generated first
        items = []
        for hyp, srcs in zip(predictions, sources):
            if hyp.strip():
                items.append(("text", hyp))
                items.extend(srcs)
        asked = dict(zip(range(len(items)), self.questions(items))) if items else {}
        # then every answer: (example, source index, side, answer, question) → QA job
        plan, jobs, cursor = [], [], 0
        truncated = [False] * len(predictions)
        unanswerable = {}  # (example, source) → the table questions the answerability filter dropped
        for e, (hyp, srcs) in enumerate(zip(predictions, sources)):
            if not hyp.strip():
                continue
            hyp_questions, cut, _ = asked[cursor]
            truncated[e] |= cut
            cursor += 1
            for s, (kind, context) in enumerate(srcs):
                src_questions, cut, dropped = asked[cursor]
                truncated[e] |= cut
                if dropped is not None:
                    unanswerable[(e, s)] = dropped
                cursor += 1
                for answer, question, candidate in hyp_questions:  # the text's claims, answered on the source
                    plan.append((e, s, "from_text", answer, question, candidate))
                    jobs.append((kind, question, context))
                for answer, question, candidate in src_questions:  # the source's facts, answered on the text
                    plan.append((e, s, "from_source", answer, question, candidate))
                    jobs.append(("text", question, hyp))
        results = self.answers(jobs)
        unanswered = {kind: UNANSWERABLE if getattr(self.backends[f"{kind}_qa"], "backend", "") == "t5" else ""
                      for kind in ("table", "text")}
        pairs = [(r.answer or unanswered[job[0]], step[3]) for r, job, step in zip(results, jobs, plan)]
        with stage("answer similarity (BERTScore)"):
            bert = self.metric._bertscore.score(pairs, show_progress=self.show_progress) if pairs else []

        with stage("scoring"):
            examples = []
            for e, (hyp, srcs) in enumerate(zip(predictions, sources)):
                examples.append({"sources": [{"source": _source_name(s, kind), "from_text": [], "from_source": []}
                                             for s, (kind, _) in enumerate(srcs)]})
                for s in range(len(srcs)):
                    if (e, s) in unanswerable:
                        examples[e]["sources"][s]["unanswerable_on_source"] = unanswerable[(e, s)]
            for (e, s, side, answer, question, candidate), result, b in zip(plan, results, bert):
                truncated[e] |= bool(getattr(result, "truncated", False))
                f1 = squad_f1(result.answer, answer)
                examples[e]["sources"][s][side].append({
                    "question": question, "answer": answer, "candidate": candidate, "predicted": result.answer,
                    "answerability": round(float(result.answerability), 6), "f1": round(f1, 6), "bertscore": round(b, 6),
                    "score": round(question_score(result.answerability, f1, b,
                                                  matched=self.penalize_wrong_answers and side == "from_source"), 6)})
            for e, hyp in enumerate(predictions):
                examples[e] = _finish(examples[e], empty=not hyp.strip(), reduction=reduction, pooling=pooling)
                examples[e]["truncated"] = truncated[e]
        return examples


def _source_name(index, kind):
    return "table" if kind == "table" else f"reference {index}"


def _finish(example, empty, reduction, pooling="mean"):
    """An example's scores from its questions' (see scoring.py); each side's candidates pooled by ``pooling``."""
    for src in example["sources"]:
        if empty:
            src.update(score=0.0, precision=0.0, recall=0.0)
            continue
        precision, recall = side_score(src["from_text"], pooling), side_score(src["from_source"], pooling)
        src.update(score=source_score(precision, recall), precision=precision, recall=recall)
    scores = [src["score"] for src in example["sources"]]
    score = reduce_sources(scores, reduction)
    best = max(range(len(scores)), key=scores.__getitem__)
    table = example["sources"][0]
    return {
        "score": score,
        "precision": example["sources"][best]["precision"] if reduction == "max" else mean_or_none(s["precision"] for s in example["sources"]),
        "recall": example["sources"][best]["recall"] if reduction == "max" else mean_or_none(s["recall"] for s in example["sources"]),
        "source": example["sources"][best]["source"] if reduction == "max" else reduction,
        "missing": [answer for answer, score in candidate_scores(table["from_source"]) if score < EXPLAIN_THRESHOLD],
        "unsupported": [answer for answer, score in candidate_scores(table["from_text"]) if score < EXPLAIN_THRESHOLD],
        "sources": example["sources"],
    }
