"""Tables as flat strings for sequence-to-sequence models.

Three styles:

``"questeval"`` (default)
    The exact input format of Data-QuestEval's QG/QA models (Rebuffel et al.,
    2021), reimplemented from the behaviour of ``linearize_e2e_input`` and
    ``LinearizeWebnlgInput`` in ThomasScialom/QuestEval (``questeval/utils.py``):

    * WebNLG triples are grouped by subject, in order of first appearance. Each
      group opens with ``entity [ <subject> ]`` and lists ``<predicate> [ <object> ]``
      for each of its triples; all items are joined by ``" , "``::

          entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ] , occupation [ Test pilot ]

      Subjects and objects are transliterated to ASCII (``unidecode``), lose one
      leading and one trailing double quote, have underscores turned into spaces
      and are tokenized with spaCy's English tokenizer, tokens joined by single
      spaces. Predicates are transliterated, lose surrounding double quotes,
      have whitespace runs turned into ``_`` and any ``( … )`` span removed
      (greedily, as the reference's regex does). ``lowercase=True`` lowercases
      subjects and objects only, as the reference does. The reference also has
      an ``ethnicgroup`` rule that cannot fire on cleaned objects; it is omitted.

    * E2E meaning representations become ``slot [ value ]`` items joined by
      ``" , "``, with no cleaning or tokenization::

          name [ The Eagle ] , eatType [ coffee shop ] , food [ Japanese ]

      As in the reference, which builds a dict, a repeated slot keeps its first
      position and its last value.

    Checked identical to the reference's output on all 2,085 distinct WebNLG
    2017 test and human-evaluation triple sets (with and without ``lowercase``)
    and all 630 E2E test MRs.

    * Attribute-value tables (WikiBio, ToTTo) use the E2E form, keeping repeated
      attributes (the reference has no such format; this is its natural extension).

``"tags"``
    ``<H> subject <R> predicate <T> object`` per triple, as in Kale & Rastogi
    (2020)'s T5 WebNLG inputs, with normalized entities and predicates.

``"plain"``
    The table's own string form: ``s | p | o<br>…`` or ``slot[value], …``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import warnings
from typing import Any, Callable, Iterable, List, Optional, Sequence, Union

from .normalize import normalize_entity, normalize_predicate
from .tables import E2E_MR, TRIPLES, Table, Triple, parse_table

Tokenizer = Callable[[str], List[str]]

STYLES = ("questeval", "tags", "plain")


@functools.lru_cache(maxsize=1)
def _spacy_tokenizer():
    try:
        import spacy  # lazy: spaCy, heavy and only for the questeval style
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            "the Data-QuestEval linearization tokenizes with spaCy; install it with "
            "pip install 'd2t-metrics[questeval]', or pass tokenize=None (no tokenization) "
            "or your own tokenize=callable"
        ) from e
    # A blank English pipeline has the same tokenizer rules as en_core_web_sm,
    # which the reference runs, without loading any model weights.
    nlp = spacy.blank("en")
    return nlp.tokenizer


def spacy_tokenize(text: str) -> List[str]:
    """spaCy's English tokenization of ``text``, as the Data-QuestEval reference uses."""
    return [t.text for t in _spacy_tokenizer()(text)]


@functools.lru_cache(maxsize=1)
def _unidecode():
    try:
        from unidecode import unidecode  # lazy: unidecode, optional (the questeval extra)

        return unidecode
    except ImportError:
        warnings.warn(
            "unidecode is not installed (pip install 'd2t-metrics[questeval]'); "
            "falling back to stripping accents, which differs from Data-QuestEval for some characters",
            stacklevel=3,
        )

        def strip_accents(text: str) -> str:
            decomposed = unicodedata.normalize("NFKD", text)
            return decomposed.encode("ascii", "ignore").decode("ascii")

        return strip_accents


def to_ascii(text: str) -> str:
    """ASCII transliteration (``São Paulo`` → ``Sao Paulo``) as Data-QuestEval applies it."""
    return _unidecode()(text)


_EDGE_QUOTES = re.compile(r'^"|"$')
_PARENS = re.compile(r"\(.*\)")
_WHITESPACE = re.compile(r"\s+")


def questeval_clean_entity(text: str, lowercase: bool = False) -> str:
    """A subject or object before tokenization: ASCII, one edge quote each side removed, ``_`` → space."""
    text = to_ascii(text)
    if lowercase:
        text = text.lower()
    text = _EDGE_QUOTES.sub("", text)
    return text.replace("_", " ")


def questeval_clean_predicate(text: str) -> str:
    """A predicate: ASCII, edge quotes removed, whitespace → ``_``, ``( … )`` removed.

    >>> questeval_clean_predicate("ReferenceNumber in the National Register of Historic Places")
    'ReferenceNumber_in_the_National_Register_of_Historic_Places'
    >>> questeval_clean_predicate("height (in metres)")
    'height_'
    """
    text = to_ascii(text)
    text = _EDGE_QUOTES.sub("", text)
    text = _WHITESPACE.sub("_", text)
    text = _PARENS.sub("", text)
    return text.strip()


def _resolve_tokenizer(tokenize: Union[str, Tokenizer, None]) -> Tokenizer:
    if tokenize is None:
        return lambda text: text.split()
    if tokenize == "spacy":
        return spacy_tokenize
    if callable(tokenize):
        return tokenize
    raise ValueError(f"tokenize must be 'spacy', None or a callable, got {tokenize!r}")


def linearize_triples_questeval(
    triples: Iterable[Triple],
    lowercase: bool = False,
    tokenize: Union[str, Tokenizer, None] = "spacy",
) -> str:
    """WebNLG triples in Data-QuestEval's format (see the module docstring).

    ``tokenize=None`` only splits on whitespace (no spaCy needed).

    >>> linearize_triples_questeval([Triple("Alan_Bean", "birthPlace", "Wheeler,_Texas")], tokenize=None)
    'entity [ Alan Bean ] , birthPlace [ Wheeler, Texas ]'
    """
    tok = _resolve_tokenizer(tokenize)

    def entity(text: str) -> str:
        return " ".join(tok(questeval_clean_entity(text.strip(), lowercase=lowercase)))

    groups: dict = {}
    for t in triples:
        groups.setdefault(entity(t.subject), []).append((questeval_clean_predicate(t.predicate.strip()), entity(t.object)))
    items = []
    for subject, facts in groups.items():
        items.append(f"entity [ {subject} ]")
        items.extend(f"{predicate} [ {obj} ]" for predicate, obj in facts)
    return " , ".join(items)


def linearize_slots_questeval(pairs: Sequence[Any], collapse_repeats: bool = True) -> str:
    """``slot [ value ]`` items joined by ``" , "`` (E2E in Data-QuestEval's format).

    With ``collapse_repeats`` a repeated slot keeps its first position and last value.

    >>> linearize_slots_questeval([("name", "The Eagle"), ("eatType", "coffee shop")])
    'name [ The Eagle ] , eatType [ coffee shop ]'
    """
    if collapse_repeats:
        merged: dict = {}
        for attribute, value in pairs:
            merged[attribute] = value
        pairs = list(merged.items())
    return " , ".join(f"{attribute} [ {value} ]" for attribute, value in pairs)


def linearize_tags(table: Table) -> str:
    """``<H> s <R> p <T> o`` per triple, with normalized entities and predicates.

    >>> linearize_tags(parse_table("Alan_Bean | birthPlace | Wheeler,_Texas"))
    '<H> Alan Bean <R> birth place <T> Wheeler, Texas'
    """
    return " ".join(
        f"<H> {normalize_entity(t.subject)} <R> {normalize_predicate(t.predicate)} <T> {normalize_entity(t.object)}"
        for t in table.to_triples()
    )


def linearize(
    table: Any,
    style: str = "questeval",
    lowercase: bool = False,
    tokenize: Union[str, Tokenizer, None] = "spacy",
    index: Optional[int] = None,
) -> str:
    """One table (any form :func:`~d2t_metrics.tables.parse_table` reads) as a string.

    ``style`` is ``"questeval"``, ``"tags"`` or ``"plain"``; see the module docstring.
    ``lowercase`` and ``tokenize`` apply to WebNLG triples in the ``questeval`` style.

    >>> linearize("name[The Eagle], eatType[coffee shop], food[Japanese]")
    'name [ The Eagle ] , eatType [ coffee shop ] , food [ Japanese ]'
    """
    if style not in STYLES:
        raise ValueError(f"unknown linearization style {style!r}; choose one of {STYLES}")
    table = parse_table(table, index)
    if style == "plain":
        return str(table)
    if style == "tags":
        return linearize_tags(table)
    if table.kind == TRIPLES:
        return linearize_triples_questeval(table.entries, lowercase=lowercase, tokenize=tokenize)
    return linearize_slots_questeval(table.entries, collapse_repeats=table.kind == E2E_MR)


def linearize_all(tables: Iterable[Any], **kwargs) -> List[str]:
    """:func:`linearize` over a list of tables; a bad table raises ``ValueError`` with its index."""
    return [linearize(t, index=i, **kwargs) for i, t in enumerate(tables)]
