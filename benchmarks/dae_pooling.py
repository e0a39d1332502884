"""How DAE pools a table's arc probabilities into a score, chosen by leave one category out.

    python -m benchmarks.dae_pooling [--out DIR]

DAE scores every dependency arc of the text; the paper pools them by their mean (its
footnote 3: min pooling, its own definition of a non-factual output, "was very unstable"
on summaries). For tables, the candidate poolings below (fixed before any was scored) are
compared on WebNLG 2017's rated system outputs against the mean semantics rating: each of
the 15 categories is held out in turn, the pooling with the best segment Spearman on the
other 14 is chosen, and the held-out category is scored with it. Reported: how often each
pooling was chosen, the out-of-fold correlations, and every pooling's in-sample ones for
reference. ``metrics/dae`` ships the pooling chosen most often (``pooling=None`` for
tables). Since session 35 the candidates also check the other direction (``direction="both"``:
the table's fact sentences' arcs against the text, which sees what the text leaves out), pooled
and joined to the text's score in the ways of :data:`SOURCE_POOLINGS` and :data:`JOINS`.
The arcs are scored once with the default checkpoints (about 2 minutes on 2 cores);
writes ``meta_eval/dae_pooling.json`` and RESULTS.md's ``dae_pooling`` section.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import math
import os
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr

from .results_md import markdown_table, write_json, write_section

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SECTION = "dae_pooling"


def _geometric(p: Sequence[float]) -> float:
    return math.exp(sum(math.log(max(q, 1e-6)) for q in p) / len(p))


def _lowest(k: int) -> Callable[[Sequence[float]], float]:
    return lambda p: sum(sorted(p)[:k]) / min(k, len(p))


def _shipped(name: str) -> Callable[[Sequence[float]], float]:
    """One of the metric's own poolings (``metrics.dae.verdicts.pooled``), so the benchmark scores what ships."""
    from metrics.dae.verdicts import pooled

    return lambda p: pooled(sum(p) / len(p), min(p), name)


POOLINGS: Dict[str, Callable[[Sequence[float]], float]] = {
    "mean": _shipped("mean"),
    "min": _shipped("min"),
    "mean_min": _shipped("mean_min"),
    "geometric mean": _geometric,
    "mean of the lowest 2": _lowest(2),
    "mean of the lowest 3": _lowest(3),
}


def pooled_scores(arc_probabilities: Sequence[Sequence[float]]) -> Dict[str, np.ndarray]:
    """Each pooling's score per output (0.0 for an output without arcs, as the metric scores it)."""
    return {name: np.array([pool(p) if p else 0.0 for p in arc_probabilities]) for name, pool in POOLINGS.items()}


# direction="both" (session 35): the table's own arcs (its fact sentences') checked against the
# text, pooled one of these ways, joined to the text's shipped ``mean_min`` score one of these ways.
SOURCE_POOLINGS = ("mean", "min", "mean_min")
JOINS = ("source", "mean", "min", "product")


def both_direction_scores(text_arcs: Sequence[Sequence[float]],
                          source_arcs: Sequence[Sequence[float]]) -> Dict[str, np.ndarray]:
    """Each (source pooling, join) candidate's score per output, as ``metrics.dae.dae`` computes it
    (0.0 for a text without arcs)."""
    from metrics.dae.verdicts import joined, pooled

    text = pooled_scores(text_arcs)["mean_min"]
    out = {}
    for pooling in SOURCE_POOLINGS:
        source = np.array([pooled(sum(p) / len(p), min(p), pooling) if p else 0.0 for p in source_arcs])
        for how in JOINS:
            out[f"both: {how}, source {pooling}"] = np.array(
                [joined(t, s, how) if arcs else 0.0 for t, s, arcs in zip(text, source, text_arcs)])
    return out


def choose_by_category(scores: Dict[str, np.ndarray], human: np.ndarray, categories: Sequence[str]):
    """Per held-out category, the candidate (a key of ``scores``: a pooling, or any choice scored
    per output) with the best Spearman on the others; and the out-of-fold scores (each output
    scored with its fold's choice). Shared with ``benchmarks.dq_options``."""
    categories = np.asarray(categories)
    chosen, oof = {}, np.full(len(human), np.nan)
    for held in sorted(set(categories.tolist())):
        train, test = categories != held, categories == held
        best = max(scores, key=lambda name: spearmanr(scores[name][train], human[train])[0])
        chosen[held] = best
        oof[test] = scores[best][test]
    return chosen, oof


def _correlations(x: np.ndarray, y: np.ndarray) -> Dict[str, float]:
    return {"pearson": float(pearsonr(x, y)[0]), "spearman": float(spearmanr(x, y)[0])}


def measure(shared: str) -> Dict:
    import d2t_metrics

    from .data import load_dataset
    from .generalization import webnlg_categories

    dataset = load_dataset("webnlg")
    categories, _unseen = webnlg_categories(dataset, shared)
    rated = [i for i, it in enumerate(dataset.items)
             if it.system != dataset.reference_system and (it.human or {}).get("semantics") is not None]
    items = [dataset.items[i] for i in rated]
    metric = d2t_metrics.load("dae", model=d2t_metrics.checkpoint_path("dae"))
    examples = metric.compute(predictions=[it.prediction for it in items], tables=[it.table for it in items],
                              per_example=True, show_progress=False, direction="both")["examples"]
    probabilities = [[a["probability"] for a in e["arcs"]] for e in examples]
    source_probabilities = [[a["probability"] for f in e["facts"] for a in f["arcs"]] for e in examples]
    human = np.array([it.human["semantics"] for it in items], dtype=float)
    scores = {**pooled_scores(probabilities), **both_direction_scores(probabilities, source_probabilities)}
    chosen, oof = choose_by_category(scores, human, [categories[i] for i in rated])
    return {
        "n": len(items), "signature": metric.signature(direction="both"), "chosen": chosen,
        "out_of_fold": _correlations(oof, human),
        "in_sample": {name: _correlations(s, human) for name, s in scores.items()},
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def render(record: Dict) -> str:
    counts = collections.Counter(record["chosen"].values())
    rows = [[f"`{name}`", counts.get(name, 0), f"{m['pearson']:.3f}", f"{m['spearman']:.3f}"]
            for name, m in record["in_sample"].items()]
    oof = record["out_of_fold"]
    return "\n".join([
        "## DAE: how a table's arcs make its score (leave one category out, issue #34)",
        "",
        f"WebNLG 2017, {record['n']} rated system outputs, segment correlation with the mean semantics rating. "
        "Each of the 15 categories is held out in turn and scored with the candidate that has the best Spearman "
        "on the other 14. Candidates: six poolings of the text's arcs (fixed before scoring, session 26); and, "
        "with `direction=\"both\"`, the table's own arcs (its fact sentences', checked against the text: what "
        "the text leaves out) pooled by their mean, min or `mean_min` and joined to the text's `mean_min` score "
        "(`source` alone, mean, min or product; added in session 35 after an in-sample look at some of them, "
        "so this selection is not blind to the test categories). "
        f"**Out of fold: Pearson {oof['pearson']:.3f}, Spearman {oof['spearman']:.3f}.** "
        "The metric ships the candidate chosen most often for tables; text sources keep the paper's mean of "
        "the text's arcs.",
        "",
        markdown_table(["candidate", "folds that chose it", "Pearson (all outputs)", "Spearman (all outputs)"], rows),
        "",
        f"Arcs scored by `{record['signature']}` on {record['date']}. Command: `python -m benchmarks.dae_pooling`.",
    ])


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(BENCH_DIR, "meta_eval"))
    args = ap.parse_args(argv)
    from d2t_metrics.datasets import shared_dir

    shared = shared_dir()
    if not shared:
        ap.error("no shared data directory: set D2T_SHARED")
    record = measure(shared)
    write_json(os.path.join(args.out, "dae_pooling.json"), record)
    write_section(SECTION, render(record))
    print(render(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
