"""The fact tuple and the extractor interface every fact_accuracy extractor follows."""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence


class Fact(NamedTuple):
    """A (subject, relation, object) claim. ``relation`` is a name of the
    extractor's schema (for WebNLG, its predicates such as ``birthPlace``);
    ``evidence`` is the text span or sentence it was read from (empty for
    facts taken from a table); ``start`` and ``end``, where known, are its offsets in the
    text as given (``text[start:end] == evidence`` unless invisible characters were
    dropped or a piece imitating the output format blanked in between), else -1."""

    subject: str
    relation: str
    object: str
    evidence: str = ""
    start: int = -1
    end: int = -1

    def as_list(self) -> List[str]:
        return [self.subject, self.relation, self.object]


class Extractor:
    """Reads facts off texts. ``tables`` (one per text, or None) lets an
    extractor use the table's entities as candidates; it must never copy a
    table fact that the text does not state."""

    name = "extractor"

    def extract(self, texts: Sequence[str], tables: Optional[Sequence] = None, show_progress: bool = True) -> List[List[Fact]]:
        raise NotImplementedError
