"""``d2t-metrics score`` sharded over processes, GPUs and machines.

Run the command line under a torch.distributed launcher and it splits the work::

    torchrun --nproc_per_node 8 -m d2t_metrics.cli score --input in.jsonl --output out.jsonl
    accelerate launch --num_processes 2 -m d2t_metrics.cli score ...

On several machines, start the same command on each, with the same input file
at the same path and the same install, naming the first machine's address;
the output is written on the first machine (``--node_rank 0``)::

    # machine 0 (10.0.0.1)                         # machine 1: the same with --node_rank 1
    torchrun --nnodes 2 --node_rank 0 --nproc_per_node 8 --master_addr 10.0.0.1 \\
        --master_port 29500 -m d2t_metrics.cli score --input in.jsonl --output out.jsonl

Both launchers set ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT`` (:func:`launch_from_env` reads them; a ``WORLD_SIZE`` of 1, or
none, is a plain run). Every process reads and checks the whole input and
plans every metric on it, exactly as a single process does (so each passes
the same columns and options); then, per metric, each process scores its
contiguous share of whole blocks of ``--block-lines`` lines
(:func:`d2t_metrics.blocks.shard_lines`), on its own GPU (``LOCAL_RANK``'s)
when CUDA exists, and the first process (rank 0) gathers the per-example
results over torch.distributed's ``gloo`` backend (it works on CPU and across
machines), computes the corpus scores of the whole with the metric's
:meth:`d2t_metrics.metric.D2TMetric.corpus_scores`, and alone writes the
output and prints the scores. The output is the single process's, byte for
byte: a single process scores the same blocks, one ``compute()`` call each, so
every example is batched with the same lines in both runs (a float32 model's
numbers move in their 7th–8th digit with the batch an example is padded in),
and the corpus scores are computed from the same per-example dicts. That
holds where each process runs the same kernels: the same hardware, libraries
and threads per process. On a CPU a float32 number can move in its 8th digit
with the thread count, and torchrun gives each process one thread, so the
one-process run a sharded CPU run equals is ``OMP_NUM_THREADS=1 d2t-metrics
score ...`` (benchmarks/RESULTS.md, sections ``sharding_*``).

Every process prints its own warnings and skips; the first alone prints the
scores, ``--timing`` (its own stages, ``<name>: gather`` being its wait for
the other shards) and the exit status that matters (the others exit 0 unless
they fail themselves).

A metric whose class does not say how its corpus scores follow from its
per-example ones (no ``corpus_scores`` of its own, or not a ``D2TMetric``) is
scored whole by rank 0, the others waiting. A metric that fails, or is skipped,
in any process is failed, or skipped, for the run. A metric that could not be
prepared in every process (a library missing on one machine) is skipped.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import sys
import traceback
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterator, List, Optional, Sequence

from . import runner
from .blocks import BLOCK_LINES
from .blocks import shard_lines
from .blocks import splits_exactly
from .runner import Corpus
from .runner import Outcome
from .runner import PreparedMetric
from .runner import Skip
from .runner import UsageError
from .timing import stage

# How long a process waits for the others at a gather: a shard may take hours, and a metric
# that cannot be sharded keeps all but rank 0 waiting while it runs (torch's default is 30 min).
GATHER_TIMEOUT = datetime.timedelta(days=2)


@dataclass(frozen=True)
class Launch:
    """This process's place in a distributed launch."""

    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def launch_from_env(environ=None) -> Optional[Launch]:
    """The launch torchrun or ``accelerate launch`` describe in the environment; ``None`` for a
    plain run (no ``WORLD_SIZE``, or 1). A partial or malformed description is a :class:`UsageError`."""
    environ = os.environ if environ is None else environ
    if environ.get("WORLD_SIZE") in (None, "", "1"):
        return None
    missing = [v for v in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not environ.get(v)]
    if missing:
        raise UsageError(f"WORLD_SIZE={environ['WORLD_SIZE']} but {', '.join(missing)} not set: "
                         "run under torchrun or accelerate launch, which set them")
    try:
        world_size, rank = int(environ["WORLD_SIZE"]), int(environ["RANK"])
        local_rank = int(environ.get("LOCAL_RANK") or 0)
    except ValueError:
        raise UsageError(f"WORLD_SIZE, RANK and LOCAL_RANK must be integers, got {environ.get('WORLD_SIZE')!r}, "
                         f"{environ.get('RANK')!r}, {environ.get('LOCAL_RANK')!r}") from None
    if world_size < 1 or not 0 <= rank < world_size or local_rank < 0:
        raise UsageError(f"bad launch: RANK={rank}, LOCAL_RANK={local_rank}, WORLD_SIZE={world_size}")
    return Launch(rank=rank, world_size=world_size, local_rank=local_rank)


def _torch():
    import torch.distributed  # lazy: torch, which --help and a plain run of a model-free metric never import

    return torch


@contextlib.contextmanager
def started(launch: Optional[Launch]) -> Iterator[None]:
    """Join the launch's process group for the block (nothing for a plain run): this process's GPU
    is ``LOCAL_RANK``'s, so that a metric's ``"cuda"`` is its own; the group uses ``gloo``."""
    if launch is None:
        yield
        return
    torch = _torch()
    dist = torch.distributed
    if torch.cuda.is_available():
        torch.cuda.set_device(launch.local_rank % torch.cuda.device_count())
    dist.init_process_group("gloo", rank=launch.rank, world_size=launch.world_size, timeout=GATHER_TIMEOUT)
    try:
        yield
        dist.barrier()  # rank 0 may still be scoring what it alone scores: leave together
    finally:
        dist.destroy_process_group()


def shown_progress(kwargs: Dict[str, Any], show: bool) -> Dict[str, Any]:
    """compute() arguments with the progress bars shown only where ``show`` (the first process)."""
    if "show_progress" not in kwargs:
        return kwargs
    return dict(kwargs, show_progress=kwargs["show_progress"] and show)


def agreed(prepared: List[PreparedMetric], outcome: Outcome, launch: Launch) -> List[PreparedMetric]:
    """The metrics prepared in every process (the others are skipped), so that all take part in
    the same gathers, in the same order."""
    everywhere: List[List[str]] = [[] for _ in range(launch.world_size)]
    _torch().distributed.all_gather_object(everywhere, [p.name for p in prepared])
    kept = []
    for p in prepared:
        lacking = [rank for rank, names in enumerate(everywhere) if p.name not in names]
        if not lacking:
            kept.append(p)
        elif launch.is_main:
            runner.report_skip(p.name, f"it could not be prepared in process(es) {', '.join(map(str, lacking))} "
                                       "(see their messages)", outcome)
    return kept


def score_shard(prepared: PreparedMetric, corpus: Corpus, launch: Launch, block_lines: int) -> tuple:
    """Score this process's whole blocks of lines: ``("ran", examples)``, ``("skipped", reason)`` or
    ``("failed", message)``; a rejected line is named by its place in the whole input."""
    start, end = shard_lines(len(corpus), block_lines, launch.world_size, launch.rank)
    if start == end:  # fewer blocks than processes
        return "ran", []
    shard = replace(prepared, kwargs=shown_progress(prepared.kwargs, launch.is_main))
    try:
        _, examples = runner.compute_result(shard, corpus, start, end, block_lines=block_lines)
        return "ran", examples
    except Skip as e:
        return "skipped", str(e)
    except Exception as e:  # noqa: BLE001 - reported by rank 0 for the run; the traceback here
        if not isinstance(e, (ValueError, runner.MetricFailed)):
            traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
        return "failed", runner.failure_message(e, prepared, corpus)


def run_sharded(prepared: PreparedMetric, corpus: Corpus, outcome: Outcome, launch: Launch,
                block_lines: int = BLOCK_LINES) -> None:
    """Score one prepared metric over every process; rank 0 records the outcome of the whole."""
    if not splits_exactly(prepared.metric):
        if launch.is_main:
            print(f"d2t-metrics: {prepared.name} does not say how its corpus scores follow from per-example ones; "
                  "scoring it in this process alone", file=sys.stderr)
            runner.run_prepared(prepared, corpus, outcome, block_lines)
        return
    if launch.is_main:
        print(f"d2t-metrics: running {runner.describe(prepared)} on {launch.world_size} processes", file=sys.stderr)
    report = score_shard(prepared, corpus, launch, block_lines)
    reports: Optional[List[Any]] = [None] * launch.world_size if launch.is_main else None
    with stage(f"{prepared.name}: gather"):  # on rank 0: the wait for the slowest shard, and the transfer
        _torch().distributed.gather_object(report, reports, dst=0)
    if launch.is_main:
        record(prepared, reports, outcome)


def record(prepared: PreparedMetric, reports: Sequence[tuple], outcome: Outcome) -> None:
    """Rank 0: the metric failed if it failed anywhere, was skipped if skipped anywhere, else ran:
    the shards' examples in rank order are the input's, and its corpus scores those of the whole."""
    failed = [(rank, text) for rank, (kind, text) in enumerate(reports) if kind == "failed"]
    skipped = [(rank, text) for rank, (kind, text) in enumerate(reports) if kind == "skipped"]
    if failed:
        outcome.failed.append(prepared.name)
        for rank, text in failed:
            print(f"d2t-metrics: error: {prepared.name} failed (process {rank}): {text}", file=sys.stderr)
    elif skipped:
        runner.report_skip(prepared.name, f"{skipped[0][1]} (process {skipped[0][0]})", outcome)
    else:
        examples = [example for _, shard in reports for example in shard]
        scores = runner.corpus_scores(prepared.metric.corpus_scores(examples))
        outcome.runs.append(runner.metric_run(prepared, scores, examples))


__all__ = ["Launch", "launch_from_env", "started", "splits_exactly", "agreed", "run_sharded"]
