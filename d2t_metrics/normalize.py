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


def normalize_predicate(text: str) -> str:
    """A predicate as words: ``birthPlace`` → ``birth place``, keeping acronyms (``ICAO``)."""
    words = split_camel_case(normalize_entity(text)).split(" ")
    return " ".join(w if (w.isupper() and len(w) > 1) else w.lower() for w in words)
