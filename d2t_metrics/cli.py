"""``d2t-metrics``: score a JSONL file of data-to-text outputs with several metrics.

::

    d2t-metrics score --metrics parent,nli_semantic_accuracy \\
        --input examples/examples.jsonl --output scores.jsonl

Each input line is a JSON object::

    {"id": "ex1", "prediction": "...", "references": ["...", ...],
     "table": <any table form parse_table reads>, "source": "..."}

``id``, ``references``, ``table`` and ``source`` are optional, but a metric
that needs one of them is skipped (with a message on stderr) when the input
lacks it. Each output line holds the input's ``id`` (the line's 0-based index
when it had none) and, per metric that ran, that example's dict from
``compute(..., per_example=True)``, unchanged. Corpus scores are printed as a
table on stdout, or as JSON with ``--json``.

Metrics are the folders ``metrics/<name>/<name>.py`` of the repository (or of
``--metrics-dir``), loaded with ``evaluate.load(path, config, model=...)``. A
metric with a folder ``checkpoints/<name>/`` gets ``model=<that folder>`` by
default, so it works offline; ``--model NAME=PATH_OR_HUB_ID`` overrides it.
Metrics whose model or libraries are missing are skipped, with the reason on
stderr; the command exits 0 when at least one metric ran.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, TextIO

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(PACKAGE_DIR)

EXIT_OK, EXIT_NOTHING_RAN, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line arguments or input file; reported without a traceback."""


# ---------------------------------------------------------------------------
# Input


@dataclass
class Corpus:
    ids: List[Any]
    predictions: List[str]
    references: Optional[List[List[str]]]
    tables: Optional[List[Any]]
    sources: Optional[List[str]]
    missing: Dict[str, List[int]] = field(default_factory=dict)  # field -> lines lacking it

    def __len__(self) -> int:
        return len(self.predictions)


def read_corpus(path: str) -> Corpus:
    """Read and check a JSONL input file; problems raise :class:`UsageError` naming the line."""
    if path == "-":
        return _read_lines(sys.stdin, "<stdin>")
    if not os.path.isfile(path):
        raise UsageError(f"input file {path!r} does not exist")
    with open(path, encoding="utf-8") as f:
        return _read_lines(f, path)


def _read_lines(f: TextIO, name: str) -> Corpus:
    rows = []
    for lineno, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(f"{name}, line {lineno}: not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise UsageError(f"{name}, line {lineno}: expected a JSON object, got {type(row).__name__}")
        where = f"{name}, line {lineno} (example {len(rows)})"
        pred = row.get("prediction")
        if not isinstance(pred, str):
            raise UsageError(f"{where}: 'prediction' must be a string, got {pred!r}")
        refs = row.get("references")
        if refs is not None:
            if isinstance(refs, str):
                refs = [refs]
            if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
                raise UsageError(f"{where}: 'references' must be a non-empty list of strings, got {row.get('references')!r}")
            row["references"] = refs
        source = row.get("source")
        if source is not None and not isinstance(source, str):
            raise UsageError(f"{where}: 'source' must be a string, got {source!r}")
        rows.append(row)
    if not rows:
        raise UsageError(f"{name}: no examples (the file is empty)")

    def column(key):
        values = [r.get(key) for r in rows]
        missing = [i for i, v in enumerate(values) if v is None]
        return (None if missing else values), missing

    references, missing_refs = column("references")
    tables, missing_tables = column("table")
    sources, missing_sources = column("source")
    ids = [r.get("id", i) for i, r in enumerate(rows)]
    return Corpus(
        ids=ids,
        predictions=[r["prediction"] for r in rows],
        references=references,
        tables=tables,
        sources=sources,
        missing={"references": missing_refs, "table": missing_tables, "source": missing_sources},
    )


# ---------------------------------------------------------------------------
# Metrics


def find_metrics_dir(explicit: Optional[str] = None) -> str:
    """``--metrics-dir``, else the repository's ``metrics/``, else ``./metrics``."""
    if explicit:
        if not os.path.isdir(explicit):
            raise UsageError(f"--metrics-dir {explicit!r} is not a directory")
        return os.path.abspath(explicit)
    for candidate in (os.path.join(REPO_ROOT, "metrics"), os.path.join(os.getcwd(), "metrics")):
        if os.path.isdir(candidate):
            return candidate
    raise UsageError(
        "cannot find the metrics/ folder next to the installed d2t_metrics package or in the current directory; "
        "pass --metrics-dir"
    )


def find_checkpoints_dir(explicit: Optional[str], metrics_dir: str) -> Optional[str]:
    if explicit:
        return os.path.abspath(explicit)
    for candidate in (os.path.join(os.path.dirname(metrics_dir), "checkpoints"), os.path.join(REPO_ROOT, "checkpoints")):
        if os.path.isdir(candidate):
            return candidate
    return None


def available_metrics(metrics_dir: str) -> List[str]:
    return sorted(
        name for name in os.listdir(metrics_dir) if os.path.isfile(os.path.join(metrics_dir, name, f"{name}.py"))
    )


def default_model(name: str, checkpoints_dir: Optional[str]) -> Optional[str]:
    """``checkpoints/<name>/`` when it exists and is not empty."""
    if not checkpoints_dir:
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


def _feature_sets(metric) -> List[Any]:
    features = metric.features
    return list(features) if isinstance(features, (list, tuple)) else [features]


def reference_feature(metric):
    """The ``references`` feature of the metric's first feature set that has one, else ``None``."""
    for features in _feature_sets(metric):
        if "references" in features:
            return features["references"]
    return None


def _is_sequence_feature(feature) -> bool:
    return type(feature).__name__ in ("Sequence", "List", "LargeList") or isinstance(feature, (list, tuple))


def compute_parameters(metric) -> Dict[str, inspect.Parameter]:
    """Parameters of the metric's ``_compute`` (a ``**kwargs`` one shows as kind VAR_KEYWORD)."""
    return dict(inspect.signature(metric._compute).parameters)


class Skip(Exception):
    """A metric that cannot run on this input or machine; the message says why."""


def build_compute_kwargs(metric, corpus: Corpus, batch_size: Optional[int], show_progress: bool) -> Dict[str, Any]:
    params = compute_parameters(metric)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())

    def accepts(name):
        return name in params or takes_any

    def required(name):
        p = params.get(name)
        return p is not None and p.default is inspect.Parameter.empty

    kwargs: Dict[str, Any] = {"predictions": corpus.predictions}
    ref_feature = reference_feature(metric)
    if ref_feature is not None:
        if corpus.references is None:
            raise Skip(f"it needs references, which lines {_lines(corpus.missing['references'])} lack")
        if _is_sequence_feature(ref_feature):
            kwargs["references"] = corpus.references
        else:
            kwargs["references"] = [refs[0] for refs in corpus.references]
    for key, arg in (("table", "tables"), ("source", "sources")):
        values = corpus.tables if key == "table" else corpus.sources
        if values is not None and accepts(arg):
            kwargs[arg] = values
        elif required(arg):
            raise Skip(f"it needs {arg}, but lines {_lines(corpus.missing[key])} have no {key!r}")
    if not accepts("per_example"):
        raise Skip("its compute() has no per_example argument, so per-example scores cannot be written")
    kwargs["per_example"] = True
    if accepts("show_progress"):
        kwargs["show_progress"] = show_progress
    if batch_size is not None and accepts("batch_size"):
        kwargs["batch_size"] = batch_size
    return kwargs


def _lines(indices: List[int], limit: int = 5) -> str:
    shown = ", ".join(str(i + 1) for i in indices[:limit])
    return shown + (f" and {len(indices) - limit} more" if len(indices) > limit else "")


def load_metric(path: str, config: Optional[str], model: Optional[str]):
    import evaluate

    kwargs = {} if model is None else {"model": model}
    return evaluate.load(path, config, **kwargs) if config else evaluate.load(path, **kwargs)


def _skip_reason(error: BaseException) -> Optional[str]:
    """A short reason for errors that mean 'cannot run here', else ``None``."""
    from .models import ModelNotAvailableError

    if isinstance(error, ModelNotAvailableError):
        return f"its model is not available: {error}"
    if isinstance(error, ImportError):
        return f"a library it needs is missing ({error}); install the metric's extra, e.g. pip install -e '.[all]'"
    if isinstance(error, OSError) and ("model" in str(error).lower() or "huggingface" in str(error).lower()):
        return f"its model is not available: {error}"
    return None


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


def _takes_model(metric) -> bool:
    """Whether the metric's constructor has a ``model`` argument (evaluate drops unknown ones silently)."""
    try:
        params = inspect.signature(type(metric).__init__).parameters
    except (TypeError, ValueError):
        return True
    return "model" in params


@dataclass
class MetricRun:
    name: str
    scores: Dict[str, Any]
    examples: List[Dict[str, Any]]
    model: Optional[str]


def run_metric(name, path, config, model, corpus, batch_size, show_progress) -> MetricRun:
    """Load and run one metric; raises :class:`Skip` with the reason when it cannot run."""
    try:
        metric = load_metric(path, config, model)
    except Exception as e:  # noqa: BLE001 - turned into a reason or re-raised
        reason = _skip_reason(e)
        if reason is None:
            raise
        raise Skip(reason) from e
    if model is not None and not _takes_model(metric):
        print(f"d2t-metrics: warning: {name} takes no model; ignoring model {model!r}", file=sys.stderr)
    kwargs = build_compute_kwargs(metric, corpus, batch_size, show_progress)
    try:
        result = metric.compute(**kwargs)
    except ValueError as e:
        raise Skip(f"it rejected the input: {e}") from e
    except Exception as e:  # noqa: BLE001
        reason = _skip_reason(e)
        if reason is None:
            raise
        raise Skip(reason) from e
    if not isinstance(result, dict):
        raise Skip(f"compute() returned {type(result).__name__}, not a dict")
    examples = result.get("examples")
    if not isinstance(examples, list) or len(examples) != len(corpus):
        got = "no 'examples'" if examples is None else f"{len(examples) if isinstance(examples, list) else type(examples).__name__} examples"
        raise Skip(f"compute(per_example=True) gave {got} for {len(corpus)} inputs")
    return MetricRun(name=name, scores=corpus_scores(result), examples=examples, model=model)


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


def _json_default(value):
    # numpy scalars and arrays from metric results
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def write_output(path: str, corpus: Corpus, runs: Sequence[MetricRun]) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for i, example_id in enumerate(corpus.ids):
            row = {"id": example_id}
            for run in runs:
                row[run.name] = run.examples[i]
            f.write(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n")


# ---------------------------------------------------------------------------
# Commands


def score(args) -> int:
    names = [n.strip() for n in args.metrics.split(",") if n.strip()]
    if not names:
        raise UsageError("--metrics needs at least one metric name")
    if len(set(names)) != len(names):
        raise UsageError(f"--metrics names a metric twice: {args.metrics}")
    metrics_dir = find_metrics_dir(args.metrics_dir)
    checkpoints_dir = find_checkpoints_dir(args.checkpoints_dir, metrics_dir)
    models = parse_assignments(args.model, "--model", names)
    configs = parse_assignments(args.config, "--config", names)
    corpus = read_corpus(args.input)
    if args.no_progress:
        os.environ["D2T_NO_PROGRESS"] = "1"
    show_progress = not args.no_progress

    runs: List[MetricRun] = []
    skipped: List[tuple] = []
    known = available_metrics(metrics_dir)
    for name in names:
        path = os.path.join(metrics_dir, name)
        if name not in known:
            skipped.append((name, f"no metric module {os.path.join(path, name + '.py')} (available: {', '.join(known) or 'none'})"))
            continue
        model = models.get(name) or default_model(name, checkpoints_dir)
        print(f"d2t-metrics: running {name}" + (f" with model {model}" if model else ""), file=sys.stderr)
        try:
            runs.append(run_metric(name, path, configs.get(name), model, corpus, args.batch_size, show_progress))
        except Skip as e:
            skipped.append((name, str(e)))
        except Exception as e:  # noqa: BLE001 - one broken metric must not hide the others
            traceback.print_exc(file=sys.stderr)
            skipped.append((name, f"it failed with {type(e).__name__}: {e}"))

    for name, reason in skipped:
        print(f"d2t-metrics: skipped {name}: {reason}", file=sys.stderr)
    if not runs:
        print("d2t-metrics: no metric ran; nothing written", file=sys.stderr)
        return EXIT_NOTHING_RAN
    if args.output:
        write_output(args.output, corpus, runs)
        print(f"d2t-metrics: wrote {len(corpus)} lines to {args.output}", file=sys.stderr)
    if args.json:
        print(json.dumps({run.name: run.scores for run in runs}, indent=2, default=_json_default))
    else:
        print(format_table(runs))
    return EXIT_OK


def list_metrics(args) -> int:
    metrics_dir = find_metrics_dir(args.metrics_dir)
    checkpoints_dir = find_checkpoints_dir(args.checkpoints_dir, metrics_dir)
    for name in available_metrics(metrics_dir):
        model = default_model(name, checkpoints_dir)
        print(f"{name}\t{model or '-'}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="d2t-metrics",
        description="Semantic accuracy metrics for data-to-text generation.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--metrics-dir", help="folder holding metrics/<name>/<name>.py (default: the repository's metrics/)")
    common.add_argument("--checkpoints-dir", help="folder holding checkpoints/<name>/ default models (default: the repository's checkpoints/)")

    s = sub.add_parser("score", parents=[common], help="score a JSONL file", description=__doc__.split("::")[0].strip())
    s.add_argument("--metrics", required=True, help="comma-separated metric names, e.g. parent,nli_semantic_accuracy")
    s.add_argument("--input", required=True, help="JSONL input ('-' for stdin)")
    s.add_argument("--output", help="JSONL output with one line of per-example scores per input line")
    s.add_argument("--json", action="store_true", help="print corpus scores as JSON instead of a table")
    s.add_argument("--model", action="append", default=[], metavar="NAME=PATH_OR_HUB_ID", help="model for a metric (repeatable)")
    s.add_argument("--config", action="append", default=[], metavar="NAME=CONFIG", help="configuration of a metric (repeatable)")
    s.add_argument("--batch-size", type=int, help="batch size for model-based metrics")
    s.add_argument("--no-progress", action="store_true", help="hide progress bars")
    s.set_defaults(func=score)

    ls = sub.add_parser("list", parents=[common], help="list the metrics and their default models")
    ls.set_defaults(func=list_metrics)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "batch_size", None) is not None and args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")
    try:
        return args.func(args)
    except UsageError as e:
        print(f"d2t-metrics: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
