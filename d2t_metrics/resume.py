"""Finished blocks kept on disk, so that a long ``d2t-metrics score`` run resumes where it stopped.

A run with ``--output out.jsonl`` in one process keeps each block's per-example
results (:mod:`d2t_metrics.blocks`) in ``out.jsonl.blocks/`` as it finishes
it, and removes the folder once the output is written. When a run stops
before that (Ctrl-C, an error, a killed job, a machine gone to sleep), the same
command with ``--resume`` reads back the blocks it finished instead of scoring
them again; a metric whose blocks are all there loads no model.

A block is read back only when everything its results depend on is the same:
the metric's name and code (evaluate's module hash), its configuration, model
(a local folder by its files' names, sizes and modification times), the
arithmetic its model runs in (``--dtype``, or a GPU's bf16 against a CPU's
float32), its options, the batch size, the block's place and its input lines; anything else
is scored again. So a resumed run writes what an uninterrupted one writes, as
a sharded run does (a generator's cache across blocks aside: see
:mod:`d2t_metrics.sharding`).

The folder holds per-example results, as the output does, and nothing else of
the input; each file is written atomically. Sharded runs keep no blocks.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import __version__
from .blocks import PER_EXAMPLE_ARGUMENTS

FORMAT = 1
SUFFIX = ".blocks"
# compute() arguments that do not change a result (so a resumed run may show its bars differently).
NEUTRAL_ARGUMENTS = ("show_progress",)


class BlockStore:
    """The blocks of one output file: :meth:`load` what a stopped run finished, :meth:`save` each
    block as it finishes, :meth:`remove` them once the output is written."""

    def __init__(self, folder: str, resume: bool, write: Callable[[str, Sequence[bytes]], None]):
        # write(path, chunks): the command line's atomic writer, whose temporary files an interrupt removes
        self.folder, self.resume, self.write = folder, resume, write
        self.broken = False  # a block could not be written: keep no more
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise ValueError(f"{folder} exists and is not a folder: remove it, or write --output elsewhere")

    @classmethod
    def for_output(cls, output: str, resume: bool, write: Callable[[str, Sequence[bytes]], None]) -> "BlockStore":
        return cls(os.path.realpath(output) + SUFFIX, resume, write)

    def keys(self, name: str, metric: Any, model: Optional[str], config: Optional[str], parts: Sequence[Dict[str, Any]],
             bounds: Sequence[Tuple[int, int]]) -> List[str]:
        """The fingerprint of everything each block's results depend on: ``parts[i]``, the compute()
        arguments of the block of lines ``bounds[i]``; what the blocks share is read once."""
        shared = {"format": FORMAT, "d2t_metrics": __version__, "metric": name, "code": getattr(metric, "_hash", None),
                  "config": config, "model": model, "model_files": model_files(model), "arithmetic": arithmetic(metric),
                  "options": {k: v for k, v in parts[0].items() if k not in PER_EXAMPLE_ARGUMENTS and k not in NEUTRAL_ARGUMENTS}
                  if parts else {}}
        keys = []
        for part, (start, end) in zip(parts, bounds):
            inputs = {k: part[k] for k in PER_EXAMPLE_ARGUMENTS if part.get(k) is not None}
            text = json.dumps({**shared, "lines": [start, end], "inputs": inputs}, sort_keys=True, ensure_ascii=True, default=repr)
            keys.append(hashlib.sha256(text.encode("ascii")).hexdigest())
        return keys

    def _path(self, name: str, start: int, end: int) -> str:
        return os.path.join(self.folder, f"{name}.{start}-{end}.json")

    def load(self, name: str, key: str, start: int, end: int) -> Optional[List[Dict[str, Any]]]:
        """The block's per-example results when a stopped run with the same key finished it (and
        ``--resume`` was given), else ``None``."""
        if not self.resume:
            return None
        try:
            with open(self._path(name, start, end), encoding="ascii") as f:
                stored = json.load(f)
        except (OSError, ValueError):
            return None  # absent, or cut short by the stop: scored again
        examples = stored.get("examples") if isinstance(stored, dict) else None
        if stored.get("key") != key or not isinstance(examples, list) or len(examples) != end - start:
            return None
        return examples

    def save(self, name: str, key: str, start: int, end: int, examples: List[Dict[str, Any]]) -> None:
        """Keep a finished block. A block that cannot be written (a full disk, a folder gone read-only)
        only costs the resume: one warning, and the run goes on keeping nothing more."""
        if self.broken:
            return
        text = json.dumps({"key": key, "examples": examples}, ensure_ascii=True, allow_nan=True, default=json_default)
        try:
            os.makedirs(self.folder, exist_ok=True)
            self.write(self._path(name, start, end), [text.encode("ascii")])
        except OSError as e:
            self.broken = True
            print(f"d2t-metrics: warning: cannot keep finished blocks in {self.folder} ({e}); "
                  "the run goes on, but --resume will have nothing more to go on from", file=sys.stderr)
            return

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def kept(self) -> int:
        """How many block files the folder holds."""
        try:
            return sum(name.endswith(".json") for name in os.listdir(self.folder))
        except OSError:
            return 0


def plain(examples: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The per-example results as JSON gives them back (numpy numbers as Python ones, tuples as
    lists, NaN kept), so that a block read back and a block just scored are the same values."""
    return json.loads(json.dumps(examples, ensure_ascii=True, allow_nan=True, default=json_default))


def json_default(value):
    # numpy scalars and arrays from metric results
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def model_files(model: Optional[str]) -> Optional[List[List[Any]]]:
    """A local model folder's files (relative name, size, modification time), so that a model
    retrained in place is not mistaken for the old one; ``None`` for a Hub id."""
    if not isinstance(model, str) or not os.path.isdir(os.path.expanduser(model)):
        return None
    root = os.path.expanduser(model)
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            found.append([os.path.relpath(path, root), st.st_size, st.st_mtime_ns])
    return sorted(found)


def arithmetic(metric: Any) -> Optional[str]:
    """The arithmetic of ``metric``'s model from its ``device_name`` and ``dtype`` (the attributes the
    model-based metrics keep; :func:`d2t_metrics.models.arithmetic_label`), ``None`` for float32 or a
    metric that keeps neither."""
    device, dtype = getattr(metric, "device_name", None), getattr(metric, "dtype", None)
    if device is None and dtype is None and not getattr(metric, "uses_model", False):
        return None
    from .models import arithmetic_label  # lazy: torch, which only a model-based metric has imported

    return arithmetic_label(None if device is None else str(device), dtype)


__all__ = ["BlockStore", "arithmetic", "plain", "model_files"]

