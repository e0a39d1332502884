"""``d2t-metrics explain``: one example's table, text and each metric's verdict per fact, in the terminal.

::

    d2t-metrics explain --input examples/examples.jsonl --line 3 [--metrics parent,dae] [--width 100]
    d2t-metrics explain --input FILE.jsonl --id webnlg-3
    d2t-metrics explain --prediction "Alan Bean was born in Boston." --table "Alan_Bean | birthPlace | Wheeler,_Texas"

A user who finds a surprising score checks it here without the Space: the
example is read (one line of a JSONL file in ``score``'s format, by its
1-based line number or its ``id``; or the prediction and table given
directly), checked as ``score`` checks its input, scored by the chosen
metrics (all by default) with the same models, configurations and options as
``score`` (:mod:`d2t_metrics.runner` plans every metric before any model
loads), and printed as plain text: the table (one entry per line), the text,
a summary (one line per metric), then per metric its verdict per fact:

* ``nli_semantic_accuracy``: each fact entailed by the text or not, the
  omitted facts, and whether the facts entail the text (hallucination);
* ``fact_accuracy``: each fact extracted from the text, supported,
  contradicted (with the expected value) or unverifiable, with its evidence
  span where the metric gives one; the table facts the text does not state;
* ``data_questeval``: the questions that failed first (expected vs found
  answer), then the others, capped with "... N more";
* ``dae``: the dependency arcs the source does not entail and, for a
  table read both ways, each fact said or left out;
* ``parent``: precision, recall, F1 and its parts.

A metric this module does not know, and any field a known metric adds later
(a ``truncated`` flag, a new field of a fact), is still shown: scalar fields
as ``key value``, lists of facts field by field.

Lines are wrapped to the terminal's width (``shutil.get_terminal_size``, or
``--width``); no colours, so the output reads the same in a pipe or a file.
Exit status: 0 every requested metric ran, 1 one failed or none ran, 2 a
usage or input error (before any model loads), 3 with ``--strict`` a metric
was skipped, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import textwrap
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import runner
from .inputs import DTYPES
from .runner import Corpus, UsageError, check_row, decode_utf8, parse_line
from .spaces import table_from_text
from .tables import parse_table

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SKIPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

# How many items of a long list (questions, arcs, facts) are printed before "... N more".
DEFAULT_LIMIT = 10
MIN_WIDTH = 40

TITLES = {
    "parent": "PARENT",
    "nli_semantic_accuracy": "NLI semantic accuracy",
    "dae": "DAE",
    "data_questeval": "Data-QuestEval",
    "fact_accuracy": "Fact accuracy",
}


# ---------------------------------------------------------------------------
# Arguments


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``explain``'s arguments to ``parser`` (the subcommand's parser; ``--metrics-dir`` and
    ``--checkpoints-dir`` are added only when a parent parser has not added them already)."""
    source = parser.add_argument_group("which example")
    source.add_argument("--input", help="JSONL input in score's format ('-' for stdin)")
    which = source.add_mutually_exclusive_group()
    which.add_argument("--line", type=int, metavar="N", help="the example on the file's 1-based line N (default: the first)")
    which.add_argument("--id", metavar="ID", help="the example whose 'id' is ID (compared as text)")
    source.add_argument("--prediction", help="the generated text, instead of --input")
    source.add_argument("--table", help="its table: WebNLG triples one per line or joined by <br>, an E2E MR, or JSON")
    source.add_argument("--reference", action="append", default=[], help="a reference text (repeatable)")
    source.add_argument("--source", dest="source_text", metavar="SOURCE", help="a source text (DAE)")
    parser.add_argument("--metrics", help="comma-separated metric names (default: every metric)")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=PATH_OR_HUB_ID", help="model for a metric (repeatable)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=CONFIG", help="configuration of a metric (repeatable)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME.KEY=VALUE", help="a compute() option of one metric (repeatable; JSON values)")
    parser.add_argument("--dtype", choices=DTYPES, help=runner.DTYPE_HELP)
    parser.add_argument("--width", type=int, help="wrap lines to this many columns (default: the terminal's width)")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"items shown per list before '... N more' (default {DEFAULT_LIMIT})")
    parser.add_argument("--strict", action="store_true", help=f"exit {EXIT_SKIPPED} when a requested metric was skipped")
    present = getattr(parser, "_option_string_actions", {})
    if "--metrics-dir" not in present:
        parser.add_argument("--metrics-dir", help="folder holding metrics/<name>/<name>.py (default: the repository's metrics/)")
    if "--checkpoints-dir" not in present:
        parser.add_argument("--checkpoints-dir", help="folder holding checkpoints/<name>/ default models")
    return parser


def build_parser() -> argparse.ArgumentParser:
    """A stand-alone parser (``python -m d2t_metrics.explain``)."""
    parser = argparse.ArgumentParser(prog="d2t-metrics explain", description=__doc__.split("::")[0].strip())
    return add_arguments(parser)


# ---------------------------------------------------------------------------
# Reading the example


@dataclass
class Chosen:
    """The example to explain: its checked input row, where it came from, and a one-example corpus."""

    row: Dict[str, Any]
    where: str
    corpus: Corpus


def check_arguments(args) -> None:
    """Refuse contradictory or missing arguments before anything is read."""
    direct = args.prediction is not None or args.table is not None or args.reference or args.source_text is not None
    if args.input is not None and direct:
        raise UsageError("give either --input (with --line or --id) or --prediction/--table, not both")
    if args.input is None:
        if args.prediction is None:
            raise UsageError("give --input FILE (with --line N or --id ID), or --prediction TEXT with --table TABLE")
        if args.line is not None or args.id is not None:
            raise UsageError("--line and --id choose a line of --input")
    if args.line is not None and args.line < 1:
        raise UsageError(f"--line must be >= 1, got {args.line}")
    if args.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {args.limit}")
    if args.width is not None and args.width < MIN_WIDTH:
        raise UsageError(f"--width must be >= {MIN_WIDTH}, got {args.width}")


def _read_text(path: str) -> Tuple[str, str]:
    if path == "-":
        if not hasattr(sys.stdin, "buffer"):
            return sys.stdin.read(), "<stdin>"
        return decode_utf8(sys.stdin.buffer.read(), "<stdin>"), "<stdin>"
    try:
        with open(path, "rb") as f:
            return decode_utf8(f.read(), path), path
    except OSError as e:
        raise UsageError(f"cannot read input file {path!r}: {e.strerror or e}") from None


def _id_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def pick_line(text: str, name: str, line: Optional[int], example_id: Optional[str]) -> Tuple[Dict[str, Any], int]:
    """``(checked row, 1-based line number)`` of the chosen example of a JSONL text.

    Lines split on ``\\n`` only, as ``score`` reads them. With neither ``line``
    nor ``example_id`` the first example is chosen. Only the chosen line is
    checked (``score``'s checks, naming the file and line)."""
    lines = text.split("\n")
    if line is not None:
        if line > len(lines) or not lines[line - 1].strip():
            filled = [str(n) for n, item in enumerate(lines, 1) if item.strip()]
            shown = ", ".join(filled[:10]) + (f" ... {filled[-1]}" if len(filled) > 10 else "")
            raise UsageError(f"{name} has no example on line {line} (its examples are on lines {shown or 'none'})")
        where = f"{name}, line {line}"
        return check_row(parse_line(lines[line - 1], where), where), line
    seen = []
    for number, item in enumerate(lines, 1):
        if not item.strip():
            continue
        where = f"{name}, line {number}"
        row = parse_line(item, where)
        if example_id is None or _id_text(row.get("id", len(seen))) == example_id:
            return check_row(row, where), number
        seen.append(_id_text(row.get("id", len(seen))))
    if example_id is None:
        raise UsageError(f"{name}: no examples (the file is empty)")
    shown = ", ".join(seen[:5]) + (f" and {len(seen) - 5} more" if len(seen) > 5 else "")
    raise UsageError(f"{name} has no example with id {example_id!r} (ids: {shown})")


def direct_row(args) -> Dict[str, Any]:
    """The row given by ``--prediction``, ``--table``, ``--reference``, ``--source``, checked as a file's line."""
    row: Dict[str, Any] = {"id": "command line", "prediction": args.prediction}
    if args.table is not None:
        try:
            row["table"] = table_from_text(args.table)
        except ValueError as e:
            raise UsageError(f"--table: {e}") from None
    if args.reference:
        row["references"] = list(args.reference)
    if args.source_text is not None:
        row["source"] = args.source_text
    return check_row(row, "the command line")


def one_example_corpus(row: Dict[str, Any], line_number: int):
    """A :class:`d2t_metrics.runner.Corpus` of the one example, its columns as the line has them."""
    def column(key):
        return [row[key]] if row.get(key) is not None else None

    return Corpus(
        ids=[row.get("id", 0)], predictions=[row["prediction"]], references=column("references"),
        tables=column("table"), sources=column("source"), line_numbers=[line_number],
        missing_lines={key: ([] if row.get(key) is not None else [line_number]) for key in ("references", "table", "source")},
    )


def choose_example(args) -> Chosen:
    if args.input is None:
        row = direct_row(args)
        return Chosen(row=row, where="the command line", corpus=one_example_corpus(row, 1))
    text, name = _read_text(args.input)
    row, number = pick_line(text, name, args.line, args.id)
    return Chosen(row=row, where=f"{name}, line {number}", corpus=one_example_corpus(row, number))


# ---------------------------------------------------------------------------
# Running


def run(args) -> int:
    """``d2t-metrics explain``: check the arguments and the example, score it, print the layout."""
    try:
        check_arguments(args)
        metrics_dir = runner.find_metrics_dir(args.metrics_dir)
        known = runner.available_metrics(metrics_dir)
        names = runner.requested_metrics(args.metrics) if args.metrics is not None else runner.default_metrics(metrics_dir)
        runner.check_metric_names(names, known, metrics_dir)
        checkpoints_dir = runner.find_checkpoints_dir(args.checkpoints_dir, metrics_dir)
        models = runner.parse_assignments(args.model, "--model", names)
        configs = runner.parse_assignments(args.config, "--config", names)
        options = runner.parse_options(args.option, names)
        chosen = choose_example(args)
    except UsageError as e:
        print(f"d2t-metrics: error: {e}", file=sys.stderr)
        return EXIT_USAGE

    outcome = runner.Outcome()
    try:
        with runner.progress_bars_silenced(True):
            prepared = runner.prepare_all(names, metrics_dir, checkpoints_dir, models, configs, options, chosen.corpus,
                                          None, False, outcome, args.dtype)
            for p in prepared:
                runner.run_prepared(p, chosen.corpus, outcome)
    except UsageError as e:  # a bad --config or --option, found before any model loaded
        print(f"d2t-metrics: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        done = ", ".join(r.name for r in outcome.runs) or "none"
        print(f"d2t-metrics: interrupted; metrics finished: {done}", file=sys.stderr)
        return EXIT_INTERRUPTED

    results = {r.name: r.examples[0] for r in outcome.runs}
    models_used = {r.name: r.model for r in outcome.runs}
    print(render(chosen.row, results, chosen.where, width=output_width(args.width), limit=args.limit,
                 models=models_used, skipped=outcome.skipped, failed=outcome.failed))
    if not outcome.runs or outcome.failed:
        return EXIT_FAILED
    if outcome.skipped and args.strict:
        return EXIT_SKIPPED
    return EXIT_OK


def output_width(requested: Optional[int]) -> int:
    """``requested``, else the terminal's columns (80 when it has none), at least :data:`MIN_WIDTH`."""
    width = requested or shutil.get_terminal_size(fallback=(80, 24)).columns
    return max(MIN_WIDTH, width)


# ---------------------------------------------------------------------------
# Numbers and headlines (shared with the playground's summary table)


def number(value: Any) -> str:
    """A score as printed: 4 decimals for floats, ``-`` for none, ``nan`` as is."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def _count(items: Any) -> int:
    return len(items) if isinstance(items, (list, tuple)) else 0


def _plural(n: int, word: str, plural: Optional[str] = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def headline(name: str, example: Dict[str, Any]) -> Tuple[str, Any, str]:
    """``(label of the headline number, the number, a short verdict)`` of one metric's example,
    the line a summary shows for it."""
    if name == "parent":
        return "F1", example.get("f1", example.get("score")), f"precision {number(example.get('precision'))}, recall {number(example.get('recall'))}"
    if name == "nli_semantic_accuracy":
        omitted = _count(example.get("omitted_facts"))
        verdict = str(example.get("label", ""))
        if omitted:
            verdict += f": {_plural(omitted, 'fact')} omitted"
        return "score", example.get("score"), verdict + f"; confidence {number(example.get('confidence'))}"
    if name == "dae":
        return "arc P(entailed), pooled", example.get("score"), dae_verdict(example)
    if name == "fact_accuracy":
        counts = ", ".join(f"{_count(example.get(k))} {k}" for k in ("supported", "contradicted", "unverifiable"))
        truth = _count(example.get("ground_truth"))
        verdict = f"{counts}; {_count(example.get('missing'))} of {truth} {example.get('ground_truth_source', 'table')} facts missing"
        if example.get("score") is None:
            verdict = "no verifiable fact; " + verdict
        return "accuracy", example.get("score"), verdict
    if name == "data_questeval":
        asked, failed = _question_counts(example)
        verdict = f"{failed} of {asked} questions failed"
        missing, unsupported = _count(example.get("missing")), _count(example.get("unsupported"))
        if missing or unsupported:
            verdict += f" ({missing} table values not given, {unsupported} answers unsupported)"
        return "score", example.get("score"), verdict
    return "score", example.get("score"), str(example.get("label", ""))


def dae_verdict(example: Dict[str, Any]) -> str:
    if example.get("no_arcs") or not example.get("arcs"):
        return "no arcs to judge"
    bad = example.get("not_entailed") or 0
    total = example.get("num_arcs", _count(example.get("arcs")))
    verdict = "all arcs entailed" if not bad else f"{bad} of {total} arcs not entailed"
    if example.get("facts") is not None:  # direction "both"
        verdict = f"{example.get('label')}: {verdict}; {_count(example.get('omitted_facts'))} of {_count(example['facts'])} facts left out"
    return verdict


QUESTION_THRESHOLD = 0.5  # a question "failed" below it, as the metric counts missing / unsupported values


def _questions(example: Dict[str, Any]) -> List[Tuple[str, str, Dict[str, Any]]]:
    """``(source name, direction, question)`` for every question of a Data-QuestEval example."""
    out = []
    for src in example.get("sources") or []:
        source = str(src.get("source", "table"))
        for direction in ("from_source", "from_text"):
            for q in src.get(direction) or []:
                out.append((source, direction, q))
    return out


def question_failed(q: Dict[str, Any]) -> bool:
    score = q.get("score")
    return not isinstance(score, (int, float)) or score < QUESTION_THRESHOLD


def _question_counts(example: Dict[str, Any]) -> Tuple[int, int]:
    questions = _questions(example)
    return len(questions), sum(1 for _, _, q in questions if question_failed(q))


def truncation_notes(example: Dict[str, Any]) -> List[str]:
    """A note for every true ``truncated``-like flag of an example (a capped extraction, question set, arcs)."""
    notes = []
    for key, value in example.items():
        if "truncated" in key and value:
            notes.append(f"{key.replace('_', ' ')}: {value if not isinstance(value, bool) else 'yes'} (the metric capped its work; see its card)")
    return notes


# ---------------------------------------------------------------------------
# Layout: a list of (indent, text) lines, wrapped at the end


# (indent, text) or (indent, text, hang): wrapped lines continue ``hang`` columns in (default: indent + 2).
Line = Tuple[Any, ...]


def wrap(lines: Iterable[Line], width: int) -> str:
    """Each line wrapped to ``width``, its continuation lines indented to its hang."""
    out = []
    for line in lines:
        indent, text = line[0], line[1]
        hang = line[2] if len(line) > 2 else indent + 2
        if not text:
            out.append("")
            continue
        out.extend(textwrap.wrap(text, width=width, initial_indent=" " * indent, subsequent_indent=" " * min(hang, width // 2),
                                 break_long_words=True, break_on_hyphens=False) or [" " * indent])
    return "\n".join(out)


def _heading(text: str, width: int) -> List[Line]:
    return [(0, ""), (0, text), (0, "-" * min(width, len(text)))]


def table_lines(table: Any) -> List[str]:
    """The table, one triple (``s | p | o``) or attribute (``attribute: value``) per line."""
    parsed = parse_table(table)
    if parsed.is_triples:
        return parsed.to_strings()
    return [f"{entry.attribute}: {entry.value}" for entry in parsed]


def capped(items: Sequence[Any], limit: int) -> Tuple[Sequence[Any], int]:
    return items[:limit], max(0, len(items) - limit)


def _more(n: int, indent: int, what: str = "") -> List[Line]:
    return [(indent, f"... {n} more{(' ' + what) if what else ''}")] if n else []


_ROW_FIELDS = ("id", "prediction", "table", "references", "source")


def render(row: Dict[str, Any], results: Dict[str, Dict[str, Any]], where: str = "", width: int = 80,
           limit: int = DEFAULT_LIMIT, models: Optional[Dict[str, Optional[str]]] = None,
           skipped: Sequence[str] = (), failed: Sequence[str] = ()) -> str:
    """The whole layout for one example: its input, a summary, then each metric's explanation."""
    lines: List[Line] = [(0, f"Example {_id_text(row.get('id', 0))}" + (f" ({where})" if where else ""))]
    # Fields of the input line beyond score's columns (a "note" on what the example shows).
    lines += [(2, f"{key}: {value if isinstance(value, str) else _short(value)}") for key, value in row.items() if key not in _ROW_FIELDS]
    if row.get("table") is not None:
        entries = table_lines(row["table"])
        lines += _heading(f"Table ({_plural(len(entries), 'entry', 'entries')})", width)
        lines += [(2, e) for e in entries]
    if row.get("source") is not None:
        lines += _heading("Source", width) + [(2, row["source"])]
    lines += _heading("Text", width) + [(2, row.get("prediction", ""))]
    references = row.get("references") or []
    if references:
        lines += _heading(f"References ({len(references)})", width)
        lines += [(2, f"{i}. {r}") for i, r in enumerate(references, 1)]

    # The project's metrics in their usual order (as the playground shows them), then any other.
    results = {name: results[name] for name in sorted(results, key=lambda n: (list(TITLES).index(n) if n in TITLES else len(TITLES), n))}
    lines += _heading("Scores", width)
    label_width = max([len(TITLES.get(n, n)) for n in results] + [0])
    for name, example in results.items():
        label, value, verdict = headline(name, example)
        lines.append((2, f"{TITLES.get(name, name).ljust(label_width)}  {label} {number(value)}" + (f": {verdict}" if verdict else ""),
                      label_width + 4))
    for name in skipped:
        lines.append((2, f"{TITLES.get(name, name).ljust(label_width)}  skipped (the reason is above)"))
    for name in failed:
        lines.append((2, f"{TITLES.get(name, name).ljust(label_width)}  failed (the error is above)"))

    for name, example in results.items():
        label, value, _ = headline(name, example)
        model = (models or {}).get(name)
        lines += _heading(f"{TITLES.get(name, name)}: {label} {number(value)}" + (f"  [model {model}]" if model else ""), width)
        lines += [(2, "note: " + n) for n in truncation_notes(example)]
        lines += RENDERERS.get(name, generic_lines)(example, limit, row)
    return wrap(lines, width)


# ---------------------------------------------------------------------------
# Per metric


def _probabilities(p: Any) -> str:
    if not isinstance(p, dict):
        return ""
    return " ".join(f"{str(k)[:1].upper()} {v:.3f}" for k, v in p.items() if isinstance(v, (int, float)))


_WRITTEN_BY = {"learned": "sentence by the learned verbalizer", "backoff": "back-off sentence: no template"}


def nli_lines(example: Dict[str, Any], limit: int, row: Dict[str, Any]) -> List[Line]:
    lines: List[Line] = [(2, f"label {example.get('label')}; score {number(example.get('score'))} (the checks' entailment "
                             f"probabilities pooled); confidence {number(example.get('confidence'))} "
                             "(the lowest entailment probability over all checks)")]
    omission_checks = [c for c in example.get("checks") or [] if c.get("type") == "omission"]
    other_checks = [c for c in example.get("checks") or [] if c.get("type") != "omission"]
    facts = _table_facts(row)
    omitted = {o.get("sentence"): o for o in example.get("omitted_facts") or []}
    # which sentences no template wrote (nli_semantic_accuracy's "verbalized_by")
    written_by = dict(zip(example.get("facts") or [], example.get("verbalized_by") or []))
    if omission_checks:
        lines.append((2, "Each fact, does the text entail it?"))
        for i, check in enumerate(omission_checks):
            sentence = check.get("hypothesis", "")
            fact = (check.get("fact") or omitted.get(sentence, {}).get("fact")
                    or (facts[i] if len(facts) == len(omission_checks) else ""))
            verdict = "entailed" if check.get("entailed") else "NOT entailed (omitted)"
            lines.append((4, f"{verdict}: {fact or sentence}"))
            detail = f'"{sentence}"' if fact and sentence != fact else ""
            if detail and written_by.get(sentence) in _WRITTEN_BY:
                detail += f" [{_WRITTEN_BY[written_by[sentence]]}]"
            lines.append((8, " ".join(x for x in (detail, f"({_probabilities(check.get('probabilities'))})") if x.strip("()"))))
    else:  # no checks listed: the omitted facts alone
        for o in example.get("omitted_facts") or []:
            lines.append((4, f"NOT entailed (omitted): {o.get('fact')}: \"{o.get('sentence', '')}\""))
    if not example.get("omitted_facts"):
        lines.append((2, "No omitted facts."))
    for check in other_checks:
        entailed = check.get("entailed")
        lines.append((2, f"Do the facts entail the text (hallucination check)? {'yes' if entailed else 'NO: the text says more than the facts'} "
                         f"({_probabilities(check.get('probabilities'))})"))
    if not other_checks and example.get("hallucination"):
        lines.append((2, "Hallucination: the facts do not entail the text."))
    return lines


def _table_facts(row: Dict[str, Any]) -> List[str]:
    try:
        return table_lines(row["table"]) if row.get("table") is not None else []
    except ValueError:
        return []


def _triple(f: Any) -> str:
    if isinstance(f, dict):
        parts = [f.get(k) for k in ("subject", "relation", "object")]
        if any(p is not None for p in parts):
            return " | ".join(str(p if p is not None else "") for p in parts)
        if "fact" in f:
            return str(f["fact"])
    if isinstance(f, (list, tuple)):
        return " | ".join(str(p) for p in f)
    return str(f)


_TRIPLE_KEYS = {"subject", "relation", "object", "fact", "predicate"}


def _extra_fields(f: Any, skip: Iterable[str] = ()) -> List[str]:
    """``key: value`` for every field of a fact beyond its triple (evidence spans, flags, scores)."""
    if not isinstance(f, dict):
        return []
    skip = set(skip) | _TRIPLE_KEYS
    out = []
    # A span given as X_start / X_end (character offsets) reads as one field.
    spans = {k[: -len("_start")] for k in f if k.endswith("_start") and k[: -len("_start")] + "_end" in f}
    for name in sorted(spans):
        if f[name + "_start"] is not None and f[name + "_end"] is not None:
            out.append(f"{name.replace('_', ' ')} span: characters {f[name + '_start']}-{f[name + '_end']}")
        skip |= {name + "_start", name + "_end"}
    for key, value in f.items():
        if key in skip or value is None or value == "" or value == []:
            continue
        if isinstance(value, (list, tuple)):
            value = ", ".join(_short(v) for v in value)
        elif isinstance(value, dict):
            value = ", ".join(f"{k} {_short(v)}" for k, v in value.items())
        else:
            value = _short(value)
        out.append(f"{key.replace('_', ' ')}: {value}")
    return out


def _short(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, str):
        return f'"{value}"' if " " in value else value
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} {_short(v)}" for k, v in value.items()) + "}"
    return str(value)


def _key(f: Any):
    return _triple(f)


def fact_accuracy_lines(example: Dict[str, Any], limit: int, row: Dict[str, Any]) -> List[Line]:
    lines: List[Line] = []
    score = example.get("score")
    lines.append((2, ("no verifiable fact in the text" if score is None else f"accuracy {number(score)}")
                  + f"; recall {number(example.get('recall'))}"))
    verdict_of: Dict[str, Tuple[str, Any]] = {}
    for verdict in ("supported", "contradicted", "unverifiable"):
        for f in example.get(verdict) or []:
            verdict_of[_key(f)] = (verdict, f)
    generated = list(example.get("generated") or [])
    if not generated:  # older results without "generated": the verdict lists themselves
        generated = [f for v in ("contradicted", "unverifiable", "supported") for f in example.get(v) or []]
    # Contradicted first, then unverifiable, then supported: what a user checks first.
    order = {"contradicted": 0, "unverifiable": 1, "supported": 2}
    ranked = sorted(generated, key=lambda f: order[verdict_of.get(_key(f), ("unverifiable", f))[0]])
    lines.append((2, f"Facts extracted from the text ({len(generated)}):"))
    shown, more = capped(ranked, limit)
    for f in shown:
        verdict, full = verdict_of.get(_key(f), ("unverifiable", f))
        merged = {**(f if isinstance(f, dict) else {}), **(full if isinstance(full, dict) else {})}
        lines.append((4, f"{verdict.upper()}: {_triple(f)}"))
        if verdict == "contradicted" and merged.get("expected"):
            lines.append((8, "expected: " + ", ".join(str(o) for o in merged["expected"])))
        lines += [(8, extra) for extra in _extra_fields(merged, skip=("expected",))]
    lines += _more(more, 4, "facts")
    if not generated:
        lines.append((4, "none"))
    missing = {_key(f) for f in example.get("missing") or []}
    truth = list(example.get("ground_truth") or [])
    source = example.get("ground_truth_source", "table")
    lines.append((2, f"Facts of the {source} ({len(truth)}), stated by the text or missing:"))
    ranked_truth = sorted(truth, key=lambda f: _key(f) not in missing)
    shown, more = capped(ranked_truth, limit)
    for f in shown:
        lines.append((4, f"{'MISSING' if _key(f) in missing else 'stated'}: {_triple(f)}"))
    lines += _more(more, 4, "facts")
    return lines


def _question_line(q: Dict[str, Any]) -> List[Line]:
    predicted = q.get("predicted")
    found = f'"{predicted}"' if predicted else "no answer"
    scores = ", ".join(f"{k} {number(q.get(k))}" for k in ("answerability", "f1", "bertscore") if q.get(k) is not None)
    lines = [(6, f"Q: {q.get('question', '')}"),
             (8, f'expected "{q.get("answer", "")}", found {found}; score {number(q.get("score"))}' + (f" ({scores})" if scores else ""))]
    extra = _extra_fields(q, skip=("question", "answer", "predicted", "answerability", "f1", "bertscore", "score", "candidate"))
    return lines + [(8, e) for e in extra]


def data_questeval_lines(example: Dict[str, Any], limit: int, row: Dict[str, Any]) -> List[Line]:
    lines: List[Line] = [(2, f"score {number(example.get('score'))}; precision {number(example.get('precision'))}; "
                             f"recall {number(example.get('recall'))} (from the {example.get('source', 'table')})")]
    if example.get("read_as") and example["read_as"] != row.get("prediction"):
        lines.append((2, f"Read as (one casing, the table's values as the table writes them): {example['read_as']}"))
    if example.get("missing"):
        lines.append((2, "Table values the text does not give: " + ", ".join(str(m) for m in example["missing"])))
    if example.get("unsupported"):
        lines.append((2, "Answers of the text the table does not support: " + ", ".join(str(m) for m in example["unsupported"])))
    names = {"from_source": "asked about the {0}, answered on the text", "from_text": "asked about the text, answered on the {0}"}
    questions = _questions(example)
    for title, keep in (("Questions that failed", True), ("Questions that passed", False)):
        chosen = [(s, d, q) for s, d, q in questions if question_failed(q) == keep]
        lines.append((2, f"{title} ({len(chosen)} of {len(questions)}, score < {QUESTION_THRESHOLD} fails):"))
        shown, more = capped(chosen, limit)
        group = None
        for source, direction, q in shown:
            if (source, direction) != group:
                group = (source, direction)
                lines.append((4, names[direction].format(source) + ":"))
            lines += _question_line(q)
        lines += _more(more, 4, "questions")
    return lines


def dae_lines(example: Dict[str, Any], limit: int, row: Dict[str, Any]) -> List[Line]:
    low = example.get("min_score", example.get("min"))
    if example.get("source_score") is not None:
        how = (f"the lower of the text's arcs {number(example.get('text_score'))} and the source's arcs against the "
               f"text {number(example.get('source_score'))}")
    else:
        how = "arc P(entailed), pooled"
    lines: List[Line] = [(2, f"score {number(example.get('score'))} ({how}); min {number(low)}; {dae_verdict(example)}")]
    arcs = sorted(example.get("arcs") or [], key=lambda a: a.get("probability", 1.0))
    threshold = example.get("threshold", 0.5)
    bad = [a for a in arcs if a.get("probability", 1.0) < threshold]
    if bad:
        lines.append((2, "Arcs the source does not entail (head -relation-> child, P(entailed)):"))
        shown, more = capped(bad, limit)
        for a in shown:
            lines.append((4, f"{a.get('head')} -{a.get('relation')}-> {a.get('child')}  {number(a.get('probability'))}"))
        lines += _more(more, 4, "arcs")
    elif arcs:
        lowest = arcs[0]
        lines.append((2, f"Every arc is entailed; the least entailed: {lowest.get('head')} -{lowest.get('relation')}-> "
                         f"{lowest.get('child')} {number(lowest.get('probability'))}"))
    facts = example.get("facts") or []
    if facts:
        lines.append((2, "Each fact's sentence checked against the text (its arcs' P(entailed), pooled):"))
        shown, more = capped(sorted(facts, key=lambda f: 2.0 if f.get("score") is None else f["score"]), limit)
        for f in shown:
            verdict = "no arc to judge" if f.get("covered") is None else "said" if f["covered"] else "LEFT OUT or changed"
            lines.append((4, f"{f.get('fact')}  {number(f.get('score'))}  {verdict}"))
        lines += _more(more, 4, "facts")
    return lines


def parent_lines(example: Dict[str, Any], limit: int, row: Dict[str, Any]) -> List[Line]:
    lines: List[Line] = [(2, f"precision {number(example.get('precision'))}, recall {number(example.get('recall'))}, "
                             f"F1 {number(example.get('f1'))}")]
    if example.get("table_recall") is not None:
        lines.append((2, f"recall = reference recall {number(example.get('reference_recall'))}^(1-lambda) x table recall "
                         f"{number(example.get('table_recall'))}^lambda, lambda {number(example.get('lambda'))}"))
    if example.get("reference_index") is not None:
        lines.append((2, f"best reference: #{example['reference_index'] + 1}"))
    ngrams = [r for r in example.get("prediction_ngrams") or [] if r.get("order") == 1]
    unsupported = [r["ngram"] for r in ngrams if not r.get("reference_count") and (r.get("table_entailment") or 0) < 1.0]
    if ngrams:
        lines.append((2, "Words in neither the reference nor the table: " + (", ".join(unsupported) or "none")))
    return lines


def generic_lines(example: Dict[str, Any], limit: int, row: Dict[str, Any]) -> List[Line]:
    """Any metric: its scalar fields, then each list field's items (capped)."""
    lines: List[Line] = []
    scalars = [f"{k} {number(v)}" for k, v in example.items() if isinstance(v, (int, float, str, bool)) or v is None]
    if scalars:
        lines.append((2, "; ".join(scalars)))
    for key, value in example.items():
        if isinstance(value, (list, tuple)) and value:
            lines.append((2, f"{key} ({len(value)}):"))
            shown, more = capped(list(value), limit)
            for item in shown:
                if isinstance(item, dict):
                    lines.append((4, "; ".join(f"{k} {_short(v)}" for k, v in item.items())))
                else:
                    lines.append((4, _short(item)))
            lines += _more(more, 4)
    return lines


RENDERERS = {
    "parent": parent_lines,
    "nli_semantic_accuracy": nli_lines,
    "dae": dae_lines,
    "data_questeval": data_questeval_lines,
    "fact_accuracy": fact_accuracy_lines,
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
