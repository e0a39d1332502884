"""Where a run's time goes: named stages, timed on the wall clock and summed per process.

A metric marks its stages (``with stage("question generation"):``); the command line's
``--timing`` prints :func:`report` after a run, and ``benchmarks/`` read :func:`totals`.
Stages may nest: each stage's time counts the stages inside it, so a report lists the
outer stages and their parts, in the order they first ran. Recording costs two clock reads
per stage and is always on; nothing is printed unless asked.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Dict, List, Tuple

_lock = threading.Lock()
_totals: Dict[Tuple[str, ...], List[float]] = {}  # stage path → [seconds, calls]
_local = threading.local()


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
    start = time.perf_counter()
    try:
        yield
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


def report(total_seconds: float = None) -> str:
    """The recorded stages as an indented plain-text table: seconds, share of ``total_seconds``
    (or of the outermost stages' sum), calls."""
    rows = totals()
    if not rows:
        return "no stages were timed"
    outer = sum(s for k, (s, _) in rows.items() if len(k) == 1)
    whole = total_seconds if total_seconds else outer
    order = sorted(rows, key=lambda k: [list(rows).index(k[: i + 1]) if k[: i + 1] in rows else 0 for i in range(len(k))])
    width = max(len("  " * (len(k) - 1) + k[-1]) for k in rows)
    lines = [f"{'stage':<{width}}  {'seconds':>9}  {'share':>6}  {'calls':>6}"]
    for k in order:
        seconds, calls = rows[k]
        share = f"{100 * seconds / whole:5.1f}%" if whole else "     -"
        lines.append(f"{'  ' * (len(k) - 1) + k[-1]:<{width}}  {seconds:9.2f}  {share:>6}  {calls:6d}")
    return "\n".join(lines)
