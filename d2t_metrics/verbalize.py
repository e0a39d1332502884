"""Turning triples into sentences: per-predicate templates with a back-off.

A template is a string with ``<subject>`` and ``<object>`` placeholders, e.g.
``"<subject> was born in <object>."``. A predicate may map to one template or,
for value-specific wording (E2E ``familyFriendly`` yes/no), to a dict from
normalized value to template with ``"*"`` as the fallback.

Without a template the back-off is used, as in Dušek & Kasner (2020):
``The <predicate> of <subject> is <object>.``
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Dict, List, Mapping, Optional, Tuple, Union

from .normalize import normalize_entity, normalize_predicate
from .tables import Table, Triple, parse_table

BACKOFF_TEMPLATE = "The <predicate> of <subject> is <object>."
# The shipped sets in priority order (a later set's wording wins for a
# predicate both have): attribute-value names, WebNLG 3.0 predicates that WebNLG
# 2017's training data lacks, WebNLG 2017 predicates, E2E slots.
DEFAULT_TEMPLATE_SETS = ("attribute_value", "webnlg_v3", "webnlg", "e2e")
TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

TemplateSpec = Union[str, Mapping[str, str]]


def _capitalize_first(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


PLACEHOLDERS = ("<subject>", "<object>", "<predicate>")


_ARTICLE = re.compile(r"\b([Aa])n? (<subject>|<object>)")


def _indefinite_article(word: str) -> str:
    # By the first letter: right for "an actor", "a test pilot"; not for
    # "an hour" or "a university", which templates rarely meet.
    return "an" if word[:1].lower() in "aeiou" else "a"


def fill_template(template: str, subject: str, predicate: str, obj: str) -> str:
    """Fill a template's placeholders and capitalize the sentence's first letter.

    The indefinite article before a placeholder agrees with the value
    (``a <object>`` with ``actor`` gives ``an actor``). A value that ends the
    sentence with its own period (``Jr.``) does not get a second one.

    >>> fill_template("<subject> is <object>.", "the winner", "winner", "Sammy Davis Jr.")
    'The winner is Sammy Davis Jr.'
    >>> fill_template("<subject> was a <object>.", "Jane Doe", "occupation", "actor")
    'Jane Doe was an actor.'
    """
    values = {"<subject>": subject, "<object>": obj}

    def agree(match):
        article = _indefinite_article(values[match.group(2)])
        return (article.capitalize() if match.group(1) == "A" else article) + " " + match.group(2)

    text = _ARTICLE.sub(agree, template)
    text = text.replace("<subject>", subject).replace("<object>", obj).replace("<predicate>", predicate)
    text = " ".join(text.split())
    if text.endswith("..") and not text.endswith("..."):
        text = text[:-1]
    return _capitalize_first(text)


def load_templates(name_or_path: str) -> Dict[str, TemplateSpec]:
    """Templates from a shipped set (``"webnlg"``, ``"e2e"``) or a JSON file path."""
    path = name_or_path
    if not os.path.isfile(path):
        path = os.path.join(TEMPLATE_DIR, f"{name_or_path}.json")
    if not os.path.isfile(path):
        raise ValueError(f"no template set {name_or_path!r}: pass 'webnlg', 'e2e' or a JSON file path")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data.get("templates", data)


class Verbalizer:
    """Verbalizes triples with templates, falling back to :data:`BACKOFF_TEMPLATE`.

    >>> v = Verbalizer({"birthPlace": "<subject> was born in <object>."})
    >>> v(Triple("Alan_Bean", "birthPlace", "Wheeler,_Texas"))
    'Alan Bean was born in Wheeler, Texas.'
    >>> v(Triple("Alan_Bean", "almaMater", '"UT Austin, B.S. 1955"'))
    'The alma mater of Alan Bean is UT Austin, B.S. 1955.'
    """

    def __init__(self, templates: Optional[Mapping[str, TemplateSpec]] = None, backoff: str = BACKOFF_TEMPLATE):
        self.templates: Dict[str, TemplateSpec] = dict(templates or {})
        # Predicates are matched case- and space-insensitively ("eatType" == "eat type").
        self._index = {self._key(k): v for k, v in self.templates.items()}
        self.backoff = backoff

    @staticmethod
    def _key(predicate: str) -> str:
        return normalize_predicate(predicate).lower().replace(" ", "")

    @classmethod
    def from_names(cls, *names: str) -> "Verbalizer":
        """A verbalizer over shipped template sets, e.g. ``Verbalizer.from_names("webnlg", "e2e")``."""
        merged: Dict[str, TemplateSpec] = {}
        for name in names:
            merged.update(load_templates(name))
        return cls(merged)

    def template_for(self, triple: Triple) -> str:
        spec = self._index.get(self._key(triple.predicate))
        if spec is None:
            return self.backoff
        if isinstance(spec, str):
            return spec
        value = normalize_entity(triple.object).lower()
        return spec.get(value) or spec.get("*") or self.backoff

    def source_of(self, triple: Triple) -> str:
        """``"template"`` or ``"backoff"``: what verbalizes ``triple`` (a learned verbalizer
        adds ``"learned"``, :mod:`d2t_metrics.learned_verbalizer`)."""
        return "backoff" if self.template_for(triple) is self.backoff else "template"

    def prepare(self, tables, show_progress: bool = False) -> None:
        """Nothing to prepare for templates; a learned verbalizer writes the sentences of
        ``tables`` (lists of triples) here, in batches."""

    def table_sentences(self, triples) -> List[Tuple[str, str]]:
        """``(sentence, source)`` per triple of one table (see :meth:`source_of`)."""
        return [(self(t), self.source_of(t)) for t in triples]

    def __call__(self, triple: Triple) -> str:
        return fill_template(
            self.template_for(triple),
            normalize_entity(triple.subject),
            normalize_predicate(triple.predicate),
            normalize_entity(triple.object),
        )

    def verbalize_table(self, table: Table, subject: Optional[str] = None) -> List[str]:
        """One sentence per fact of the table (attribute-value tables use their name as subject)."""
        return [self(t) for t in table.to_triples(subject=subject)]

    def verbalize_text(self, table: Table, subject: Optional[str] = None) -> str:
        """All the table's sentences joined by spaces (the premise of a hallucination check)."""
        return " ".join(self.verbalize_table(table, subject=subject))


@functools.lru_cache(maxsize=4)
def default_verbalizer(*names: str) -> Verbalizer:
    """A shared verbalizer over shipped template sets (default: :data:`DEFAULT_TEMPLATE_SETS`)."""
    return Verbalizer.from_names(*(names or DEFAULT_TEMPLATE_SETS))


def verbalize(table, backoff_only: bool = False) -> List[str]:
    """One sentence per fact of ``table`` (any form :func:`~d2t_metrics.tables.parse_table` reads).

    Uses the shipped attribute-value, WebNLG and E2E templates, or only
    :data:`BACKOFF_TEMPLATE` with ``backoff_only=True`` (Dušek & Kasner's
    *Backoff* setup).

    >>> verbalize("name[Blue Spice], eatType[pub], area[riverside]")
    ['Blue Spice is a pub.', 'Blue Spice is located in the riverside area.']
    >>> verbalize("Alan_Bean | birthPlace | Wheeler,_Texas", backoff_only=True)
    ['The birth place of Alan Bean is Wheeler, Texas.']
    >>> verbalize({"name": "Jane Doe", "born": "December 22, 1965", "occupation": "actor"})
    ['Jane Doe was born December 22, 1965.', 'Jane Doe was an actor.']
    """
    verbalizer = Verbalizer() if backoff_only else default_verbalizer()
    return verbalizer.verbalize_table(parse_table(table))
