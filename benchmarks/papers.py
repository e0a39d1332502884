"""Figures to reproduce: from the papers, and from the reference implementations
(``../shared/golden``). Keyed by metric row name, then by a figure key:

* ``("webnlg", "segment", <correlation>, <aspect>)``
* ``("webnlg", "system", "pearson", <aspect>)``
* ``("webnlg", "binary", <threshold>, "accuracy")``
* ``("e2e", "binary", "2way" | "4way", "accuracy")``
* ``("dae_pairs", "rerank", "accuracy")``

Values are fractions (0.775 for 77.5%).
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple


class Figure(NamedTuple):
    value: float
    source: str


PARENT_PAPER = "Dhingra et al. 2019, Table 4 (PARENT-W, 500 bootstrap samples)"
PARENT_GOLDEN = "reference implementation's scores (shared/golden/parent_webnlg2017.jsonl)"
NLI_PAPER = "Dušek & Kasner 2020"
DAE_PAPER = "Goyal & Durrett 2020, Table 4"
DATA_QUESTEVAL_PAPER = "Rebuffel et al. 2021, Table 1 (data-QuestEval, source only)"

FIGURES: Dict[str, Dict[Tuple, Figure]] = {
    "parent": {
        ("webnlg", "system", "pearson", "semantics"): Figure(0.887, PARENT_PAPER),
        ("webnlg", "system", "pearson", "grammar"): Figure(0.821, PARENT_PAPER),
        ("webnlg", "system", "pearson", "fluency"): Figure(0.768, PARENT_PAPER),
    },
    "bleu": {
        # The paper's BLEU is corpus BLEU per system; ours is corpus BLEU from
        # summed sentence statistics at system level too.
        ("webnlg", "system", "pearson", "semantics"): Figure(0.775, PARENT_PAPER.replace("PARENT-W", "BLEU")),
        ("webnlg", "system", "pearson", "grammar"): Figure(0.858, PARENT_PAPER.replace("PARENT-W", "BLEU")),
        ("webnlg", "system", "pearson", "fluency"): Figure(0.811, PARENT_PAPER.replace("PARENT-W", "BLEU")),
    },
    "nli_semantic_accuracy": {
        # Default (extracted) templates; 2-way, WebNLG against semantics >= 2.5 on all 2,230 outputs.
        ("webnlg", "binary", "2.5", "accuracy"): Figure(0.775, NLI_PAPER + " (default templates)"),
        ("e2e", "binary", "2way", "accuracy"): Figure(0.933, NLI_PAPER + " (default templates)"),
    },
    "nli_semantic_accuracy_backoff": {
        ("webnlg", "binary", "2.5", "accuracy"): Figure(0.768, NLI_PAPER + " (back-off templates)"),
        ("e2e", "binary", "2way", "accuracy"): Figure(0.874, NLI_PAPER + " (back-off templates)"),
    },
    "data_questeval": {
        # WebNLG 2017 segment-level Pearson; the paper reports no Spearman or system level.
        ("webnlg", "segment", "pearson", "semantics"): Figure(0.735, DATA_QUESTEVAL_PAPER),
        ("webnlg", "segment", "pearson", "grammar"): Figure(0.604, DATA_QUESTEVAL_PAPER),
        ("webnlg", "segment", "pearson", "fluency"): Figure(0.576, DATA_QUESTEVAL_PAPER),
    },
    "dae": {
        ("dae_pairs", "rerank", "accuracy"): Figure(0.836, DAE_PAPER),
    },
    "dae_rule": {
        ("dae_pairs", "rerank", "accuracy"): Figure(0.748, DAE_PAPER + " (rule-based dependency)"),
    },
}

# Figures computed from the reference implementation's own outputs (golden files).
REFERENCE_FIGURES: Dict[str, Dict[Tuple, Figure]] = {
    "parent": {
        ("webnlg", "segment", "pearson", "semantics"): Figure(0.609, PARENT_GOLDEN),
        ("webnlg", "segment", "spearman", "semantics"): Figure(0.617, PARENT_GOLDEN),
        ("webnlg", "system", "pearson", "semantics"): Figure(0.877, PARENT_GOLDEN),
    },
}

# Other systems' figures printed beside ours for context (not ours to reproduce).
DAE_CONTEXT_ROWS = [
    ("BERT (MNLI)", 0.723),
    ("RoBERTa (MNLI)", 0.783),
    ("ELECTRA (MNLI)", 0.820),
    ("QAGS", 0.721),
    ("Rule-based dependency", 0.748),
    ("DAE", 0.836),
    ("Human", 0.839),
]


def figure(metric: str, key: Tuple, reference: bool = False) -> Optional[Figure]:
    table = REFERENCE_FIGURES if reference else FIGURES
    return table.get(metric, {}).get(key)
