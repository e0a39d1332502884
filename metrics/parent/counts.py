"""Reading PARENT-C co-occurrence counts (``cooccurrence_counts=``).

The counts are one flat JSON object, ``{"eattype": 4862, "eattype|||pub":
1290, ...}``, in the format the reference implementation reads
(``--cooccurrence_counts``). They are learned offline from (table,
reference) training pairs by ``python -m training.parent.cooccurrence``
(from the repository root); this module only reads them.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Tuple

_LOADED: Dict[Tuple[str, float], Dict[str, float]] = {}


def load_counts(path_or_counts: Any) -> Dict[str, float]:
    """Counts from a JSON file (cached per path and modification time) or a dict (returned as is)."""
    if isinstance(path_or_counts, dict):
        return path_or_counts
    if not isinstance(path_or_counts, (str, os.PathLike)):
        raise ValueError(f"cooccurrence_counts must be a path to a JSON file or a dict, got {type(path_or_counts).__name__}")
    path = os.fspath(path_or_counts)
    if not os.path.isfile(path):
        raise ValueError(f"co-occurrence counts file {path!r} not found; learn one with `python -m training.parent.cooccurrence`")
    key = (os.path.abspath(path), os.path.getmtime(path))
    counts = _LOADED.get(key)
    if counts is None:
        with open(path, encoding="utf-8") as f:
            counts = json.load(f)
        if not isinstance(counts, dict) or not all(isinstance(v, (int, float)) for v in counts.values()):
            raise ValueError(f"{path!r} is not a co-occurrence counts file: expected one JSON object of numbers")
        _LOADED.clear()
        _LOADED[key] = counts
    return counts
