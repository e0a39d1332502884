"""The fact tuple and the extractor interface every fact_accuracy extractor follows."""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence


class Fact(NamedTuple):
    """A (subject, relation, object) claim. ``relation`` is a name of the
    extractor's schema (for WebNLG, its predicates such as ``birthPlace``);
    ``evidence`` is the text span or sentence it was read from (empty for
    facts taken from a table)."""

    subject: str
    relation: str
    object: str
    evidence: str = ""

    def as_list(self) -> List[str]:
        return [self.subject, self.relation, self.object]


class Extractor:
    """Reads facts off texts. ``tables`` (one per text, or None) lets an
    extractor use the table's entities as candidates; it must never copy a
    table fact that the text does not state."""

    name = "extractor"

    def extract(self, texts: Sequence[str], tables: Optional[Sequence] = None, show_progress: bool = True) -> List[List[Fact]]:
        raise NotImplementedError
