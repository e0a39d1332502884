"""Time and memory of one call: wall time, peak RSS above the starting RSS
(sampled), the process's max RSS, Python heap peak (tracemalloc, optional: it
slows Python code down, so timed runs leave it off) and CUDA peak memory.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
import tracemalloc
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

MB = 1024 * 1024


def current_rss() -> Optional[int]:
    """Resident set size in bytes (Linux /proc), or None elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def max_rss() -> int:
    """The process's peak RSS so far, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


@dataclass
class Measurement:
    seconds: float = 0.0
    rss_start_mb: float = float("nan")
    rss_peak_delta_mb: float = float("nan")
    max_rss_mb: float = float("nan")
    python_peak_mb: float = float("nan")
    cuda_peak_mb: float = float("nan")


class _RSSSampler(threading.Thread):
    def __init__(self, interval: float = 0.01):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = current_rss() or 0
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            rss = current_rss()
            if rss is not None and rss > self.peak:
                self.peak = rss
            self._halt.wait(self.interval)

    def stop(self):
        self._halt.set()
        self.join()


def _cuda():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch
    return None


@contextmanager
def measure(trace_python: bool = False):
    """``with measure() as m: ...`` fills ``m`` when the block ends."""
    m = Measurement()
    start_rss = current_rss()
    sampler = _RSSSampler() if start_rss is not None else None
    if sampler:
        sampler.start()
    cuda = _cuda()
    if cuda:
        cuda.cuda.synchronize()
        cuda.cuda.reset_peak_memory_stats()
    if trace_python:
        tracemalloc.start()
    t0 = time.perf_counter()
    try:
        yield m
    finally:
        if cuda or _cuda():
            _cuda().cuda.synchronize()
        m.seconds = time.perf_counter() - t0
        if trace_python:
            m.python_peak_mb = tracemalloc.get_traced_memory()[1] / MB
            tracemalloc.stop()
        if sampler:
            sampler.stop()
            end = current_rss() or 0
            m.rss_start_mb = start_rss / MB
            m.rss_peak_delta_mb = (max(sampler.peak, end) - start_rss) / MB
        m.max_rss_mb = max_rss() / MB
        if _cuda():
            m.cuda_peak_mb = _cuda().cuda.max_memory_allocated() / MB
