"""Shared ground for the d2t-metrics evaluate modules: tables, parsers,
linearization, verbalization, tokenization, the input checks every metric
runs first, and model loading and batching.

No metric logic lives here; each metric is a folder under ``metrics/``
(installed: ``d2t_metrics/metrics/``). ``load(name)`` loads one from any
directory; ``metric_path``, ``checkpoint_path`` and ``available_metrics``
say where the metrics and the project's checkpoints are
(:mod:`d2t_metrics.locations`).
"""

from .tables import (
    AttributeValue,
    Table,
    Triple,
    parse_mr,
    parse_table,
    parse_tables,
    parse_triple,
)
from .locations import available_metrics, checkpoint_path, load, metric_path
from .inputs import check_references, check_texts, decode_table, encode_table
from .normalize import normalize_entity, normalize_predicate, split_camel_case

__version__ = "0.1.0"

__all__ = [
    "AttributeValue",
    "Table",
    "Triple",
    "available_metrics",
    "checkpoint_path",
    "load",
    "metric_path",
    "check_references",
    "check_texts",
    "decode_table",
    "encode_table",
    "parse_mr",
    "parse_table",
    "parse_tables",
    "parse_triple",
    "normalize_entity",
    "normalize_predicate",
    "split_camel_case",
]
