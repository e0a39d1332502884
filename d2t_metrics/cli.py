"""``d2t-metrics``: score a JSONL file of data-to-text outputs with several metrics.

::

    d2t-metrics score [--metrics parent,nli_semantic_accuracy] \\
        --input examples/examples.jsonl --output scores.jsonl [--overwrite] [--with-input] [--strict]
    d2t-metrics list      # the metrics and their default models
    d2t-metrics doctor    # what each metric needs here, and the command that fixes what is missing
    d2t-metrics explain   # one example's scores, explained (d2t_metrics.explain)

Each input line is a JSON object ``{"id", "prediction", "references", "table",
"source"}`` (all but ``prediction`` optional). The whole file, the
arguments, the ``--model`` paths and the ``--option`` values are checked, and
every metric's inputs planned from its declared protocol, before any metric
loads a model (:mod:`d2t_metrics.runner` says how). A metric with a folder
``checkpoints/<name>/`` gets ``model=<that folder>`` by default, so it works
offline; ``--model NAME=PATH_OR_HUB_ID`` overrides it.

Outcomes and exit codes
    A metric that cannot run here (a library, base or model is missing, or the
    input lacks a column it needs) is *skipped*, with the reason and the fix on
    stderr (the same fix as ``d2t-metrics doctor``). Any other error while it
    loads or scores (a ``ValueError`` from a ``compute`` that rejects the
    input included) is a *failure*: reported as ``d2t-metrics: error: NAME
    failed: ...``; the other metrics still run.

    * 0: at least one metric ran and none failed (some may have been skipped,
      unless ``--strict``);
    * 1: a metric failed, or no metric ran, or the output could not be written;
    * 2: a usage or input error, reported before any metric ran;
    * 3: with ``--strict``, a requested metric was skipped (the others ran
      and were written);
    * 130: interrupted (Ctrl-C, at any point, a model loading included): at
      once, one line on stderr, no traceback; the metrics that finished are
      kept (written, and printed), the line names those kept and those not
      run, and no partial or temporary file is left.

    ``doctor`` exits 0 when every metric has all it needs, 1 otherwise.

Output
    Each output line holds the input's ``id`` (the example's 0-based index when
    it had none), with ``--with-input`` its ``prediction`` (and ``table``,
    ``references``, ``source`` when given), and, per metric that ran, that
    example's dict from ``compute(..., per_example=True)``, unchanged but for
    NaN or infinite numbers, which JSON lacks: written as ``null``, with a
    warning. Corpus scores are printed as a table on stdout, or as JSON with
    ``--json``, each metric's with its signature (what its numbers depend on:
    model, version, options, and ``dtype:`` for arithmetic other than float32,
    set by ``--dtype``) under the table, or as its ``"signature"`` entry. Output is strict JSON: an input line whose ``id`` or
    ``table`` holds ``NaN``, ``Infinity`` or an overflowing number (``1e400``)
    is refused by the input check.

    ``--output`` is checked before anything is scored: it must not be a
    directory, its folder must exist or be creatable and writable, and an
    existing file is replaced only with ``--overwrite`` (exit 2 otherwise). It
    is written atomically, so a failed or interrupted write leaves the old
    file whole. A symbolic link is followed: the file it points to is
    replaced. Lines are UTF-8 JSON; a string UTF-8 cannot encode (a lone
    surrogate in a metric's result) is written with ``\\uXXXX`` escapes.

``--no-progress`` hides every progress bar: the metrics' own, and those of
transformers, huggingface_hub, datasets and evaluate (``D2T_NO_PROGRESS=1`` is
set before any metric loads); the previous settings are restored afterwards.

``--timing`` prints, after the run, where the time went: each metric's
``load`` and ``compute`` and the stages the metrics mark inside them
(:mod:`d2t_metrics.timing`).

A metric scores the input in blocks of ``--block-lines`` lines, one
``compute()`` call each (:mod:`d2t_metrics.blocks`): every line is checked
before the first block, and one progress bar counts the lines. Run under
``torchrun`` or ``accelerate launch``, ``score`` gives each process whole
blocks (GPUs, machines) and the first process writes the one output a single
process with as many threads writes, byte for byte (:mod:`d2t_metrics.sharding`).
With ``--output``, a one-process run keeps each finished block beside it until
the output is written; after a stop, ``--resume`` goes on from them
(:mod:`d2t_metrics.resume`).

``evaluate`` (and with it torch) is imported only when a metric loads:
``--help``, ``list`` and ``doctor`` start at once.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

from . import runner
from . import sharding
from . import timing
from .blocks import BLOCK_LINES, GPU_BLOCK_LINES, default_block_lines
from .inputs import DTYPES
from .resume import BlockStore
from .runner import Corpus
from .runner import InterruptGuard
from .runner import Outcome
from .runner import UsageError
from .runner import available_metrics
from .runner import default_metrics
from .runner import check_metric_names
from .runner import check_output_path
from .runner import default_model
from .runner import find_checkpoints_dir
from .runner import find_metrics_dir
from .runner import parse_assignments
from .runner import parse_options
from .runner import print_scores
from .runner import progress_bars_silenced
from .runner import read_corpus
from .runner import requested_metrics
from .runner import write_output

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SKIPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

SCORE_EPILOG = (
    "exit status: 0 no metric failed and at least one ran (others may be skipped, unless --strict); "
    "1 a metric failed, none ran, or the output could not be written; 2 usage or input error; "
    "3 with --strict, a requested metric was skipped; 130 interrupted"
)


@dataclass
class Run:
    """What a score run has done so far: what an interrupt keeps and reports."""

    names: Sequence[str]
    corpus: Corpus
    outcome: Outcome = field(default_factory=Outcome)
    current: Optional[str] = None  # the metric loading or scoring now
    writes: bool = True  # False in all but the first process of a sharded run
    store: Optional[BlockStore] = None  # the finished blocks kept beside --output (d2t_metrics.resume)


def score(args) -> int:
    # with --timing each stage waits for the GPU at its ends, so that its queued work counts where it was
    # queued; the caller's setting comes back afterwards
    previous = timing.set_sync(timing.cuda_sync if args.timing else None)
    try:
        return _score(args)
    finally:
        timing.set_sync(previous)


def _score(args) -> int:
    started_at = time.perf_counter()
    launch = sharding.launch_from_env()
    metrics_dir = find_metrics_dir(args.metrics_dir)
    known = available_metrics(metrics_dir)
    names = requested_metrics(args.metrics) if args.metrics is not None else default_metrics(metrics_dir)
    check_metric_names(names, known, metrics_dir)
    checkpoints_dir = find_checkpoints_dir(args.checkpoints_dir, metrics_dir)
    models = parse_assignments(args.model, "--model", names)
    configs = parse_assignments(args.config, "--config", names)
    options = parse_options(args.option, names)
    if args.resume and not args.output:
        raise UsageError("--resume reads the blocks kept beside --output: give the stopped run's --output")
    if args.resume and launch is not None:
        raise UsageError("--resume works in one process: a run sharded over processes keeps no blocks")
    if args.output:
        check_output_path(args.output, args.overwrite or args.resume)  # a stopped run may have written part of it
    corpus = read_corpus(args.input)
    if args.block_lines is None:
        args.block_lines = default_block_lines(sharded=launch is not None)
    if args.timing:
        timing.reset()

    run = Run(names, corpus, writes=launch is None or launch.is_main, store=block_store(args, launch))
    outcome = run.outcome
    # Ctrl-C, wherever it lands (a model loading included): keep what finished, exit 130 at once.
    with InterruptGuard(lambda: finish_interrupted(args, run), EXIT_INTERRUPTED):
        try:
            with progress_bars_silenced(args.no_progress), sharding.started(launch):
                with timing.stage("planning (imports, checks)"):
                    prepared = runner.prepare_all(names, metrics_dir, checkpoints_dir, models, configs, options, corpus,
                                                  args.batch_size, not args.no_progress and run.writes, outcome, args.dtype)
                if launch is not None:
                    prepared = sharding.agreed(prepared, outcome, launch)
                for p in prepared:
                    run.current = p.name
                    if launch is None:
                        runner.run_prepared(p, corpus, outcome, args.block_lines, run.store)
                    else:
                        sharding.run_sharded(p, corpus, outcome, launch, args.block_lines)
                run.current = None
        except KeyboardInterrupt:  # raised by code (not the signal, which the guard handles)
            return finish_interrupted(args, run)
        if not run.writes:
            return EXIT_OK  # the first process writes, prints, and gives the run's exit status
        return finish(args, run, time.perf_counter() - started_at)


def block_store(args, launch) -> Optional[BlockStore]:
    """Where a one-process run with --output keeps its finished blocks; none otherwise."""
    if not args.output or launch is not None:
        return None
    try:
        return BlockStore.for_output(args.output, args.resume, runner.write_atomically)
    except ValueError as e:
        raise UsageError(str(e)) from None


def kept_blocks_note(run: Run) -> Optional[str]:
    """What a stopped run leaves for --resume, if anything."""
    n = run.store.kept() if run.store is not None else 0
    if not n:
        return None
    return f"{n} finished block(s) kept in {run.store.folder}: the same command with --resume goes on from them"


def print_kept_blocks(run: Run) -> None:
    note = kept_blocks_note(run)
    if note:
        print(f"d2t-metrics: {note}", file=sys.stderr)


def finish(args, run: Run, seconds: float) -> int:
    """Write the output, print the scores (and, with --timing, where the time went); the exit status."""
    outcome = run.outcome
    if args.timing:
        print(timing.report(seconds), file=sys.stderr)
    if not outcome.runs:
        print("d2t-metrics: no metric ran; nothing written", file=sys.stderr)
        print_kept_blocks(run)
        return EXIT_FAILED
    if args.output:
        try:
            write_output(args.output, run.corpus, outcome.runs, args.with_input)
        except (OSError, TypeError, ValueError) as e:
            print(f"d2t-metrics: error: cannot write {args.output}: {e}", file=sys.stderr)
            print_kept_blocks(run)
            return EXIT_FAILED
        print(f"d2t-metrics: wrote {len(run.corpus)} lines to {args.output}", file=sys.stderr)
        if run.store is not None and not outcome.failed:
            run.store.remove()  # done: nothing to resume
    print_scores(outcome.runs, args.json)
    if outcome.failed:
        print_kept_blocks(run)
        return EXIT_FAILED
    if outcome.skipped and args.strict:
        print(f"d2t-metrics: --strict: skipped {', '.join(outcome.skipped)} (exit {EXIT_SKIPPED})", file=sys.stderr)
        return EXIT_SKIPPED
    return EXIT_OK


def finish_interrupted(args, run: Run) -> int:
    """Keep what finished: write and print it; then one line on stderr saying what was kept and what was not run."""
    outcome, current = run.outcome, run.current
    runs = list(outcome.runs)  # a snapshot: the guard calls this from its own thread
    settled = outcome.settled()
    not_run = [n for n in run.names if n not in settled]
    where = f"while running {current}" if current else "before scoring"
    parts = [f"d2t-metrics: interrupted {where}"]
    if not run.writes:
        parts.append("the first process keeps what finished")
    elif runs:
        kept = ", ".join(r.name for r in runs)
        if args.output:
            try:
                write_output(args.output, run.corpus, runs, args.with_input)
                kept += f" (written to {args.output})"
            except (OSError, TypeError, ValueError, KeyboardInterrupt) as e:
                kept += f" (not written: {type(e).__name__}: {e})" if not isinstance(e, KeyboardInterrupt) else " (not written)"
        parts.append(f"kept {kept}")
        print_scores(runs, args.json)
    else:
        parts.append("no metric finished, nothing written")
    if not_run and run.writes:
        parts.append(f"not run: {', '.join(not_run)}")
    note = kept_blocks_note(run)
    if note:
        parts.append(note)
    print("; ".join(parts), file=sys.stderr)
    return EXIT_INTERRUPTED


def list_metrics(args) -> int:
    metrics_dir = find_metrics_dir(args.metrics_dir)
    checkpoints_dir = find_checkpoints_dir(args.checkpoints_dir, metrics_dir)
    for name in available_metrics(metrics_dir):
        model = default_model(name, checkpoints_dir)
        print(f"{name}\t{model or '-'}")
    return EXIT_OK


def doctor(args) -> int:
    from .doctor import report  # lazy: huggingface_hub (through d2t_metrics.bases), which --help and list do not need

    metrics_dir = find_metrics_dir(args.metrics_dir)
    known = available_metrics(metrics_dir)
    names = requested_metrics(args.metrics) if args.metrics else known
    check_metric_names(names, known, metrics_dir)
    lines, green = report(names, find_checkpoints_dir(args.checkpoints_dir, metrics_dir))
    print("\n".join(lines))
    return EXIT_OK if green else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="d2t-metrics",
        description="Semantic accuracy metrics for data-to-text generation.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--metrics-dir", help="folder holding metrics/<name>/<name>.py (default: the repository's metrics/)")
    common.add_argument("--checkpoints-dir", help="folder holding checkpoints/<name>/ default models (default: the repository's checkpoints/)")

    s = sub.add_parser("score", parents=[common], help="score a JSONL file", description=__doc__.split("::")[0].strip(),
                       epilog=SCORE_EPILOG)
    s.add_argument("--metrics", help="comma-separated metric names, e.g. parent,nli_semantic_accuracy (default: every metric)")
    s.add_argument("--input", required=True, help="JSONL input ('-' for stdin)")
    s.add_argument("--output", help="JSONL output with one line of per-example scores per input line (written atomically)")
    s.add_argument("--overwrite", action="store_true", help="replace --output if it exists")
    s.add_argument("--with-input", action="store_true", help="output lines also carry the prediction (and table, references, source)")
    s.add_argument("--strict", action="store_true", help=f"exit {EXIT_SKIPPED} when a requested metric was skipped")
    s.add_argument("--json", action="store_true", help="print corpus scores as JSON instead of a table")
    s.add_argument("--model", action="append", default=[], metavar="NAME=PATH_OR_HUB_ID", help="model for a metric (repeatable)")
    s.add_argument("--config", action="append", default=[], metavar="NAME=CONFIG", help="configuration of a metric (repeatable)")
    s.add_argument("--option", action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="a compute() option of one metric, e.g. parent.tokenizer=whitespace or dae.threshold=0.3 (repeatable; JSON values)")
    s.add_argument("--batch-size", type=int, help="batch size for model-based metrics")
    s.add_argument("--dtype", choices=DTYPES, help=runner.DTYPE_HELP)
    s.add_argument("--block-lines", type=int, default=None, metavar="N",
                   help=f"lines per compute() call (default {BLOCK_LINES}, or {GPU_BLOCK_LINES} in one process on a GPU; "
                        "0: the whole input at once); a run sharded "
                        "over processes writes what one process with the same N and threads per process writes, byte for byte")
    s.add_argument("--resume", action="store_true",
                   help="go on from the blocks a stopped run with the same --output finished (kept in <output>.blocks/ "
                        "until the output is written; read back only where input, metric, model and options are the same)")
    s.add_argument("--no-progress", action="store_true", help="hide all progress bars")
    s.add_argument("--timing", action="store_true", help="print where the time went (each metric's load, compute and inner stages) to stderr; on a GPU each stage waits for the device at its ends, so that its time is its own")
    s.set_defaults(func=score)

    ls = sub.add_parser("list", parents=[common], help="list the metrics and their default models")
    ls.set_defaults(func=list_metrics)

    d = sub.add_parser("doctor", parents=[common], help="check what each metric needs here and print the fix for what is missing",
                       epilog="exit status: 0 every metric has what it needs; 1 something is missing")
    d.add_argument("--metrics", help="comma-separated metric names (default: all)")
    d.set_defaults(func=doctor)

    # Its arguments are d2t_metrics.explain's, read when the command runs (see explain()).
    e = sub.add_parser("explain", add_help=False, help="explain one example's scores (d2t-metrics explain --help)")
    e.set_defaults(func=explain)
    return parser


def explain(args, argv: Sequence[str]) -> int:
    """``d2t-metrics explain ...``: the arguments and the work are :mod:`d2t_metrics.explain`'s."""
    from . import explain as explaining  # lazy: only this command needs it (and what it imports)

    parser = argparse.ArgumentParser(prog="d2t-metrics explain", description=explaining.__doc__.split("::")[0].strip())
    explaining.add_arguments(parser)
    return explaining.run(parser.parse_args(list(argv)))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "explain":  # explain parses its own arguments
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "score" and args.batch_size is not None and args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.command == "score" and args.block_lines is not None and args.block_lines < 0:
        parser.error(f"--block-lines must be >= 0 (0: the whole input at once), got {args.block_lines}")
    try:
        return args.func(args, rest) if args.command == "explain" else args.func(args)
    except UsageError as e:
        print(f"d2t-metrics: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # while reading the input, before anything ran
        print("d2t-metrics: interrupted; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
