"""Question answering for Data-QuestEval: two backends behind one interface.

Both answer a list of questions, each on its own context (a text, or a table
linearized by ``d2t_metrics.linearize.linearize``)::

    qa = load_qa("checkpoints/data_questeval/text_qa")      # or a T5 hub id / path
    qa.answer(["Who discovered 101 Helena?"], ["James Craig Watson discovered 101 Helena."])
    # [QAResult(answer='James Craig Watson', answerability=0.97)]

A :class:`QAResult` holds the answer (``""`` when the model finds none) and
the answerability, a number in [0, 1] that QuestEval uses as a score of its own.

:class:`T5QA` — QuestEval's generative QA (``ThomasNLG/t5-qa_squad2neg-en`` for
texts, ``ThomasNLG/t5-qa_webnlg_synth-en`` for tables), reimplemented from the
behaviour of ``API_T2T`` in QuestEval 0.2.4 (``questeval/utils.py``):

* the model reads exactly ``f"{question} </s> {context}"`` (QuestEval's
  separator is the literal ``</s>``, T5's end-of-sequence token), truncated to
  512 tokens;
* the answer is the greedy decoding (one beam, no sampling) with transformers'
  default length limit of QuestEval's time, 20 decoder positions including the
  start token, hence ``max_new_tokens=19``;
* answerability = 1 − p, where p is the softmax probability, at the FIRST
  decoding step, of one vocabulary entry: QuestEval reads column 73 of the
  first step's scores for every T5 QA model (its comment calls it "the index
  for the token unanswerable in T5 vocabulary"). "unanswerable" is not one
  piece of T5's vocabulary, so what is read is at most the probability of the
  piece the word starts with (presumably ``▁un``; T5's vocabulary is not at
  hand offline to check), never that of the whole word. Here id 73 is used
  for T5's own 32,100-entry vocabulary, as QuestEval does, and for any other
  tokenizer the first piece of ``"unanswerable"``; ``unanswerable_token_id``
  overrides both;
* an answer ``"unanswerable"`` means no answer (returned as ``""``; QuestEval
  keeps the word and scores it by F1/BERTScore against the gold answer, where
  it matches nothing, so F1 is 0 in both; see :data:`UNANSWERABLE` to
  reproduce its BERTScore input).

QuestEval pads every batch to 512 tokens; ``pad_to_max_length=True`` does the
same, the default pads each batch to its longest input and batches inputs of
similar length together, which changes no answer (T5 masks padding) and is
several times faster on short data-to-text inputs.

:class:`SpanQA` — the project's offline extractive QA: all-MiniLM-L6-v2 with
LoRA adapters and a fully trained span head (``qa_outputs``), trained by
``python -m training.data_questeval.train text-qa`` / ``table-qa``. SQuAD 2.0
style: the input is ``[CLS] question [SEP] context [SEP]``, a start and an end
logit per token, and the ``[CLS]`` position (index 0) stands for "no answer".

* P(no answer) of one window: the start and end distributions are combined
  into a distribution over the window's admissible outcomes, {no answer} ∪
  {spans (i, j) of context tokens with i ≤ j < i + ``max_answer_tokens``},
  each weighted exp(start_i + end_j) (no answer: start_CLS + end_CLS), and
  P(no answer) is the weight of the no-answer outcome over the total. (This
  is the independent start × end model of training, conditioned on
  admissible outcomes, so it is a proper probability in [0, 1].)
* A context longer than one window (``max_length`` tokens with the question)
  is read in overlapping windows: consecutive windows share ``stride`` context
  tokens (the Hugging Face ``stride`` convention), at most ``max_windows`` of
  them (the rest of a longer context is not read; a context over
  ``max_windows * max_length * 12`` characters is cut to that before
  tokenizing). The question keeps its first ``max_question_tokens`` tokens.
* Over windows: answerability = 1 − the smallest P(no answer) of any window
  (the context is answerable when one window holds the answer). The answer is
  ``""`` when every window's most probable outcome is "no answer", else the
  span with the highest probability (within its window) among the windows
  that prefer a span.

User text stays text: SpanQA's tokenizer reads ``[SEP]`` or ``[CLS]`` inside a
question or context as characters (:func:`d2t_metrics.untrusted.literal_tokenizer`;
the model's own markers are added by id), and the T5 backends, whose prompt
holds QuestEval's live ``</s>``, escape the special strings of the question and
the context first (:func:`d2t_metrics.untrusted.escape_special_strings`). A
:class:`QAResult` says ``truncated`` when part of its context was not read
(SpanQA: more windows than ``max_windows``, which the metric sets per call;
T5: an input over 512 tokens).

Both take ``answer(questions, contexts, batch_size=None, show_progress=True)``
and ``pad_to_max_length``. :func:`load_qa` picks the backend from what it is
given. Its one sibling import is :mod:`qg` (input checks and the recipe
reader), which the metric module imports directly too, so evaluate copies both.
"""

from __future__ import annotations

import collections
import os
import re
import string
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from d2t_metrics.models import load_model
from d2t_metrics.models import padded_length
from d2t_metrics.models import run_batched
from d2t_metrics.untrusted import escape_special_strings
from d2t_metrics.untrusted import literal_tokenizer
from d2t_metrics.untrusted import special_strings

from .qg import check_pairs
from .qg import read_recipe

SEPARATOR = "</s>"
# what QuestEval's T5 QA models answer when the context does not hold the answer
UNANSWERABLE = "unanswerable"
# QuestEval reads this column of the first decoding step's scores (keep_score_idx, T5 QA models)
QUESTEVAL_UNANSWERABLE_ID = 73
_T5_VOCAB_SIZE = 32100
# transformers' default max_length (20, the decoder start token included) that QuestEval's generate() ran with
QUESTEVAL_MAX_NEW_TOKENS = 19
QUESTEVAL_MAX_SOURCE_LENGTH = 512
QA_TASK = "question-answering"
RECIPE_FILE = "d2t_config.json"

# SpanQA defaults (a checkpoint's d2t_config.json may set max_length, stride, max_answer_tokens)
SPAN_MAX_LENGTH = 256
SPAN_STRIDE = 96
SPAN_MAX_ANSWER_TOKENS = 30
SPAN_MAX_QUESTION_TOKENS = 48
SPAN_MAX_WINDOWS = 32


class QAResult(NamedTuple):
    """One answer: ``answer`` is ``""`` when the model finds none; ``answerability`` is in [0, 1];
    ``truncated`` says that the model read only part of the context (a window or length cap bound)."""

    answer: str
    answerability: float
    truncated: bool = False


# ---------------------------------------------------------------- SQuAD answer comparison


_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalization: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_f1(prediction: str, gold: str) -> float:
    """The SQuAD token F1 of two answers (QuestEval's ``calculate_f1_squad``):
    when either is empty after normalization, 1.0 if both are, else 0.0."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    same = sum((collections.Counter(pred) & collections.Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


# A table question is kept (``filter_table_questions``) when the table QA, asked it on its own table,
# answers with the value it was generated for at this SQuAD F1 or more. Fixed before any measurement:
# half the tokens of the two answers in common ("Texas" for "Wheeler , Texas": 0.67, kept; "Alan
# Bean" for "Wheeler , Texas": 0, dropped); the metric's explanations use the same 0.5 line.
ANSWERABLE_F1 = 0.5


def answerable(question: str, target_value: str, predicted_answer: str, threshold: float = ANSWERABLE_F1) -> bool:
    """Whether a question generated about ``target_value`` is answerable from its own context: the
    context's QA answered it (``predicted_answer``, ``""`` for no answer) with that value, SQuAD token
    F1 >= ``threshold`` (QuestEval's consistency check and QAGS's filter, as a hard rule). An empty
    question or no answer is not answerable; a value with no word left after SQuAD's normalization
    (``"-"``, ``"The"``) needs the same string, case and spaces aside."""
    if not question.strip() or not predicted_answer.strip():
        return False
    if not normalize_answer(target_value):
        return " ".join(predicted_answer.lower().split()) == " ".join(target_value.lower().split())
    return squad_f1(predicted_answer, target_value) >= threshold


def squad_em(prediction: str, gold: str) -> float:
    """SQuAD exact match after :func:`normalize_answer`."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


# ---------------------------------------------------------------- shared helpers


def _clamp01(x: float) -> float:
    return min(1.0, max(0.0, float(x)))


# ---------------------------------------------------------------- T5 (QuestEval's models)


def t5_unanswerable_token_id(tokenizer, model_type: str = "t5") -> int:
    """The vocabulary entry whose first-step probability QuestEval reads:
    73 for T5's own vocabulary, else the first piece of ``"unanswerable"``."""
    if model_type in ("t5", "mt5") and len(tokenizer) == _T5_VOCAB_SIZE:
        return QUESTEVAL_UNANSWERABLE_ID
    ids = tokenizer(UNANSWERABLE, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError("the tokenizer gives no token for 'unanswerable'; pass unanswerable_token_id")
    return int(ids[0])


class _T5Runner:
    """Greedy seq2seq generation with the first step's scores, length-sorted batches."""

    def __init__(self, name_or_path: str, device: Optional[str], dtype, pad_to_max_length: bool, max_source_length: int,
                 max_new_tokens: int, batch_size: int):
        self.name_or_path = str(name_or_path)
        # QuestEval's prompts hold a live "</s>": special strings stay special, users' parts are escaped
        self.tokenizer, self.model = load_model(self.name_or_path, task="seq2seq", device=device, dtype=dtype, metric="data_questeval",
                                                literal=False)
        self.pad_to_max_length = bool(pad_to_max_length)
        self.max_source_length = int(max_source_length)
        self.max_new_tokens = int(max_new_tokens)
        self.batch_size = int(batch_size)
        if self.max_source_length < 1 or self.max_new_tokens < 1 or self.batch_size < 1:
            raise ValueError("max_source_length, max_new_tokens and batch_size must be >= 1")

    def lengths(self, inputs: Sequence[str]) -> List[int]:
        enc = self.tokenizer(list(inputs), truncation=True, max_length=self.max_source_length)
        return [len(ids) for ids in enc["input_ids"]]

    def escape(self, text: str) -> str:
        """``text`` with the tokenizer's special strings broken (QuestEval's prompts hold a literal
        ``</s>`` separator, so the tokenizer must read special strings; the user's part must not hold one)."""
        if not hasattr(self, "_specials"):
            self._specials = special_strings(self.tokenizer)
        return escape_special_strings(text, self._specials)

    def cut(self, inputs: Sequence[str]) -> List[bool]:
        """Whether each input is longer than the ``max_source_length`` tokens the model reads."""
        enc = self.tokenizer(list(inputs), truncation=True, max_length=self.max_source_length + 1)
        return [len(ids) > self.max_source_length for ids in enc["input_ids"]]

    def run(self, inputs: List[str], score_id: Optional[int]) -> List[Tuple[str, Optional[float]]]:
        import torch

        padding = "max_length" if self.pad_to_max_length else True
        enc = self.tokenizer(inputs, max_length=self.max_source_length, padding=padding, truncation=True, return_tensors="pt")
        enc = {k: v.to(self.model.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        with torch.inference_mode():
            out = self.model.generate(**enc, num_beams=1, do_sample=False, max_new_tokens=self.max_new_tokens,
                                      output_scores=score_id is not None, return_dict_in_generate=True)
        texts = self.tokenizer.batch_decode(out.sequences, skip_special_tokens=True, clean_up_tokenization_spaces=True)
        if score_id is None:
            return [(t.strip(), None) for t in texts]
        probs = out.scores[0].float().softmax(-1)[:, score_id].tolist()
        return [(t.strip(), p) for t, p in zip(texts, probs)]

    def batched(self, inputs: List[str], score_id: Optional[int], batch_size: Optional[int], show_progress: bool, desc: str):
        if not inputs:
            return []
        return run_batched(inputs, self.lengths(inputs), lambda batch: self.run(batch, score_id),
                           batch_size=int(batch_size or self.batch_size), desc=desc, show_progress=show_progress)


class T5QA:
    """QuestEval's generative QA on a T5 checkpoint (hub id or local path); see the module docstring."""

    backend = "t5"

    def __init__(self, name_or_path: str, device: Optional[str] = None, dtype=None, pad_to_max_length: bool = False,
                 max_source_length: int = QUESTEVAL_MAX_SOURCE_LENGTH, max_new_tokens: int = QUESTEVAL_MAX_NEW_TOKENS,
                 unanswerable_token_id: Optional[int] = None, batch_size: int = 48):
        self._runner = _T5Runner(name_or_path, device, dtype, pad_to_max_length, max_source_length, max_new_tokens, batch_size)
        self.name_or_path = self._runner.name_or_path
        model_type = getattr(self.model.config, "model_type", "")
        self.unanswerable_token_id = (int(unanswerable_token_id) if unanswerable_token_id is not None
                                      else t5_unanswerable_token_id(self.tokenizer, model_type))

    @property
    def tokenizer(self):
        return self._runner.tokenizer

    @tokenizer.setter
    def tokenizer(self, value):
        self._runner.tokenizer = value

    @property
    def model(self):
        return self._runner.model

    @property
    def pad_to_max_length(self) -> bool:
        return self._runner.pad_to_max_length

    @pad_to_max_length.setter
    def pad_to_max_length(self, value: bool) -> None:
        self._runner.pad_to_max_length = bool(value)

    @staticmethod
    def format_input(question: str, context: str) -> str:
        """QuestEval's QA input: ``f"{question} </s> {context}"``."""
        return f"{question} {SEPARATOR} {context}"

    def answer(self, questions: Sequence[str], contexts: Sequence[str], batch_size: Optional[int] = None,
               show_progress: bool = True) -> List[QAResult]:
        check_pairs(questions, contexts, ("questions", "contexts"))
        escape = self._runner.escape
        inputs = [self.format_input(escape(q), escape(c)) for q, c in zip(questions, contexts)]
        outs = self._runner.batched(inputs, self.unanswerable_token_id, batch_size, show_progress, "answering questions")
        cut = self._runner.cut(inputs) if inputs else []
        return [QAResult("" if text.lower() == UNANSWERABLE else text, _clamp01(1.0 - p), bool(c))
                for (text, p), c in zip(outs, cut)]


# ---------------------------------------------------------------- extractive span QA


class Window(NamedTuple):
    """One window of a (question, context) pair as the span model reads it."""

    example: int  # index of the pair
    input_ids: List[int]
    token_type_ids: Optional[List[int]]
    context_start: int  # first context token (inclusive)
    context_end: int  # last context token (inclusive); < context_start when the window has none
    offsets: List[Tuple[int, int]]  # character offsets into the (cut) context, per token


def _cut_question(tokenizer, question: str, max_tokens: int) -> str:
    question = question[: max_tokens * 24]  # a token is rarely longer; bounds the work on a huge string
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= max_tokens:
        return question
    return question[: enc["offset_mapping"][max_tokens - 1][1]]


def effective_stride(max_length: int, stride: int, max_question_tokens: int) -> int:
    """``stride`` capped at half the context room of a window, which the fast tokenizers require."""
    room = max_length - max_question_tokens - 3  # [CLS] q [SEP] c [SEP]
    if room < 8:
        raise ValueError(f"max_length {max_length} leaves no room for a context after a {max_question_tokens}-token question")
    return max(0, min(int(stride), room // 2))


def encode_windows(tokenizer, questions: Sequence[str], contexts: Sequence[str], max_length: int = SPAN_MAX_LENGTH,
                   stride: int = SPAN_STRIDE, max_question_tokens: int = SPAN_MAX_QUESTION_TOKENS,
                   max_windows: Optional[int] = SPAN_MAX_WINDOWS) -> Tuple[List[Window], List[str]]:
    """The windows of every pair (see the module docstring), and the contexts as
    read (a huge one cut); window offsets point into those."""
    windows, contexts, _ = encode_windows_counted(tokenizer, questions, contexts, max_length, stride, max_question_tokens,
                                                  max_windows)
    return windows, contexts


def encode_windows_counted(tokenizer, questions: Sequence[str], contexts: Sequence[str], max_length: int = SPAN_MAX_LENGTH,
                           stride: int = SPAN_STRIDE, max_question_tokens: int = SPAN_MAX_QUESTION_TOKENS,
                           max_windows: Optional[int] = SPAN_MAX_WINDOWS) -> Tuple[List[Window], List[str], List[bool]]:
    """:func:`encode_windows`, and for each pair whether part of its context was not read
    (more windows than ``max_windows``, or the context cut before tokenizing)."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("SpanQA needs a fast tokenizer (character offsets)")
    stride = effective_stride(max_length, stride, max_question_tokens)
    limit = max_windows * max_length * 12 if max_windows else None
    truncated = [bool(limit) and len(c) > limit for c in contexts]
    contexts = [c[:limit] if limit else c for c in contexts]
    questions = [_cut_question(tokenizer, q, max_question_tokens) for q in questions]
    if not questions:
        return [], contexts, []
    enc = tokenizer(questions, contexts, truncation="only_second", max_length=max_length, stride=stride,
                    return_overflowing_tokens=True, return_offsets_mapping=True, padding=False)
    windows: List[Window] = []
    per_example: Dict[int, int] = collections.Counter()
    mapping = enc.get("overflow_to_sample_mapping", list(range(len(enc["input_ids"]))))
    for w, example in enumerate(mapping):
        if max_windows and per_example[example] >= max_windows:
            truncated[example] = True
            continue
        per_example[example] += 1
        seq = enc.sequence_ids(w)
        ctx = [k for k, s in enumerate(seq) if s == 1]
        lo, hi = (ctx[0], ctx[-1]) if ctx else (1, 0)
        types = enc["token_type_ids"][w] if "token_type_ids" in enc else None
        windows.append(Window(int(example), list(enc["input_ids"][w]), list(types) if types is not None else None, lo, hi,
                              [tuple(o) for o in enc["offset_mapping"][w]]))
    return windows, contexts, truncated


def collate_windows(windows: Sequence[Window], pad_id: int, pad_to: Optional[int] = None):
    """Tensors for a batch of windows (right padding, to the longest or to ``pad_to``)."""
    import torch

    n = max(len(w.input_ids) for w in windows)
    n = max(n, pad_to or 0)
    ids = torch.full((len(windows), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(windows), n), dtype=torch.long)
    types = torch.zeros((len(windows), n), dtype=torch.long)
    for r, w in enumerate(windows):
        k = len(w.input_ids)
        ids[r, :k] = torch.tensor(w.input_ids)
        mask[r, :k] = 1
        if w.token_type_ids is not None:
            types[r, :k] = torch.tensor(w.token_type_ids)
    batch = {"input_ids": ids, "attention_mask": mask}
    if windows[0].token_type_ids is not None:
        batch["token_type_ids"] = types
    return batch


class WindowReading(NamedTuple):
    """What one window says: P(no answer), and its most probable span (log-probability, character span)."""

    p_null: float
    span_logp: float
    span: Optional[Tuple[int, int]]


def read_window(start, end, window: Window, max_answer_tokens: int) -> WindowReading:
    """:class:`WindowReading` of one window's start and end logits (1-D tensors)."""
    import torch

    start, end = start.float(), end.float()
    null = start[0] + end[0]
    lo, hi = window.context_start, window.context_end
    if hi < lo:
        return WindowReading(1.0, float("-inf"), None)
    s, e = start[lo: hi + 1], end[lo: hi + 1]
    n = s.numel()
    pos = torch.arange(n, device=s.device)
    length = pos[None, :] - pos[:, None]
    valid = (length >= 0) & (length < max_answer_tokens)
    scores = (s[:, None] + e[None, :]).masked_fill(~valid, float("-inf")).flatten()
    log_z = torch.logsumexp(torch.cat([null.view(1), scores]), 0)
    k = int(scores.argmax())
    i, j = lo + k // n, lo + k % n
    span = (window.offsets[i][0], window.offsets[j][1])
    return WindowReading(float(torch.exp(null - log_z)), float(scores[k] - log_z), span)


def combine_windows(readings: Sequence[WindowReading], context: str, truncated: bool = False) -> QAResult:
    """One answer from the readings of a pair's windows (module docstring)."""
    if not readings:
        return QAResult("", 0.0, truncated)
    answerability = _clamp01(1.0 - min(r.p_null for r in readings))
    preferring_span = [r for r in readings if r.span is not None and r.span_logp > _log(r.p_null)]
    if not preferring_span:
        return QAResult("", answerability, truncated)
    best = max(preferring_span, key=lambda r: r.span_logp)
    return QAResult(context[best.span[0]: best.span[1]].strip(), answerability, truncated)


def _log(p: float) -> float:
    import math

    return math.log(p) if p > 0 else float("-inf")


class SpanQA:
    """Extractive QA with a no-answer option on a project checkpoint (task
    ``question-answering``) or any transformers QA model folder; see the module docstring."""

    backend = "span"

    def __init__(self, name_or_path: str, device: Optional[str] = None, dtype=None, pad_to_max_length: bool = False,
                 max_length: Optional[int] = None, stride: Optional[int] = None, max_answer_tokens: Optional[int] = None,
                 max_question_tokens: int = SPAN_MAX_QUESTION_TOKENS, max_windows: Optional[int] = SPAN_MAX_WINDOWS,
                 batch_size: int = 32):
        self.name_or_path = str(name_or_path)
        tokenizer, model = load_model(self.name_or_path, task=QA_TASK, device=device, dtype=dtype, metric="data_questeval")
        recipe = read_recipe(self.name_or_path) or {}
        self._setup(tokenizer, model, recipe, pad_to_max_length, max_length, stride, max_answer_tokens, max_question_tokens,
                    max_windows, batch_size)

    @classmethod
    def from_model(cls, tokenizer, model, recipe: Optional[Dict[str, Any]] = None, **options) -> "SpanQA":
        """A SpanQA over a model already in memory (a model being trained, for its dev scores)."""
        self = cls.__new__(cls)
        self.name_or_path = "<in memory>"
        defaults = dict(pad_to_max_length=False, max_length=None, stride=None, max_answer_tokens=None,
                        max_question_tokens=SPAN_MAX_QUESTION_TOKENS, max_windows=SPAN_MAX_WINDOWS, batch_size=32)
        defaults.update(options)
        self._setup(tokenizer, model, recipe or {}, **defaults)
        return self

    def _setup(self, tokenizer, model, recipe, pad_to_max_length, max_length, stride, max_answer_tokens, max_question_tokens,
               max_windows, batch_size):
        # a question or context holding "[SEP]" or "[CLS]" is text: only the encoder's own markers are special
        self.tokenizer, self.model, self.recipe = literal_tokenizer(tokenizer), model, recipe
        model_limit = getattr(model.config, "max_position_embeddings", 512) or 512
        self.max_length = int(max_length or recipe.get("max_length") or min(SPAN_MAX_LENGTH, model_limit))
        if self.max_length > model_limit:
            raise ValueError(f"max_length {self.max_length} exceeds the model's {model_limit} positions")
        self.max_question_tokens = int(max_question_tokens)
        self.stride = effective_stride(self.max_length, int(stride if stride is not None else recipe.get("stride", SPAN_STRIDE)),
                                       self.max_question_tokens)
        self.max_answer_tokens = int(max_answer_tokens or recipe.get("max_answer_tokens") or SPAN_MAX_ANSWER_TOKENS)
        self.max_windows = int(max_windows) if max_windows else None
        self.pad_to_max_length = bool(pad_to_max_length)
        # A checkpoint trained without segment ids (the recipe says "token_type_ids": false) must be read
        # without them: BERT-like models then take type 0 everywhere, as in training.
        self.token_type_ids = bool(recipe.get("token_type_ids", True))
        self.batch_size = int(batch_size)
        if self.batch_size < 1 or self.max_answer_tokens < 1:
            raise ValueError("batch_size and max_answer_tokens must be >= 1")

    def windows(self, questions: Sequence[str], contexts: Sequence[str]) -> Tuple[List[Window], List[str]]:
        return encode_windows(self.tokenizer, questions, contexts, self.max_length, self.stride, self.max_question_tokens,
                              self.max_windows)

    def _counted_windows(self, questions: Sequence[str], contexts: Sequence[str]):
        return encode_windows_counted(self.tokenizer, questions, contexts, self.max_length, self.stride,
                                      self.max_question_tokens, self.max_windows)

    def _read_batch(self, batch: List[Window]) -> List[WindowReading]:
        import torch

        device = next(self.model.parameters()).device
        # to the longest window on a CPU; on a GPU to a multiple of a few tokens (fewer shapes to meet)
        pad_to = self.max_length if self.pad_to_max_length else padded_length(max(len(w.input_ids) for w in batch), device,
                                                                               self.max_length)
        tensors = collate_windows(batch, self.tokenizer.pad_token_id or 0, pad_to)
        if not self.token_type_ids:
            tensors.pop("token_type_ids", None)
        with torch.inference_mode():
            out = self.model(**{k: v.to(device) for k, v in tensors.items()})
            # each window is read on the CPU: on a GPU, reading row by row there cost a dozen kernel launches and
            # four waits a window (8 of 35 s of a 100-output run on an H200, RESULTS.md gpu_checks); on a CPU
            # these are the same tensors (float32 already), so the same numbers
            start, end = out.start_logits.float().cpu(), out.end_logits.float().cpu()
        return [read_window(start[r], end[r], w, self.max_answer_tokens) for r, w in enumerate(batch)]

    def answer(self, questions: Sequence[str], contexts: Sequence[str], batch_size: Optional[int] = None,
               show_progress: bool = True) -> List[QAResult]:
        check_pairs(questions, contexts, ("questions", "contexts"))
        windows, read_contexts, truncated = self._counted_windows(questions, contexts)
        readings = run_batched(windows, [len(w.input_ids) for w in windows], self._read_batch,
                               batch_size=int(batch_size or self.batch_size), desc="answering questions",
                               show_progress=show_progress) if windows else []
        grouped: Dict[int, List[WindowReading]] = collections.defaultdict(list)
        for w, r in zip(windows, readings):
            grouped[w.example].append(r)
        return [combine_windows(grouped.get(i, []), read_contexts[i], truncated[i]) for i in range(len(questions))]


# ---------------------------------------------------------------- loading


def load_qa(name_or_path: str, device: Optional[str] = None, dtype=None, **options):
    """A QA backend for ``name_or_path``: a project checkpoint whose
    ``d2t_config.json`` has task ``question-answering`` → :class:`SpanQA`;
    anything else (a T5 hub id such as ``ThomasNLG/t5-qa_squad2neg-en``, or a
    local T5 folder) → :class:`T5QA`. ``options`` go to the backend."""
    recipe = read_recipe(name_or_path) if os.path.isdir(os.path.expanduser(str(name_or_path))) else None
    if recipe is not None:
        task = recipe.get("task")
        if task == QA_TASK:
            return SpanQA(name_or_path, device=device, dtype=dtype, **options)
        raise ValueError(f"{name_or_path} is a d2t-metrics checkpoint for task {task!r}, not question answering")
    return T5QA(name_or_path, device=device, dtype=dtype, **options)
