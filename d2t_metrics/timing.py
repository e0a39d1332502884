"""Where a run's time goes: named stages, timed on the wall clock and summed per process.

A metric marks its stages (``with stage("question generation"):``); the command line's
``--timing`` prints :func:`report` after a run, and ``benchmarks/`` read :func:`totals`.
Stages may nest: each stage's time counts the stages inside it, so a report lists the
outer stages and their parts, in the order they first ran. Recording costs two clock reads
per stage and is always on; nothing is printed unless asked. With :func:`set_sync` (the command
line's ``--timing`` sets :func:`cuda_sync`) each stage also waits for the GPU as it starts and ends,
so that a stage's device time is its own.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

_lock = threading.Lock()
_totals: Dict[Tuple[str, ...], List[float]] = {}  # stage path → [seconds, calls]
_local = threading.local()
_sync: Optional[Callable[[], None]] = None  # called as each stage starts and ends, when set


def set_sync(sync: Optional[Callable[[], None]]) -> Optional[Callable[[], None]]:
    """Call ``sync`` as each stage starts and ends (``None``: nothing); returns the previous one.
    A GPU runs what a stage queued after the stage has returned, so without it a stage's device
    time is counted in whichever later stage (or no stage) first waits for the device."""
    global _sync
    previous, _sync = _sync, sync
    return previous


def cuda_sync() -> None:
    """Wait for the GPU's queued work, where this process has started CUDA (else nothing: torch is
    not imported for it, and a CPU run pays a dictionary lookup)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _path() -> List[str]:
    if not hasattr(_local, "path"):
        _local.path = []
    return _local.path


@contextlib.contextmanager
def stage(name: str):
    """Time the block as stage ``name`` (nested inside the stage that is running, if any)."""
    path = _path()
    path.append(str(name))
    key = tuple(path)
    sync = _sync
    if sync is not None:
        sync()
    start = time.perf_counter()
    try:
        yield
        if sync is not None:  # not after an error: a failed CUDA call would raise again here, hiding the first
            sync()
    finally:
        elapsed = time.perf_counter() - start
        path.pop()
        with _lock:
            entry = _totals.setdefault(key, [0.0, 0])
            entry[0] += elapsed
            entry[1] += 1


def reset() -> None:
    """Forget every recorded stage."""
    with _lock:
        _totals.clear()


def totals() -> Dict[Tuple[str, ...], Tuple[float, int]]:
    """Each stage path (outermost first) → (seconds, calls), in the order stages first ran."""
    with _lock:
        return {k: (v[0], v[1]) for k, v in _totals.items()}


# A stage whose parts leave this much of it (and this share) outside any part gets an "(other)" row:
# time a user would otherwise not see (model warm-up, bookkeeping between parts).
OTHER_MIN_SECONDS = 0.05
OTHER_MIN_SHARE = 0.05
OTHER = "(other)"


def report(total_seconds: float = None) -> str:
    """The recorded stages as an indented plain-text table: seconds, share of ``total_seconds``
    (or of the outermost stages' sum), calls. Under a stage with parts, an ``(other)`` row gives
    what the parts leave of it, where that is at least :data:`OTHER_MIN_SECONDS` and
    :data:`OTHER_MIN_SHARE` of the stage (parts that ran side by side, in threads, can sum to
    more than their stage: no row then)."""
    rows = totals()
    if not rows:
        return "no stages were timed"
    outer = sum(s for k, (s, _) in rows.items() if len(k) == 1)
    whole = total_seconds if total_seconds else outer
    order = sorted(rows, key=lambda k: [list(rows).index(k[: i + 1]) if k[: i + 1] in rows else 0 for i in range(len(k))])
    entries: List[Tuple[int, str, float, object]] = []  # (depth, name, seconds, calls), in the report's order
    open_stages: List[Tuple[str, ...]] = []  # the stages whose parts are being listed, innermost last

    def close_until(key: Tuple[str, ...]) -> None:
        while open_stages and open_stages[-1] != key[: len(open_stages[-1])]:
            entries.extend(_other_row(open_stages.pop(), rows))

    for k in order:
        close_until(k)
        entries.append((len(k) - 1, k[-1], *rows[k]))
        open_stages.append(k)
    close_until(())
    width = max(len("  " * depth + name) for depth, name, _, _ in entries)
    lines = [f"{'stage':<{width}}  {'seconds':>9}  {'share':>6}  {'calls':>6}"]
    for depth, name, seconds, calls in entries:
        share = f"{100 * seconds / whole:5.1f}%" if whole else "     -"
        lines.append(f"{'  ' * depth + name:<{width}}  {seconds:9.2f}  {share:>6}  {calls:>6}")
    return "\n".join(lines)


def _other_row(key: Tuple[str, ...], rows) -> List[Tuple[int, str, float, str]]:
    """The ``(other)`` entry under stage ``key``, if its parts leave enough of it (:func:`report`)."""
    parts = [s for k, (s, _) in rows.items() if len(k) == len(key) + 1 and k[: len(key)] == key]
    if not parts:
        return []
    seconds = rows[key][0]
    rest = seconds - sum(parts)
    if rest < OTHER_MIN_SECONDS or rest < OTHER_MIN_SHARE * seconds:
        return []
    return [(len(key), OTHER, rest, "")]
