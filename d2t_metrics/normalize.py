"""Text normalization of table values and predicates for verbalization and linearization.

Underscores become spaces, camelCase predicates are split, surrounding quotes
are stripped, and unicode is kept intact (``São_Paulo`` → ``São Paulo``).
"""

from __future__ import annotations

import re

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


def normalize_predicate(text: str) -> str:
    """A predicate as words: ``birthPlace`` → ``birth place``, keeping acronyms (``ICAO``)."""
    words = split_camel_case(normalize_entity(text)).split(" ")
    return " ".join(w if (w.isupper() and len(w) > 1) else w.lower() for w in words)
