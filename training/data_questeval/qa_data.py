"""Textual QA/QG training data from SQuAD v1.1 (step 1 of Data-QuestEval).

``../shared/data/squad/dev-v1.1.json`` (the first half, by article, of the
official SQuAD v1.1 dev set) is the training half and
``../shared/data/squad/test-v1.1.json`` (the second half) the held-out half:
no article is in both.

* QA examples (:func:`qa_examples`): each question with its paragraph and its
  first gold answer. Unanswerable examples are made as QuestEval's
  ``squad2neg`` data are, by pairing a question with a context that does not
  answer it: :func:`add_unanswerable` adds ``ratio`` × (number of answerable
  examples) of them (default :data:`UNANSWERABLE_RATIO` = 0.5, i.e. one third
  of the final data), each a question paired with a paragraph of ANOTHER
  article (so it is almost never answered there) that does not contain the
  question's answer (normalized) either. With ``hard_share`` > 0, that
  share of them is made harder: the question's OWN paragraph with the
  sentence(s) holding its answer taken out (:func:`without_answer`), kept
  only when the rest does not contain any gold answer. Another article's
  paragraph is about something else, so it teaches the model little about
  the case Data-QuestEval needs it for: a text about the right entity that
  does not state the fact asked about (an omission).
* QG pairs (:func:`qg_pairs`): (answer, context, question) where the context
  (``metrics.data_questeval.qg.answer_context``, which the metric uses on
  texts too) is the sentence holding the answer plus neighbouring sentences
  while they fit ``QG_CONTEXT_WORDS`` words (80: with the prompt, the answer and the
  question a training sequence stays within ~160 generator tokens; a longer
  answer sentence is cut to the words around the answer). At inference
  QuestEval passes whole texts, which for data-to-text outputs are short.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field, replace
from typing import Callable, List, Optional, Sequence, Tuple

from metrics.data_questeval.qa import normalize_answer
from metrics.data_questeval.qg import QG_CONTEXT_WORDS
from metrics.data_questeval.qg import answer_context
from metrics.data_questeval.qg import sentence_spans

TRAIN_FILE = os.path.join("data", "squad", "dev-v1.1.json")
HELDOUT_FILE = os.path.join("data", "squad", "test-v1.1.json")
UNANSWERABLE_RATIO = 0.5


@dataclass
class SquadQuestion:
    qid: str
    title: str  # the article
    context: str
    question: str
    answers: List[Tuple[str, int]]  # (text, character start) of each gold answer


@dataclass
class QAExample:
    """A QA training/dev example; ``answer == ""`` (and ``answer_start == -1``) for an unanswerable one."""

    question: str
    context: str
    answer: str
    answer_start: int
    group: str  # article / table entry: unanswerable pairs take a context of another group
    source: str = "squad"
    gold: List[str] = field(default_factory=list)  # every gold answer, for dev scores

    @property
    def answerable(self) -> bool:
        return bool(self.answer)


def squad_file(shared: str, heldout: bool = False) -> str:
    return os.path.join(shared, HELDOUT_FILE if heldout else TRAIN_FILE)


def load_squad(path: str) -> List[SquadQuestion]:
    """Every question of a SQuAD v1.1 JSON file, in file order."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    out = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [(a["text"], int(a["answer_start"])) for a in qa.get("answers", [])]
                if answers:
                    out.append(SquadQuestion(qa["id"], article["title"], paragraph["context"], qa["question"], answers))
    return out


def qa_examples(questions: Sequence[SquadQuestion]) -> List[QAExample]:
    """Answerable QA examples: each question with its first gold answer."""
    return [QAExample(q.question, q.context, q.answers[0][0], q.answers[0][1], q.title, "squad", [a for a, _ in q.answers])
            for q in questions]


def may_still_answer(rest: str, gold: Sequence[str]) -> bool:
    """Whether ``rest`` (a context with the answer taken out) still contains
    one of the ``gold`` answers (normalized), or half or more of one's words
    ("Muslim League" left where the gold is "All India Muslim League")."""
    norm = normalize_answer(rest)
    words = set(norm.split())
    for answer in gold:
        g = normalize_answer(answer)
        if g and (g in norm or 2 * sum(w in words for w in g.split()) >= len(g.split())):
            return True
    return False


def without_answer(context: str, answer_start: int, answer_end: int, gold: Sequence[str]) -> Optional[str]:
    """``context`` less the sentences that overlap ``[answer_start, answer_end)``,
    or ``None`` when nothing is left or what is left may still answer
    (:func:`may_still_answer`)."""
    spans = sentence_spans(context)
    kept = [context[s:e].strip() for s, e in spans if not (e > answer_start and s < answer_end)]
    if not kept or len(kept) == len(spans):
        return None
    rest = " ".join(kept)
    if not normalize_answer(rest) or may_still_answer(rest, gold):
        return None
    return rest


def add_unanswerable(examples: Sequence[QAExample], ratio: float = UNANSWERABLE_RATIO, seed: int = 13,
                     contexts: Optional[Sequence[Tuple[str, str]]] = None, hard_share: float = 0.0,
                     remove_answer: Callable[[str, int, int, Sequence[str]], Optional[str]] = without_answer) -> List[QAExample]:
    """``examples`` plus ``round(ratio * answerable)`` unanswerable ones (module
    docstring), shuffled with ``seed``. ``contexts`` are the (group, context)
    pairs to draw from (default: those of ``examples``). ``hard_share`` of
    them (where the context allows it) are the question's own context
    without its answer (``remove_answer``: :func:`without_answer` for a
    paragraph; a table's is ``synthetic.table_without_answer``), marked
    ``source`` ``"…:unanswerable:removed"``; the same ``seed`` with
    ``hard_share`` 0 gives the same data as before it existed."""
    if not 0.0 <= hard_share <= 1.0:
        raise ValueError(f"hard_share must be in [0, 1], got {hard_share}")
    rng = random.Random(seed)
    answerable = [e for e in examples if e.answerable]
    pool = list(dict.fromkeys(contexts if contexts is not None else [(e.group, e.context) for e in examples]))
    groups = {g for g, _ in pool}
    wanted = int(round(ratio * len(answerable)))
    negatives: List[QAExample] = []
    if len(groups) >= 2 and answerable:
        chosen = rng.sample(answerable, wanted) if wanted <= len(answerable) else [rng.choice(answerable) for _ in range(wanted)]
        n_hard = int(round(hard_share * len(chosen)))
        for k, e in enumerate(chosen):
            if k < n_hard and e.answer_start >= 0:
                rest = remove_answer(e.context, e.answer_start, e.answer_start + len(e.answer), e.gold or [e.answer])
                if rest is not None:
                    negatives.append(replace(e, context=rest, answer="", answer_start=-1,
                                             source=e.source + ":unanswerable:removed", gold=[]))
                    continue
            gold = [normalize_answer(a) for a in (e.gold or [e.answer])]
            for _ in range(20):  # a few draws find a context of another group without the answer
                group, context = rng.choice(pool)
                norm = normalize_answer(context)
                if group != e.group and not any(g and g in norm for g in gold):
                    negatives.append(replace(e, context=context, answer="", answer_start=-1, group=group,
                                             source=e.source + ":unanswerable", gold=[]))
                    break
    out = list(examples) + negatives
    rng.shuffle(out)
    return out


@dataclass
class QGPair:
    answer: str
    context: str
    question: str
    group: str


def qg_pairs(questions: Sequence[SquadQuestion], max_context_words: int = QG_CONTEXT_WORDS) -> List[QGPair]:
    """(answer, short context, question) for each question, with its first gold answer."""
    out = []
    for q in questions:
        text, start = q.answers[0]
        out.append(QGPair(text, answer_context(q.context, start, start + len(text), max_context_words), q.question, q.title))
    return out


def sample(items: Sequence, n: int, seed: int) -> List:
    """``n`` items chosen with ``seed`` (all of them, shuffled, when ``n`` is 0 or too large)."""
    items = list(items)
    rng = random.Random(seed)
    rng.shuffle(items)
    return items[:n] if n else items
