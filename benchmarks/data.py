"""The meta-evaluation data sets, read from ``../shared/data`` (never copied into the repo).

Each loader returns a :class:`BenchDataset`: a flat list of system outputs
(:class:`Item`) with the input they came from (``input_id``, the unit the
bootstrap resamples), the system that wrote them, what a metric needs
(prediction, references, table, source) and the human judgement.

* ``webnlg``: WebNLG 2017 challenge human evaluation, 223 inputs x 10 "systems"
  (9 systems plus the references, team ``webnlg``), mean ratings of semantics,
  grammar and fluency (1-3).
* ``e2e``: the 21 primary E2E Challenge systems on the 630 test MRs, labelled by
  the E2E slot-error script (OK / omission / hallucination / hallucination+omission).
* ``dae_pairs``: Falke et al.'s 373 CNN/DM summary pairs (article sentence, a
  correct and an incorrect summary sentence), two items per pair.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from d2t_metrics.datasets import iter_tsv, load_e2e_csv, shared_dir

WEBNLG_REFERENCE_TEAM = "webnlg"
HUMAN_ASPECTS = ("semantics", "grammar", "fluency")

# Smoke runs keep whole inputs (every system's output for the first few inputs)
# so that system-level statistics still have every system, at <= 50 items.
SMOKE_INPUTS = {"webnlg": 5, "e2e": 2, "dae_pairs": 25}


@dataclass
class Item:
    prediction: str
    references: List[str]
    input_id: int
    system: str
    table: Optional[str] = None
    source: Optional[str] = None
    human: Dict[str, object] = field(default_factory=dict)


@dataclass
class BenchDataset:
    name: str
    description: str
    items: List[Item]
    # The system whose outputs are the references themselves (excluded from
    # correlations, as in Dhingra et al.'s webnlg_correlations.py).
    reference_system: Optional[str] = None
    path: str = ""

    def __len__(self) -> int:
        return len(self.items)

    @property
    def systems(self) -> List[str]:
        return sorted({it.system for it in self.items})

    @property
    def n_inputs(self) -> int:
        return len({it.input_id for it in self.items})

    def subset_inputs(self, n_inputs: int) -> "BenchDataset":
        """The items of the first ``n_inputs`` inputs (in input order)."""
        keep = set(sorted({it.input_id for it in self.items})[:n_inputs])
        return BenchDataset(
            name=self.name,
            description=self.description + f" (smoke subset: first {n_inputs} inputs)",
            items=[it for it in self.items if it.input_id in keep],
            reference_system=self.reference_system,
            path=self.path,
        )


class DatasetMissing(Exception):
    """A data set's files are not on this machine."""


def _data_path(*parts: str) -> str:
    root = shared_dir()
    if root is None:
        raise DatasetMissing("../shared is absent (set D2T_SHARED to its path)")
    path = os.path.join(root, "data", *parts)
    if not os.path.exists(path):
        raise DatasetMissing(f"{path} not found")
    return path


def load_webnlg() -> BenchDataset:
    path = _data_path("webnlg2017", "human_eval.csv")
    refs_path = _data_path("webnlg2017", "human_eval_references.jsonl")
    references = {}
    with open(refs_path, encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            references[entry["mr"]] = entry["references"]
    items, input_ids = [], {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            mr = row["mr"]
            if mr not in references:
                raise ValueError(f"{path}: row {row['id']}: no references for mr {mr!r}")
            input_id = input_ids.setdefault(mr, len(input_ids))
            items.append(
                Item(
                    prediction=row["text"],
                    references=list(references[mr]),
                    input_id=input_id,
                    system=row["team"],
                    # The golden PARENT tables come from the `mr` column (it keeps
                    # apostrophes that the v1.6 `triples` drop).
                    table=mr,
                    human={a: float(row[a]) for a in HUMAN_ASPECTS},
                )
            )
    return BenchDataset(
        name="webnlg",
        description="WebNLG 2017 human evaluation (223 inputs x 9 systems + references)",
        items=items,
        reference_system=WEBNLG_REFERENCE_TEAM,
        path=path,
    )


def _strip_single_quotes(text: str) -> str:
    # tnt1/tnt2 rows keep the single quotes their source files have.
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == "'" else text


def normalize_label(label: str) -> str:
    """``hallucination+omission`` and ``omission+hallucination`` are one class."""
    parts = sorted(p.strip().lower() for p in str(label).replace(" ", "").split("+") if p.strip())
    if parts == ["ok"]:
        return "OK"
    return "+".join(parts)


def load_e2e() -> BenchDataset:
    path = _data_path("e2e", "primary_slot_errors.tsv")
    refs = {ex.mr: ex.references for ex in load_e2e_csv(_data_path("e2e", "testset_w_refs.csv"))}
    items, input_ids = [], {}
    for i, row in enumerate(iter_tsv(path)):
        mr = _strip_single_quotes(row["mr"])
        if mr not in refs:
            raise ValueError(f"{path}: row {i}: MR not in testset_w_refs.csv: {mr!r}")
        input_id = input_ids.setdefault(mr, len(input_ids))
        items.append(
            Item(
                # Some system files end lines with spaces; the golden inputs are stripped.
                prediction=_strip_single_quotes(row["output"]).strip(),
                references=list(refs[mr]),
                input_id=input_id,
                system=row["system"],
                table=mr,
                human={"ok": row["slot_error_ok"] == "1", "label": normalize_label(row["slot_error_result"])},
            )
        )
    return BenchDataset(
        name="e2e",
        description="E2E Challenge, 21 primary systems x 630 test MRs, slot-error script labels",
        items=items,
        path=path,
    )


def load_dae_pairs() -> BenchDataset:
    path = _data_path("dae", "summary_pairs.json")
    with open(path, encoding="utf-8") as f:
        pairs = json.load(f)
    items = []
    for i, pair in enumerate(pairs):
        for key, correct in (("correct_sent", True), ("incorrect_sent", False)):
            items.append(
                Item(
                    prediction=pair[key],
                    # Reference-based baselines treat the article sentence as the reference.
                    references=[pair["article_sent"]],
                    input_id=i,
                    system="correct" if correct else "incorrect",
                    source=pair["article_sent"],
                    human={"correct": correct},
                )
            )
    return BenchDataset(
        name="dae_pairs",
        description="Falke et al. (2019) CNN/DM summary pairs: 373 x (correct, incorrect)",
        items=items,
        path=path,
    )


LOADERS = {"webnlg": load_webnlg, "e2e": load_e2e, "dae_pairs": load_dae_pairs}


def load_dataset(name: str, smoke: bool = False) -> BenchDataset:
    if name not in LOADERS:
        raise ValueError(f"unknown data set {name!r}; choose from {sorted(LOADERS)}")
    ds = LOADERS[name]()
    return ds.subset_inputs(SMOKE_INPUTS[name]) if smoke else ds
