"""When two facts say the same thing, and the factual accuracy of one text.

Values (subjects and objects) are compared by what they denote, not by how
they are written:

* **text**: Unicode NFKC, accents dropped, case folded; underscores, quotes
  and punctuation become spaces; a leading article (*the*, *a*, *an*) and a
  trailing disambiguation in brackets (``Bananaman_(TV_series)``) are dropped.
  ``"Aarhus_Airport"`` = ``aarhus airport`` = ``the Aarhus Airport``.
* **dates**: ISO (``2005-07-14``, ``2005-07``), ``July 14, 2005``,
  ``14 July 2005``, ``14th of July 2005``, ``Jul. 14 2005``, ``July 2005``,
  ``2005/07/14`` and ``14/07/2005`` (a ``d/m/y`` or ``m/d/y`` date is read
  only when one of its first two numbers is above 12; otherwise it is
  ambiguous and compared as text). A date matches only a date with the same
  year, month and day (a missing part must be missing on both sides); a bare
  year is a number, so ``2005`` does not match ``2005-07-14``.
* **numbers with units**: ``1,200 m`` = ``1200.0 metres`` = ``1.2 km``.
  Thousands separators, decimals, a sign, scale words (*thousand*,
  *million*, *billion*), number words up to twenty, currency signs and
  common units (length, area, mass, duration, temperature names, percent)
  are read; units of one dimension are converted to a base unit (metres,
  square metres, kilograms, seconds) and values compared with a relative
  tolerance of 1e-6, so rounding (``2.8 km`` for ``2776 m``) does not match.
  A number without a unit matches the same number with any unit: WebNLG
  values leave the unit to the predicate (``runwayLength | 2776.0``).
  Numbers of different dimensions, or with different unknown units, do not
  match.

``fuzzy_threshold`` (0 < t ≤ 1) lets two *texts* match when their
normalized forms have a ``difflib.SequenceMatcher`` ratio of at least ``t``
(compared only up to :data:`FUZZY_MAX_CHARS` characters: the ratio is
quadratic). Dates and numbers never match fuzzily: ``1201`` is not ``1200``,
and neither do texts whose digits differ (``101 Helena`` is not ``102 Helena``).
The metric's default is :data:`DEFAULT_FUZZY_THRESHOLD`; ``Matcher()`` alone
is exact.

Relations are compared through the schema: camelCase, underscores, case,
punctuation and auxiliary verbs are ignored (``birthPlace`` = ``birth_place``
= ``Birth place``; an OpenIE phrase ``was born in`` = ``is born in``).

The score of one text follows Goodrich et al. (2019), eq. 1: of the facts
extracted from the generated text, only those whose (subject, relation) also
occurs in the ground truth can be verified or refuted; accuracy is the share
of those whose object matches too (:func:`score_facts`).
"""

from __future__ import annotations

import datetime
import difflib
import functools
import re
import unicodedata
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from .facts import Fact

# Longer strings are compared exactly: difflib's ratio is quadratic in the length.
FUZZY_MAX_CHARS = 300
# fact_accuracy's default fuzzy_threshold: it tolerates the learned extractors'
# slips in copying a name ("Ururuña" for "Uruguay"). Chosen on WebNLG 2017 dev
# extraction F1 (end-to-end 67.1 -> 70.0, on system-style texts 53.8 -> 59.2,
# OpenIE 39.8 -> 41.7; metric card), not on the human ratings.
DEFAULT_FUZZY_THRESHOLD = 0.85
# Longer strings are never read as dates or numbers (the patterns are linear,
# but a value this long is a sentence, not a quantity).
QUANTITY_MAX_CHARS = 80
RELATIVE_TOLERANCE = 1e-6

# ---------------------------------------------------------------------------
# Text

_QUOTES = "\"'`´“”‘’«»„‚"
_NON_WORD = re.compile(r"[^\w]+")
_SPACES = re.compile(r"\s+")
_ARTICLES = ("the ", "a ", "an ")
_TRAILING_BRACKETS = re.compile(r"\s*\([^()]*\)\s*$")


def _fold(text: str) -> str:
    """NFKC, accents dropped, case folded."""
    text = unicodedata.normalize("NFKC", text)
    decomposed = unicodedata.normalize("NFD", text)
    text = "".join(c for c in decomposed if not unicodedata.combining(c))
    return text.casefold()


def normalize_text(value: str) -> str:
    """The text form of a value: ``"The_Aarhus_Airport (Denmark)"`` → ``aarhus airport``."""
    text = value.replace("_", " ").strip()
    # A trailing "(...)" disambiguates an entity name in WebNLG/DBpedia; the text never says it.
    stripped = _TRAILING_BRACKETS.sub("", text)
    if stripped.strip():
        text = stripped
    text = _fold(text)
    text = _NON_WORD.sub(" ", text).replace("_", " ")
    text = _SPACES.sub(" ", text).strip()
    for article in _ARTICLES:
        if text.startswith(article) and len(text) > len(article):
            text = text[len(article):]
            break
    return text


# ---------------------------------------------------------------------------
# Dates

_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4, "may": 5,
    "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sep": 9, "sept": 9,
    "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_DATE_PATTERNS = [
    re.compile(rf"^{_YEAR}-(?P<mnum>\d{{1,2}})-(?P<day>\d{{1,2}})$"),
    re.compile(rf"^{_YEAR}/(?P<mnum>\d{{1,2}})/(?P<day>\d{{1,2}})$"),
    re.compile(rf"^{_YEAR}-(?P<mnum>\d{{1,2}})$"),
    re.compile(rf"^{_MONTH} {_DAY},? {_YEAR}$"),
    re.compile(rf"^(?:the )?{_DAY} (?:of )?{_MONTH},? {_YEAR}$"),
    re.compile(rf"^{_MONTH},? (?:of )?{_YEAR}$"),
]
_NUMERIC_DATE = re.compile(r"^(?P<a>\d{1,2})[/.](?P<b>\d{1,2})[/.](?P<year>\d{4})$")


class Date(NamedTuple):
    year: int
    month: Optional[int]
    day: Optional[int]


def _valid_date(year: int, month: Optional[int], day: Optional[int]) -> Optional[Date]:
    try:
        datetime.date(year, month or 1, day or 1)
    except ValueError:
        return None
    return Date(year, month, day)


def parse_date(value: str) -> Optional[Date]:
    """The date a value states, or ``None`` (see the module docstring for the forms read)."""
    if len(value) > QUANTITY_MAX_CHARS:
        return None
    text = _fold(value.replace("_", " ")).strip().strip(_QUOTES).strip()
    text = _SPACES.sub(" ", text.replace(",", ", ")).replace(" ,", ",")
    text = _SPACES.sub(" ", text).strip(" .")
    for pattern in _DATE_PATTERNS:
        m = pattern.match(text)
        if m:
            groups = m.groupdict()
            month = int(groups["mnum"]) if groups.get("mnum") else _MONTHS[groups["month"]] if groups.get("month") else None
            day = int(groups["day"]) if groups.get("day") else None
            return _valid_date(int(groups["year"]), month, day)
    m = _NUMERIC_DATE.match(text)
    if m:
        a, b = int(m.group("a")), int(m.group("b"))
        if a > 12 >= b:
            return _valid_date(int(m.group("year")), b, a)
        if b > 12 >= a:
            return _valid_date(int(m.group("year")), a, b)
        if a == b:
            return _valid_date(int(m.group("year")), a, b)
    return None


# ---------------------------------------------------------------------------
# Numbers and units

# unit spelling -> (dimension, factor to the dimension's base unit)
_UNITS: Dict[str, Tuple[str, float]] = {}


def _add_units(dimension: str, factor: float, *names: str) -> None:
    for name in names:
        _UNITS[name] = (dimension, factor)


_add_units("length", 1.0, "m", "metre", "metres", "meter", "meters")
_add_units("length", 1000.0, "km", "kilometre", "kilometres", "kilometer", "kilometers")
_add_units("length", 0.01, "cm", "centimetre", "centimetres", "centimeter", "centimeters")
_add_units("length", 0.001, "mm", "millimetre", "millimetres", "millimeter", "millimeters")
_add_units("length", 0.3048, "ft", "foot", "feet")
_add_units("length", 0.0254, "inch", "inches")
_add_units("length", 1609.344, "mi", "mile", "miles")
_add_units("area", 1.0, "m2", "m²", "sq m", "square metre", "square metres", "square meter", "square meters")
_add_units("area", 1e6, "km2", "km²", "sq km", "square kilometre", "square kilometres", "square kilometer", "square kilometers")
_add_units("area", 1e4, "ha", "hectare", "hectares")
_add_units("area", 2589988.110336, "sq mi", "square mile", "square miles", "mi2", "mi²")
_add_units("mass", 1.0, "kg", "kilogram", "kilograms", "kilogramme", "kilogrammes")
_add_units("mass", 0.001, "g", "gram", "grams", "gramme", "grammes")
_add_units("mass", 1000.0, "t", "tonne", "tonnes", "metric ton", "metric tons")
_add_units("mass", 0.45359237, "lb", "lbs", "pound weight")
_add_units("time", 1.0, "s", "sec", "secs", "second", "seconds")
_add_units("time", 60.0, "min", "mins", "minute", "minutes")
_add_units("time", 3600.0, "h", "hr", "hrs", "hour", "hours")
_add_units("time", 86400.0, "day", "days")
_add_units("celsius", 1.0, "°c", "c", "degc", "celsius", "degrees celsius", "degree celsius")
_add_units("fahrenheit", 1.0, "°f", "f", "degf", "fahrenheit", "degrees fahrenheit", "degree fahrenheit")
_add_units("kelvin", 1.0, "k", "kelvin", "kelvins")
_add_units("percent", 1.0, "%", "percent", "per cent")
_add_units("usd", 1.0, "$", "usd", "us$", "dollar", "dollars", "us dollars")
_add_units("eur", 1.0, "€", "eur", "euro", "euros")
_add_units("gbp", 1.0, "£", "gbp", "pound sterling", "pounds sterling")
_add_units("inhabitants_per_km2", 1.0, "inhabitants per square kilometre", "inhabitants per km2", "per km2", "/km2", "per square kilometre")

_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9}
_NUMBER_WORDS = {
    w: i for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER = re.compile(
    r"^(?P<cur>[$€£])?\s*(?P<sign>[-+−])?\s*(?P<cur2>[$€£])?\s*"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s*(?P<scale>thousand|million|billion|trillion|bn)\b)?(?P<gap>\s*)(?P<unit>.*)$"
)


class Quantity(NamedTuple):
    value: float  # in the base unit of the dimension
    dimension: str  # "" for a bare number; a dimension name, or "unit:<spelling>" for an unknown unit
    stated: Optional[float] = None  # the number as written, before conversion to the base unit


# An unknown unit: up to three words, maybe ending in a number ("out of 5").
_UNKNOWN_UNIT = re.compile(r"^[a-z°%$€£/]+(?: [a-z°%$€£/]+){0,2}(?: \d+)?$")


def _unit(spelling: str, spaced: bool = True) -> Optional[Tuple[str, float]]:
    """``(dimension, factor)`` of a unit; ``None`` when the words after a number
    are not a unit (a name such as ``3Arena``, or a sentence)."""
    unit = _SPACES.sub(" ", spelling.strip().strip(".").strip()).replace("^2", "2")
    if not unit:
        return ("", 1.0)
    if unit in _UNITS:
        return _UNITS[unit]
    if unit.startswith("(") and unit.endswith(")"):
        return _unit(unit[1:-1], spaced)
    if spaced and len(unit) <= 30 and _UNKNOWN_UNIT.match(unit):
        return (f"unit:{unit}", 1.0)
    return None


def parse_quantity(value: str) -> Optional[Quantity]:
    """The number (with its unit) a value states, or ``None``."""
    if len(value) > QUANTITY_MAX_CHARS:
        return None
    text = _fold(value.replace("_", " ")).strip().strip(_QUOTES).strip()
    text = _SPACES.sub(" ", text)
    if text in _NUMBER_WORDS:
        return Quantity(float(_NUMBER_WORDS[text]), "")
    first, _, rest = text.partition(" ")
    if first in _NUMBER_WORDS and rest:
        unit = _unit(rest)
        if unit is not None and not unit[0].startswith("unit:"):
            return Quantity(float(_NUMBER_WORDS[first]) * unit[1], unit[0], float(_NUMBER_WORDS[first]))
        return None
    m = _NUMBER.match(text)
    if not m:
        return None
    try:
        number = float(m.group("num").replace(",", ""))
    except ValueError:
        return None
    if m.group("sign") in ("-", "−"):
        number = -number
    if m.group("scale"):
        number *= _SCALES[m.group("scale")]
    currency = m.group("cur") or m.group("cur2")
    unit = _unit(m.group("unit"), spaced=bool(m.group("gap")))
    if unit is None:
        return None
    if currency:
        if unit[0]:
            return None  # "$5 km": not a quantity we read
        unit = _UNITS[currency]
    dimension, factor = unit
    return Quantity(number * factor, dimension, number)


def same_quantity(a: Quantity, b: Quantity) -> bool:
    if a.dimension and b.dimension and a.dimension != b.dimension:
        return False
    if not a.dimension or not b.dimension:
        # A table often gives the bare number ("89.0") where the text names its
        # unit ("89 minutes"): compare the numbers as written.
        a, b = Quantity(_as_stated(a), ""), Quantity(_as_stated(b), "")
    scale = max(abs(a.value), abs(b.value), 1e-12)
    return abs(a.value - b.value) <= RELATIVE_TOLERANCE * scale


def _as_stated(q: Quantity) -> float:
    return q.value if q.stated is None else q.stated


# ---------------------------------------------------------------------------
# Values


class Value(NamedTuple):
    """A value read for comparison: its kind (``date``, ``number``, ``text``)
    and its canonical data (a :class:`Date`, a :class:`Quantity`, or the
    normalized text)."""

    kind: str
    data: object
    text: str  # the normalized text form, for display and fuzzy matching

    def key(self) -> str:
        """A string equal for values that match exactly (a bare number and the
        same number with a unit share it: units are compared pairwise)."""
        if self.kind == "date":
            d = self.data
            return f"date:{d.year:04d}-{d.month or 0:02d}-{d.day or 0:02d}"
        if self.kind == "number":
            return f"number:{_as_stated(self.data):.9g}"
        return f"text:{self.text}"


@functools.lru_cache(maxsize=65536)
def read_value(value: str) -> Value:
    """A value as a :class:`Value`: a date, else a number, else text."""
    text = normalize_text(value)
    date = parse_date(value)
    if date is not None:
        return Value("date", date, text)
    quantity = parse_quantity(value)
    if quantity is not None:
        return Value("number", quantity, text)
    return Value("text", text, text)


# ---------------------------------------------------------------------------
# Relations

_AUXILIARIES = frozenset(
    "is was are were be been being am 's has have had having will would shall should can could may might must "
    "do does did also".split()
)
_CAMEL_1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAMEL_2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def relation_words(relation: str) -> List[str]:
    """``birthPlace`` → ``["birth", "place"]``; ``was born in`` → ``["born", "in"]``
    (auxiliary verbs dropped unless nothing else is left)."""
    text = _CAMEL_2.sub(" ", _CAMEL_1.sub(" ", relation.replace("_", " ")))
    words = normalize_text_keep_articles(text).split()
    content = [w for w in words if w not in _AUXILIARIES]
    return content or words


def normalize_text_keep_articles(text: str) -> str:
    text = _fold(text)
    text = _NON_WORD.sub(" ", text).replace("_", " ")
    return _SPACES.sub(" ", text).strip()


@functools.lru_cache(maxsize=16384)
def relation_key(relation: str) -> str:
    """The form in which two relations of one schema are equal: words joined without spaces."""
    return "".join(relation_words(relation[:QUANTITY_MAX_CHARS * 4]))


# ---------------------------------------------------------------------------
# The matcher


_DIGITS = re.compile(r"\d+")


class Matcher:
    """Compares values and relations (module docstring); ``fuzzy_threshold``
    in (0, 1] also lets texts match by ``difflib`` similarity."""

    def __init__(self, fuzzy_threshold: Optional[float] = None):
        if fuzzy_threshold is not None:
            if isinstance(fuzzy_threshold, bool) or not isinstance(fuzzy_threshold, (int, float)) or not 0.0 < float(fuzzy_threshold) <= 1.0:
                raise ValueError(f"fuzzy_threshold must be None or a number in (0, 1], got {fuzzy_threshold!r}")
            fuzzy_threshold = float(fuzzy_threshold)
        self.fuzzy_threshold = fuzzy_threshold

    def same_value(self, a: str, b: str) -> bool:
        va, vb = read_value(a), read_value(b)
        if va.kind == "date" or vb.kind == "date":
            return va.kind == vb.kind and va.data == vb.data
        if va.kind == "number" or vb.kind == "number":
            return va.kind == vb.kind and same_quantity(va.data, vb.data)
        if va.text == vb.text:
            return bool(va.text) or a.strip() == b.strip()
        return self._fuzzy(va.text, vb.text)

    def _fuzzy(self, a: str, b: str) -> bool:
        t = self.fuzzy_threshold
        if t is None or not a or not b or len(a) > FUZZY_MAX_CHARS or len(b) > FUZZY_MAX_CHARS:
            return False
        if _DIGITS.findall(a) != _DIGITS.findall(b):  # a number inside a name is exact: 101 Helena, 102 Helena
            return False
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        # the cheap upper bounds first
        return matcher.real_quick_ratio() >= t and matcher.quick_ratio() >= t and matcher.ratio() >= t

    @staticmethod
    def same_relation(a: str, b: str) -> bool:
        ka, kb = relation_key(a), relation_key(b)
        return ka == kb and (bool(ka) or a.strip() == b.strip())

    def same_subject_relation(self, f: Fact, g: Fact) -> bool:
        return self.same_relation(f.relation, g.relation) and self.same_value(f.subject, g.subject)

    def same_fact(self, f: Fact, g: Fact) -> bool:
        return self.same_subject_relation(f, g) and self.same_value(f.object, g.object)

    def fact_key(self, f: Fact) -> Tuple[str, str, str]:
        return (read_value(f.subject).key(), relation_key(f.relation), read_value(f.object).key())


# ---------------------------------------------------------------------------
# Scoring one text


def as_fact(item) -> Fact:
    """A :class:`Fact` from a Fact, a ``Triple`` or any ``(s, r, o[, evidence])`` sequence of strings."""
    if isinstance(item, Fact):
        return item
    if all(isinstance(getattr(item, k, None), str) for k in ("subject", "relation", "object", "evidence")):
        # a Fact of another copy of this module (evaluate loads the metric's files as its own)
        return Fact(item.subject, item.relation, item.object, item.evidence,
                    int(getattr(item, "start", -1)), int(getattr(item, "end", -1)))
    parts = list(item)
    if len(parts) not in (3, 4) or not all(isinstance(p, str) for p in parts):
        raise ValueError(f"a fact must be (subject, relation, object) strings, got {item!r}")
    return Fact(*parts)


def fact_dict(f: Fact, **extra) -> Dict[str, object]:
    """A fact as a JSON-ready dict (``evidence`` only when the extractor gave one, with its
    ``evidence_start`` and ``evidence_end`` in the text when it gave them)."""
    out: Dict[str, object] = {"subject": f.subject, "relation": f.relation, "object": f.object}
    if f.evidence:
        out["evidence"] = f.evidence
        if f.start >= 0:
            out["evidence_start"], out["evidence_end"] = f.start, f.end
    out.update(extra)
    return out


def unique_facts(facts: Iterable, matcher: Matcher) -> List[Fact]:
    """Facts in order, each stated once: F is a set in the paper (a text that
    repeats a fact does not count it twice)."""
    seen = set()
    out = []
    for item in facts:
        f = as_fact(item)
        key = matcher.fact_key(f)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


class _Index:
    """Facts grouped by relation key (and subject key when matching is exact),
    so that a text is compared with the facts that could match, not with all.
    Within a group, each distinct subject is compared once per query subject
    (a long text repeats its subjects: fuzzy comparisons are the cost)."""

    def __init__(self, facts: Sequence[Fact], matcher: Matcher):
        self.matcher = matcher
        self.groups: Dict[Tuple[str, ...], Dict[str, List[Tuple[int, Fact]]]] = {}
        for i, f in enumerate(facts):
            self.groups.setdefault(self._key(f), {}).setdefault(f.subject, []).append((i, f))
        self._subjects: Dict[Tuple[Tuple[str, ...], str], List[List[Tuple[int, Fact]]]] = {}

    def _key(self, f: Fact) -> Tuple[str, ...]:
        if self.matcher.fuzzy_threshold is None:
            return (relation_key(f.relation), read_value(f.subject).key())
        return (relation_key(f.relation),)

    def same_subject_relation(self, f: Fact) -> List[Fact]:
        key = self._key(f)
        subjects = self._subjects.get((key, f.subject))
        if subjects is None:
            subjects = [facts for subject, facts in self.groups.get(key, {}).items() if self.matcher.same_value(f.subject, subject)]
            self._subjects[(key, f.subject)] = subjects
        hits = sorted(p for facts in subjects for p in facts if self.matcher.same_relation(f.relation, p[1].relation))
        return [g for _, g in hits]


def score_facts(generated: Iterable, truth: Iterable, matcher: Optional[Matcher] = None) -> Dict[str, object]:
    """Goodrich et al.'s accuracy of one text, with its recall and explanation.

    ``generated``: the facts extracted from the generated text (F_gen);
    ``truth``: the ground-truth facts (F_gt: the table's, or the reference's).
    A generated fact is *verifiable* when a ground-truth fact has the same
    subject and relation; *supported* when one of those also has its object,
    *contradicted* otherwise (with the objects expected); the rest are
    *unverifiable*. ``score`` = supported / verifiable (``None`` when nothing
    is verifiable); ``recall`` = ground-truth facts found among the generated
    facts / ground-truth facts (``None`` without ground-truth facts).
    """
    matcher = matcher or Matcher()
    gen = unique_facts(generated, matcher)
    gt = unique_facts(truth, matcher)
    truth_index = _Index(gt, matcher)
    supported, contradicted, unverifiable = [], [], []
    for f in gen:
        candidates = truth_index.same_subject_relation(f)
        if not candidates:
            unverifiable.append(fact_dict(f))
        elif any(matcher.same_value(f.object, t.object) for t in candidates):
            supported.append(fact_dict(f))
        else:
            expected = []
            for t in candidates:
                if t.object not in expected:
                    expected.append(t.object)
            contradicted.append(fact_dict(f, expected=expected))
    gen_index = _Index(gen, matcher)
    found, missing = [], []
    for t in gt:
        hit = any(matcher.same_value(g.object, t.object) for g in gen_index.same_subject_relation(t))
        (found if hit else missing).append(t)
    verifiable = len(supported) + len(contradicted)
    return {
        "score": len(supported) / verifiable if verifiable else None,
        "recall": len(found) / len(gt) if gt else None,
        "verifiable": verifiable,
        "num_supported": len(supported),
        "num_contradicted": len(contradicted),
        "num_unverifiable": len(unverifiable),
        "num_generated": len(gen),
        "num_ground_truth": len(gt),
        "num_found": len(found),
        "supported": supported,
        "contradicted": contradicted,
        "unverifiable": unverifiable,
        "missing": [fact_dict(t) for t in missing],
        "generated": [fact_dict(f) for f in gen],
        "ground_truth": [fact_dict(t) for t in gt],
    }


def corpus_scores(examples: Sequence[Dict[str, object]]) -> Dict[str, object]:
    """Corpus figures from :func:`score_facts` results: ``accuracy`` and
    ``recall`` pooled over all facts (micro), ``mean_accuracy`` over the
    examples that have a score (macro), and the counts."""
    verifiable = sum(e["verifiable"] for e in examples)
    supported = sum(e["num_supported"] for e in examples)
    truth = sum(e["num_ground_truth"] for e in examples)
    found = sum(e["num_found"] for e in examples)
    scored = [e["score"] for e in examples if e["score"] is not None]
    return {
        "accuracy": supported / verifiable if verifiable else None,
        "mean_accuracy": sum(scored) / len(scored) if scored else None,
        "recall": found / truth if truth else None,
        "verifiable": verifiable,
        "supported": supported,
        "contradicted": sum(e["num_contradicted"] for e in examples),
        "unverifiable": sum(e["num_unverifiable"] for e in examples),
        "generated": sum(e["num_generated"] for e in examples),
        "ground_truth_facts": truth,
        "found": found,
        "scored_examples": len(scored),
    }
