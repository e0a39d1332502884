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

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union


class Triple(NamedTuple):
    subject: str
    predicate: str
    object: str

    def __str__(self) -> str:
        return f"{self.subject} | {self.predicate} | {self.object}"


class AttributeValue(NamedTuple):
    attribute: str
    value: str

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

_MR_SLOT = re.compile(r"\s*([^\[\],]+?)\s*\[([^\[\]]*)\]\s*")
_LOOKS_LIKE_MR = re.compile(r"^\s*[^\[\]|]+\[[^\[\]]*\]")


def _where(index: Optional[int]) -> str:
    return "" if index is None else f"example {index}: "


def parse_triple(text: str, index: Optional[int] = None) -> Triple:
    """Parse one WebNLG ``"subject | predicate | object"`` string."""
    if not isinstance(text, str):
        raise ValueError(f"{_where(index)}a triple string must be a str, got {type(text).__name__}: {text!r}")
    parts = [p.strip() for p in text.split("|")]
    if len(parts) != 3:
        raise ValueError(
            f"{_where(index)}malformed triple {text!r}: expected 'subject | predicate | object' "
            f"with exactly two '|' separators, found {len(parts) - 1}"
        )
    if not all(parts):
        raise ValueError(f"{_where(index)}malformed triple {text!r}: subject, predicate and object must be non-empty")
    return Triple(*parts)


def parse_mr(text: str, index: Optional[int] = None) -> Table:
    """Parse an E2E meaning representation ``name[The Eagle], eatType[coffee shop]``."""
    if not isinstance(text, str):
        raise ValueError(f"{_where(index)}an E2E MR must be a str, got {type(text).__name__}: {text!r}")
    stripped = text.strip()
    # tnt1/tnt2 E2E outputs carry surrounding single quotes.
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == "'":
        stripped = stripped[1:-1].strip()
    entries, pos = [], 0
    while pos < len(stripped):
        m = _MR_SLOT.match(stripped, pos)
        if not m:
            raise ValueError(f"{_where(index)}malformed E2E meaning representation {text!r} near {stripped[pos:pos + 30]!r}: expected 'slot[value], ...'")
        attr, value = m.group(1).strip(), m.group(2).strip()
        if not attr:
            raise ValueError(f"{_where(index)}malformed E2E meaning representation {text!r}: a slot has no name near {stripped[pos:pos + 30].strip()!r}")
        if not value:
            raise ValueError(f"{_where(index)}malformed E2E meaning representation {text!r}: slot {attr!r} has an empty value")
        entries.append(AttributeValue(attr, value))
        pos = m.end()
        if pos < len(stripped):
            if stripped[pos] != ",":
                raise ValueError(
                    f"{_where(index)}malformed E2E meaning representation {text!r}: expected ',' after "
                    f"{m.group(0).strip()!r}, found {stripped[pos:pos + 30]!r}"
                )
            pos += 1
            if not stripped[pos:].strip():
                raise ValueError(f"{_where(index)}malformed E2E meaning representation {text!r}: trailing ','")
    if not entries:
        raise ValueError(f"{_where(index)}empty E2E meaning representation {text!r}")
    return Table(entries, kind=E2E_MR, source=text)


def _split_triple_string(text: str) -> List[str]:
    parts = re.split(r"\s*<br\s*/?>\s*|\n", text)
    return [p for p in (p.strip() for p in parts) if p]


def _entry_from_sequence(item: Sequence, index: Optional[int]) -> Entry:
    if len(item) == 3:
        values = [v for v in item]
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f"{_where(index)}triple {item!r} must hold three strings")
        values = [v.strip() for v in values]
        if not all(values):
            raise ValueError(f"{_where(index)}triple {item!r} has an empty member")
        return Triple(*values)
    if len(item) == 2:
        attr, value = item
        if not isinstance(attr, str) or not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ValueError(f"{_where(index)}attribute-value pair {item!r} must be (str, str)")
        value = str(value).strip()
        if not attr.strip():
            raise ValueError(f"{_where(index)}attribute-value pair {item!r} has an empty attribute")
        return AttributeValue(attr.strip(), value)
    raise ValueError(
        f"{_where(index)}table entry {item!r} has {len(item)} members; expected a triple (3) or an attribute-value pair (2)"
    )


def parse_table(table: Any, index: Optional[int] = None) -> Table:
    """Parse any supported table form into a :class:`Table`.

    Accepted forms:

    * a :class:`Table` (returned as is);
    * a WebNLG string ``"s | p | o"``, or several joined by ``<br>`` or newlines;
    * an E2E meaning representation ``"name[The Eagle], eatType[pub]"``;
    * a list of such triple strings, of ``(s, p, o)`` triples or :class:`Triple`;
    * a list of ``(attribute, value)`` pairs or :class:`AttributeValue`;
    * a dict ``{attribute: value}`` (a list value yields one record per item);
    * a dict with ``"triples"`` or ``"table"`` holding one of the above.

    Raises ``ValueError`` naming ``index`` and the offending input when the
    table is ``None``, empty or malformed.
    """
    if isinstance(table, Table):
        if not table.entries:
            raise ValueError(f"{_where(index)}empty table")
        return table
    if table is None:
        raise ValueError(f"{_where(index)}table is None")
    if isinstance(table, str):
        if not table.strip():
            raise ValueError(f"{_where(index)}empty table string")
        # No "|" but a bracket: an E2E MR (a malformed one gets the MR parser's message).
        if "|" not in table and (_LOOKS_LIKE_MR.match(table.strip().strip("'")) or "[" in table):
            return parse_mr(table, index)
        return Table([parse_triple(t, index) for t in _split_triple_string(table)], kind=TRIPLES, source=table)
    if isinstance(table, dict):
        if set(table) == {"subject", "predicate", "object"}:
            return Table([_entry_from_sequence((table["subject"], table["predicate"], table["object"]), index)], kind=TRIPLES, source=table)
        for key in ("triples", "table", "mr"):
            if key in table and len(table) <= 3:
                return parse_table(table[key], index)
        entries = []
        for attr, value in table.items():
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                entries.append(_entry_from_sequence((attr, v), index))
        if not entries:
            raise ValueError(f"{_where(index)}empty table")
        return Table(entries, kind=ATTRIBUTE_VALUE, source=table)
    if isinstance(table, (list, tuple)):
        if not table:
            raise ValueError(f"{_where(index)}empty table")
        entries: List[Entry] = []
        for item in table:
            if item is None:
                raise ValueError(f"{_where(index)}table entry is None in {table!r}")
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
                raise ValueError(f"{_where(index)}cannot read table entry {item!r} of type {type(item).__name__}")
        kinds = {type(e) for e in entries}
        if len(kinds) > 1:
            raise ValueError(f"{_where(index)}table mixes triples and attribute-value pairs: {table!r}")
        kind = TRIPLES if Triple in kinds else ATTRIBUTE_VALUE
        return Table(entries, kind=kind, source=table)
    raise ValueError(f"{_where(index)}cannot read a table from {type(table).__name__}: {table!r}")


def parse_tables(tables: Iterable[Any], n: Optional[int] = None, name: str = "tables") -> List[Table]:
    """Parse a list of tables, checking the count against ``n`` when given."""
    if tables is None:
        raise ValueError(f"{name} is None; pass one table per prediction")
    tables = list(tables)
    if n is not None and len(tables) != n:
        raise ValueError(f"got {n} predictions but {len(tables)} {name}; pass exactly one table per prediction")
    return [parse_table(t, i) for i, t in enumerate(tables)]


def check_texts(texts: Any, name: str = "predictions", allow_empty: bool = True) -> List[str]:
    """Validate a list of strings, raising ``ValueError`` with the index of the first bad one."""
    if texts is None:
        raise ValueError(f"{name} is None; pass a list of strings")
    if isinstance(texts, str):
        raise ValueError(f"{name} must be a list of strings, got a single string")
    texts = list(texts)
    for i, t in enumerate(texts):
        if t is None:
            raise ValueError(f"example {i}: {name[:-1] if name.endswith('s') else name} is None")
        if not isinstance(t, str):
            raise ValueError(f"example {i}: {name[:-1] if name.endswith('s') else name} must be a str, got {type(t).__name__}: {t!r}")
        if not allow_empty and not t.strip():
            raise ValueError(f"example {i}: {name[:-1] if name.endswith('s') else name} is empty")
    return texts


def check_references(references: Any, n: int, name: str = "references") -> List[List[str]]:
    """Normalize references to one list of strings per example."""
    if references is None:
        raise ValueError(f"{name} is None; pass one reference (or a list of references) per prediction")
    references = list(references)
    if len(references) != n:
        raise ValueError(f"got {n} predictions but {len(references)} {name}; pass exactly one entry per prediction")
    out = []
    for i, refs in enumerate(references):
        if refs is None:
            raise ValueError(f"example {i}: reference is None")
        if isinstance(refs, str):
            refs = [refs]
        refs = list(refs)
        if not refs:
            raise ValueError(f"example {i}: no reference given")
        for r in refs:
            if not isinstance(r, (str, list, tuple)):
                raise ValueError(f"example {i}: reference must be a str, got {type(r).__name__}: {r!r}")
        out.append(refs)
    return out
