"""Table and triple types, and parsers for every table form users hand over.

A :class:`Table` keeps its entries in the form they came in:

* :class:`Triple` entries (WebNLG RDF triples), or
* :class:`AttributeValue` entries (E2E meaning representations, WikiBio/ToTTo
  attribute-value lists and dicts).

Methods that need triples call :meth:`Table.to_triples`, which uses the
``name`` slot (or a given subject) as the subject of attribute-value records.
Raw strings are kept exactly as given (underscores and quotes included),
because PARENT's parity depends on the raw values; :mod:`d2t_metrics.normalize`
cleans them for verbalization.
"""

from __future__ import annotations

import functools
import gc
import math
import numbers
import re
import reprlib
from dataclasses import dataclass, field
from typing import Any, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

# Error messages quote the offending input. A bounded repr keeps a megabyte
# string, a 100k-deep list or a self-referencing dict from turning the message
# itself into a crash (RecursionError) or a wall of text.
_SHORT = reprlib.Repr()
_SHORT.maxstring = 80
_SHORT.maxother = 80
_SHORT.maxlevel = 3
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 6


def short_repr(obj: Any) -> str:
    """``repr(obj)``, cut to about 80 characters and 3 levels of nesting."""
    return _SHORT.repr(obj)



class _TripleFields(NamedTuple):
    subject: str
    predicate: str
    object: str


class Triple(_TripleFields):
    """A WebNLG RDF triple. Members must be strings (checked: a triple of
    numbers would otherwise flow on into templates and models as text)."""

    __slots__ = ()

    def __new__(cls, subject: str, predicate: str, object: str):  # noqa: A002 - the RDF term
        for role, member in (("subject", subject), ("predicate", predicate), ("object", object)):
            if not isinstance(member, str):
                raise ValueError(f"a triple's {role} must be a str, got {type(member).__name__}: {short_repr(member)}")
        return super().__new__(cls, subject, predicate, object)

    def __str__(self) -> str:
        return f"{self.subject} | {self.predicate} | {self.object}"


class _AttributeValueFields(NamedTuple):
    attribute: str
    value: str


class AttributeValue(_AttributeValueFields):
    """One record of an attribute-value table (an E2E slot, a WikiBio field)."""

    __slots__ = ()

    def __new__(cls, attribute: str, value: str):
        for role, member in (("attribute", attribute), ("value", value)):
            if not isinstance(member, str):
                raise ValueError(f"an attribute-value pair's {role} must be a str, got {type(member).__name__}: {short_repr(member)}")
        return super().__new__(cls, attribute, value)

    def __str__(self) -> str:
        return f"{self.attribute}[{self.value}]"


Entry = Union[Triple, AttributeValue]

# The kinds of table a parser can return; they decide how a table is
# linearized, verbalized and how its E2E-specific rules apply.
TRIPLES = "triples"
E2E_MR = "e2e"
ATTRIBUTE_VALUE = "attribute_value"


@dataclass(frozen=True)
class Table:
    """An ordered, immutable list of table entries of one kind."""

    entries: Tuple[Entry, ...]
    kind: str = TRIPLES
    # The raw input this table was parsed from, kept for error messages and
    # round trips; not part of equality.
    source: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "entries", tuple(self.entries))
        if self.kind not in (TRIPLES, E2E_MR, ATTRIBUTE_VALUE):
            raise ValueError(f"unknown table kind {self.kind!r}")
        expected = Triple if self.kind == TRIPLES else AttributeValue
        for entry in self.entries:
            if not isinstance(entry, expected):
                raise ValueError(f"a {self.kind} table holds {expected.__name__} entries, got {entry!r}")

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def __getitem__(self, i):
        return self.entries[i]

    @property
    def is_triples(self) -> bool:
        return self.kind == TRIPLES

    def subject(self) -> Optional[str]:
        """The entity the table is about: the first subject, or the ``name`` value."""
        if self.kind == TRIPLES:
            return self.entries[0].subject if self.entries else None
        for entry in self.entries:
            if entry.attribute.strip().lower() == "name":
                return entry.value
        return None

    def values(self) -> List[str]:
        """What a text names of the table: each triple's subject and object, or each record's value."""
        if self.kind == TRIPLES:
            return [v for t in self.entries for v in (t.subject, t.object)]
        return [entry.value for entry in self.entries]

    def to_triples(self, subject: Optional[str] = None, keep_name: bool = False) -> List[Triple]:
        """Triples for this table.

        Attribute-value records become ``(subject, attribute, value)``, with the
        ``name`` slot's value as the subject (as Dušek & Kasner did for E2E).
        The ``name`` record itself is dropped unless ``keep_name``: it is the
        subject of every other fact already. Tables with no ``name`` use the
        given ``subject``, or ``"it"``.
        """
        if self.kind == TRIPLES:
            return list(self.entries)
        subj = subject or self.subject() or "it"
        triples = []
        for entry in self.entries:
            if entry.attribute.strip().lower() == "name" and not keep_name:
                continue
            triples.append(Triple(subj, entry.attribute, entry.value))
        if not triples and self.entries:
            # A table that is only a name still states one fact.
            triples.append(Triple(subj, "name", subj))
        return triples

    def to_obj(self) -> Union[str, List[Any]]:
        """A plain, JSON-serializable form that :func:`parse_table` reads back into an equal table.

        Triples give ``"s | p | o"`` strings (``[s, p, o]`` lists where a member
        contains ``|``), E2E tables their MR string, attribute-value tables
        ``[attribute, value]`` pairs.
        """
        if self.kind == TRIPLES:
            return [list(t) if any("|" in part or "<br" in part or "\n" in part for part in t) else str(t) for t in self.entries]
        if self.kind == E2E_MR:
            return str(self)
        return [[e.attribute, e.value] for e in self.entries]

    def to_strings(self) -> List[str]:
        """Each entry in its canonical string form (``s | p | o`` or ``attr[value]``)."""
        return [str(e) for e in self.entries]

    def __str__(self) -> str:
        if self.kind == TRIPLES:
            return "<br>".join(self.to_strings())
        return ", ".join(self.to_strings())


# ---------------------------------------------------------------------------
# Parsers

# A wrapper dict ({"table": ...}) may hold another; deeper than this is a
# mistake (or a self-referencing dict), reported instead of recursing.
MAX_WRAPPER_DEPTH = 8
WRAPPER_KEYS = ("triples", "table", "mr")


def _without_gc_pauses(parse):
    """Run a parser with the cyclic garbage collector paused.

    A big table allocates one small tuple per entry, and every few hundred
    allocations the collector walks the objects of the whole process: with
    models loaded that made a 1 MB table take seconds instead of tenths. The
    tuples hold only strings, so no cycle is missed."""

    @functools.wraps(parse)
    def wrapper(*args, **kwargs):
        if not gc.isenabled():
            return parse(*args, **kwargs)
        gc.disable()
        try:
            return parse(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper


def _where(index: Optional[int]) -> str:
    return "" if index is None else f"example {index}: "


def parse_triple(text: str, index: Optional[int] = None) -> Triple:
    """Parse one WebNLG ``"subject | predicate | object"`` string."""
    if not isinstance(text, str):
        raise ValueError(f"{_where(index)}a triple string must be a str, got {type(text).__name__}: {short_repr(text)}")
    parts = [p.strip() for p in text.split("|")]
    if len(parts) != 3:
        raise ValueError(
            f"{_where(index)}malformed triple {short_repr(text)}: expected 'subject | predicate | object' "
            f"with exactly two '|' separators, found {len(parts) - 1}"
        )
    if not all(parts):
        raise ValueError(f"{_where(index)}malformed triple {short_repr(text)}: subject, predicate and object must be non-empty")
    return Triple._make(parts)  # three str: no need for the checking constructor


@_without_gc_pauses
def parse_mr(text: str, index: Optional[int] = None) -> Table:
    """Parse an E2E meaning representation ``name[The Eagle], eatType[coffee shop]``.

    Split at each ``]`` with ``str`` methods: linear in the input, whatever it
    holds (a regular expression with overlapping ``\\s*`` runs was quadratic on
    long runs of spaces).
    """
    if not isinstance(text, str):
        raise ValueError(f"{_where(index)}an E2E MR must be a str, got {type(text).__name__}: {short_repr(text)}")
    stripped = text.strip()
    # tnt1/tnt2 E2E outputs carry surrounding single quotes.
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == "'":
        stripped = stripped[1:-1].strip()
    where = f"{_where(index)}malformed E2E meaning representation {short_repr(text)}"

    def near(pos: int) -> str:
        return short_repr(stripped[pos:pos + 30])

    parts = stripped.split("]")
    tail = parts.pop()  # what follows the last "]"
    entries, pos = [], 0  # pos: where the current part starts in `stripped`
    for k, part in enumerate(parts):
        body, body_pos = part, pos
        if k:
            lead = len(part) - len(part.lstrip())
            if not part.startswith(",", lead):
                slot = stripped[slot_start:pos].strip()
                raise ValueError(f"{where}: expected ',' after {short_repr(slot)}, found {near(pos + lead)}")
            body, body_pos = part[lead + 1 :], pos + lead + 1
        name, bracket, value = body.partition("[")
        if not bracket or "[" in value or "," in name:
            raise ValueError(f"{where} near {near(body_pos)}: expected 'slot[value], ...'")
        attr, value = name.strip(), value.strip()
        if not attr:
            raise ValueError(f"{where}: a slot has no name near {short_repr(stripped[body_pos:body_pos + 30].strip())}")
        if not value:
            raise ValueError(f"{where}: slot {short_repr(attr)} has an empty value")
        entries.append(AttributeValue._make((attr, value)))  # both str: no need for the checking constructor
        slot_start = body_pos
        pos += len(part) + 1
    if tail.strip():
        if tail.strip() == "," and entries:
            raise ValueError(f"{where}: trailing ','")
        if entries and not tail.lstrip().startswith(","):
            raise ValueError(f"{where}: expected ',' after {short_repr(stripped[slot_start:pos].strip())}, found {near(pos + len(tail) - len(tail.lstrip()))}")
        raise ValueError(f"{where} near {near(pos)}: expected 'slot[value], ...'")
    if not entries:
        raise ValueError(f"{_where(index)}empty E2E meaning representation {short_repr(text)}")
    return Table(entries, kind=E2E_MR, source=text)


# No \s* around the tag: a pattern that can start a match at every space of
# a long run of spaces made splitting quadratic; the parts are stripped instead.
_TRIPLE_SEPARATOR = re.compile(r"<br\s*/?>|\n")


def _split_triple_string(text: str) -> List[str]:
    """Triple strings joined by ``<br>`` (``<br/>``, ``<br />``) or newlines."""
    return [p for p in (p.strip() for p in _TRIPLE_SEPARATOR.split(text)) if p]


def _value_string(attr: str, value: Any, item: Any, index: Optional[int]) -> str:
    """A table value as a string: str as is, finite numbers written out."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if isinstance(value, numbers.Integral):
            return str(int(value))
        if not math.isfinite(float(value)):
            raise ValueError(f"{_where(index)}attribute-value pair {short_repr(item)}: the value of {short_repr(attr)} is {value!r}, not a usable number")
        return str(float(value))
    raise ValueError(f"{_where(index)}attribute-value pair {short_repr(item)} must be (str, str)")


def _entry_from_sequence(item: Sequence, index: Optional[int]) -> Entry:
    if len(item) == 3:
        values = list(item)
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f"{_where(index)}triple {short_repr(item)} must hold three strings")
        values = [v.strip() for v in values]
        if not all(values):
            raise ValueError(f"{_where(index)}triple {short_repr(item)} has an empty member")
        return Triple(*values)
    if len(item) == 2:
        attr, value = item
        if not isinstance(attr, str):
            raise ValueError(f"{_where(index)}attribute-value pair {short_repr(item)} must be (str, str)")
        if not attr.strip():
            raise ValueError(f"{_where(index)}attribute-value pair {short_repr(item)} has an empty attribute")
        return AttributeValue(attr.strip(), _value_string(attr, value, item, index))
    raise ValueError(
        f"{_where(index)}table entry {short_repr(item)} has {len(item)} members; expected a triple (3) or an attribute-value pair (2)"
    )


def _unwrap(table: Any, index: Optional[int]) -> Any:
    """The table inside ``{"table": ...}`` / ``{"triples": ...}`` / ``{"mr": ...}`` wrappers.

    Only a dict with that one key is a wrapper: ``{"name": "X", "table": "round"}``
    is an attribute-value table whose attributes happen to include ``table``."""
    depth = 0
    while isinstance(table, dict) and len(table) == 1 and next(iter(table)) in WRAPPER_KEYS:
        depth += 1
        if depth > MAX_WRAPPER_DEPTH:
            raise ValueError(
                f"{_where(index)}table wrapped in more than {MAX_WRAPPER_DEPTH} nested "
                f"{{'table'|'triples'|'mr': ...}} dicts (or a dict that contains itself)"
            )
        table = next(iter(table.values()))
    return table


def _dict_entries(table: dict, index: Optional[int]) -> List[Entry]:
    if set(table) == {"subject", "predicate", "object"}:
        return [_entry_from_sequence((table["subject"], table["predicate"], table["object"]), index)]
    entries: List[Entry] = []
    for attr, value in table.items():
        if value is None:
            # An absent attribute: a datasets column of dicts with differing
            # keys gives every row all the keys, the missing ones as None.
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if v is None:
                raise ValueError(f"{_where(index)}attribute {short_repr(attr)} has a None among its values {short_repr(value)}")
            entries.append(_entry_from_sequence((attr, v), index))
    return entries


def _list_entries(table: Sequence, index: Optional[int]) -> List[Entry]:
    entries: List[Entry] = []
    for item in table:
        if item is None:
            raise ValueError(f"{_where(index)}table entry is None in {short_repr(table)}")
        if isinstance(item, (Triple, AttributeValue)):
            entries.append(item)
        elif isinstance(item, str):
            for part in _split_triple_string(item):
                entries.append(parse_triple(part, index))
        elif isinstance(item, (list, tuple)):
            entries.append(_entry_from_sequence(item, index))
        elif isinstance(item, dict) and {"subject", "predicate", "object"} <= set(item):
            entries.append(_entry_from_sequence((item["subject"], item["predicate"], item["object"]), index))
        elif isinstance(item, dict) and {"attribute", "value"} <= set(item):
            entries.append(_entry_from_sequence((item["attribute"], item["value"]), index))
        else:
            raise ValueError(f"{_where(index)}cannot read table entry {short_repr(item)} of type {type(item).__name__}")
    return entries


def _checked(entries: List[Entry], kind: str, source: Any, index: Optional[int]) -> Table:
    if not entries:
        raise ValueError(f"{_where(index)}empty table: {short_repr(source)} has no entries")
    if kind == ATTRIBUTE_VALUE and not any(e.value for e in entries):
        raise ValueError(f"{_where(index)}table {short_repr(source)} has no values: every entry's value is empty")
    return Table(entries, kind=kind, source=source)


@_without_gc_pauses
def parse_table(table: Any, index: Optional[int] = None) -> Table:
    """Parse any supported table form into a :class:`Table`.

    Accepted forms:

    * a :class:`Table` (returned as is);
    * a WebNLG string ``"s | p | o"``, or several joined by ``<br>`` or newlines;
    * an E2E meaning representation ``"name[The Eagle], eatType[pub]"``;
    * a list of such triple strings, of ``(s, p, o)`` triples or :class:`Triple`;
    * a list of ``(attribute, value)`` pairs or :class:`AttributeValue`;
    * a dict ``{attribute: value}`` (a list value yields one record per item;
      a ``None`` value means the attribute is absent, as Arrow fills the keys
      a row lacks; numbers are written out, NaN and infinity are refused);
    * a dict whose only key is ``"triples"``, ``"table"`` or ``"mr"``, holding
      one of the above.

    Raises ``ValueError`` naming ``index`` and the offending input when the
    table is ``None``, empty or malformed. Parsing is linear in the input.
    """
    table = _unwrap(table, index)
    if isinstance(table, Table):
        _checked(list(table.entries), table.kind, table, index)  # an empty Table is refused like any empty table
        return table
    if table is None:
        raise ValueError(f"{_where(index)}table is None")
    if isinstance(table, str):
        if not table.strip():
            raise ValueError(f"{_where(index)}empty table string")
        # No "|" but a bracket: an E2E MR (a malformed one gets the MR parser's message).
        if "|" not in table and "[" in table:
            return parse_mr(table, index)
        return _checked([parse_triple(t, index) for t in _split_triple_string(table)], TRIPLES, table, index)
    if isinstance(table, dict):
        entries = _dict_entries(table, index)
        kind = TRIPLES if entries and isinstance(entries[0], Triple) else ATTRIBUTE_VALUE
        return _checked(entries, kind, table, index)
    if isinstance(table, (list, tuple)):
        entries = _list_entries(table, index)
        kinds = {type(e) for e in entries}
        if len(kinds) > 1:
            raise ValueError(f"{_where(index)}table mixes triples and attribute-value pairs: {short_repr(table)}")
        return _checked(entries, TRIPLES if Triple in kinds else ATTRIBUTE_VALUE, table, index)
    raise ValueError(f"{_where(index)}cannot read a table from {type(table).__name__}: {short_repr(table)}")


def parse_tables(tables: Iterable[Any], n: Optional[int] = None, name: str = "tables") -> List[Table]:
    """Parse a list of tables, checking the count against ``n`` when given."""
    if tables is None:
        raise ValueError(f"{name} is None; pass one table per prediction")
    if isinstance(tables, (str, bytes, dict, Table)) or not isinstance(tables, Iterable):
        raise ValueError(f"{name} must be a list with one table per prediction, got {type(tables).__name__}: {short_repr(tables)}")
    tables = list(tables)
    if n is not None and len(tables) != n:
        raise ValueError(f"got {n} predictions but {len(tables)} {name}; pass exactly one table per prediction")
    return [parse_table(t, i) for i, t in enumerate(tables)]
