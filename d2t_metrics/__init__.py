"""Shared ground for the d2t-metrics evaluate modules: tables, parsers,
linearization, verbalization, tokenization, the input checks every metric
runs first, and model loading and batching.

No metric logic lives here; each metric is a folder under ``metrics/``
(installed: ``d2t_metrics/metrics/``) whose class subclasses the one
protocol, :class:`d2t_metrics.metric.D2TMetric`. ``load(name)`` loads one
from any directory; ``metric_path``, ``checkpoint_path`` and
``available_metrics`` say where the metrics and the project's checkpoints are
(:mod:`d2t_metrics.locations`). :mod:`d2t_metrics.runner` scores a JSONL file
with several metrics (the ``d2t-metrics`` command line, :mod:`d2t_metrics.cli`,
and the playground use it); :mod:`d2t_metrics.doctor` says what each metric
needs on this machine. Importing ``d2t_metrics`` does not import ``evaluate``.

``linearize(table)`` and ``verbalize(table)`` are the functions (their
modules stay importable as ``from d2t_metrics.linearize import ...``; use
``importlib.import_module("d2t_metrics.linearize")`` for the module object).
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
# The functions the README names, bound over their submodules' names on purpose.
from .linearize import linearize  # noqa: E402  (light: spaCy and unidecode load on first use)
from .verbalize import verbalize  # noqa: E402

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
    "linearize",
    "verbalize",
]
