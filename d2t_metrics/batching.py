"""Length-sorted dynamic batching: items of similar length go into one batch,
so that padding costs little, and results come back in input order.

Plain Python (and tqdm for the progress bar): :mod:`d2t_metrics.models` and
:mod:`d2t_metrics.parallel` batch through it, and code without torch can too.
"""

from __future__ import annotations

from typing import Any, Callable, List, Sequence

from .hub import progress


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> List[List[int]]:
    """Indices grouped into batches of similar length (longest first), so padding is small."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def run_batched(
    items: Sequence[Any],
    lengths: Sequence[int],
    fn: Callable[[List[Any]], List[Any]],
    batch_size: int = 32,
    desc: str = "",
    show_progress: bool = True,
) -> List[Any]:
    """Apply ``fn`` to length-sorted batches of ``items``; results come back in input order.

    ``fn`` takes a list of items and returns one result per item.
    """
    results: List[Any] = [None] * len(items)
    batches = length_sorted_batches(lengths, batch_size)
    for batch in progress(batches, total=len(batches), desc=desc, enabled=show_progress):
        outs = fn([items[i] for i in batch])
        if len(outs) != len(batch):
            raise RuntimeError(f"batch function returned {len(outs)} results for {len(batch)} items")
        for i, out in zip(batch, outs):
            results[i] = out
    return results
