"""The end-to-end extractor's task format: a text in, its facts out as
``subject | relation | object`` triples joined by `` ; ``.

Training (``training/fact_accuracy/triples_data.py``, for
``python -m training.fact_accuracy.train triples``) and extraction
(``extractors.py``) build their prompts and targets here, so the two cannot
drift apart. Entities are written as
words (``Aarhus_Airport`` → ``Aarhus Airport``) and relations keep the
schema's names (WebNLG predicates such as ``cityServed``): the relation is
compared through the schema, the entities through the matcher.

A prompt may name the schema's relations to look for (``Relations: a, b``),
as schema-guided extractors do: the metric passes the input table's
predicates. Training lists each text's own predicates shuffled among
distractors of its category that the text does not state, so a listed
relation is not a promise that the text states it; an output that omits a
table fact should yield no fact for it. Without the line the model reads
the text against the whole schema it learned, which cannot name the
predicates of categories it never saw (a third of WebNLG 2017's test
inputs); with it, those names are in the prompt.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Tuple

from d2t_metrics.normalize import entity_words

PROMPT = "Extract the facts stated in the text as subject | relation | object triples.\nText: {text}\nTriples:"
RELATIONS_PROMPT = ("Extract the facts stated in the text as subject | relation | object triples.\n"
                    "Relations: {relations}\nText: {text}\nTriples:")
SEPARATOR = " ; "
# A table naming more relations than this is read without the list (the prompt
# would outgrow what the model was trained on: WebNLG tables have at most 7).
MAX_LISTED_RELATIONS = 24
MAX_RELATION_CHARS = 64
_SPACES = re.compile(r"\s+")


def listed_relations(relations: Optional[Iterable[str]]) -> List[str]:
    """The relations a prompt lists: whitespace-collapsed, commas removed (they
    separate the list), cut to :data:`MAX_RELATION_CHARS`, each once, in the
    given order; ``[]`` (no list) when none is left or there are more than
    :data:`MAX_LISTED_RELATIONS`."""
    out: Dict[str, None] = {}  # ordered and deduplicated
    for relation in relations or ():
        name = _SPACES.sub(" ", str(relation).replace(",", " ")).strip()[:MAX_RELATION_CHARS].strip()
        if name:
            out[name] = None
            if len(out) > MAX_LISTED_RELATIONS:
                return []  # a huge table stops here, not after reading all of it
    return list(out)


def prompt(text: str, relations: Optional[Iterable[str]] = None) -> str:
    """The extraction prompt for ``text``; with ``relations``, the schema-guided one listing them."""
    text = _SPACES.sub(" ", text).strip()
    names = listed_relations(relations)
    if names:
        return RELATIONS_PROMPT.format(relations=", ".join(names), text=text)
    return PROMPT.format(text=text)


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


