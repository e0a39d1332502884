"""Data-QuestEval's scoring: answer candidates, per-question scores, and how
they are reduced to a score per example (QuestEval 0.2.4, ``task="data2text"``).

For one hypothesis and one source (the table, or a reference text):

* **precision side**: questions generated on the hypothesis (one per answer
  candidate: spaCy entities and noun chunks) are answered on the source. A
  question the source cannot answer, or answers differently, is a claim of
  the text the source does not support.
* **recall side**: questions generated on the source (table: one per value of
  its linearization; reference: as for the hypothesis) are answered on the
  hypothesis. A question the hypothesis cannot answer is an omitted fact.

Each answered question gets three numbers (QuestEval's ``list_scores``):
``answerability`` (1 − P(no answer)), ``f1`` (SQuAD token F1 of the
predicted answer against the answer the question was generated from) and
``bertscore`` (BERTScore F1 of the same two strings). Each is clipped to
[0, 1]; a side's score is the mean over its questions of the mean of the three
(QuestEval averages each kind over the questions, then the kinds: the same
number). With ``matched`` (the metric's ``penalize_wrong_answers``, on the
recall side), the answerability counts only as far as the answer matches:
a table value the text answers with another value is then as missing as
one the text does not answer (QuestEval scores it a third higher). Where several questions ask about one answer candidate (the
table side with the project's QG, ``questions_per_value``), the candidate's
score is the mean of its questions' and the side's the mean over
candidates. The example's score against one source is the mean of its two
sides; against several sources (table and references) it is their max (QuestEval's
``reduction_multi_refs``) or, on request, their mean.

Reading choices (the card lists them): an empty hypothesis scores 0 against
every source (QuestEval's rule); a side with no question (a hypothesis with no
entity or noun chunk) is left out, so the score is the other side's; an answer
the QA model does not give has F1 0 and BERTScore 0 (QuestEval's T5 QA writes
the word "unanswerable", which it then compares by BERTScore; with the T5
backends that word is compared here too, see ``unanswered_as``).

This module imports no sibling module. :class:`AnswerBERTScore` is the one
BERTScore of the project: the benchmarks' baseline builds on
:class:`BERTScoreEncoder` and :func:`greedy_match` too.
"""

from __future__ import annotations

import collections
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from d2t_metrics.bases import resolve_base

LIST_SCORES = ("answerability", "bertscore", "f1")
REDUCTIONS = ("max", "mean")
# How a side's candidate scores make its score: their mean (QuestEval's), their lowest, or the mean of
# the two (one wrong or missing fact then weighs more than 1/n of a side).
POOLINGS = ("mean", "min", "mean_min")
# a question scoring below this marks its answer as missing from the text / unsupported by the table
EXPLAIN_THRESHOLD = 0.5
# What the BERTScore of each answer pair is computed with: the last layer of a small encoder.
DEFAULT_BERTSCORE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def clip01(x: float) -> float:
    return min(1.0, max(0.0, float(x)))


def question_score(answerability: float, f1: float, bertscore: float, matched: bool = False) -> float:
    """One question's score: the mean of its three clipped numbers. With ``matched``, the answerability
    counts only as far as the answer matches the expected one (× max(F1, BERTScore)): a question
    answered confidently with another value then scores about as low as one not answered at all,
    where QuestEval's mean gives it a third for its answerability alone."""
    a, f, b = clip01(answerability), clip01(f1), clip01(bertscore)
    if matched:
        a *= max(f, b)
    return (a + f + b) / 3.0


def candidate_scores(questions: Sequence[Dict[str, Any]]) -> List[Tuple[str, float]]:
    """(answer, score) per answer candidate, in order: the mean score of the
    questions asked about it. Questions that share a ``candidate`` index ask
    about one candidate; a question without one is its own."""
    groups: "collections.OrderedDict[Any, List[Dict[str, Any]]]" = collections.OrderedDict()
    for n, q in enumerate(questions):
        groups.setdefault(q.get("candidate", ("question", n)), []).append(q)
    return [(qs[0].get("answer", ""), sum(q["score"] for q in qs) / len(qs)) for qs in groups.values()]


def side_score(questions: Sequence[Dict[str, Any]], pooling: str = "mean") -> Optional[float]:
    """The answer candidates' scores (each its questions' mean) pooled by ``pooling``
    (:data:`POOLINGS`): by default their mean (every candidate weighs the same however many
    questions ask about it; with one question each, QuestEval's mean over questions);
    ``None`` without questions."""
    scores = [score for _, score in candidate_scores(questions)]
    return pooled(scores, pooling) if scores else None


def pooled(scores: Sequence[float], pooling: str = "mean") -> float:
    """``scores`` (at least one) pooled by ``pooling``: "mean", "min" or "mean_min" (the mean of the two)."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    mean = sum(scores) / len(scores)
    if pooling == "mean":
        return mean
    low = min(scores)
    return low if pooling == "min" else (mean + low) / 2


def source_score(precision: Optional[float], recall: Optional[float]) -> float:
    """The score against one source: the mean of the sides that have questions (0 when neither has)."""
    sides = [s for s in (precision, recall) if s is not None]
    return sum(sides) / len(sides) if sides else 0.0


def reduce_sources(scores: Sequence[float], reduction: str = "max") -> float:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if not scores:
        raise ValueError("no source to score against")
    return max(scores) if reduction == "max" else sum(scores) / len(scores)


def mean_or_none(values: Iterable[Optional[float]]) -> Optional[float]:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


class LRUCache:
    """A bounded dict that forgets the least recently used entry first."""

    def __init__(self, max_size: int):
        self.max_size = int(max_size)
        self._data: "collections.OrderedDict[Any, Any]" = collections.OrderedDict()

    def get(self, key, default=None):
        if key in self._data:
            self._data.move_to_end(key)
            return self._data[key]
        return default

    def __contains__(self, key) -> bool:
        return key in self._data

    def __setitem__(self, key, value) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.max_size:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()


def greedy_match(cand: Any, ref: Any) -> Tuple[float, float, float]:
    """BERTScore's precision, recall and F1 (Zhang et al., 2020) of two texts
    given as L2-normalized token embeddings, one row per token: each token is
    matched to its most similar token of the other text by cosine, and the
    best similarities are averaged. (0, 0, 0) when a text has no token.

    Takes numpy arrays or torch tensors and computes in their own library:
    the two round float32 sums differently, and the benchmark's figures were
    recorded with numpy, the metric's with torch."""
    if len(cand) == 0 or len(ref) == 0:
        return 0.0, 0.0, 0.0
    sim = cand @ ref.T
    p, r = _mean_best_similarity(sim, 1), _mean_best_similarity(sim, 0)
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def _mean_best_similarity(sim: Any, axis: int) -> float:
    best = sim.max(axis)
    return float(getattr(best, "values", best).mean())  # torch's max gives (values, indices), numpy's the values


class BERTScoreEncoder:
    """The encoder of a BERTScore: a model loaded once, the hidden layer whose
    token vectors are compared (default the last), and texts truncated to
    ``max_length`` tokens or what the model's position table holds."""

    def __init__(self, path: str, device: Optional[str] = None, layer: Optional[int] = None,
                 batch_size: int = 64, max_length: int = 64, metric: str = "data_questeval", dtype=None):
        from d2t_metrics.models import load_model  # lazy: torch and transformers, only once answers are compared

        self.tokenizer, self.model = load_model(path, task="encoder", device=device, dtype=dtype, metric=metric)
        n_layers = self.model.config.num_hidden_layers
        self.layer = n_layers if layer is None else int(layer)
        if not 0 <= self.layer <= n_layers:
            raise ValueError(f"bertscore layer must be in 0..{n_layers}, got {layer}")
        self.batch_size = int(batch_size)
        limit = getattr(self.model.config, "max_position_embeddings", max_length)
        if self.model.config.model_type in ("roberta", "xlm-roberta", "camembert"):
            limit -= 2  # positions start after the padding index
        self.max_length = min(int(max_length), limit)

    def embed(self, texts: Sequence[str], desc: str, show_progress: bool = False) -> List[Any]:
        """One torch tensor of L2-normalized token vectors per text (special tokens dropped)."""
        from d2t_metrics.models import token_embeddings  # lazy: torch and transformers, as above

        return token_embeddings(self.model, self.tokenizer, texts, layer=self.layer, max_length=self.max_length,
                                batch_size=self.batch_size, desc=desc, show_progress=show_progress)


class AnswerBERTScore(BERTScoreEncoder):
    """BERTScore F1 of two short answers (:func:`greedy_match`), no idf, no
    baseline rescaling. An empty string scores 0 against anything. Embeds each
    distinct string once per :meth:`score` call."""

    def __init__(self, model: Optional[str] = None, device: Optional[str] = None, layer: Optional[int] = None,
                 batch_size: int = 64, max_length: int = 64, dtype=None):
        self.model_name = str(model or DEFAULT_BERTSCORE_MODEL)
        path = resolve_base(self.model_name) if model is None or not os.path.isdir(os.path.expanduser(self.model_name)) else self.model_name
        super().__init__(path, device=device, layer=layer, batch_size=batch_size, max_length=max_length, dtype=dtype)

    def score(self, pairs: Sequence[Tuple[str, str]], show_progress: bool = False) -> List[float]:
        """BERTScore F1 of each (candidate, reference) pair, in [0, 1] after clipping."""
        texts = sorted({t for pair in pairs for t in pair if t})
        vectors = dict(zip(texts, self.embed(texts, "comparing answers", show_progress)))
        out = []
        for cand, ref in pairs:
            a, b = vectors.get(cand), vectors.get(ref)
            out.append(0.0 if a is None or b is None else clip01(greedy_match(a, b)[2]))
        return out
