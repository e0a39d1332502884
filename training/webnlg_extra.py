"""Entries of further WebNLG releases (e.g. WebNLG 3.0 train and dev) for the trained components.

Shared by the recipes that take ``--extra-data``: every metric is measured on WebNLG 2017's test
inputs (and tuned on its dev inputs), so an entry of a newer release whose triple set is one of
those inputs is left out, and so is one whose input the main training data already has.
"""

from __future__ import annotations

import os
from typing import Iterable, List, Sequence, Tuple

from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.datasets import shared_dir


def default_exclude_inputs() -> List[str]:
    """WebNLG 2017 test and dev XML folders under the shared data ("" for each when it is absent,
    so that the caller's check of the folders refuses to run without the exclusion)."""
    shared = shared_dir()
    return [os.path.join(shared, "data", "webnlg2017", "xml", split) if shared else "" for split in ("test", "dev")]


def extra_entries(main_entries: Sequence, extra_paths: Iterable[str], exclude_paths: Iterable[str]) -> Tuple[list, dict]:
    """The entries of ``extra_paths`` that add something: without any whose triple set is an input of
    ``exclude_paths`` or already an input of ``main_entries`` or of an earlier extra entry (inputs
    compared as the templates' extraction compares them). Returns the entries and the counts
    removed, for the recipe."""
    from d2t_metrics.extract_templates import input_key, without_inputs

    read = [e for path in extra_paths for e in load_webnlg_xml(path)]
    allowed = without_inputs(read, [e for path in exclude_paths for e in load_webnlg_xml(path)])
    first: dict = {}
    for entry in without_inputs(allowed, main_entries):
        first.setdefault(input_key(entry), entry)
    kept = list(first.values())
    return kept, {"read": len(read), "removed_excluded_input": len(read) - len(allowed),
                  "removed_already_in_data": len(allowed) - len(kept), "kept": len(kept)}
