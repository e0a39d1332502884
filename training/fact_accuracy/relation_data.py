"""Training data and dev scores of fact_accuracy's relation classifier
(``metrics/fact_accuracy/relations.py``, which finds the candidates and marks
the pairs the classifier reads).

**Training data (distant supervision, as Mintz et al. 2009 and the paper's
Sec. 3).** For each WebNLG lexicalization, each sentence in which both the
subject and the object of one of the entry's triples appear gives a
positive example labelled with the triple's predicate. An entity "appears"
when its words, or the words the corpus gives for it in that
lexicalization (the ``<reference>`` mentions of the enriched XML, pronouns
excepted), occur in the sentence; overlapping matches go to the longest. If
two triples link the same two mentions the first one (corpus order) labels
them. Negatives (``none``) are the other candidate pairs of those sentences
(the reversed positive pairs included), ``negative_ratio`` (1.0) of them per
positive, sampled with a fixed seed; a pair of two table entities that some
triple of the entry links is never a negative. Predicates with fewer than
``min_examples`` (20) positive examples are dropped (their examples are not
used, neither as positives nor as ``none``, which would be false).

:func:`relation_scores` gives the classifier's dev scores (accuracy,
macro-F1, relation precision/recall/F1) over such examples.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple

from metrics.fact_accuracy.relations import MAX_CANDIDATES
from metrics.fact_accuracy.relations import MAX_PAIRS
from metrics.fact_accuracy.relations import NONE
from metrics.fact_accuracy.relations import PRONOUNS
from metrics.fact_accuracy.relations import Mention
from metrics.fact_accuracy.relations import candidate_pairs
from metrics.fact_accuracy.relations import candidates
from metrics.fact_accuracy.relations import entity_forms
from metrics.fact_accuracy.relations import find_entities
from metrics.fact_accuracy.relations import mark
from metrics.fact_accuracy.relations import parse_sentences

NEGATIVE_RATIO = 1.0
MIN_EXAMPLES = 20


def relation_scores(gold: Sequence[str], predicted: Sequence[str]) -> Dict[str, Any]:
    """Accuracy, macro-F1 over the labels seen (gold or predicted, ``none``
    included), and micro precision/recall/F1 of the relations (a pair that is
    ``none`` in gold or prediction is no relation)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    n = len(gold)
    if n == 0:
        return {"pairs": 0, "accuracy": None, "macro_f1": None, "relation_precision": None, "relation_recall": None, "relation_f1": None}
    f1s = []
    for label in sorted(set(gold) | set(predicted)):
        tp = sum(g == p == label for g, p in zip(gold, predicted))
        fp = sum(p == label != g for g, p in zip(gold, predicted))
        fn = sum(g == label != p for g, p in zip(gold, predicted))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    correct = sum(g == p != NONE for g, p in zip(gold, predicted))
    said = sum(p != NONE for p in predicted)
    true = sum(g != NONE for g in gold)
    precision = correct / said if said else 0.0
    recall = correct / true if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"pairs": n, "accuracy": round(sum(g == p for g, p in zip(gold, predicted)) / n, 4), "macro_f1": round(sum(f1s) / len(f1s), 4),
            "relation_precision": round(precision, 4), "relation_recall": round(recall, 4), "relation_f1": round(f1, 4)}


# ---------------------------------------------------------------- training data (distant supervision)


def _mention_forms(entity: str, references: Dict[str, str], mentions: Dict[str, str]) -> List[str]:
    """An entity's phrases in one lexicalization: its own forms plus the corpus's
    mentions of it there (pronouns excepted)."""
    forms = entity_forms(entity)
    for tag, ent in references.items():
        text = " ".join((mentions.get(tag) or "").split())
        bare = re.sub(r"\s*'\s*s$", "", text.lower())
        if ent == entity and text and bare not in PRONOUNS and any(ch.isalnum() for ch in text):
            forms.append(text)
    return list(dict.fromkeys(forms))


def _example(sentence: str, subject: Mention, obj: Mention, label: str) -> Dict[str, Any]:
    text, lo, hi = mark(sentence, subject, obj)
    return {"text": text, "lo": lo, "hi": hi, "label": label, "subject": subject.text, "object": obj.text}


def build_examples(entries: Sequence, nlp, labels: Optional[Sequence[str]] = None, negative_ratio: float = NEGATIVE_RATIO,
                   min_examples: int = MIN_EXAMPLES, seed: int = 13, max_candidates: int = MAX_CANDIDATES,
                   max_pairs: int = MAX_PAIRS, batch_size: int = 128) -> Tuple[List[Dict[str, Any]], List[str], Dict[str, Any]]:
    """Relation classification examples from WebNLG entries
    (``d2t_metrics.datasets.WebNLGEntry``) by distant supervision (module docstring).

    Returns ``(examples, labels, stats)``: each example is a dict with the
    marked ``text``, its ``lo``/``hi`` (:func:`mark`), ``label``, ``subject``
    and ``object``; ``labels`` is ``none`` then the predicates kept (those
    with at least ``min_examples`` positives, or the given ``labels``, e.g.
    the training set's for a dev set); ``stats`` counts what was built.
    """
    if negative_ratio < 0 or not math.isfinite(negative_ratio):
        raise ValueError(f"negative_ratio must be a finite number >= 0, got {negative_ratio}")
    jobs = []  # (entry, lexicalization index)
    texts = []
    for entry in entries:
        for i, text in enumerate(entry.lexicalizations):
            jobs.append((entry, i))
            texts.append(text)
    parsed = parse_sentences(nlp, texts, batch_size=batch_size)
    sentences = []  # (sentence text, positives [(s, o, predicate)], negative pool)
    n_sentences = 0
    for (entry, i), sents in zip(jobs, parsed):
        triples = [(t.subject, t.predicate, t.object) for t in entry.table.to_triples()]
        linked = {(s, o) for s, _, o in triples}
        refs = entry.references[i] if i < len(entry.references) else {}
        ments = entry.mentions[i] if i < len(entry.mentions) else {}
        forms = {e: _mention_forms(e, refs, ments) for e in dict.fromkeys(x for s, _, o in triples for x in (s, o))}
        for sent in sents:
            n_sentences += 1
            found = find_entities(sent.text, forms)
            positives, taken = [], set()
            for s, p, o in triples:
                ms, mo = found.get(s), found.get(o)
                if ms is None or mo is None or ms.overlaps(mo) or (ms, mo) in taken:
                    continue
                taken.add((ms, mo))
                positives.append((ms, mo, p))
            if not positives:
                continue
            cands = candidates(sent, list(found.values()), max_candidates)
            pool = [(a, b) for a, b in candidate_pairs(cands, max_pairs)
                    if (a, b) not in taken and (a.entity, b.entity) not in linked]
            sentences.append((sent.text, positives, pool))
    counts = Counter(p for _, positives, _ in sentences for _, _, p in positives)
    if labels is None:
        labels = [NONE] + sorted(p for p, c in counts.items() if c >= min_examples and p != NONE)
    else:
        labels = list(labels)
        if NONE not in labels:
            raise ValueError(f"the labels must include {NONE!r}")
    keep = set(labels) - {NONE}
    rng = random.Random(seed)
    examples: List[Dict[str, Any]] = []
    n_pos = n_neg = dropped = 0
    for text, positives, pool in sentences:
        kept = [(s, o, p) for s, o, p in positives if p in keep]
        dropped += len(positives) - len(kept)
        for s, o, p in kept:
            examples.append(_example(text, s, o, p))
        n_negative = min(len(pool), int(round(negative_ratio * len(kept))))
        for a, b in rng.sample(pool, n_negative):
            examples.append(_example(text, a, b, NONE))
        n_pos += len(kept)
        n_neg += n_negative
    rng.shuffle(examples)
    label_counts = Counter(e["label"] for e in examples)
    stats = {"entries": len(entries), "texts": len(texts), "sentences": n_sentences, "sentences_with_positives": len(sentences),
             "positives": n_pos, "negatives": n_neg, "dropped_positives": dropped, "predicates_seen": len(counts),
             "labels": len(labels), "negative_ratio": negative_ratio, "min_examples": min_examples,
             "label_counts": {label: label_counts.get(label, 0) for label in labels}}
    return examples, labels, stats
