"""Question generation for Data-QuestEval: two backends behind one interface.

Both write one question per (answer, context) pair, the context being a text
or a table linearized by ``d2t_metrics.linearize.linearize``::

    qg = load_qg("checkpoints/data_questeval/table_qg")    # or a T5 hub id / path
    qg.generate(["Wheeler , Texas"], ["entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ]"])
    # ['Where was Alan Bean born?']

:class:`T5QG` — QuestEval's generative QG (``ThomasNLG/t5-qg_squad1-en`` for
texts, ``ThomasNLG/t5-qg_webnlg_synth-en`` for tables), reimplemented from the
behaviour of QuestEval 0.2.4:

* the input is exactly ``f"sv1 </s> {answer} </s> {context}"``. QuestEval
  sets its prefix ``sv1`` when it loads ``t5-qg_squad1-en``, which it always
  loads (for the hypothesis), and the prefix is one attribute of the metric,
  so with ``task="data2text"`` the table QG gets it too; ``prefix=None``
  leaves it out (``f"{answer} </s> {context}"``);
* greedy decoding (``num_beams=1``, no sampling), at most 19 new tokens
  (transformers' default ``max_length=20`` of QuestEval's time, the decoder
  start included), inputs truncated to 512 tokens;
* ``pad_to_max_length=True`` pads every batch to 512 tokens as QuestEval
  does; the default pads to the longest input of batches of similar length.

:class:`GeneratorQG` — the project's offline QG: the shared small generator
(:mod:`d2t_metrics.generator`, SmolLM2-135M-Instruct + LoRA) trained by
``python -m training.data_questeval.train text-qg`` / ``table-qg`` on prompts
built by :func:`qg_prompt`::

    Context: <text>                                      Table: <linearized table>
    Write a question whose answer is: <answer>           Write a question about the table whose answer is: <answer>
    Question:                                            Question:

The project's tokenizer reads special-token strings in a user's text as
characters; :class:`T5QG`, whose prompt holds QuestEval's live ``</s>``,
escapes them in the answer and the context first. A table longer than
:data:`TABLE_QG_CONTEXT_WORDS` words (never in WebNLG or E2E) is read
around the value asked about (:func:`table_answer_context`).
The context comes first so that a prompt too long for the model
(``max_prompt_tokens``, 384) loses the start of its context, never the answer
or the instruction (the generator keeps a prompt's last tokens). Whitespace
runs become single spaces and an answer keeps its first
:data:`MAX_ANSWER_CHARS` characters. The question is the greedy continuation
up to the first newline, cut after its first ``?``. A checkpoint's recipe
names the context kind it was trained for (``context_kind``: ``text`` or
``table``), which ``generate`` uses unless told otherwise.

Both take ``generate(answers, contexts, batch_size=None, show_progress=True)``
and return the questions in input order, and
``generate_alternatives(answers, contexts, n)``: up to ``n`` distinct
questions per pair, best first, by beam search with ``n`` beams (the metric
asks the project's table QG three per table value: one badly formed
question then does not decide a fact). :func:`load_qg` picks the backend.

:func:`table_values` gives the answers QuestEval asks about in a linearized
table (its ``extract_table_answers``: the ``[ … ]`` items), with their
character spans; :func:`answer_context` the part of a text around an answer
that the project's QG reads (it was trained on such contexts). This module
imports no sibling module (:mod:`qa` takes its checks and recipe reader from it).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from d2t_metrics.untrusted import escape_special_strings
from d2t_metrics.untrusted import literal_tokenizer
from d2t_metrics.untrusted import special_strings

SEPARATOR = "</s>"
QUESTEVAL_QG_PREFIX = "sv1"
QUESTEVAL_MAX_NEW_TOKENS = 19
QUESTEVAL_MAX_SOURCE_LENGTH = 512
GENERATOR_TASK = "causal-lm"
RECIPE_FILE = "d2t_config.json"

CONTEXT_KINDS = ("text", "table")
PROMPTS = {
    "text": "Context: {context}\nWrite a question whose answer is: {answer}\nQuestion:",
    "table": "Table: {context}\nWrite a question about the table whose answer is: {answer}\nQuestion:",
}
MAX_ANSWER_CHARS = 200
_SPACES = re.compile(r"\s+")


def _one_line(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def qg_prompt(answer: str, context: str, kind: str = "text") -> str:
    """The generator's prompt for one (answer, context) pair; ``kind`` is ``text`` or ``table``."""
    if kind not in PROMPTS:
        raise ValueError(f"unknown context kind {kind!r}; choose one of {CONTEXT_KINDS}")
    return PROMPTS[kind].format(context=_one_line(context), answer=_one_line(answer)[:MAX_ANSWER_CHARS])


def clean_question(generated: str) -> str:
    """A generated continuation → the question: first line, up to and with its first ``?``."""
    text = generated.split("\n")[0].strip()
    if "?" in text:
        text = text[: text.index("?") + 1]
    return text


def check_pairs(first: Sequence[str], second: Sequence[str], names: Tuple[str, str] = ("answers", "contexts")) -> None:
    """Refuse two parallel lists (answers and contexts; questions and contexts) of
    different lengths or holding anything but strings."""
    if len(first) != len(second):
        raise ValueError(f"{names[0]} and {names[1]} differ in length: {len(first)} vs {len(second)}")
    for name, values in zip(names, (first, second)):
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise ValueError(f"{name}[{i}] is not a string: {type(value).__name__}")


def read_recipe(path: str) -> Optional[Dict[str, Any]]:
    """The ``d2t_config.json`` of a project checkpoint folder, or ``None`` for anything else."""
    f = os.path.join(os.path.expanduser(str(path)), RECIPE_FILE)
    if not os.path.isfile(f):
        return None
    with open(f, encoding="utf-8") as fh:
        return json.load(fh)


# ---------------------------------------------------------------- table answers


class TableValue(NamedTuple):
    """A value of a linearized table and its character span in the linearization."""

    value: str
    start: int
    end: int


def table_values(linearized: str) -> List[TableValue]:
    """The ``[ … ]`` items of a linearized table, in order, with their spans.

    Like QuestEval's ``extract_table_answers`` (whitespace tokens between a
    ``[`` token and the next ``]`` token; a ``[`` inside a value is part of
    it), except that empty items are skipped (they are no answer) and a value
    is the linearization's own substring (QuestEval joins the tokens with
    single spaces: the same unless a value holds other whitespace, which
    only a hand-made E2E or attribute-value value can).

    >>> table_values("entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ]")
    [TableValue(value='Alan Bean', start=9, end=18), TableValue(value='Wheeler , Texas', start=36, end=51)]
    """
    values, inside, first, last = [], False, None, None
    for m in re.finditer(r"\S+", linearized):
        token = m.group()
        if token == "]" and inside:
            if first is not None:
                values.append(TableValue(linearized[first:last], first, last))
            inside, first, last = False, None, None
            continue
        if inside:
            first = m.start() if first is None else first
            last = m.end()
        elif token == "[":
            inside = True
    return values



# ---------------------------------------------------------------- QG contexts

# Words of context around an answer that the project's QG reads: with the
# prompt, the answer and the question, a training sequence stays within ~160
# generator tokens. Its training pairs (training/data_questeval/qa_data.py)
# and the metric's questions on texts use the same contexts.
QG_CONTEXT_WORDS = 80

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def sentence_spans(text: str) -> List[Tuple[int, int]]:
    """Character spans of the sentences of ``text`` (a break after ``.``, ``!``
    or ``?`` and whitespace, before a capital or a digit)."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def _words_in(text: str) -> int:
    return len(text.split())


def answer_context(context: str, answer_start: int, answer_end: int, max_words: int = QG_CONTEXT_WORDS) -> str:
    """The sentence(s) holding the answer, grown by whole neighbouring sentences
    (before, after, alternately) while within ``max_words``; an answer
    sentence longer than that is cut to ``max_words`` words around the answer."""
    spans = sentence_spans(context)
    if not spans:
        return context.strip()
    inside = [k for k, (s, e) in enumerate(spans) if e > answer_start and s < answer_end] or [0]
    lo, hi = inside[0], inside[-1]
    text = context[spans[lo][0]: spans[hi][1]]
    if _words_in(text) > max_words:
        return _cut_around(context, spans[lo][0], spans[hi][1], answer_start, answer_end, max_words)
    grew = True
    while grew:
        grew = False
        for k in (lo - 1, hi + 1):
            if 0 <= k < len(spans):
                s, e = min(spans[lo][0], spans[k][0]), max(spans[hi][1], spans[k][1])
                if _words_in(context[s:e]) <= max_words:
                    lo, hi = min(lo, k), max(hi, k)
                    grew = True
    return context[spans[lo][0]: spans[hi][1]].strip()


# Words of a linearized table that the project's table QG reads about one value. It was trained on
# whole WebNLG tables (at most 64 words linearized in WebNLG 2017's test set, 49 in E2E's), so a
# table within this budget is read whole; a longer one (hundreds of triples) would not fit the
# prompt, whose start the generator drops, so the value is read with the words around it instead.
TABLE_QG_CONTEXT_WORDS = 80


def table_answer_context(linearized: str, value_start: int, value_end: int,
                         max_words: int = TABLE_QG_CONTEXT_WORDS) -> str:
    """The linearized table as the project's table QG reads it about the value at
    ``value_start:value_end``: whole within ``max_words`` words, else the ``max_words``
    words around the value."""
    if _words_in(linearized) <= max_words:
        return linearized
    return _cut_around(linearized, 0, len(linearized), value_start, value_end, max_words)


def _cut_around(context: str, start: int, end: int, answer_start: int, answer_end: int, max_words: int) -> str:
    words = [(m.start() + start, m.end() + start) for m in re.finditer(r"\S+", context[start:end])]
    first = next((k for k, (s, e) in enumerate(words) if e > answer_start), 0)
    last = max(first, next((k for k in range(len(words) - 1, -1, -1) if words[k][0] < answer_end), first))
    if last - first + 1 >= max_words:  # the answer alone fills the budget: it keeps its start
        lo, hi = first, min(len(words) - 1, first + max_words - 1)
    else:  # centre the answer in the budget, shifted where the sentence ends
        lo = max(0, first - (max_words - (last - first + 1)) // 2)
        hi = min(len(words) - 1, lo + max_words - 1)
        lo = max(0, hi - max_words + 1)
    return context[words[lo][0]: words[hi][1]]


# ---------------------------------------------------------------- T5 (QuestEval's models)


class T5QG:
    """QuestEval's generative QG on a T5 checkpoint (hub id or local path); see the module docstring."""

    backend = "t5"

    def __init__(self, name_or_path: str, device: Optional[str] = None, dtype=None, pad_to_max_length: bool = False,
                 max_source_length: int = QUESTEVAL_MAX_SOURCE_LENGTH, max_new_tokens: int = QUESTEVAL_MAX_NEW_TOKENS,
                 prefix: Optional[str] = QUESTEVAL_QG_PREFIX, batch_size: int = 36):
        from d2t_metrics.models import load_model

        self.name_or_path = str(name_or_path)
        # QuestEval's prompts hold a live "</s>": special strings stay special, users' parts are escaped
        self.tokenizer, self.model = load_model(self.name_or_path, task="seq2seq", device=device, dtype=dtype, metric="data_questeval",
                                                literal=False)
        self.pad_to_max_length = bool(pad_to_max_length)
        self.max_source_length = int(max_source_length)
        self.max_new_tokens = int(max_new_tokens)
        self.prefix = prefix
        self.batch_size = int(batch_size)
        if self.max_source_length < 1 or self.max_new_tokens < 1 or self.batch_size < 1:
            raise ValueError("max_source_length, max_new_tokens and batch_size must be >= 1")

    def format_input(self, answer: str, context: str) -> str:
        """QuestEval's QG input: ``f"sv1 </s> {answer} </s> {context}"`` (without ``sv1 </s> `` when ``prefix`` is None)."""
        head = f"{self.prefix} {SEPARATOR} " if self.prefix else ""
        return f"{head}{answer} {SEPARATOR} {context}"

    def _run(self, inputs: List[str], num_beams: int = 1) -> List[str]:
        import torch

        padding = "max_length" if self.pad_to_max_length else True
        enc = self.tokenizer(inputs, max_length=self.max_source_length, padding=padding, truncation=True, return_tensors="pt")
        enc = {k: v.to(self.model.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        with torch.inference_mode():
            out = self.model.generate(**enc, num_beams=num_beams, num_return_sequences=num_beams, do_sample=False,
                                      max_new_tokens=self.max_new_tokens)
        return [t.strip() for t in self.tokenizer.batch_decode(out, skip_special_tokens=True, clean_up_tokenization_spaces=True)]

    def _beams(self, answers: Sequence[str], contexts: Sequence[str], n: int, batch_size: Optional[int],
               show_progress: bool) -> List[List[str]]:
        """The ``n`` beams of each pair, best first (greedy for 1); a batch holds ``batch_size`` pairs' beams."""
        from d2t_metrics.models import run_batched

        check_pairs(answers, contexts)
        # the prompt's own "</s>" separators are special; the same string in a user's text must not be
        specials = special_strings(self.tokenizer)
        inputs = [self.format_input(escape_special_strings(a, specials), escape_special_strings(c, specials))
                  for a, c in zip(answers, contexts)]
        if not inputs:
            return []
        lengths = [len(ids) for ids in self.tokenizer(inputs, truncation=True, max_length=self.max_source_length)["input_ids"]]

        def run(batch):
            out = self._run(batch, num_beams=n)
            return [out[k * n: (k + 1) * n] for k in range(len(batch))]

        return run_batched(inputs, lengths, run, batch_size=int(batch_size or self.batch_size),
                           desc="generating questions", show_progress=show_progress)

    def generate(self, answers: Sequence[str], contexts: Sequence[str], batch_size: Optional[int] = None,
                 show_progress: bool = True) -> List[str]:
        return [beams[0] for beams in self._beams(answers, contexts, 1, batch_size, show_progress)]

    def generate_alternatives(self, answers: Sequence[str], contexts: Sequence[str], n: int, batch_size: Optional[int] = None,
                              show_progress: bool = True) -> List[List[str]]:
        """Up to ``n`` distinct questions per pair, best first: beam search with
        ``n`` beams (QuestEval asks one greedy question: ``n=1``)."""
        return [_distinct(beams) for beams in self._beams(answers, contexts, int(n), batch_size, show_progress)]


# ---------------------------------------------------------------- the project's small generator


class GeneratorQG:
    """QG with a project generator checkpoint (task ``causal-lm``); see the module docstring."""

    backend = "generator"

    def __init__(self, path: str, device: Optional[str] = None, dtype=None, context_kind: Optional[str] = None,
                 max_new_tokens: int = 32, max_prompt_tokens: int = 384, batch_size: int = 32, pad_to_max_length: bool = False,
                 quantize: Optional[str] = None):
        from d2t_metrics.generator import load_generator

        self.name_or_path = str(path)
        # quantize="int8": opt-in, CPU only, questions may change (d2t_metrics.generator.QUANTIZATIONS)
        tokenizer, model, recipe = load_generator(self.name_or_path, device=device, dtype=dtype, quantize=quantize)
        self._setup(tokenizer, model, recipe, context_kind, max_new_tokens, max_prompt_tokens, batch_size)
        self.pad_to_max_length = bool(pad_to_max_length)

    @classmethod
    def from_model(cls, tokenizer, model, recipe: Optional[Dict[str, Any]] = None, **options) -> "GeneratorQG":
        """A GeneratorQG over a model already in memory (for dev scores while training)."""
        self = cls.__new__(cls)
        self.name_or_path = "<in memory>"
        tokenizer.padding_side = "left"  # generation continues every prompt at the same position
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        defaults = dict(context_kind=None, max_new_tokens=32, max_prompt_tokens=384, batch_size=32)
        defaults.update(options)
        pad = bool(defaults.pop("pad_to_max_length", False))
        self._setup(tokenizer, model, recipe or {}, **defaults)
        self.pad_to_max_length = pad
        return self

    def _setup(self, tokenizer, model, recipe, context_kind, max_new_tokens, max_prompt_tokens, batch_size):
        # the prompts hold no special token: "<|endoftext|>" in a user's text is read as characters
        self.tokenizer, self.model, self.recipe = literal_tokenizer(tokenizer), model, recipe
        self.context_kind = context_kind or recipe.get("context_kind") or "text"
        if self.context_kind not in CONTEXT_KINDS:
            raise ValueError(f"unknown context kind {self.context_kind!r}; choose one of {CONTEXT_KINDS}")
        self.max_new_tokens, self.max_prompt_tokens, self.batch_size = int(max_new_tokens), int(max_prompt_tokens), int(batch_size)
        if min(self.max_new_tokens, self.max_prompt_tokens, self.batch_size) < 1:
            raise ValueError("max_new_tokens, max_prompt_tokens and batch_size must be >= 1")

    def prompts(self, answers: Sequence[str], contexts: Sequence[str], context_kind: Optional[str] = None) -> List[str]:
        kind = context_kind or self.context_kind
        return [qg_prompt(a, c, kind) for a, c in zip(answers, contexts)]

    def generate(self, answers: Sequence[str], contexts: Sequence[str], batch_size: Optional[int] = None,
                 show_progress: bool = True, context_kind: Optional[str] = None) -> List[str]:
        from d2t_metrics.generator import generate

        check_pairs(answers, contexts)
        out = generate(self.model, self.tokenizer, self.prompts(answers, contexts, context_kind),
                       **self._decoding(batch_size, show_progress))
        return [clean_question(q) for q in out]

    def generate_alternatives(self, answers: Sequence[str], contexts: Sequence[str], n: int, batch_size: Optional[int] = None,
                              show_progress: bool = True, context_kind: Optional[str] = None) -> List[List[str]]:
        """Up to ``n`` distinct questions per pair, best first (beam search with
        ``n`` beams; ``n=1``: :meth:`generate`'s question)."""
        from d2t_metrics.generator import generate_alternatives

        check_pairs(answers, contexts)
        out = generate_alternatives(self.model, self.tokenizer, self.prompts(answers, contexts, context_kind), n,
                                    **self._decoding(batch_size, show_progress))
        return [_distinct(clean_question(q) for q in beams) for beams in out]

    def _decoding(self, batch_size: Optional[int], show_progress: bool) -> Dict[str, Any]:
        return dict(max_new_tokens=self.max_new_tokens, batch_size=int(batch_size or self.batch_size),
                    max_prompt_tokens=self.max_prompt_tokens, show_progress=show_progress, desc="generating questions",
                    pad_to_max_length=getattr(self, "pad_to_max_length", False), stop_strings=("?",))


def _distinct(questions) -> List[str]:
    return list(dict.fromkeys(q for q in questions if q.strip()))


# ---------------------------------------------------------------- loading


def load_qg(name_or_path: str, device: Optional[str] = None, dtype=None, **options):
    """A QG backend for ``name_or_path``: a project generator checkpoint
    (``d2t_config.json`` task ``causal-lm``) → :class:`GeneratorQG`; anything
    else (a T5 hub id such as ``ThomasNLG/t5-qg_squad1-en``, or a local T5
    folder) → :class:`T5QG`. ``options`` go to the backend."""
    recipe = read_recipe(name_or_path) if os.path.isdir(os.path.expanduser(str(name_or_path))) else None
    if recipe is not None:
        task = recipe.get("task")
        if task == GENERATOR_TASK:
            return GeneratorQG(name_or_path, device=device, dtype=dtype, **options)
        raise ValueError(f"{name_or_path} is a d2t-metrics checkpoint for task {task!r}, not question generation")
    return T5QG(name_or_path, device=device, dtype=dtype, **options)
