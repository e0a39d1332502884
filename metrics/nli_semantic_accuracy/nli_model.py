"""The NLI scorer: a sequence-pair classifier loaded once, run on length-sorted batches.

``NLIScorer`` maps the model's ``config.id2label`` onto NLI labels (any order,
any case; 3-way entailment/neutral/contradiction or 2-way entailment /
not_entailment) and returns one probability row per (premise, hypothesis)
pair. Pairs are sorted by length and padded per batch, so a corpus runs in a
handful of forward passes instead of one per pair.

**Pairs longer than the model's maximum length are windowed, not cut.**

* A hypothesis that takes more than half of the model's window is split into
  parts at sentence ends (sentences packed while they fit in half the
  window). A hypothesis is entailed only if every part is: the pair's row is
  the row of the part with the *lowest* entailment probability. This is how
  the hallucination check (premise: the facts, hypothesis: the whole text)
  reads a long text: the text is faithful only if each of its parts is.
* The premise is read in overlapping windows that fit beside the hypothesis
  (part), each overlapping the next by half a window, so any span of up to
  half a window lies whole in some window. A hypothesis (part) is entailed if
  any window entails it: its row is the window's with the *highest*
  entailment probability. This is how the omission check (premise: the text,
  hypothesis: one fact) finds a fact mentioned late in a long text. (For the
  hallucination check of a very large table it means a part of the text must
  be supported by facts that sit together in one window of the premise.)
* Only a single sentence of the hypothesis longer than half the window is
  cut (to its first half-window of tokens); such a pair is marked
  ``truncated``, since part of it was never seen.

**A text is read up to** :data:`MAX_TEXT_TOKENS` **tokens.** The work of a
pair grows with the text's length (windows of the premise, parts of the
hypothesis), so the metric first cuts a longer text to its first
``MAX_TEXT_TOKENS`` tokens (:meth:`NLIScorer.cap_texts`) and marks the example
``truncated``: a 100,000-character text costs as much as its first ~9,000
characters, instead of hundreds of forward passes per fact.

Each row :meth:`NLIScorer.__call__` returns is a :class:`PairProbabilities`
(a list of label probabilities) that also says whether the pair was
``truncated`` and in how many ``windows`` it was read; :meth:`NLIScorer.as_dict`
keeps both on the dict it returns (:class:`LabelProbabilities`), which is how
``checks.combine`` reports them per example.
"""

from __future__ import annotations

import math
import re
from typing import Dict, List, Optional, Sequence, Tuple

# A model run in bf16 or fp16 moves a label's log-probability a little (at most 0.13 on 3,882
# WebNLG 2017 pairs and 0.18 on 4,099 E2E pairs with the project's checkpoint, bf16 on a CPU;
# benchmarks/history/nli_semantic_accuracy.md, session 39). A pair whose top two labels, or whose
# entailment and a decision's threshold, lie within this margin in log-probability is scored again
# in float32 (``exact_near``), so that its label is the float32 one.
EXACT_MARGIN = 0.3

# Tokens of a text the metric reads (far above any data-to-text output: WebNLG
# and E2E texts have under 100; RotoWire summaries a few hundred). With the
# project's checkpoint (256-token window) that is at most ~17 windows per fact.
MAX_TEXT_TOKENS = 2048

ENTAILMENT = "entailment"
NEUTRAL = "neutral"
CONTRADICTION = "contradiction"
NOT_ENTAILMENT = "not_entailment"

_ALIASES = {
    "entailment": ENTAILMENT,
    "entailed": ENTAILMENT,
    "entails": ENTAILMENT,
    "entail": ENTAILMENT,
    "neutral": NEUTRAL,
    "contradiction": CONTRADICTION,
    "contradicted": CONTRADICTION,
    "contradicts": CONTRADICTION,
    "contradictory": CONTRADICTION,
    "not_entailment": NOT_ENTAILMENT,
    "not_entailed": NOT_ENTAILMENT,
    "non_entailment": NOT_ENTAILMENT,
    "non_entailed": NOT_ENTAILMENT,
    "no_entailment": NOT_ENTAILMENT,
}


def _canonical(label: str) -> Optional[str]:
    key = str(label).strip().lower().replace("-", "_").replace(" ", "_")
    return _ALIASES.get(key)


def map_nli_labels(id2label: Dict[int, str]) -> Tuple[str, ...]:
    """The NLI label name of each output index of a classifier.

    Accepts 3-way models (entailment, neutral, contradiction in any order and
    case) and 2-way models (entailment, not_entailment / "not entailed").
    Raises ``ValueError`` for labels that cannot be mapped (e.g. ``LABEL_0``).

    >>> map_nli_labels({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})
    ('contradiction', 'neutral', 'entailment')
    >>> map_nli_labels({0: "entailed", 1: "not_entailed"})
    ('entailment', 'not_entailment')
    """
    if not id2label:
        raise ValueError("the model's config has no id2label; an NLI model must name its labels")
    try:
        items = sorted((int(k), v) for k, v in id2label.items())
    except (TypeError, ValueError) as e:
        raise ValueError(f"cannot read the model's id2label {id2label!r}") from e
    if [k for k, _ in items] != list(range(len(items))):
        raise ValueError(f"the model's id2label {id2label!r} must have indices 0..{len(items) - 1}")
    names = tuple(_canonical(v) for _, v in items)
    valid = ({ENTAILMENT, NEUTRAL, CONTRADICTION}, {ENTAILMENT, NOT_ENTAILMENT})
    if None in names or set(names) not in valid or len(set(names)) != len(names):
        raise ValueError(
            f"cannot map the model's labels {dict(items)!r} to NLI labels: expected entailment, neutral and "
            "contradiction (any order or case) or entailment and not_entailment. Use an NLI model "
            "(e.g. roberta-large-mnli or checkpoints/nli_semantic_accuracy) or fix config.id2label."
        )
    return names


class NLIScorer:
    """Loads an NLI model once and scores (premise, hypothesis) pairs in batches.

    ``model`` is a hub id, a local transformers directory or a project
    checkpoint directory (``checkpoints/nli_semantic_accuracy``: PEFT adapters
    whose ``d2t_config.json`` names the labels and the max length; see
    :mod:`d2t_metrics.checkpoints`).
    """

    def __init__(self, model: str = "roberta-large-mnli", device: Optional[str] = None, dtype=None, max_length: Optional[int] = None, metric: str = "nli_semantic_accuracy"):
        from d2t_metrics.models import load_model

        self.name = model
        self.tokenizer, self.model = load_model(model, task="sequence-classification", device=device, dtype=dtype, metric=metric)
        self.labels = map_nli_labels(self.model.config.id2label)
        self.entailment_index = self.labels.index(ENTAILMENT)
        self.max_length = max_length or self._model_max_length()
        self._onnx = None  # the ONNX Runtime copy, made on first use of backend="onnx"
        self._exact = None  # the float32 copy that re-scores pairs near a decision (exact_near), loaded on first use
        self.rescored = 0  # windows (pairs, when they fit one) the last call scored again in float32

    def _model_max_length(self) -> int:
        limits = [512]
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if tok_max and tok_max < 100_000:
            limits.append(int(tok_max))
        pos = getattr(self.model.config, "max_position_embeddings", None)
        if pos:
            # RoBERTa-style models reserve two positions (offset by the padding index).
            offset = 2 if getattr(self.model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert") else 0
            limits.append(int(pos) - offset)
        return min(limits)

    @property
    def device(self):
        return next(self.model.parameters()).device

    def tokenize(self, premises: Sequence[str], hypotheses: Sequence[str]) -> List[Dict[str, List[int]]]:
        """Unpadded features of sentence pairs, the premise truncated to fit
        ``max_length`` (one feature per pair; ``__call__`` windows instead)."""
        tok = self.tokenizer
        # verbose=False: over-long pairs are handled just below; the tokenizer's
        # "sequence length is longer than the maximum" warning would mislead
        enc = tok(list(premises), list(hypotheses), truncation=False, add_special_tokens=True, verbose=False)
        features = [{k: enc[k][i] for k in enc.keys()} for i in range(len(premises))]
        too_long = [i for i, f in enumerate(features) if len(f["input_ids"]) > self.max_length]
        if too_long:
            hyp_lens = self._lengths([hypotheses[i] for i in too_long])
            for i, hyp_len in zip(too_long, hyp_lens):
                # only_first keeps the hypothesis whole; if the hypothesis alone
                # cannot fit, both sides are cut instead of raising.
                strategy = "only_first" if hyp_len < self.max_length // 2 else "longest_first"
                one = tok(premises[i], hypotheses[i], truncation=strategy, max_length=self.max_length)
                features[i] = {k: one[k] for k in enc.keys()}
        return features

    def encode(self, premises: Sequence[str], hypotheses: Sequence[str]):
        """A padded batch of sentence pairs, the premise truncated to fit ``max_length``."""
        return self.tokenizer.pad(self.tokenize(premises, hypotheses), return_tensors="pt")

    # ---- windowing of over-long pairs --------------------------------------
    def _lengths(self, texts: Sequence[str]) -> List[int]:
        """Token counts without special tokens (no length warning: the caller handles length)."""
        if not texts:
            return []
        return [len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]]

    def _room(self) -> int:
        """Tokens a pair's two texts may take together."""
        return self.max_length - self.tokenizer.num_special_tokens_to_add(pair=True)

    def cap_texts(self, texts: Sequence[str], max_tokens: int = MAX_TEXT_TOKENS) -> List[Tuple[str, bool]]:
        """Per text, ``(text, False)`` when it has at most ``max_tokens`` tokens,
        else ``(its prefix of max_tokens tokens, True)`` (module docstring)."""
        texts = list(texts)
        if not texts:
            return []
        if not getattr(self.tokenizer, "is_fast", False):  # no offsets: cut by characters (>= 1 per token, roughly)
            return [(t[: 4 * max_tokens], True) if len(t) > 4 * max_tokens else (t, False) for t in texts]
        enc = self.tokenizer(texts, add_special_tokens=False, truncation=True, max_length=max_tokens,
                             return_offsets_mapping=True, verbose=False)
        out = []
        for text, offsets in zip(texts, enc["offset_mapping"]):
            end = offsets[-1][1] if offsets else 0
            # what follows the last token read may hold no token (spaces, characters the tokenizer drops)
            cut = end < len(text) and bool(self._lengths([text[end:]])[0])
            out.append((text[:end], True) if cut else (text, False))
        return out

    def _cut_to(self, text: str, budget: int) -> str:
        """The prefix of ``text`` holding its first ``budget`` tokens."""
        enc = self.tokenizer(text, add_special_tokens=False, truncation=True, max_length=budget, return_offsets_mapping=True)
        offsets = enc["offset_mapping"]
        return text[: offsets[-1][1]] if offsets else ""

    def hypothesis_parts(self, hypothesis: str, budget: int) -> Tuple[List[str], bool]:
        """``hypothesis`` in parts of at most ``budget`` tokens, split at sentence
        ends, and whether a sentence had to be cut to fit (``truncated``)."""
        if self._lengths([hypothesis])[0] <= budget:
            return [hypothesis], False
        sentences = split_sentences(hypothesis)
        truncated = False
        lengths = self._lengths(sentences)
        for i, n in enumerate(lengths):
            if n > budget:
                sentences[i] = self._cut_to(sentences[i], budget)
                lengths[i] = self._lengths([sentences[i]])[0]
                truncated = True
        parts = pack(sentences, lengths, budget)
        return parts, truncated

    def _window_features(self, premise: str, hypothesis: str) -> Tuple[List[Dict[str, List[int]]], List[int], bool]:
        """Features of an over-long pair: every (hypothesis part, premise window)
        combination, the part index of each, and whether anything was cut."""
        room = self._room()
        parts, truncated = self.hypothesis_parts(hypothesis, room // 2)
        features: List[Dict[str, List[int]]] = []
        owners: List[int] = []
        for j, (part, part_len) in enumerate(zip(parts, self._lengths(parts))):
            window = room - part_len  # >= room - room // 2 >= 1 premise tokens per window
            enc = self.tokenizer(
                premise, part, truncation="only_first", max_length=self.max_length,
                stride=window // 2, return_overflowing_tokens=True,
            )
            keys = [k for k in enc.keys() if k != "overflow_to_sample_mapping"]
            for w in range(len(enc["input_ids"])):
                features.append({k: enc[k][w] for k in keys})
                owners.append(j)
        return features, owners, truncated

    def _plan(self, premises: Sequence[str], hypotheses: Sequence[str]) -> List[Tuple[List[Dict[str, List[int]]], List[int], bool]]:
        """Per pair: its features, the hypothesis part of each, and ``truncated``.
        A pair that fits is one feature, exactly as the tokenizer encodes it."""
        enc = self.tokenizer(list(premises), list(hypotheses), truncation=False, add_special_tokens=True, verbose=False)
        columns = {k: enc[k] for k in enc.keys()}  # read once: each enc[k] costs a lookup through BatchEncoding
        plans = []
        for i in range(len(premises)):
            feature = {k: column[i] for k, column in columns.items()}
            if len(feature["input_ids"]) <= self.max_length:
                plans.append(([feature], [0], False))
            elif getattr(self.tokenizer, "is_fast", False):
                plans.append(self._window_features(premises[i], hypotheses[i]))
            else:  # windows need a fast tokenizer's overflow and offsets
                plans.append((self.tokenize([premises[i]], [hypotheses[i]]), [0], True))
        return plans

    def _pad(self, features: Sequence[Dict[str, List[int]]]):
        """One batch of tokenized pairs as padded tensors on the device: to the longest pair on a
        CPU, to a multiple of a few tokens on a GPU (:func:`d2t_metrics.models.padded_length`)."""
        from d2t_metrics.models import padded_length

        longest = max(len(f["input_ids"]) for f in features)
        length = padded_length(longest, self.device, self.max_length)
        if length == longest:
            return self.tokenizer.pad(list(features), return_tensors="pt").to(self.device)
        return self.tokenizer.pad(list(features), padding="max_length", max_length=length, return_tensors="pt").to(self.device)

    def predict_features(self, features: Sequence[Dict[str, List[int]]]) -> List[List[float]]:
        """Label probabilities (in ``self.labels`` order) for one batch of tokenized pairs."""
        import torch

        batch = self._pad(features)
        with torch.inference_mode():
            logits = self.model(**batch).logits
        return torch.softmax(logits.float(), dim=-1).cpu().tolist()

    def onnx_classifier(self):
        """The model as an ONNX Runtime session (``backend="onnx"``; ``d2t_metrics.onnx_backend``),
        exported on first use and kept."""
        if self._onnx is None:
            from d2t_metrics.onnx_backend import OnnxClassifier

            names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in self.tokenizer.model_input_names]
            self._onnx = OnnxClassifier(self.model, names)
        return self._onnx

    def predict_features_onnx(self, features: Sequence[Dict[str, List[int]]]) -> List[List[float]]:
        """:meth:`predict_features` run by ONNX Runtime (probabilities within ~1e-5 of PyTorch's)."""
        import torch

        batch = self.tokenizer.pad(list(features), return_tensors="np")
        logits = torch.from_numpy(self.onnx_classifier()(batch))
        return torch.softmax(logits.float(), dim=-1).tolist()

    def rescore_near_decisions(self, features: Sequence[Dict[str, List[int]]], rows: List[List[float]],
                               decisions: Sequence, batch_size: int = 32) -> List[List[float]]:
        """``rows`` with each one near one of ``decisions`` (:func:`near_decision`) replaced by the
        float32 model's probabilities for its features; :attr:`rescored` counts them."""
        from d2t_metrics.models import run_batched

        near = [i for i, row in enumerate(rows) if near_decision(row, self.entailment_index, decisions)]
        self.rescored = len(near)
        if not near:
            return rows
        exact = run_batched([features[i] for i in near], [len(features[i]["input_ids"]) for i in near], self._predict_exact,
                            batch_size=batch_size, desc="NLI (float32)", show_progress=False)
        rows = list(rows)
        for i, row in zip(near, exact):
            rows[i] = row
        return rows

    def _predict_exact(self, features: Sequence[Dict[str, List[int]]]) -> List[List[float]]:
        import torch

        from d2t_metrics.models import load_model

        if self._exact is None:
            self._exact = load_model(self.name, task="sequence-classification", device=str(self.device), dtype=torch.float32)[1]
        batch = self._pad(features)
        with torch.inference_mode():
            logits = self._exact(**batch).logits
        return torch.softmax(logits.float(), dim=-1).cpu().tolist()

    def predict_batch(self, premises: Sequence[str], hypotheses: Sequence[str]) -> List[List[float]]:
        """Label probabilities (in ``self.labels`` order) for one batch of pairs."""
        return self.predict_features(self.tokenize(premises, hypotheses))

    def __call__(self, premises: Sequence[str], hypotheses: Sequence[str], batch_size: int = 32, show_progress: bool = True,
                 backend: str = "torch", exact_near: Optional[Sequence] = None) -> List["PairProbabilities"]:
        """Probabilities for every pair, computed on length-sorted batches, in
        input order; over-long pairs are windowed (module docstring). ``backend="onnx"``:
        the same batches run by ONNX Runtime on the CPU. ``exact_near``: the decisions the
        caller makes, ``"argmax"`` or an entailment threshold each; when the model does not run
        in float32, each window within :data:`EXACT_MARGIN` of one of them is scored again by a
        float32 copy of the model (:meth:`rescore_near_decisions`)."""
        from d2t_metrics.models import run_batched

        if len(premises) != len(hypotheses):
            raise ValueError(f"got {len(premises)} premises but {len(hypotheses)} hypotheses")
        # Identical pairs (the same output of several systems, repeated fact
        # sentences) are scored once.
        index: Dict[Tuple[str, str], int] = {}
        where = [index.setdefault((p, h), len(index)) for p, h in zip(premises, hypotheses)]
        pairs = list(index)
        # Tokenized once; sorting by exact token length pads least.
        plans = self._plan([p for p, _ in pairs], [h for _, h in pairs]) if pairs else []
        features = [f for feats, _, _ in plans for f in feats]
        predict = self.predict_features_onnx if backend == "onnx" else self.predict_features
        rows = run_batched(features, [len(f["input_ids"]) for f in features], predict,
                           batch_size=batch_size, desc="NLI", show_progress=show_progress)
        self.rescored = 0
        if exact_near is not None and backend != "onnx" and str(self.model.dtype) != "torch.float32":
            rows = self.rescore_near_decisions(features, rows, exact_near, batch_size)
        unique, k = [], 0
        for feats, owners, truncated in plans:
            best = reduce_windows(rows[k : k + len(feats)], owners, self.entailment_index)
            unique.append(PairProbabilities(best, truncated=truncated, windows=len(feats)))
            k += len(feats)
        return [unique[i] for i in where]

    def as_dict(self, probs: Sequence[float]) -> "LabelProbabilities":
        return LabelProbabilities(
            {name: float(p) for name, p in zip(self.labels, probs)},
            truncated=getattr(probs, "truncated", False), windows=getattr(probs, "windows", 1),
        )

    def is_entailed(self, probs: Sequence[float]) -> bool:
        """A check passes when entailment is the most likely label (Dušek & Kasner, 2020)."""
        return max(range(len(probs)), key=lambda i: probs[i]) == self.entailment_index


class PairProbabilities(list):
    """One pair's label probabilities (a list in the scorer's label order) and
    how the pair was read: ``truncated`` (a part of it was cut unseen) and
    ``windows`` (forward passes it took; 1 when it fit)."""

    def __init__(self, probs: Sequence[float], truncated: bool = False, windows: int = 1):
        super().__init__(probs)
        self.truncated = bool(truncated)
        self.windows = int(windows)


class LabelProbabilities(dict):
    """``{label: probability}`` of one pair, with ``truncated`` and ``windows``
    as on :class:`PairProbabilities`."""

    def __init__(self, probs: Dict[str, float], truncated: bool = False, windows: int = 1):
        super().__init__(probs)
        self.truncated = bool(truncated)
        self.windows = int(windows)


# CJK full stops are not followed by a space
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n+")


def near_decision(probs: Sequence[float], entailment_index: int, decisions: Sequence,
                  margin: float = EXACT_MARGIN) -> bool:
    """Whether a row of label probabilities lies within ``margin`` (in log-probability) of one of
    ``decisions``: ``"argmax"`` (its two most likely labels) or an entailment threshold."""
    logs = [math.log(max(float(p), 1e-45)) for p in probs]
    for decision in decisions:
        if decision == "argmax":
            top = sorted(logs, reverse=True)
            if len(top) > 1 and top[0] - top[1] < 2 * margin:  # each may move by the margin, the other way
                return True
        elif abs(logs[entailment_index] - math.log(max(float(decision), 1e-45))) < margin:
            return True
    return False


def split_sentences(text: str) -> List[str]:
    """Sentences of ``text``: split after ``. ! ?`` followed by white space, after ``。！？``, and at line breaks."""
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text)) if s]


def pack(sentences: Sequence[str], lengths: Sequence[int], budget: int) -> List[str]:
    """Consecutive sentences joined into parts of at most ``budget`` tokens
    (by their separate counts; a sentence is never split here)."""
    parts: List[str] = []
    used = 0
    for sentence, n in zip(sentences, lengths):
        if parts and used + n <= budget:
            parts[-1] += " " + sentence
            used += n
        else:
            parts.append(sentence)
            used = n
    return parts


def reduce_windows(rows: Sequence[Sequence[float]], owners: Sequence[int], entailment_index: int) -> List[float]:
    """The row that decides a windowed pair: per hypothesis part, the premise
    window with the highest entailment probability (a part is entailed if any
    window entails it); over parts, the one whose best row has the lowest (the
    hypothesis is entailed only if every part is)."""
    best: Dict[int, Sequence[float]] = {}
    for row, part in zip(rows, owners):
        if part not in best or row[entailment_index] > best[part][entailment_index]:
            best[part] = row
    return list(min(best.values(), key=lambda row: row[entailment_index]))
