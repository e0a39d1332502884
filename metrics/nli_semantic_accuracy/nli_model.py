"""The NLI scorer: a sequence-pair classifier loaded once, run on length-sorted batches.

``NLIScorer`` maps the model's ``config.id2label`` onto NLI labels (any order,
any case; 3-way entailment/neutral/contradiction or 2-way entailment /
not_entailment) and returns one probability row per (premise, hypothesis)
pair. Pairs are sorted by length and padded per batch, so a corpus runs in a
handful of forward passes instead of one per pair.

Inputs longer than the model's maximum length are truncated on the premise
side (``truncation="only_first"``): the hypothesis (a fact sentence, or the
text in the hallucination check) is kept whole. A hypothesis that alone is too
long to fit is truncated as well (``longest_first``) instead of failing.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

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
    checkpoint directory (``checkpoints/nli_semantic_accuracy``).
    """

    def __init__(self, model: str = "roberta-large-mnli", device: Optional[str] = None, dtype=None, max_length: Optional[int] = None, metric: str = "nli_semantic_accuracy"):
        from d2t_metrics.models import load_model

        self.name = model
        self.tokenizer, self.model = load_model(model, task="sequence-classification", device=device, dtype=dtype, metric=metric)
        self.labels = map_nli_labels(self.model.config.id2label)
        self.entailment_index = self.labels.index(ENTAILMENT)
        self.max_length = max_length or self._model_max_length()

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
        """Unpadded features of sentence pairs, the premise truncated to fit ``max_length``."""
        tok = self.tokenizer
        enc = tok(list(premises), list(hypotheses), truncation=False, add_special_tokens=True)
        features = [{k: enc[k][i] for k in enc.keys()} for i in range(len(premises))]
        too_long = [i for i, f in enumerate(features) if len(f["input_ids"]) > self.max_length]
        if too_long:
            hyp_lens = [len(ids) for ids in tok([hypotheses[i] for i in too_long], add_special_tokens=False)["input_ids"]]
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

    def predict_features(self, features: Sequence[Dict[str, List[int]]]) -> List[List[float]]:
        """Label probabilities (in ``self.labels`` order) for one batch of tokenized pairs."""
        import torch

        batch = self.tokenizer.pad(list(features), return_tensors="pt").to(self.device)
        with torch.inference_mode():
            logits = self.model(**batch).logits
        return torch.softmax(logits.float(), dim=-1).cpu().tolist()

    def predict_batch(self, premises: Sequence[str], hypotheses: Sequence[str]) -> List[List[float]]:
        """Label probabilities (in ``self.labels`` order) for one batch of pairs."""
        return self.predict_features(self.tokenize(premises, hypotheses))

    def __call__(self, premises: Sequence[str], hypotheses: Sequence[str], batch_size: int = 32, show_progress: bool = True) -> List[List[float]]:
        """Probabilities for every pair, computed on length-sorted batches, in input order."""
        from d2t_metrics.models import run_batched

        if len(premises) != len(hypotheses):
            raise ValueError(f"got {len(premises)} premises but {len(hypotheses)} hypotheses")
        # Identical pairs (the same output of several systems, repeated fact
        # sentences) are scored once.
        index: Dict[Tuple[str, str], int] = {}
        where = [index.setdefault((p, h), len(index)) for p, h in zip(premises, hypotheses)]
        pairs = list(index)
        # Tokenized once; sorting by exact token length pads least.
        features = self.tokenize([p for p, _ in pairs], [h for _, h in pairs]) if pairs else []
        lengths = [len(f["input_ids"]) for f in features]
        unique = run_batched(features, lengths, self.predict_features, batch_size=batch_size, desc="NLI", show_progress=show_progress)
        return [unique[i] for i in where]

    def as_dict(self, probs: Sequence[float]) -> Dict[str, float]:
        return {name: float(p) for name, p in zip(self.labels, probs)}

    def is_entailed(self, probs: Sequence[float]) -> bool:
        """A check passes when entailment is the most likely label (Dušek & Kasner, 2020)."""
        return max(range(len(probs)), key=lambda i: probs[i]) == self.entailment_index
