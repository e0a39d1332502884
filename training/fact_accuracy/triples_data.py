"""Training pairs of fact_accuracy's end-to-end extractor (``python -m
training.fact_accuracy.train triples``): WebNLG texts in, their triples out,
in the task format of ``metrics/fact_accuracy/text_to_triples.py`` (its
:func:`prompt` and :func:`target`, shared with extraction).

Training lists each text's own predicates shuffled among distractors of its
category that the text does not state (:func:`hinted_relations`), and gives
a share of the texts as the WebNLG 2017 challenge's system outputs are
written (:func:`tokenized_lowercase`).
"""

from __future__ import annotations

import random
import re
from typing import Dict, List, Sequence, Tuple

from metrics.fact_accuracy.text_to_triples import prompt
from metrics.fact_accuracy.text_to_triples import target

_PUNCTUATION = re.compile(r"([,.;:!?()\"])")
_SPACES = re.compile(r"\s+")


def tokenized_lowercase(text: str) -> str:
    """``text`` as the WebNLG 2017 challenge's system outputs are written:
    lower-cased, punctuation split off by spaces (``"Aarhus, Denmark."`` →
    ``"aarhus , denmark ."``). Training on some texts in that form keeps the
    extractor from failing on them (it did: dev F1 63.7 on the corpus's texts,
    40.1 on the same texts in this form). Deliberately not
    ``d2t_metrics.tokenize.nltk_tokenize``: the shipped checkpoint was trained
    on this form, and its recorded command must reproduce that data."""
    return _SPACES.sub(" ", _PUNCTUATION.sub(r" \1 ", text.lower())).strip()


def category_relations(entries: Sequence) -> Dict[str, List[str]]:
    """Each WebNLG category's predicates (sorted), the pool of a prompt's distractors."""
    pools: Dict[str, set] = {}
    for entry in entries:
        pools.setdefault(entry.category, set()).update(t.predicate.strip() for t in entry.table)
    return {c: sorted(p) for c, p in pools.items()}


def hinted_relations(gold: Sequence[str], pool: Sequence[str], rng: random.Random, distractors: int) -> List[str]:
    """``gold``'s relations and up to ``distractors`` others drawn from ``pool``
    (how many: uniform in 0..distractors), shuffled."""
    names = list(dict.fromkeys(gold))
    others = [p for p in pool if p not in names]
    names += rng.sample(others, min(len(others), rng.randint(0, distractors)))
    rng.shuffle(names)
    return names


def training_pairs(entries: Sequence, seed: int = 13, per_entry: int = 1, listed_share: float = 0.0,
                   distractors: int = 3, lowercase_share: float = 0.0) -> List[Tuple[str, str]]:
    """(prompt, target) pairs from WebNLG entries (``d2t_metrics.datasets.WebNLGEntry``):
    ``per_entry`` lexicalizations of each entry, chosen with ``seed``, paired
    with the entry's triples in the corpus order, which the texts mostly follow.
    A ``listed_share`` of the prompts (drawn with ``seed``) list the entry's
    relations among distractors of its category (:func:`hinted_relations`);
    the others are the plain prompt, so one model serves both. A
    ``lowercase_share`` of the texts are given as :func:`tokenized_lowercase`
    writes them (the targets keep the corpus's spelling)."""
    for name, share in (("listed_share", listed_share), ("lowercase_share", lowercase_share)):
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {share}")
    if distractors < 0:
        raise ValueError(f"distractors must be >= 0, got {distractors}")
    rng = random.Random(seed)
    pools = category_relations(entries) if listed_share else {}
    pairs = []
    for entry in entries:
        texts = list(entry.lexicalizations)
        rng.shuffle(texts)
        triples = [(t.subject, t.predicate, t.object) for t in entry.table]
        for text in texts[:per_entry]:
            relations = None
            if listed_share and rng.random() < listed_share:
                relations = hinted_relations([p.strip() for _, p, _ in triples], pools[entry.category], rng, distractors)
            if lowercase_share and rng.random() < lowercase_share:
                text = tokenized_lowercase(text)
            pairs.append((prompt(text, relations), target(triples)))
    rng.shuffle(pairs)
    return pairs
