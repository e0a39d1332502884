"""The command line's unit of work: a metric scores its input in blocks of lines.

``d2t-metrics score`` calls a metric's ``compute()`` once per block of
``--block-lines`` consecutive input lines (by default :data:`BLOCK_LINES`, or
:data:`GPU_BLOCK_LINES` in one process on a GPU: :func:`default_block_lines`) and
joins the blocks' per-example results, their corpus scores computed from them
by the metric's :meth:`~d2t_metrics.metric.D2TMetric.corpus_scores`.

Why blocks: a float32 model's numbers move in their 7th–8th digit with the
batch an example is padded in, so a process scoring lines 1,000–1,999 on
their own would not write what one process scoring all lines writes. In
blocks, an example shares its batches with the same lines whether one process
scores every block or several processes share them (a sharded run gives each
process whole blocks: :func:`shard_lines`, :mod:`d2t_metrics.sharding`), so
the two outputs are byte for byte the same. Blocks also bound one call's memory
on a huge input, and let a stopped run go on from the blocks it finished
(``--resume``: :mod:`d2t_metrics.resume`). They cost some batching: nli_semantic_accuracy on 800 WebNLG
2017 outputs took 1.04× the CPU time of one call in blocks of 256 lines and
1.16× in blocks of 64; fact_accuracy on 512, no more in blocks of 256 than
whole, but 1.20× in blocks of 64 (benchmarks/history/). To share a few hundred
lines over many processes, pass a smaller ``--block-lines``.

A metric whose corpus scores cannot be computed from its per-example ones
(:func:`splits_exactly` is false) is scored in one call, as a whole.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Tuple

# Lines per compute() call: large enough that a block's batches are nearly as full and as evenly
# padded as the whole input's (see the module docstring), small enough to share a few thousand
# lines over several processes.
BLOCK_LINES = 256
# ... but one process on a GPU: a block holds a whole batch of the GPU's largest default
# (models.GPU_GREEDY_BATCH_SIZE), so the command line does not cap what the metric's batching can fill.
GPU_BLOCK_LINES = 1024
# compute() arguments that hold one value per example (the others are options, passed to every block).
PER_EXAMPLE_ARGUMENTS = ("predictions", "references", "tables", "sources")


def check_block_lines(value: int) -> int:
    """``value`` as a block size: an int >= 0, 0 meaning the whole input in one block."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"block lines must be an integer >= 0 (0: the whole input at once), got {value!r}")
    return value


def default_block_lines(sharded: bool) -> int:
    """Lines per block when the command line is given none: :data:`GPU_BLOCK_LINES` in one process
    where torch sees a GPU, else :data:`BLOCK_LINES` (a sharded run deals out whole blocks, and
    smaller ones share a few thousand lines more evenly)."""
    if sharded:
        return BLOCK_LINES
    import torch  # lazy: the command line imports torch only when it scores

    return GPU_BLOCK_LINES if torch.cuda.is_available() else BLOCK_LINES


def block_bounds(start: int, end: int, block_lines: int) -> List[Tuple[int, int]]:
    """The blocks ``[s, e)`` that cover lines ``[start, end)``. Blocks are laid from line 0 of the
    input, so ``start`` must begin one (a shard's first line does); 0 lines per block: one block."""
    check_block_lines(block_lines)
    if not 0 <= start <= end:
        raise ValueError(f"bad line range [{start}, {end})")
    if block_lines == 0:
        return [(start, end)] if end > start else []
    if start % block_lines:
        raise ValueError(f"line {start} does not begin a block of {block_lines} lines")
    return [(s, min(s + block_lines, end)) for s in range(start, end, block_lines)]


def shard_lines(n: int, block_lines: int, num_processes: int, rank: int) -> Tuple[int, int]:
    """``[start, end)``: the whole blocks of process ``rank`` among ``num_processes`` sharing ``n``
    lines. Each process takes the blocks that begin nearest its even share of the lines, so each
    shard is within one block's lines of an even share (only the last block may be short)."""
    check_block_lines(block_lines)
    if num_processes < 1 or not 0 <= rank < num_processes:
        raise ValueError(f"rank {rank} is not one of {num_processes} processes")
    size = block_lines or max(n, 1)
    n_blocks = math.ceil(n / size)

    def first_block(r: int) -> int:
        return n_blocks if r == num_processes else min(n_blocks, int(r * n / (num_processes * size) + 0.5))

    return min(first_block(rank) * size, n), min(first_block(rank + 1) * size, n)


def block_arguments(kwargs: Dict[str, Any], start: int, end: int) -> Dict[str, Any]:
    """``kwargs`` with each per-example argument cut to lines ``[start, end)``; options unchanged."""
    return {k: (v[start:end] if k in PER_EXAMPLE_ARGUMENTS and v is not None else v) for k, v in kwargs.items()}


def global_indices(message: str, start: int) -> str:
    """A block's ``example 3:`` is the input's ``example start+3:`` (metrics name examples by index)."""
    return re.sub(r"\bexample (\d+):", lambda m: f"example {int(m.group(1)) + start}:", message)


def splits_exactly(metric) -> bool:
    """Whether the metric's corpus scores follow from its per-example ones: a ``D2TMetric`` whose
    class defines :meth:`~d2t_metrics.metric.D2TMetric.corpus_scores`."""
    from .metric import D2TMetric  # lazy: evaluate, imported by now (the metric's module did)

    return isinstance(metric, D2TMetric) and type(metric).corpus_scores is not D2TMetric.corpus_scores


__all__ = ["BLOCK_LINES", "GPU_BLOCK_LINES", "PER_EXAMPLE_ARGUMENTS", "check_block_lines", "default_block_lines",
           "block_bounds", "shard_lines", "block_arguments", "global_indices", "splits_exactly"]
