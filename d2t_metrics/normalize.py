"""Text normalization of table values and predicates for verbalization and linearization.

Underscores become spaces, camelCase predicates are split, surrounding quotes
are stripped, and unicode is kept intact (``São_Paulo`` → ``São Paulo``).
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, Tuple

_CAMEL_1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAMEL_2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")
_SPACES = re.compile(r"\s+")
_QUOTES = "\"'“”‘’"


def normalize_entity(text: str) -> str:
    """``"Carl_A._Wirtanen"`` → ``Carl A. Wirtanen``; ``"\\"1923 OAA907 XC\\""`` → ``1923 OAA907 XC``."""
    text = text.replace("_", " ")
    text = _SPACES.sub(" ", text).strip()
    if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    return text


# Predicates whose subject and object may trade places without changing the fact (``spouse``,
# ``relatedMeanOfTransportation``, ``neighboringMunicipality``): a swap of their roles is no error.
_SYMMETRIC_PREDICATE = re.compile(r"spouse|partner|related|associated|sister|neighbo|twin|sibling|ally|rival", re.IGNORECASE)


def symmetric_predicate(predicate: str) -> bool:
    """Whether ``predicate`` reads the same with subject and object swapped (a name list, not a rule)."""
    return bool(_SYMMETRIC_PREDICATE.search(predicate))


def names_an_entity(value: str) -> bool:
    """Whether a table value names something rather than stating a literal: not quoted, and
    beginning with a letter (``Levan_Khomeriki``, not ``1988``, ``2006-12-31`` or ``"solo_singer"``)."""
    value = value.strip()
    return not value.startswith('"') and bool(re.match(r"[^\W\d_]", normalize_entity(value)))


def exchange_spans(text: str, a: Tuple[int, int], b: Tuple[int, int],
                   say: Callable[[str, str], str] = lambda piece, replaced: piece):
    """``text`` with its pieces at the character spans ``a`` and ``b`` trading places (a fact's
    subject and object, for a role swap), each piece said as ``say(piece, the piece it replaces)``
    gives it: ``(new text, span of the piece now first, span of the piece now second)``, or None
    when the spans overlap."""
    if a[0] < b[1] and b[0] < a[1]:
        return None
    first, second = sorted((a, b))
    said_first = say(text[second[0]: second[1]], text[first[0]: first[1]])
    said_second = say(text[first[0]: first[1]], text[second[0]: second[1]])
    out = text[: first[0]] + said_first + text[first[1]: second[0]] + said_second + text[second[1]:]
    start = second[0] + len(said_first) - (first[1] - first[0])
    return out, (first[0], first[0] + len(said_first)), (start, start + len(said_second))


def split_camel_case(text: str) -> str:
    """``birthPlace`` → ``birth Place``; ``ICAO_Location_Identifier`` → ``ICAO Location Identifier``."""
    text = text.replace("_", " ")
    text = _CAMEL_1.sub(" ", text)
    text = _CAMEL_2.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def settle_first_letter(text: str) -> str:
    """``text`` with the case of its first cased letter decided by the rest of the text: lower
    when no other letter is upper case, upper otherwise. Many systems write all in lower case
    and a sentence's first letter is the one case a writer (or a perturbation) may swap
    alone, so "alan bean was born ..." and "Alan bean was born ..." read the same (issue #38).
    Same length as ``text``: offsets into it are kept."""
    first = next((i for i, ch in enumerate(text) if ch.swapcase() != ch), None)
    if first is None:
        return text
    upper = any(ch.isupper() for ch in text[first + 1:])
    letter = text[first].upper() if upper else text[first].lower()
    # a letter whose other case is longer ("ß" → "SS") is left as it is: offsets must hold
    return text if len(letter) != 1 else text[:first] + letter + text[first + 1:]


# A text is written in lower case when at most this share of its words has an upper-case letter:
# a lower-case system output keeps a copied name's casing now and then ("... is located in
# İzmir, turkey"), and a cased text capitalizes at least each sentence's first word.
LOWER_CASE_SHARE = 0.1


def written_in_lower_case(text: str) -> bool:
    """Whether ``text`` is written as lower-case system outputs are: at most one word in ten
    (:data:`LOWER_CASE_SHARE`) with an upper-case letter, so that the one copied "İzmir" does
    not make a lower-case text read as cased (issue #38's ``lower_case``)."""
    words = text.split()
    return sum(1 for w in words if any(ch.isupper() for ch in w)) <= LOWER_CASE_SHARE * len(words)


def normalize_predicate(text: str) -> str:
    """A predicate as words: ``birthPlace`` → ``birth place``, keeping acronyms (``ICAO``)."""
    words = split_camel_case(normalize_entity(text)).split(" ")
    return " ".join(w if (w.isupper() and len(w) > 1) else w.lower() for w in words)


def entity_words(value: str) -> str:
    """``Aarhus_Airport`` → ``Aarhus Airport``; ``"Aarhus, Denmark"`` → ``Aarhus, Denmark``."""
    text = _SPACES.sub(" ", value.replace("_", " ")).strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


_SPACE_BEFORE = re.compile(r" +([,.;:!?)]|'s\b|n't\b)")
_SPACE_AFTER = re.compile(r"\( +")
# not after an initial ("carl a. wirtanen")
_SENTENCE_START = re.compile(r"(^|(?<!\b\w)[.!?] +)([a-z])")
# a bound on the work per text: WebNLG tables hold at most 14 values
MAX_RECASED_VALUES = 64
# A table value is recased only where it stands as whole words.
_WORD_EDGE = r"(?<![\w-]){}(?![\w-])"
# Python lower-cases the Turkish "İ" to "i" and a combining dot above; on an "i" or "j", which
# already carry a dot, it changes nothing a reader sees
_DOT_ABOVE = re.compile("(?<=[ij])\u0307+")


def _untokenized(text: str) -> str:
    return _SPACE_AFTER.sub("(", _SPACE_BEFORE.sub(r"\1", text))


def restore_form(text: str, values: Iterable[str] = (), lower: Callable[[str], str] = str.lower) -> str:
    """A text written as WebNLG 2017's system outputs are (lower-cased,
    punctuation split off) brought back towards ordinary writing, which the
    models read better (fact_accuracy's extractor: dev F1 79.4 on the corpus's texts against 73.4 on
    the same texts in that form): spaces before punctuation removed, the
    table's ``values`` given back their casing where they occur as whole
    words (longest first; a value is found in the text as ``lower`` writes it), and sentences
    capitalized. A text with any upper-case letter is returned as it is: its casing is the writer's."""
    if any(ch.isupper() for ch in text):
        return text
    out = _untokenized(text)
    cased = {entity_words(str(v)) for v in values if str(v)}
    for value in sorted((v for v in cased if v.lower() != v), key=len, reverse=True)[:MAX_RECASED_VALUES]:
        out = re.sub(_WORD_EDGE.format(re.escape(_untokenized(lower(value)))), lambda m: value, out)
    return _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), out)


def lower_case(text: str) -> str:
    """``text.lower()`` without the combining dot above that Python adds to an "i" for "İ"."""
    return _DOT_ABOVE.sub("", text.lower())


def read_case_free(text: str, values: Iterable[str] = ()) -> str:
    """``text`` in one casing whatever its writer's, and with one space between words: lower case,
    whitespace runs as one space, then restored (:func:`restore_form`: the table's ``values`` given
    back their casing, sentences capitalized, spaces before punctuation removed). "Alan Bean was born
    in Wheeler, Texas", its lower-case and its upper-case versions read the same; casing and spacing
    state no fact, so they cannot move a score (a doubled space would keep a value from its casing)."""
    return restore_form(" ".join(lower_case(text).split()), values, lower=lower_case)
