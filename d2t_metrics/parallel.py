"""Data-parallel scoring of a large corpus over several processes or GPUs.

Run a script under ``accelerate launch`` (or ``torchrun``) and call
:func:`score_in_parallel` in every process: the inputs are split into
contiguous shards, one per process; each process scores its shard (on its own
GPU, chosen by :func:`process_device`), and the results are gathered back so
that every process holds all of them, in input order. In a plain single-process
run it simply scores everything, so the same code works with and without a
launcher::

    # score.py
    from d2t_metrics.parallel import score_in_parallel, process_device

    def score_batch(texts):
        ...  # e.g. run an NLI model on process_device()
        return [len(t) for t in texts]

    scores = score_in_parallel(texts, score_batch, batch_size=64)

    $ accelerate launch --multi_gpu --num_processes 4 score.py   # 4 GPUs
    $ torchrun --nproc_per_node 2 score.py                       # 2 CPU processes (gloo)

Call ``get_state().destroy_process_group()`` at the end of such a script, so
the gloo/NCCL group shuts down cleanly. ``accelerate`` is only imported when a distributed launch is detected, so the
single-process path needs nothing beyond the base install.
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Optional, Sequence, Tuple

from .batching import run_batched

# Environment variables any torch.distributed launcher sets.
_LAUNCH_VARS = ("WORLD_SIZE", "ACCELERATE_NUM_PROCESSES")


def is_distributed_launch() -> bool:
    """True when this process was started by ``accelerate launch``/``torchrun`` with more than one process."""
    for var in _LAUNCH_VARS:
        try:
            if int(os.environ.get(var, "1")) > 1:
                return True
        except ValueError:
            continue
    return False


def get_state():
    """accelerate's ``PartialState`` for this process (sets up the process group once).

    Without a GPU the processes talk over gloo on CPU: accelerate only does so
    when asked (``cpu=True``), so that is passed whenever CUDA is absent or
    ``ACCELERATE_USE_CPU`` (set by ``accelerate launch --cpu``) is true.
    """
    import torch  # lazy: torch, the single-process path needs only the base install
    from accelerate import PartialState  # lazy: accelerate, only under a distributed launch

    forced = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
    return PartialState(cpu=forced or not torch.cuda.is_available())


def process_device(state=None) -> str:
    """This process's device: its own GPU under a multi-GPU launch, else cuda/cpu."""
    if state is None and not is_distributed_launch():
        from .models import get_device  # lazy: torch (through models), not needed to score on one process

        return get_device()
    state = state or get_state()
    device = state.device
    return "cpu" if device.type == "cpu" else str(device)


def shard_bounds(n: int, num_processes: int, rank: int) -> Tuple[int, int]:
    """``[start, end)`` of process ``rank``'s contiguous shard of ``n`` items.

    The first ``n % num_processes`` shards get one extra item, as accelerate's
    ``split_between_processes`` does.
    """
    if num_processes < 1 or not 0 <= rank < num_processes:
        raise ValueError(f"bad rank {rank} for {num_processes} processes")
    base, extra = divmod(n, num_processes)
    start = rank * base + min(rank, extra)
    end = start + base + (1 if rank < extra else 0)
    return start, end


def score_in_parallel(
    items: Sequence[Any],
    fn: Callable[[List[Any]], List[Any]],
    batch_size: int = 32,
    lengths: Optional[Sequence[int]] = None,
    show_progress: bool = True,
    desc: str = "scoring",
    state=None,
) -> List[Any]:
    """Score ``items`` with ``fn`` (a list → one result per item) across all processes.

    Each process scores its contiguous shard in length-sorted batches of
    ``batch_size`` (``lengths`` defaults to the string length of each item), then
    the shards are gathered; every process returns the full result list, in
    input order. Results must be picklable.
    """
    items = list(items)
    if lengths is not None and len(lengths) != len(items):
        raise ValueError(f"got {len(items)} items but {len(lengths)} lengths")
    if state is None and not is_distributed_launch():
        return _score_shard(items, fn, batch_size, lengths, show_progress, desc)

    state = state or get_state()
    start, end = shard_bounds(len(items), state.num_processes, state.process_index)
    shard_lengths = None if lengths is None else list(lengths[start:end])
    results = _score_shard(items[start:end], fn, batch_size, shard_lengths, show_progress and state.is_main_process, desc)
    if state.num_processes == 1:
        return results
    from accelerate.utils import gather_object  # lazy: accelerate, only under a distributed launch

    # Gather (index, result) pairs so the order never depends on how shards are concatenated.
    gathered = gather_object([(start + i, r) for i, r in enumerate(results)])
    gathered.sort(key=lambda pair: pair[0])
    if [i for i, _ in gathered] != list(range(len(items))):
        raise RuntimeError(f"gathered {len(gathered)} results for {len(items)} items")
    return [r for _, r in gathered]


def _score_shard(items, fn, batch_size, lengths, show_progress, desc):
    if not items:
        return []
    if lengths is None:
        lengths = [len(x) if hasattr(x, "__len__") else 1 for x in items]
    return run_batched(items, lengths, fn, batch_size=batch_size, desc=desc, show_progress=show_progress)


__all__ = ["is_distributed_launch", "get_state", "process_device", "shard_bounds", "score_in_parallel"]
