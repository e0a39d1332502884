"""The input boundary every metric shares: checks that run before ``evaluate``
stores anything, and the form in which tables travel through its store.

``evaluate`` writes a metric's declared inputs to an Arrow cache file before
``_compute`` sees them, and type-checks only the first example. Checking
inside ``_compute`` is therefore too late: a bad call has already left the
users' texts in the cache (and a lock the next call waits on), and a list like
``["ok", 123]`` has already been turned into ``["ok", "123"]``.
:class:`CheckedInputs`, mixed into each metric's ``evaluate.Metric`` class,
checks every example of ``compute``, ``add_batch`` and ``add`` first and
raises ``ValueError`` naming the argument and the example index.

Tables are declared inputs (so ``add_batch``, ``num_process`` shards and
``evaluate.combine`` carry them with their predictions), stored as one
canonical JSON string per table (:func:`encode_table`): lossless for every
form :func:`~d2t_metrics.tables.parse_table` reads, since it stores the parsed
:class:`~d2t_metrics.tables.Table` (its kind and its raw strings), and it
survives Arrow whatever shape the user's tables had.

The rules, the same for every metric:

* ``predictions`` (and ``references``, and ``sources`` texts): a list with one
  entry per example, not a single string; each a ``str`` (``None``, numbers,
  lists are refused, not stringified); valid Unicode (no lone surrogates,
  which Arrow and tokenizers cannot encode); at most :data:`MAX_TEXT_CHARS`
  characters. An empty prediction or reference is allowed (each metric card
  says how it scores); an empty source text is not.
* ``tables``: one per prediction, each parsed by ``parse_table``: a
  malformed, empty or ``None`` table is refused.
* The lengths of all inputs agree, and there is at least one example.
* Keyword options a metric does not take are refused by name.
* The options every metric takes (:attr:`CheckedInputs.COMMON_OPTIONS`) are
  checked alike in every metric: ``per_example`` and ``show_progress`` must be
  ``True`` or ``False`` (``1`` or ``"no"`` are refused, not read as truthy),
  ``batch_size`` a positive int (``None`` only where the metric's own default
  is ``None``: PARENT, which runs no model).
"""

from __future__ import annotations

import inspect
import json
import numbers
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .tables import AttributeValue, Table, Triple, _without_gc_pauses, parse_table, short_repr
from .untrusted import plain_text

# A guard against pasting a whole corpus into one example, far above any
# model's window (long texts are windowed or truncated as each card says).
# spaCy's own default limit (nlp.max_length) is the same.
MAX_TEXT_CHARS = 1_000_000

# Kinds of declared input.
TEXT = "text"  # one string per example (predictions)
REFERENCES = "references"  # one string or a non-empty list of strings per example
TABLE = "table"  # one table per example, stored encoded
SOURCE_TEXT = "source_text"  # one source text per example, stored encoded in a table column

# What an optional input not given is stored as, per example (a factory: a fresh list each).
EMPTY_INPUT = {REFERENCES: list, TABLE: str}

_TABLE_KINDS = ("triples", "e2e", "attribute_value")
_CANONICAL_PREFIX = '{"kind":'


# ---------------------------------------------------------------------------
# The canonical string form of a table (and of a source text)


@_without_gc_pauses
def encode_table(table: Any, index: Optional[int] = None) -> str:
    """A table in any form → its canonical JSON string.

    ``{"kind": "triples", "entries": [["s", "p", "o"], ...]}`` (kinds ``e2e`` and
    ``attribute_value`` hold ``[attribute, value]`` pairs). Raw strings are
    kept exactly; :func:`decode_table` gives back an equal :class:`Table`.
    A string already in this form is checked and returned as it is.
    """
    if isinstance(table, str) and table.startswith(_CANONICAL_PREFIX):
        decode_table(table, index)  # refuses a malformed or hand-edited one
        return table
    parsed = parse_table(table, index)
    return json.dumps({"kind": parsed.kind, "entries": [list(e) for e in parsed.entries]}, ensure_ascii=False, separators=(",", ":"))


def encode_source_text(text: str) -> str:
    """A source text in the form a table column stores it (``{"kind": "text", ...}``)."""
    return json.dumps({"kind": "text", "text": text}, ensure_ascii=False, separators=(",", ":"))


def decode_source(encoded: str, index: Optional[int] = None) -> Union[Table, str]:
    """A stored table column value → its :class:`Table`, or the source text."""
    where = "" if index is None else f"example {index}: "
    try:
        obj = json.loads(encoded)
        kind = obj["kind"]
        if kind == "text" and isinstance(obj.get("text"), str):
            return obj["text"]
        if kind not in _TABLE_KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        entry = Triple if kind == "triples" else AttributeValue
        return Table([entry(*e) for e in obj["entries"]], kind=kind)
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{where}not a canonical table string {short_repr(encoded)} ({e})") from None


def decode_table(encoded: str, index: Optional[int] = None) -> Table:
    """A canonical table string → :class:`Table` (a source text is refused)."""
    table = decode_source(encoded, index)
    if not isinstance(table, Table):
        where = "" if index is None else f"example {index}: "
        raise ValueError(f"{where}expected a table, found a source text")
    if not table.entries:
        raise ValueError(f"{'' if index is None else f'example {index}: '}empty table")
    return table


def decode_column(column: Sequence[str], table_only: bool = True) -> List[Union[Table, str]]:
    """Decode a stored column; a table repeated across examples (several systems'
    outputs for one input) is decoded once."""
    memo: Dict[str, Union[Table, str]] = {}
    out = []
    for i, value in enumerate(column):
        if value not in memo:
            memo[value] = decode_table(value, i) if table_only else decode_source(value, i)
        out.append(memo[value])
    return out


def plain_table(table: Table) -> Table:
    """``table`` with :func:`~d2t_metrics.untrusted.plain_text` applied to every
    string of every entry: what a model reads of it (zero-width, bidi and control
    characters gone; every visible character kept). The same object when nothing changes."""
    entries = [type(e)(*(plain_text(member) for member in e)) for e in table.entries]
    if all(new == old for new, old in zip(entries, table.entries)):
        return table
    return Table(entries, kind=table.kind, source=table.source)


# ---------------------------------------------------------------------------
# Checks


def _singular(name: str) -> str:
    return {"predictions": "prediction", "references": "reference", "sources": "source", "tables": "table"}.get(name, name)


def as_list(values: Any, name: str) -> list:
    """``values`` as a list of per-example entries; refuses None, a single string or table, and non-sequences."""
    if values is None:
        raise ValueError(f"{name} is None; pass a list with one entry per example")
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a list with one entry per example, got a single string {short_repr(values)}")
    if isinstance(values, (dict, Table)):
        raise ValueError(f"{name} must be a list with one entry per example, got a single {type(values).__name__}")
    if not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list with one entry per example, got {type(values).__name__}: {short_repr(values)}")
    return list(values)


def check_text(value: Any, what: str, index: int, allow_empty: bool = True) -> str:
    """One text: a ``str`` of valid Unicode, at most :data:`MAX_TEXT_CHARS` long."""
    if value is None:
        raise ValueError(f"example {index}: {what} is None")
    if not isinstance(value, str):
        raise ValueError(f"example {index}: {what} must be a str, got {type(value).__name__}: {short_repr(value)}")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(
            f"example {index}: {what} has {len(value):,} characters, over the limit of {MAX_TEXT_CHARS:,}; "
            "score long documents in parts"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"example {index}: {what} is not valid Unicode: lone surrogate {value[e.start]!r} at character {e.start}"
        ) from None
    if not allow_empty and not value.strip():
        raise ValueError(f"example {index}: {what} is empty")
    return str(value)  # a str subclass (numpy.str_) becomes a plain str


def check_texts(texts: Any, name: str = "predictions", n: Optional[int] = None, allow_empty: bool = True, offset: int = 0) -> List[str]:
    """A list of texts, each checked by :func:`check_text`; ``n`` checks the count."""
    texts = as_list(texts, name)
    if n is not None and len(texts) != n:
        raise ValueError(f"got {n} predictions but {len(texts)} {name}; pass exactly one per prediction")
    return [check_text(t, _singular(name), offset + i, allow_empty) for i, t in enumerate(texts)]


def check_references(references: Any, n: int, name: str = "references", offset: int = 0) -> List[List[str]]:
    """References as one non-empty list of strings per example (a string is a list of one)."""
    references = as_list(references, name)
    if len(references) != n:
        raise ValueError(f"got {n} predictions but {len(references)} {name}; pass exactly one entry per prediction")
    out = []
    for i, refs in enumerate(references):
        if refs is None:
            raise ValueError(f"example {offset + i}: reference is None")
        if isinstance(refs, str):
            refs = [refs]
        if isinstance(refs, (bytes, dict)) or not isinstance(refs, Iterable):
            raise ValueError(f"example {offset + i}: references must be a str or a list of str, got {type(refs).__name__}: {short_repr(refs)}")
        refs = list(refs)
        if not refs:
            raise ValueError(f"example {offset + i}: no reference given")
        out.append([check_text(r, "reference", offset + i) for r in refs])
    return out


def check_tables(tables: Any, n: int, name: str = "tables", offset: int = 0) -> List[str]:
    """Tables parsed, checked and encoded (:func:`encode_table`), one per example."""
    tables = as_list(tables, name)
    if len(tables) != n:
        raise ValueError(f"got {n} predictions but {len(tables)} {name}; pass exactly one table per prediction")
    return [check_encoded(encode_table(t, offset + i), "table", offset + i) for i, t in enumerate(tables)]


def check_source_texts(sources: Any, n: int, name: str = "sources", offset: int = 0) -> List[str]:
    """Non-empty source texts, encoded for a table column (:func:`encode_source_text`)."""
    texts = check_texts(sources, name, n=n, allow_empty=False, offset=offset)
    return [encode_source_text(t) for t in texts]


def check_encoded(encoded: str, what: str, index: int) -> str:
    """An encoded input that Arrow can store: valid Unicode, of bounded size."""
    if len(encoded) > 4 * MAX_TEXT_CHARS:
        raise ValueError(f"example {index}: {what} is {len(encoded):,} characters long once written out; the limit is {4 * MAX_TEXT_CHARS:,}")
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"example {index}: {what} is not valid Unicode: it holds a lone surrogate {encoded[e.start]!r}") from None
    return encoded


def check_batch_size(batch_size: Any) -> int:
    """A positive int (``True`` and floats are refused)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {short_repr(batch_size)}")
    return int(batch_size)


# The arithmetic a model-based metric may be told to run in (``dtype=``, ``--dtype``).
DTYPES = ("float32", "bfloat16", "float16")


def check_dtype_name(dtype: Any) -> Optional[str]:
    """The name (one of :data:`DTYPES`) of ``dtype``, a torch dtype or its name with or without
    ``torch.``, or ``None`` for ``None`` (the device's default); a ``ValueError`` otherwise."""
    if dtype is None:
        return None
    is_torch_dtype = type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype"
    name = str(dtype).replace("torch.", "", 1) if isinstance(dtype, str) or is_torch_dtype else None
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (or None: bfloat16 on a GPU, float32 elsewhere), "
                         f"got {short_repr(dtype)}")
    return name


def check_flag(value: Any, name: str) -> bool:
    """A real ``bool``: ``1``, ``"no"`` or ``None`` are refused, since their truth
    value is not what the caller meant (``"no"`` is true)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {short_repr(value)}")
    return value


# ---------------------------------------------------------------------------
# The mixin


class CheckedInputs:
    """Mix into an ``evaluate.Metric`` (before it in the bases) to check every
    input before evaluate stores it.

    A metric declares ``INPUTS``: each feature name and its kind (:data:`TEXT`,
    :data:`REFERENCES`, :data:`TABLE`), and, in ``ALTERNATIVE_INPUTS``, other
    keywords that fill a feature column (DAE's ``sources=`` texts fill its
    ``tables`` column), and, in ``OPTIONAL_INPUTS``, the declared inputs it can
    do without (each example then stores :data:`EMPTY_INPUT` of its kind).
    ``_compute`` receives tables as canonical strings: decode them with
    :func:`decode_column`.

    A call that fails (bad input, or an error while computing) leaves nothing in
    evaluate's cache: no cache file with the users' texts, no held lock.
    """

    INPUTS: Dict[str, str] = {"predictions": TEXT}
    ALTERNATIVE_INPUTS: Dict[str, Tuple[str, str]] = {}
    OPTIONAL_INPUTS: Tuple[str, ...] = ()
    # Options every metric takes, so that evaluate.combine can pass them to all.
    COMMON_OPTIONS = ("per_example", "show_progress", "batch_size")

    # -- evaluate's entry points ------------------------------------------
    def compute(self, *, predictions=None, references=None, **kwargs):
        """Compute the metric on the given examples and on those added before.

        Every input is checked first (``ValueError`` naming the argument and the
        example index), before evaluate stores anything.
        """
        columns, options = self._checked_call({"predictions": predictions, "references": references, **kwargs})
        if columns is not None:
            self._store(columns)
        elif self.writer is None:
            raise ValueError(
                f"nothing to compute: pass {self._call_signature()} to compute(), or add examples with add() or add_batch() first"
            )
        try:
            return super().compute(**options)
        except BaseException:
            self._discard_stored()
            raise

    def check(self, *, predictions=None, references=None, **kwargs) -> None:
        """Check a compute() call's inputs and options as compute() does (``ValueError``
        naming the argument and the example index), storing and computing nothing:
        what a caller that computes in parts runs on the whole first."""
        self._checked_call({"predictions": predictions, "references": references, **kwargs})

    def _checked_call(self, call: Dict[str, Any]) -> Tuple[Optional[Dict[str, list]], Dict[str, Any]]:
        """``(the checked columns, or None when no input was given; the options)``."""
        given, options = self._split_call(call)
        self._check_options(options)
        self._check_common_options(options)
        self._check_option_values(options)
        if not given:
            return None, options
        columns = self._checked_columns(given, offset=0)
        if not columns["predictions"]:
            raise ValueError("predictions is empty; pass at least one example")
        return columns, options

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of examples, each checked first (``ValueError`` naming the argument and its index in the batch)."""
        given, options = self._split_call({"predictions": predictions, "references": references, **kwargs})
        if options:
            raise ValueError(f"add_batch() takes only the inputs {self._call_signature()}; pass {sorted(options)} to compute()")
        if not given:
            raise ValueError(f"add_batch() needs {self._call_signature()}")
        self._store(self._checked_columns(given, offset=0))

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one example, checked first (``ValueError`` naming the argument)."""
        # evaluate.combine's add() passes the plural names.
        prediction = kwargs.pop("predictions", prediction)
        reference = kwargs.pop("references", reference)
        one = {"predictions": prediction, "references": reference, **kwargs}
        given, options = self._split_call({k: (None if v is None else [v]) for k, v in one.items()})
        if options:
            raise ValueError(f"add() takes only the inputs {self._call_signature()}; pass {sorted(options)} to compute()")
        if not given:
            raise ValueError(f"add() needs {self._call_signature(singular=True)}")
        columns = self._checked_columns(given, offset=0)
        super().add(
            prediction=columns["predictions"][0],
            reference=columns["references"][0] if "references" in columns else None,
            **{k: v[0] for k, v in columns.items() if k not in ("predictions", "references")},
        )

    # -- the checks -------------------------------------------------------
    def _split_call(self, call: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """``(inputs given, options)``. Inputs the metric does not declare
        (``references`` for a reference-less metric inside evaluate.combine)
        are dropped, as evaluate does."""
        inputs = {name: call.get(name) for name in list(self.INPUTS) + list(self.ALTERNATIVE_INPUTS)}
        given = {k: v for k, v in inputs.items() if v is not None}
        options = {k: v for k, v in call.items() if k not in inputs and k not in ("predictions", "references")}
        return given, options

    def _checked_columns(self, given: Dict[str, Any], offset: int) -> Dict[str, list]:
        """Every declared input checked and encoded; raises ``ValueError``."""
        predictions = check_texts(given.get("predictions"), "predictions", offset=offset)
        n = len(predictions)
        columns: Dict[str, list] = {"predictions": predictions}
        for name, kind in self.INPUTS.items():
            if name == "predictions":
                continue
            fillers = [alt for alt, (column, _) in self.ALTERNATIVE_INPUTS.items() if column == name and alt in given]
            if fillers:
                # The more specific input wins (DAE: sources= texts over tables=),
                # so one call can give tables to the table metrics of a combine.
                columns[name] = self._check_column(fillers[0], self.ALTERNATIVE_INPUTS[fillers[0]][1], given[fillers[0]], n, offset)
            elif name in given:
                columns[name] = self._check_column(name, kind, given[name], n, offset)
            elif name in self.OPTIONAL_INPUTS:
                columns[name] = [EMPTY_INPUT[kind]() for _ in range(n)]
            else:
                hint = "".join(f" (or {alt}=)" for alt, (column, _) in self.ALTERNATIVE_INPUTS.items() if column == name)
                raise ValueError(f"{name} is None; {type(self).__name__} needs {name}={hint}, one per prediction")
        return columns

    def _check_column(self, name: str, kind: str, values: Any, n: int, offset: int) -> list:
        if kind == TEXT:
            return check_texts(values, name, n=n, offset=offset)
        if kind == REFERENCES:
            return check_references(values, n, name, offset=offset)
        if kind == TABLE:
            return check_tables(values, n, name, offset=offset)
        if kind == SOURCE_TEXT:
            return check_source_texts(values, n, name, offset=offset)
        raise ValueError(f"unknown input kind {kind!r}")

    def _check_options(self, options: Dict[str, Any]) -> None:
        params = inspect.signature(self._compute).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return
        known = [p for p in params if p not in self.INPUTS]
        unknown = sorted(k for k in options if k not in known)
        if unknown:
            raise ValueError(
                f"{self.name}: unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                f"it takes the inputs {self._call_signature()} and the options {', '.join(known)}"
            )

    def _check_common_options(self, options: Dict[str, Any]) -> None:
        """The :attr:`COMMON_OPTIONS` given, checked the same way in every metric
        (module docstring), before anything is stored or loaded."""
        for name in ("per_example", "show_progress"):
            if name in options:
                check_flag(options[name], name)
        if "batch_size" in options:
            param = inspect.signature(self._compute).parameters.get("batch_size")
            if not (options["batch_size"] is None and param is not None and param.default is None):
                check_batch_size(options["batch_size"])

    def _check_option_values(self, options: Dict[str, Any]) -> None:
        """Refuse bad option values before anything is stored (metrics override this)."""

    @property
    def accepted_inputs(self) -> Tuple[str, ...]:
        """Every input keyword: the declared features and the alternatives that fill them."""
        return tuple(self.INPUTS) + tuple(self.ALTERNATIVE_INPUTS)

    def _call_signature(self, singular: bool = False) -> str:
        names = []
        for name in self.INPUTS:
            alts = [alt for alt, (column, _) in self.ALTERNATIVE_INPUTS.items() if column == name]
            shown = _singular(name) if singular and name in ("predictions", "references") else name
            names.append("/".join([f"{shown}="] + [f"{a}=" for a in alts]))
        return ", ".join(names)

    # -- evaluate's store -------------------------------------------------
    def _store(self, columns: Dict[str, list]) -> None:
        super().add_batch(
            predictions=columns["predictions"],
            references=columns.get("references"),
            **{k: v for k, v in columns.items() if k not in ("predictions", "references")},
        )

    def _discard_stored(self) -> None:
        """Forget what evaluate stored for a failed call: delete its cache files
        (they hold the users' texts) and release its locks."""
        paths = list(getattr(self, "file_paths", None) or []) + [getattr(self, "cache_file_name", None)]
        locks = list(getattr(self, "filelocks", None) or []) + [getattr(self, "filelock", None), getattr(self, "rendez_vous_lock", None)]
        if getattr(self, "writer", None) is not None:
            try:
                self.writer.finalize()
            except Exception:  # noqa: BLE001 - best effort; the file is deleted next
                pass
        for path in {p for p in paths if p}:
            try:
                os.remove(path)
            except OSError:
                pass
        for lock in {id(x): x for x in locks if x is not None}.values():
            try:
                lock.release()
            except Exception:  # noqa: BLE001 - a lock that was never acquired
                pass
        self.writer = self.data = self.buf_writer = None
        self.file_paths = self.filelocks = None
        self.cache_file_name = self.filelock = None
        self.selected_feature_format = None


__all__ = [
    "MAX_TEXT_CHARS",
    "CheckedInputs",
    "as_list",
    "check_batch_size",
    "check_encoded",
    "check_flag",
    "check_references",
    "check_source_texts",
    "check_tables",
    "check_text",
    "check_texts",
    "decode_column",
    "decode_source",
    "decode_table",
    "encode_source_text",
    "encode_table",
    "plain_table",
]
