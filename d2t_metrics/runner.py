"""Scoring a JSONL file with several metrics: the engine behind ``d2t-metrics score``
(:mod:`d2t_metrics.cli`) and the playground (``spaces/playground``).

Input
    Each input line is a JSON object::

        {"id": "ex1", "prediction": "...", "references": ["...", ...],
         "table": <any table form parse_table reads>, "source": "..."}

    ``id``, ``references``, ``table`` and ``source`` are optional. The file is
    UTF-8 (a byte-order mark is accepted); empty lines are skipped. The whole
    file is checked before any metric loads (:func:`read_corpus`): every
    problem (not UTF-8, not JSON, a field of the wrong type, a table
    ``parse_table`` refuses, a string with a lone surrogate) is a
    :class:`UsageError` naming the file's 1-based line.

Plan, then load
    Metrics are the folders ``metrics/<name>/<name>.py`` (or of
    ``--metrics-dir``). Everything that can be decided without a model is
    decided before any metric loads one (:func:`prepare_all`): what the
    machine lacks (code, bases: :mod:`d2t_metrics.doctor`, with the same fix
    ``d2t-metrics doctor`` prints), the ``--model`` paths, the configuration,
    the ``--option`` names and values, and which input columns to pass. The
    columns come from the metric's declared protocol
    (:class:`d2t_metrics.metric.D2TMetric`: ``INPUTS``, ``OPTIONAL_INPUTS``,
    ``ALTERNATIVE_INPUTS``): a declared input (or a ``_compute`` argument
    without a default) is needed unless optional, an alternative can stand in
    for it (DAE's ``sources`` for ``tables``, preferred when the input has
    both), and an optional column is passed when every line has it. A metric
    whose inputs besides predictions are all optional (``fact_accuracy``)
    needs one of them. A metric with the project's checkpoint
    (``CHECKPOINT``: ``checkpoints/<name>/``) gets it as ``model=``, so it
    runs offline; ``--model NAME=PATH_OR_HUB_ID`` overrides it; a
    configuration in ``MODEL_FREE_CONFIGS`` gets no model. Only then does
    each metric load (``download_and_prepare``, which calls its
    ``load_model()``) and score (:func:`run_metric`).

    Any evaluate module works too: one that does not subclass ``D2TMetric``
    may declare the same class attributes; its checkpoint is
    ``checkpoints/<name>/``, and it takes a model when its constructor has a
    ``model`` argument (:func:`protocol_of`).

Outcomes
    A metric that cannot run here (a library, base or model is missing, or the
    input lacks a column it needs) is *skipped* (:class:`Skip`), with the
    reason and its fix. Any other error while it loads or scores is a
    *failure*; the other metrics still run.

Output
    Each output line holds the input's ``id`` (the example's 0-based index when
    it had none), with ``with_input`` its ``prediction`` (and ``table``,
    ``references``, ``source`` when given), and, per metric that ran, that
    example's dict from ``compute(..., per_example=True)``, unchanged. It is
    written atomically (a temporary file in the same folder, then
    ``os.replace``).
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import inspect
import json
import math
import os
import re
import signal
import stat
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .blocks import BLOCK_LINES
from .blocks import block_arguments
from .blocks import block_bounds
from .blocks import global_indices
from .blocks import splits_exactly
from .locations import checkpoints_dir
from .resume import BlockStore
from .resume import json_default
from .resume import plain
from .locations import metrics_dir
from .tables import parse_table
from .tables import short_repr
from .timing import stage

# compute() argument -> the input line's field that fills it.
INPUT_FIELDS = {"references": "references", "tables": "table", "sources": "source"}


class UsageError(Exception):
    """Bad command-line arguments or input file; reported without a traceback."""


class Skip(Exception):
    """A metric that cannot run on this input or machine; the message says why."""


class MetricFailed(Exception):
    """A metric that ran but gave a result the command cannot use; the message says why."""


# ---------------------------------------------------------------------------
# Input


@dataclass
class Corpus:
    ids: List[Any]
    predictions: List[str]
    references: Optional[List[List[str]]]
    tables: Optional[List[Any]]
    sources: Optional[List[str]]
    line_numbers: List[int] = field(default_factory=list)  # the file's 1-based line of each example
    missing_lines: Dict[str, List[int]] = field(default_factory=dict)  # input field -> lines lacking it

    def __len__(self) -> int:
        return len(self.predictions)

    def column(self, argument: str) -> Optional[list]:
        """The values for compute argument ``argument``, or ``None`` when some line lacks them."""
        return {"references": self.references, "tables": self.tables, "sources": self.sources}[argument]


def read_corpus(path: str) -> Corpus:
    """Read and check a JSONL input file; problems raise :class:`UsageError` naming the line."""
    if path == "-":
        if not hasattr(sys.stdin, "buffer"):  # already text (a replaced sys.stdin)
            return parse_corpus(sys.stdin.read(), "<stdin>")
        return parse_corpus(decode_utf8(sys.stdin.buffer.read(), "<stdin>"), "<stdin>")
    if not os.path.isfile(path):
        raise UsageError(f"input file {path!r} does not exist")
    with open(path, "rb") as f:
        data = f.read()
    return parse_corpus(decode_utf8(data, path), path)


def decode_utf8(data: bytes, name: str) -> str:
    """``data`` as text; a leading BOM is dropped, anything else that is not UTF-8 is a :class:`UsageError`."""
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as e:
        offset = start + e.start
        line = data.count(b"\n", 0, offset) + 1
        raise UsageError(
            f"{name} is not UTF-8 (byte 0x{data[offset]:02x} at offset {offset}, line {line}); "
            "re-encode it, e.g. iconv -f latin1 -t utf-8"
        ) from None


def parse_corpus(text: str, name: str) -> Corpus:
    rows: List[Dict[str, Any]] = []
    line_numbers: List[int] = []
    # Only "\n" ends a line: JSON strings may hold U+2028 and other characters
    # that str.splitlines() would split on.
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        rows.append(check_row(parse_line(line, f"{name}, line {lineno}"), f"{name}, line {lineno}"))
        line_numbers.append(lineno)
    if not rows:
        raise UsageError(f"{name}: no examples (the file is empty)")

    def column(key):
        values = [r.get(key) for r in rows]
        missing = [line for line, v in zip(line_numbers, values) if v is None]
        return (None if missing else values), missing

    references, missing_refs = column("references")
    tables, missing_tables = column("table")
    sources, missing_sources = column("source")
    return Corpus(
        ids=[r.get("id", i) for i, r in enumerate(rows)],
        predictions=[r["prediction"] for r in rows],
        references=references,
        tables=tables,
        sources=sources,
        line_numbers=line_numbers,
        missing_lines={"references": missing_refs, "table": missing_tables, "source": missing_sources},
    )


def parse_line(line: str, where: str) -> Dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise UsageError(f"{where}: not valid JSON (nested too deeply)") from None
    if not isinstance(row, dict):
        raise UsageError(f"{where}: expected a JSON object, got {type(row).__name__}")
    return row


def check_row(row: Dict[str, Any], where: str) -> Dict[str, Any]:
    """The row with ``references`` as a list; a problem raises :class:`UsageError` starting with ``where``."""
    pred = row.get("prediction")
    if not isinstance(pred, str):
        raise UsageError(f"{where}: 'prediction' must be a string, got {short_repr(pred)}")
    refs = row.get("references")
    if refs is not None:
        if isinstance(refs, str):
            refs = [refs]
        if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
            raise UsageError(f"{where}: 'references' must be a non-empty list of strings, got {short_repr(row.get('references'))}")
        row["references"] = refs
    source = row.get("source")
    if source is not None and not isinstance(source, str):
        raise UsageError(f"{where}: 'source' must be a string, got {short_repr(source)}")
    # Strings that UTF-8 cannot encode break tokenizers, Arrow and the output
    # file later on; json.loads makes them from escapes such as "\ud800".
    for key in ("id", "prediction", "references", "source", "table"):
        bad = lone_surrogate(row.get(key))
        if bad is not None:
            raise UsageError(f"{where}: {key!r} is not valid Unicode (lone surrogate {bad!r})")
    # The output is strict JSON (no NaN or Infinity), and the id and table are copied into it.
    for key in ("id", "table"):
        bad = non_finite_number(row.get(key))
        if bad is not None:
            raise UsageError(f"{where}: {key!r} holds a non-finite number ({bad!r}); JSON has no NaN or Infinity, "
                             "so it cannot be written back: use a string or a finite number")
    table = row.get("table")
    if table is not None:
        try:
            # Checked only: the metric gets the table as written (any evaluate
            # module may read it, not only ours, which parse it again).
            parse_table(table)
        except ValueError as e:
            raise UsageError(f"{where}: table: {e}") from None
    return row


def non_finite_number(value: Any) -> Optional[float]:
    """The first NaN or infinite number inside ``value`` (``json.loads`` reads ``NaN``, ``Infinity``
    and ``1e400``, the last as ``inf``), else ``None``."""
    stack = [value]
    while stack:  # iterative, as lone_surrogate
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def lone_surrogate(value: Any) -> Optional[str]:
    """The first lone surrogate in any string (or dict key) inside ``value``, else ``None``."""
    stack = [value]
    while stack:  # iterative: a deeply nested table must not hit the recursion limit
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as e:
                return item[e.start]
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


# ---------------------------------------------------------------------------
# Output path


def check_output_path(path: str, overwrite: bool) -> None:
    """Fail now, before any scoring, if ``path`` cannot be written."""
    if os.path.isdir(path):
        raise UsageError(f"--output {path!r} is a directory")
    target = os.path.realpath(path)
    if os.path.lexists(path):
        if not overwrite:
            raise UsageError(f"--output {path!r} already exists; pass --overwrite to replace it")
        if os.path.exists(target) and not os.path.isfile(target):
            # os.replace would swap out a device or FIFO for a regular file.
            raise UsageError(f"--output {path!r} is not a regular file")
    folder = nearest_existing_folder(os.path.dirname(target))
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write --output {path!r}: {folder!r} is not a directory")
    # A real probe, not os.access: it also catches read-only file systems, and root.
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".d2t-metrics-probe-")
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise UsageError(f"cannot write --output {path!r}: directory {folder!r} is not writable ({e.strerror})") from None


def nearest_existing_folder(folder: str) -> str:
    while not os.path.lexists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder


# ---------------------------------------------------------------------------
# Metrics


def find_metrics_dir(explicit: Optional[str] = None) -> str:
    """``--metrics-dir``, else the project's metrics (:func:`d2t_metrics.locations.metrics_dir`:
    the installed package's data, or the checkout's top-level ``metrics/``), else ``./metrics``."""
    if explicit:
        if not os.path.isdir(explicit):
            raise UsageError(f"--metrics-dir {explicit!r} is not a directory")
        return os.path.abspath(explicit)
    found = metrics_dir()
    if found is not None:
        return found
    candidate = os.path.join(os.getcwd(), "metrics")
    if os.path.isdir(candidate):
        return candidate
    raise UsageError(
        "cannot find the metrics/ folder: neither the installed d2t_metrics package nor its checkout holds one, "
        "and there is none in the current directory; reinstall d2t-metrics or pass --metrics-dir"
    )


def find_checkpoints_dir(explicit: Optional[str], metrics_dir: str) -> Optional[str]:
    """``--checkpoints-dir``, else ``checkpoints/`` beside ``metrics_dir`` (another checkout's
    ``--metrics-dir``), else the project's checkpoints (:func:`d2t_metrics.locations.checkpoints_dir`)."""
    if explicit:
        return os.path.abspath(explicit)
    beside = os.path.join(os.path.dirname(metrics_dir), "checkpoints")
    if os.path.isdir(beside):
        return beside
    return checkpoints_dir()


def available_metrics(metrics_dir: str) -> List[str]:
    return sorted(
        name for name in os.listdir(metrics_dir) if os.path.isfile(os.path.join(metrics_dir, name, f"{name}.py"))
    )


def default_metrics(metrics_dir: str) -> List[str]:
    """The metrics a run without ``--metrics`` scores: every one but the combinations of
    others (``COMPONENT_CHECKPOINTS``: semantic_accuracy), which would run them all again."""
    names = []
    for name in available_metrics(metrics_dir):
        try:
            combined = getattr(load_metric_class(os.path.join(metrics_dir, name))[0], "COMPONENT_CHECKPOINTS", False)
        except Exception:  # noqa: BLE001 - a metric that cannot be imported is planned (and skipped) as before
            combined = False
        if not combined:
            names.append(name)
    return names


def requested_metrics(spec: str) -> List[str]:
    """``--metrics a,b`` → ``["a", "b"]``; none, or one named twice, is a :class:`UsageError`."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise UsageError("--metrics needs at least one metric name")
    if len(set(names)) != len(names):
        raise UsageError(f"--metrics names a metric twice: {spec}")
    return names


def check_metric_names(names: Sequence[str], known: Sequence[str], metrics_dir: str) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        listed = ", ".join(map(repr, unknown))
        raise UsageError(
            f"unknown metric{'s' if len(unknown) > 1 else ''} {listed} (no {os.path.join(metrics_dir, '<name>', '<name>.py')}); "
            f"available: {', '.join(known) or 'none'}"
        )


def default_model(name: Optional[str], checkpoints_dir: Optional[str]) -> Optional[str]:
    """``checkpoints/<name>/`` when it exists and is not empty."""
    if not checkpoints_dir or not name:
        return None
    path = os.path.join(checkpoints_dir, name)
    if os.path.isdir(path) and any(not f.startswith(".") for f in os.listdir(path)):
        return path
    return None


def parse_assignments(values: Sequence[str], option: str, known: Sequence[str]) -> Dict[str, str]:
    """``["nli=/path", ...]`` → ``{"nli": "/path"}``; an unknown metric name is an error."""
    out = {}
    for value in values or []:
        name, sep, rhs = value.partition("=")
        name, rhs = name.strip(), rhs.strip()
        if not sep or not name or not rhs:
            raise UsageError(f"{option} expects NAME=VALUE, got {value!r}")
        if name not in known:
            raise UsageError(f"{option} {value!r} names metric {name!r}, which is not among --metrics ({', '.join(known)})")
        out[name] = rhs
    return out


def parse_options(values: Sequence[str], known: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """``["parent.tokenizer=whitespace", "dae.threshold=0.3"]`` → ``{"parent": {"tokenizer": "whitespace"}, ...}``.

    A value that reads as JSON (a number, ``true``, ``null``, a list) is that
    value; anything else is the string as written."""
    out: Dict[str, Dict[str, Any]] = {}
    for value in values or []:
        target, sep, raw = value.partition("=")
        name, dot, key = target.strip().partition(".")
        if not sep or not dot or not name or not key.strip():
            raise UsageError(f"--option expects NAME.KEY=VALUE (e.g. parent.tokenizer=whitespace), got {value!r}")
        if name not in known:
            raise UsageError(f"--option {value!r} names metric {name!r}, which is not among --metrics ({', '.join(known)})")
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        out.setdefault(name, {})[key.strip()] = parsed
    return out


def check_model_path(name: str, model: str) -> None:
    """A ``--model`` that can only mean a local folder must exist: refused before any metric loads."""
    from .hub import looks_like_path  # lazy: huggingface_hub (through d2t_metrics.hub), which --help and list do not need

    folder = os.path.expanduser(model)
    if looks_like_path(model) and not os.path.exists(folder):
        raise UsageError(f"--model {name}={model}: no such folder ({os.path.abspath(folder)}); "
                         "pass an existing checkpoint folder or a hub id ('name' or 'org/name')")


def check_hub_model(name: str, model: str) -> None:
    """A hub id the metric would load: :class:`Skip` now, before any metric loads, when it is not in
    the local cache and the Hub is off or does not answer (instead of a connection error later)."""
    from .hub import ModelNotAvailableError, resolve_model_name  # lazy: huggingface_hub, which --help and list do not need

    try:
        resolve_model_name(model, metric=name)
    except ModelNotAvailableError as e:
        raise Skip(f"its model is not available: {e}") from None


# compute() arguments the command line sets itself.
_RESERVED_OPTIONS = ("predictions", "references", "tables", "sources", "per_example")


def checked_options(name: str, metric, options: Dict[str, Any]) -> Dict[str, Any]:
    """``--option`` values for ``metric``: each must be an option of its ``compute``, with a value
    the metric accepts (its own checks, run now, before it loads a model)."""
    params = compute_parameters(metric)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    inputs = declared_inputs(metric)
    known = [p for p in params if p not in _RESERVED_OPTIONS and p not in inputs and params[p].kind is not inspect.Parameter.VAR_KEYWORD]
    for key in options:
        if key in _RESERVED_OPTIONS or key in inputs:
            raise UsageError(f"--option {name}.{key}: {key} comes from the input file, not an option")
        if key not in known and not takes_any:
            raise UsageError(f"--option {name}.{key}: {name} has no option {key!r}; it takes {', '.join(known) or 'none'}")
    if options and is_d2t_metric(metric):
        try:
            metric._check_option_values(dict(options))
        except ValueError as e:
            raise UsageError(f"--option for {name}: {e}") from None
    return dict(options)


# ---------------------------------------------------------------------------
# The metric protocol, read from the class


def is_d2t_metric(metric_or_class) -> bool:
    from .metric import D2TMetric  # lazy: evaluate, which the metric's module has imported by now

    cls = metric_or_class if isinstance(metric_or_class, type) else type(metric_or_class)
    return issubclass(cls, D2TMetric)


@dataclass(frozen=True)
class Protocol:
    """What the runner plans with, read from a metric's class before it is constructed."""

    optional_inputs: Tuple[str, ...] = ()
    alternative_inputs: Dict[str, str] = field(default_factory=dict)  # keyword -> the declared input it fills
    model_free_configs: Tuple[str, ...] = ()
    checkpoint: Optional[str] = None  # the folder under checkpoints/ the command line passes as model=
    takes_model: bool = False
    component_checkpoints: bool = False  # a combination of metrics: model= is checkpoints/ itself


def protocol_of(cls, name: Optional[str] = None) -> Protocol:
    """The declared protocol of a metric class (:class:`d2t_metrics.metric.D2TMetric`). Another
    evaluate module may declare the same class attributes; its checkpoint is ``checkpoints/<name>/``,
    and it takes a model when its constructor has a ``model`` argument."""
    if is_d2t_metric(cls):
        return Protocol(
            optional_inputs=tuple(cls.OPTIONAL_INPUTS),
            alternative_inputs=_filled_columns(cls.ALTERNATIVE_INPUTS),
            model_free_configs=tuple(cls.MODEL_FREE_CONFIGS),
            checkpoint=cls.CHECKPOINT,
            takes_model=cls.DEFAULT_MODEL is not None or cls.CHECKPOINT is not None,
            component_checkpoints=bool(cls.COMPONENT_CHECKPOINTS),
        )
    declared = {key: getattr(cls, key, None) for key in ("OPTIONAL_INPUTS", "ALTERNATIVE_INPUTS", "MODEL_FREE_CONFIGS")}
    return Protocol(
        optional_inputs=tuple(declared["OPTIONAL_INPUTS"] or ()),
        alternative_inputs=_filled_columns(declared["ALTERNATIVE_INPUTS"] or {}),
        model_free_configs=tuple(declared["MODEL_FREE_CONFIGS"] or ()),
        checkpoint=name,
        takes_model=_constructor_takes_model(cls),
    )


def _filled_columns(alternatives) -> Dict[str, str]:
    """``{keyword: (column, kind)}`` → ``{keyword: column}``."""
    return {alt: (column[0] if isinstance(column, (tuple, list)) else column) for alt, column in alternatives.items()}


def _constructor_takes_model(cls) -> bool:
    """Whether the constructor has a ``model`` argument (evaluate drops unknown ones silently)."""
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return True
    return "model" in params


def uses_model(metric) -> bool:
    """Whether a constructed metric loads a model: its ``uses_model`` (an attribute or method of
    other evaluate modules), else whether its class takes one."""
    if is_d2t_metric(metric):
        return metric.uses_model
    uses = getattr(metric, "uses_model", None)
    if callable(uses):
        uses = uses()
    return _constructor_takes_model(type(metric)) if uses is None else bool(uses)


def _feature_sets(metric) -> List[Any]:
    features = metric.features
    return list(features) if isinstance(features, (list, tuple)) else [features]


def declared_inputs(metric) -> List[str]:
    """The input names the metric declares as evaluate features, in any of its feature sets."""
    names: List[str] = []
    for features in _feature_sets(metric):
        names.extend(n for n in features if n not in names)
    return names


def reference_feature(metric):
    """The ``references`` feature of the metric's first feature set that has one, else ``None``."""
    for features in _feature_sets(metric):
        if "references" in features:
            return features["references"]
    return None


def alternative_inputs(metric) -> Dict[str, str]:
    """``{keyword: column it fills}`` from the metric's ``ALTERNATIVE_INPUTS`` (DAE: sources → tables)."""
    return protocol_of(type(metric)).alternative_inputs


def _is_sequence_feature(feature) -> bool:
    return type(feature).__name__ in ("Sequence", "List", "LargeList") or isinstance(feature, (list, tuple))


def compute_parameters(metric) -> Dict[str, inspect.Parameter]:
    """Parameters of the metric's ``_compute`` (a ``**kwargs`` one shows as kind VAR_KEYWORD)."""
    return dict(inspect.signature(metric._compute).parameters)


def plan_inputs(metric, corpus: Corpus) -> Dict[str, list]:
    """The input columns to pass to ``compute``: ``{argument: values}``; :class:`Skip` when one it needs is missing."""
    declared = declared_inputs(metric)
    params = compute_parameters(metric)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    alternatives = alternative_inputs(metric)

    optional = protocol_of(type(metric)).optional_inputs

    def needs(arg):
        p = params.get(arg)
        if arg in optional:  # declared, but passed only when the input has it (data_questeval's references)
            return False
        return arg in declared or (p is not None and p.default is inspect.Parameter.empty)

    def accepts(arg):
        return arg in params or takes_any or arg in declared or arg in alternatives

    chosen: Dict[str, list] = {}
    for arg in INPUT_FIELDS:
        if not needs(arg):
            continue
        # An alternative first: that is what DAE's compute() itself prefers.
        substitutes = [alt for alt, column in alternatives.items() if column == arg and alt in INPUT_FIELDS]
        present = [c for c in substitutes + [arg] if corpus.column(c) is not None]
        if not present:
            raise Skip(lacking_message(arg, substitutes, corpus))
        chosen[present[0]] = corpus.column(present[0])
    filled = {alternatives.get(arg, arg) for arg in chosen}
    for arg in INPUT_FIELDS:
        if arg in chosen or needs(arg) or alternatives.get(arg) in filled:
            continue  # passing a column and its alternative together is refused ("not both")
        if accepts(arg) and corpus.column(arg) is not None:
            chosen[arg] = corpus.column(arg)
    others = [arg for arg in declared if arg != "predictions"]
    if others and set(others) <= set(optional) and not chosen:  # fact_accuracy: a table or references
        args = sorted((a for a in others if a in INPUT_FIELDS), key=lambda a: a != "tables")
        gaps = [f"{_lines(corpus.missing_lines[INPUT_FIELDS[a]])} no {INPUT_FIELDS[a]!r}" for a in args]
        raise Skip(f"it needs {' or '.join(args)}, but " + " and ".join(gaps))
    return chosen


def lacking_message(argument: str, substitutes: Sequence[str], corpus: Corpus) -> str:
    """``it needs tables (or sources), but line 2 has no 'table' and lines 1, 2 have no 'source'``."""
    gaps = [f"{_lines(corpus.missing_lines[INPUT_FIELDS[a]])} no {INPUT_FIELDS[a]!r}" for a in [argument, *substitutes]]
    alternatives = f" (or {', '.join(substitutes)})" if substitutes else ""
    return f"it needs {argument}{alternatives}, but " + " and ".join(gaps)


def _lines(lines: List[int], limit: int = 5) -> str:
    """``"line 3 has"`` or ``"lines 1, 2 have"``: the subject and verb of a sentence about those lines."""
    if len(lines) == 1:
        return f"line {lines[0]} has"
    shown = ", ".join(str(n) for n in lines[:limit])
    return f"lines {shown}" + (f" and {len(lines) - limit} more" if len(lines) > limit else "") + " have"


def build_compute_kwargs(metric, corpus: Corpus, batch_size: Optional[int], show_progress: bool) -> Dict[str, Any]:
    kwargs: Dict[str, Any] = {"predictions": corpus.predictions, **plan_inputs(metric, corpus)}
    ref_feature = reference_feature(metric)
    if "references" in kwargs and ref_feature is not None and not _is_sequence_feature(ref_feature):
        kwargs["references"] = [refs[0] for refs in kwargs["references"]]
    params = compute_parameters(metric)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if "per_example" not in params and not takes_any:
        raise Skip("its compute() has no per_example argument, so per-example scores cannot be written")
    kwargs["per_example"] = True
    if "show_progress" in params or takes_any:
        kwargs["show_progress"] = show_progress
    if batch_size is not None and ("batch_size" in params or takes_any):
        kwargs["batch_size"] = batch_size
    return kwargs


def unpassed_note(metric, corpus: Corpus, kwargs: Dict[str, Any]) -> str:
    """A hint for a failure: columns the metric takes that were not passed because some lines lack them."""
    params = compute_parameters(metric)
    notes = [
        f"{_lines(corpus.missing_lines[key])} no {key!r}, so no {arg} were passed"
        for arg, key in INPUT_FIELDS.items()
        if arg not in kwargs and arg in params and corpus.missing_lines.get(key) and len(corpus.missing_lines[key]) < len(corpus)
    ]
    return f" (note: {'; '.join(notes)})" if notes else ""


def load_metric_class(path: str):
    """The metric's class and module hash, imported as ``evaluate.load`` does, without constructing it."""
    from evaluate.loading import DownloadMode, evaluation_module_factory, import_main_class  # lazy: evaluate, slow to import

    module = evaluation_module_factory(path, download_mode=DownloadMode.REUSE_DATASET_IF_EXISTS)
    return import_main_class(module.module_path), module.hash


def choose_model(name: str, protocol: Protocol, config: Optional[str], requested: Optional[str], checkpoint: Optional[str]):
    """``(model to construct the metric with, warning or None)``: ``--model`` if given, else the
    project's checkpoint; none for a metric or configuration that takes no model."""
    if not protocol.takes_model:
        return None, (f"{name} takes no model; ignoring model {requested!r}" if requested else None)
    if config is not None and config in protocol.model_free_configs:
        return None, (f"{name} uses no model with config {config!r}; ignoring model {requested!r}" if requested else None)
    return requested or checkpoint, None


def model_in_use(metric, given: Optional[str]) -> Optional[str]:
    """The model the constructed metric will load, for the "running" line; ``None`` when it uses none."""
    if not uses_model(metric):
        return None
    name = metric.model_name if is_d2t_metric(metric) else getattr(metric, "model_name", None)
    return str(name) if name is not None else given


def _skip_reason(error: BaseException) -> Optional[str]:
    """A short reason, with its fix, for errors that mean 'cannot run here', else ``None``."""
    from .hub import ModelNotAvailableError  # lazy: huggingface_hub, which --help and list do not need
    from .doctor import install_line  # lazy: the same

    if isinstance(error, ModelNotAvailableError):
        return f"its model is not available: {error}"
    if isinstance(error, ImportError):
        fix = install_line(error.name) or "pip install -e '.[all]' (see d2t-metrics doctor)"
        return f"a library it needs is missing ({error}); fix: {fix}"
    if isinstance(error, OSError) and ("model" in str(error).lower() or "huggingface" in str(error).lower()):
        return f"its model is not available: {error}"
    return None


def missing_here(name: str, config: Optional[str], requested_model: Optional[str]) -> Optional[str]:
    """Why metric ``name`` cannot run on this machine (a library or base it needs is not installed),
    with the fix ``d2t-metrics doctor`` names; found without importing anything."""
    from .doctor import missing_before_loading, skip_reason  # lazy: huggingface_hub (through d2t_metrics.bases)

    missing = missing_before_loading(name, config, with_model=requested_model is None)
    return skip_reason(missing) if missing else None


@dataclass
class PreparedMetric:
    """A constructed metric whose model is not loaded yet, with its compute() arguments."""

    name: str
    metric: Any
    config: Optional[str]
    model: Optional[str]  # the model it uses, as reported; None when it uses none
    kwargs: Dict[str, Any]


@dataclass
class MetricRun:
    name: str
    scores: Dict[str, Any]
    examples: List[Dict[str, Any]]
    model: Optional[str]
    signature: Optional[str] = None  # the settings its scores depend on (metric.signature), if it says


def prepare_metric(name, path, config, requested_model, checkpoints_dir, corpus, batch_size, show_progress, options=None,
                   dtype: Optional[str] = None) -> PreparedMetric:
    """Check what the machine lacks, construct one metric (no model is loaded) and plan its inputs
    and options; :class:`Skip` when it cannot run, :class:`UsageError` for a bad ``--config`` or ``--option``."""
    reason = missing_here(name, config, requested_model)
    if reason is not None:
        raise Skip(reason)
    try:
        cls, module_hash = load_metric_class(path)
    except Exception as e:  # noqa: BLE001 - turned into a reason or re-raised
        reason = _skip_reason(e)
        if reason is None:
            raise
        raise Skip(reason) from e
    protocol = protocol_of(cls, name)
    default = checkpoints_dir if protocol.component_checkpoints else default_model(protocol.checkpoint, checkpoints_dir)
    model, warning = choose_model(name, protocol, config, requested_model, default)
    if warning:
        print(f"d2t-metrics: warning: {warning}", file=sys.stderr)
    if requested_model is not None and model == requested_model:
        check_model_path(name, model)
    if is_d2t_metric(cls) and isinstance(model, str) and not os.path.isdir(os.path.expanduser(model)):
        check_hub_model(name, model)
    try:
        metric = cls(config_name=config, hash=module_hash, **({} if model is None else {"model": model}),
                     **arithmetic_arguments(name, cls, protocol, config, dtype))
    except Exception as e:  # noqa: BLE001
        reason = _skip_reason(e)
        if reason is not None:
            raise Skip(reason) from e
        if isinstance(e, ValueError) and config is not None:
            raise UsageError(f"--config {name}={config}: {e}") from None
        raise
    kwargs = build_compute_kwargs(metric, corpus, batch_size, show_progress)
    kwargs.update(checked_options(name, metric, options or {}))
    return PreparedMetric(name=name, metric=metric, config=config, model=model_in_use(metric, model), kwargs=kwargs)


DTYPE_HELP = ("arithmetic of the model-based metrics (default: bfloat16 on a GPU, float32 elsewhere); each "
              "signature names any but float32")


def arithmetic_arguments(name: str, cls, protocol: Protocol, config: Optional[str], dtype: Optional[str]) -> Dict[str, Any]:
    """``{"dtype": dtype}`` for a metric that runs a model and takes ``dtype=`` (``--dtype``); nothing for
    one that runs none; a warning when one that runs a model cannot be told."""
    if dtype is None or not protocol.takes_model or (config is not None and config in protocol.model_free_configs):
        return {}
    if "dtype" in inspect.signature(cls.__init__).parameters:
        return {"dtype": dtype}
    print(f"d2t-metrics: warning: {name} takes no dtype: --dtype {dtype} does not apply to it", file=sys.stderr)
    return {}


def run_metric(prepared: PreparedMetric, corpus: Corpus, block_lines: int = BLOCK_LINES,
               store: Optional[BlockStore] = None) -> MetricRun:
    """Load the metric's model and score; :class:`Skip` when it cannot run here, any other error when it fails."""
    scores, examples = compute_result(prepared, corpus, block_lines=block_lines, store=store)
    return metric_run(prepared, scores, examples)


def compute_result(prepared: PreparedMetric, corpus: Corpus, start: int = 0, end: Optional[int] = None,
                   block_lines: int = BLOCK_LINES, store: Optional[BlockStore] = None) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """``(corpus scores, per-example dicts)`` of loading one metric and computing it on lines
    ``[start, end)`` of ``corpus`` (all by default), its load and compute timed as the stages
    ``"<name>: load"`` and ``"<name>: compute"`` (:mod:`d2t_metrics.timing`).

    Every line is checked first where the metric can check without computing (a ``D2TMetric``'s
    ``check``), so that a bad line is refused before the model loads. A metric whose corpus scores
    follow from its per-example ones computes in blocks of ``block_lines`` lines
    (:mod:`d2t_metrics.blocks`) with one progress bar over the lines, each block kept in ``store``
    and read back from it when a stopped run finished it (:mod:`d2t_metrics.resume`; the model is
    not loaded when every block is there); any other metric in one call.
    :class:`Skip` when it cannot run here, :class:`MetricFailed` for an unusable result,
    ``ValueError`` naming the input's example."""
    end = len(corpus) if end is None else end
    metric, kwargs = prepared.metric, block_arguments(prepared.kwargs, start, end)
    split = splits_exactly(metric)
    blocks = block_bounds(start, end, block_lines) if split else [(start, end)]
    store = store if split else None
    try:
        if is_d2t_metric(type(metric)):  # its check(): every line, before the model loads
            with stage(f"{prepared.name}: checks"), _input_indices(start):
                metric.check(**kwargs)
        parts = [block_arguments(kwargs, s - start, e - start) for s, e in blocks]
        keys = store.keys(prepared.name, metric, prepared.model, prepared.config, parts, blocks) if store else []
        done = {i: store.load(prepared.name, keys[i], s, e) for i, (s, e) in enumerate(blocks)} if store else {}
        done = {i: examples for i, examples in done.items() if examples is not None}
        if done:
            print(f"d2t-metrics: {prepared.name}: {len(done)} of {len(blocks)} block(s) read back from {store.folder}",
                  file=sys.stderr)
        if len(done) < len(blocks):
            with stage(f"{prepared.name}: load"):
                metric.download_and_prepare()  # where evaluate.load loads models
        with stage(f"{prepared.name}: compute"):
            if len(blocks) == 1 and not done:
                result, examples = _computed(metric, kwargs, start, end)
                if store is not None:
                    store.save(prepared.name, keys[0], start, end, plain(examples))
                return corpus_scores(result), examples
            examples = []
            show = bool(kwargs.get("show_progress"))
            with _line_bar(prepared.name, end - start, show) as bar:
                for i, (s, e) in enumerate(blocks):
                    if i in done:
                        part_examples = done[i]
                    else:
                        part = dict(parts[i], **({"show_progress": False} if show else {}))
                        part_examples = _computed(metric, part, s, e)[1]
                        if store is not None:
                            # as the blocks read back are: plain JSON values, the same corpus scores
                            part_examples = plain(part_examples)
                            store.save(prepared.name, keys[i], s, e, part_examples)
                    examples.extend(part_examples)
                    bar.update(e - s)
            return corpus_scores(metric.corpus_scores(examples)), examples
    except Exception as e:  # noqa: BLE001 - turned into a reason or re-raised
        reason = _skip_reason(e)
        if reason is None:
            raise
        raise Skip(reason) from e


def _computed(metric, kwargs: Dict[str, Any], start: int, end: int) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """``(result, its per-example dicts)`` of one compute() call on lines ``[start, end)``."""
    with _input_indices(start):
        result = metric.compute(**kwargs)
    if not isinstance(result, dict):
        raise MetricFailed(f"compute() returned {type(result).__name__}, not a dict")
    examples = result.get("examples")
    if not isinstance(examples, list) or len(examples) != end - start:
        got = "no 'examples'" if examples is None else f"{len(examples) if isinstance(examples, list) else type(examples).__name__} examples"
        raise MetricFailed(f"compute(per_example=True) gave {got} for {end - start} inputs")
    return result, examples


@contextlib.contextmanager
def _input_indices(start: int) -> Iterator[None]:
    """A ``ValueError`` about lines from ``start`` on names the input's examples: a part's
    "example 3:" is the input's "example start+3:"."""
    try:
        yield
    except ValueError as e:
        if start == 0:
            raise
        raise ValueError(global_indices(str(e), start)) from e


@contextlib.contextmanager
def _line_bar(name: str, total: int, show: bool):
    """One progress bar over a metric's lines, scored block by block (the metric's own bars off)."""
    if not show:
        yield _NoBar()
        return
    from tqdm.auto import tqdm  # lazy: tqdm, shown only with progress bars on

    with tqdm(total=total, desc=f"{name}: lines", unit="line", dynamic_ncols=True) as bar:
        yield bar


class _NoBar:
    def update(self, n: int) -> None:
        pass


def metric_run(prepared: PreparedMetric, scores: Dict[str, Any], examples: List[Dict[str, Any]]) -> MetricRun:
    """The run's record, its numbers made writable as strict JSON: a NaN or infinite score
    becomes ``None`` (``null``), with a warning saying how many."""
    scores, n_scores = finite_or_null(scores)
    examples, n_examples = finite_or_null(examples)
    if n_scores or n_examples:
        print(f"d2t-metrics: warning: {prepared.name} gave {n_scores + n_examples} NaN or infinite number(s) "
              f"({n_scores} corpus, {n_examples} per-example); written as null, since JSON has none", file=sys.stderr)
    return MetricRun(name=prepared.name, scores=scores, examples=examples, model=prepared.model,
                     signature=metric_signature(prepared.name, prepared.metric, prepared.kwargs))


def metric_signature(name: str, metric: Any, options: Dict[str, Any]) -> Optional[str]:
    """``metric.signature(**options)`` for the options it ran with (its model, version and
    arithmetic: two scores are comparable when their signatures agree), or ``None`` when it has
    none; a signature that cannot be made costs a warning, not the scores."""
    sign = getattr(metric, "signature", None)
    if not callable(sign):
        return None
    try:
        value = sign(**options)
    except Exception as e:  # noqa: BLE001 - the scores stand without it
        print(f"d2t-metrics: warning: {name} could not say its signature ({type(e).__name__}: {e})", file=sys.stderr)
        return None
    return str(value) if value else None


def failure_message(error: Exception, prepared: Optional[PreparedMetric], corpus: Corpus) -> str:
    if isinstance(error, MetricFailed):
        return str(error)
    note = unpassed_note(prepared.metric, corpus, prepared.kwargs) if prepared is not None else ""
    if isinstance(error, ValueError):
        return f"it rejected the input: {with_line_numbers(str(error), corpus)}{note}"
    return f"{type(error).__name__}: {error}{note}"


def with_line_numbers(message: str, corpus: Corpus) -> str:
    """Metrics name examples by 0-based index ("example 4: ..."); add the input line."""

    def replace(match):
        i = int(match.group(1))
        return f"line {corpus.line_numbers[i]} (example {i}):" if 0 <= i < len(corpus.line_numbers) else match.group(0)

    return re.sub(r"\bexample (\d+):", replace, message)


def corpus_scores(result: Dict[str, Any]) -> Dict[str, Any]:
    """The corpus-level numbers of a result: top-level scalars, and scalars one dict deep as ``a.b``."""
    scores: Dict[str, Any] = {}
    for key, value in result.items():
        if key == "examples":
            continue
        if _is_number(value):
            scores[key] = value
        elif isinstance(value, dict):
            for sub, v in value.items():
                if _is_number(v):
                    scores[f"{key}.{sub}"] = v
    return scores


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---------------------------------------------------------------------------
# Progress bars

# (module, is-enabled, disable, enable): the switches of each library's bars.
_PROGRESS_SWITCHES = (
    ("huggingface_hub.utils", lambda m: not m.are_progress_bars_disabled(), "disable_progress_bars", "enable_progress_bars"),
    ("transformers.utils.logging", lambda m: m.is_progress_bar_enabled(), "disable_progress_bar", "enable_progress_bar"),
    ("datasets", lambda m: m.is_progress_bar_enabled(), "disable_progress_bars", "enable_progress_bars"),
    ("evaluate.utils.logging", lambda m: m.is_progress_bar_enabled(), "disable_progress_bar", "enable_progress_bar"),
)


@contextlib.contextmanager
def progress_bars_silenced(silence: bool) -> Iterator[None]:
    """Hide every progress bar while the metrics load and run; the settings are restored afterwards,
    since main() may run inside a longer-lived process (tests, notebooks)."""
    if not silence:
        yield
        return
    saved_env = os.environ.get("D2T_NO_PROGRESS")
    os.environ["D2T_NO_PROGRESS"] = "1"  # read by d2t_metrics.models when a metric loads
    restore = []
    for module_name, is_enabled, disable, enable in _PROGRESS_SWITCHES:
        try:
            module = importlib.import_module(module_name)
            was_enabled = is_enabled(module)
            getattr(module, disable)()
        except (ImportError, AttributeError):
            continue  # library absent, or a version without the switch
        if was_enabled:
            restore.append(getattr(module, enable))
    try:
        yield
    finally:
        for enable in reversed(restore):
            enable()
        if saved_env is None:
            os.environ.pop("D2T_NO_PROGRESS", None)
        else:
            os.environ["D2T_NO_PROGRESS"] = saved_env


# ---------------------------------------------------------------------------
# Output


def format_table(runs: Sequence[MetricRun]) -> str:
    rows = [(run.name, key, _format_number(value)) for run in runs for key, value in run.scores.items()]
    headers = ("metric", "score", "value")
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(3)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2])]).rstrip())
    return "\n".join(lines)


def _format_number(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def finite_or_null(value: Any) -> Tuple[Any, int]:
    """``(value, n)``: ``value`` with each of its ``n`` NaN or infinite numbers (numpy scalars and
    arrays included) replaced by ``None``, since strict JSON has no such numbers; ``value`` itself
    when ``n`` is 0."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value, 0
    if isinstance(value, float):
        return (value, 0) if math.isfinite(value) else (None, 1)
    if isinstance(value, dict):
        pairs = [(k, finite_or_null(v)) for k, v in value.items()]
        n = sum(c for _, (_, c) in pairs)
        return ({k: v for k, (v, _) in pairs} if n else value), n
    if isinstance(value, (list, tuple)):
        items = [finite_or_null(v) for v in value]
        n = sum(c for _, c in items)
        return ([v for v, _ in items] if n else value), n
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        plain, n = finite_or_null(value.tolist())
        return (plain if n else value), n
    return value, 0


def encode_line(row: Dict[str, Any]) -> bytes:
    """One output line as strict UTF-8 JSON (a NaN or infinity is a ``ValueError``); ``\\u``
    escapes when a string has a lone surrogate UTF-8 cannot hold."""
    text = json.dumps(row, ensure_ascii=False, allow_nan=False, default=json_default)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(row, ensure_ascii=True, allow_nan=False, default=json_default) + "\n").encode("ascii")


def output_lines(corpus: Corpus, runs: Sequence[MetricRun], with_input: bool = False) -> List[bytes]:
    """One encoded line per example: its id, with ``with_input`` its input fields, and each run's example dict."""
    lines = []
    for i, example_id in enumerate(corpus.ids):
        row = {"id": example_id}
        if with_input:
            row["prediction"] = corpus.predictions[i]
            for column, key in ((corpus.tables, "table"), (corpus.references, "references"), (corpus.sources, "source")):
                if column is not None:
                    row[key] = column[i]
        for run in runs:
            row[run.name] = run.examples[i]
        lines.append(encode_line(row))
    return lines


# Temporary files being written now: what an interrupt removes (InterruptGuard) before the process exits.
PARTIAL_FILES: set = set()


def write_atomically(path: str, chunks: Sequence[bytes]) -> None:
    """Write ``path`` through a temporary file in its folder and ``os.replace``: readers see
    the old file or the whole new one, and a failed or interrupted write leaves the old file."""
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    os.makedirs(folder, exist_ok=True)
    mode = _file_mode(target)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    PARTIAL_FILES.add(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it 0600
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    finally:
        PARTIAL_FILES.discard(tmp)


def _file_mode(path: str) -> int:
    """The existing file's permissions, else the ones ``open()`` would give a new file."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_output(path: str, corpus: Corpus, runs: Sequence[MetricRun], with_input: bool = False) -> None:
    # Every line is encoded before the file is touched, so an unwritable value
    # fails here with the old file intact.
    write_atomically(path, output_lines(corpus, runs, with_input))


def print_scores(runs: Sequence[MetricRun], as_json: bool) -> None:
    """The corpus scores, each metric's with its signature where it has one (as sacrebleu prints
    them): a ``"signature"`` entry beside the scores in JSON, a line under the table otherwise."""
    if as_json:
        print(json.dumps({run.name: _with_signature(run) for run in runs}, indent=2, allow_nan=False, default=json_default))
    else:
        print(format_table(runs))
        signed = [run for run in runs if run.signature]
        if signed:
            width = max(len(run.name) for run in signed)
            print("\nsignatures")
            for run in signed:
                print(f"{run.name.ljust(width)}  {run.signature}")


def _with_signature(run: MetricRun) -> Dict[str, Any]:
    if not run.signature or "signature" in run.scores:
        return run.scores
    return {**run.scores, "signature": run.signature}


# ---------------------------------------------------------------------------
# Preparing and running every requested metric


@dataclass
class Outcome:
    """What happened to each requested metric, in order."""

    runs: List[MetricRun] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)
    failed: List[str] = field(default_factory=list)

    def settled(self) -> set:
        return {r.name for r in self.runs} | set(self.skipped) | set(self.failed)


def prepare_all(names, metrics_dir, checkpoints_dir, models, configs, options, corpus, batch_size, show_progress,
                outcome, dtype: Optional[str] = None) -> List[PreparedMetric]:
    """Construct every metric and plan its inputs before any loads a model, so that
    skips for what is missing and bad configurations or options show up at once."""
    prepared = []
    for name in names:
        try:
            prepared.append(prepare_metric(name, os.path.join(metrics_dir, name), configs.get(name), models.get(name),
                                           checkpoints_dir, corpus, batch_size, show_progress, options.get(name, {}), dtype))
        except UsageError:
            raise  # a bad --config, --model or --option: stop before anything runs
        except Skip as e:
            report_skip(name, str(e), outcome)
        except Exception as e:  # noqa: BLE001
            report_failure(name, e, None, corpus, outcome)
    return prepared


def run_prepared(prepared: PreparedMetric, corpus: Corpus, outcome: Outcome, block_lines: int = BLOCK_LINES,
                 store: Optional[BlockStore] = None) -> None:
    """Load and run one prepared metric, recording what happened in ``outcome``."""
    print(f"d2t-metrics: running {describe(prepared)}", file=sys.stderr)
    try:
        outcome.runs.append(run_metric(prepared, corpus, block_lines, store))
    except Skip as e:
        report_skip(prepared.name, str(e), outcome)
    except Exception as e:  # noqa: BLE001 - one broken metric must not hide the others
        report_failure(prepared.name, e, prepared, corpus, outcome)


def describe(prepared: PreparedMetric) -> str:
    text = prepared.name
    if prepared.model:
        text += f" with model {prepared.model}"
    if prepared.config:
        text += f" (config {prepared.config})"
    return text


def report_skip(name: str, reason: str, outcome: Outcome) -> None:
    outcome.skipped.append(name)
    print(f"d2t-metrics: skipped {name}: {reason}", file=sys.stderr)


def report_failure(name: str, error: Exception, prepared: Optional[PreparedMetric], corpus: Corpus, outcome: Outcome) -> None:
    outcome.failed.append(name)
    # A rejected input or an unusable result is explained by its message; anything else is a bug worth its traceback.
    if not isinstance(error, (ValueError, MetricFailed)):
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    print(f"d2t-metrics: error: {name} failed: {failure_message(error, prepared, corpus)}", file=sys.stderr)


# ---------------------------------------------------------------------------
# Ctrl-C

_STOP_WATCHING = b"\0"  # no signal has number 0


class InterruptGuard:
    """Ctrl-C honoured at any point of a run, model loading included: ``on_interrupt()`` runs
    (it may keep what finished), the files being written (:data:`PARTIAL_FILES`) are removed,
    and the process ends with ``exit_code`` at once (``os._exit``, after flushing).

    Why not ``KeyboardInterrupt``: Python's own handler raises it wherever the main thread
    happens to be; raised inside a destructor (a regex's, while a model loads) it is printed
    as "Exception ignored in ..." and lost, and a library that catches every exception
    swallows it too, so an interrupted run went on for minutes. Here the signal raises
    nothing: its handler only counts, and a watcher thread, woken through
    ``signal.set_wakeup_fd`` (written by the interpreter's C-level handler, so also while the
    main thread sits in a long native call that released the GIL), does the work. A second
    Ctrl-C, while ``on_interrupt`` still runs, exits from the main thread without it.

    It acts only in the main thread (elsewhere, signals cannot be handled, and it does
    nothing), and not where Ctrl-C is ignored (``nohup``); the previous handler and wakeup fd are restored on exit, so ``main()`` can run
    inside a longer-lived process (tests, notebooks).
    """

    def __init__(self, on_interrupt: Callable[[], None], exit_code: int = 130):
        self.on_interrupt = on_interrupt
        self.exit_code = exit_code
        self._thread: Optional[threading.Thread] = None
        self._count = 0

    def __enter__(self) -> "InterruptGuard":
        if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            return self  # signals are the main thread's; an ignored Ctrl-C (nohup, a background job) stays ignored
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)  # set_wakeup_fd needs it
        self._previous_handler = signal.signal(signal.SIGINT, self._handle)
        self._previous_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="d2t-metrics-interrupt", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> bool:
        if self._thread is None:
            return False
        signal.set_wakeup_fd(self._previous_fd)
        signal.signal(signal.SIGINT, self._previous_handler)
        os.write(self._write_fd, _STOP_WATCHING)
        self._thread.join()
        self._thread = None
        os.close(self._read_fd)
        os.close(self._write_fd)
        return False

    def _handle(self, signum, frame) -> None:
        # Runs in the main thread between bytecodes; the watcher thread does the work.
        self._count += 1
        if self._count > 1:
            self._exit()

    def _watch(self) -> None:
        while True:
            data = os.read(self._read_fd, 64)
            if signal.SIGINT in data:
                self._interrupt()
            if not data or _STOP_WATCHING in data:
                return

    def _interrupt(self) -> None:
        try:
            self.on_interrupt()
        except BaseException as e:  # noqa: BLE001 - the process ends anyway; say why it could not keep more
            with contextlib.suppress(Exception):
                print(f"d2t-metrics: interrupted ({type(e).__name__} while keeping what finished: {e})", file=sys.stderr)
        self._exit()

    def _exit(self) -> None:
        for path in list(PARTIAL_FILES):
            with contextlib.suppress(OSError):
                os.remove(path)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(self.exit_code)
