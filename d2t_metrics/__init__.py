"""Shared ground for the d2t-metrics evaluate modules: tables, parsers,
linearization, verbalization, tokenization, and model loading and batching.

No metric logic lives here; each metric is a folder under ``metrics/``.
"""

from .tables import (
    AttributeValue,
    Table,
    Triple,
    check_references,
    check_texts,
    parse_mr,
    parse_table,
    parse_tables,
    parse_triple,
)
from .normalize import normalize_entity, normalize_predicate, split_camel_case

__version__ = "0.1.0"

__all__ = [
    "AttributeValue",
    "Table",
    "Triple",
    "check_references",
    "check_texts",
    "parse_mr",
    "parse_table",
    "parse_tables",
    "parse_triple",
    "normalize_entity",
    "normalize_predicate",
    "split_camel_case",
]
