"""The end-to-end extractor's task format: a text in, its facts out as
``subject | relation | object`` triples joined by `` ; ``.

Training (``train.py triples``) and extraction (``extractors.py``) build
their prompts here, so the two cannot drift apart. Entities are written as
words (``Aarhus_Airport`` → ``Aarhus Airport``) and relations keep the
schema's names (WebNLG predicates such as ``cityServed``): the relation is
compared through the schema, the entities through the matcher.
"""

from __future__ import annotations

import random
import re
from typing import Iterable, List, Sequence, Tuple

PROMPT = "Extract the facts stated in the text as subject | relation | object triples.\nText: {text}\nTriples:"
SEPARATOR = " ; "
_SPACES = re.compile(r"\s+")


def entity_words(value: str) -> str:
    """``Aarhus_Airport`` → ``Aarhus Airport``; ``"Aarhus, Denmark"`` → ``Aarhus, Denmark``."""
    text = _SPACES.sub(" ", value.replace("_", " ")).strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


def prompt(text: str) -> str:
    return PROMPT.format(text=_SPACES.sub(" ", text).strip())


def target(triples: Iterable[Tuple[str, str, str]]) -> str:
    return SEPARATOR.join(f"{entity_words(s)} | {p.strip()} | {entity_words(o)}" for s, p, o in triples)


def parse_triples(generated: str) -> List[Tuple[str, str, str]]:
    """The triples of a generated string; pieces that are not three non-empty
    fields are dropped, repeats kept once (a small model may loop)."""
    found: List[Tuple[str, str, str]] = []
    for piece in generated.split(";"):
        fields = [f.strip() for f in piece.split("|")]
        if len(fields) != 3 or not all(fields):
            continue
        triple = (fields[0], fields[1], fields[2])
        if triple not in found:
            found.append(triple)
    return found


def training_pairs(entries: Sequence, seed: int = 13, per_entry: int = 1) -> List[Tuple[str, str]]:
    """(prompt, target) pairs from WebNLG entries (``d2t_metrics.datasets.WebNLGEntry``):
    ``per_entry`` lexicalizations of each entry, chosen with ``seed``, paired
    with the entry's triples in the corpus order, which the texts mostly follow."""
    rng = random.Random(seed)
    pairs = []
    for entry in entries:
        texts = list(entry.lexicalizations)
        rng.shuffle(texts)
        triples = [(t.subject, t.predicate, t.object) for t in entry.table]
        for text in texts[:per_entry]:
            pairs.append((prompt(text), target(triples)))
    rng.shuffle(pairs)
    return pairs
