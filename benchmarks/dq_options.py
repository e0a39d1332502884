"""Two of data_questeval's choices, decided on WebNLG 2017 from one full run's questions.

    python -m benchmarks.run --metrics data_questeval --datasets webnlg --dump-examples DIR
    python -m benchmarks.dq_options --dump DIR/data_questeval.webnlg.jsonl

Scoring WebNLG 2017 takes about 70 minutes on 2 cores, nearly all of it generating and
answering questions; how the answered questions make a score takes no model. So both
choices below are read from one run's per-question output (``--dump-examples``), each
output rescored with the metric's own functions (``pipeline._finish``); the rescoring
of the shipped settings must give the dumped score of every output, or the script stops.

1. **Pooling** (issue #38: one swapped value should move a score): how a side's answer
   candidates make its score, one of ``scoring.POOLINGS`` (fixed before any was scored).
   Each of the 15 categories is held out in turn and scored with the pooling that has the
   best segment Spearman on the other 14 (as ``benchmarks.dae_pooling``); reported: how
   often each was chosen, the out-of-fold correlations, and each pooling's full figures.
2. **Answerable table questions** (issue #37, ``filter_table_questions``): every table
   question of the run is asked to the table QA on its own table (``pipeline.check_answerable``,
   a few minutes), the unanswerable ones are dropped, and the outputs rescored: the figures
   with the filter on and off, and how many questions and values it drops.

Writes ``meta_eval/dq_options.json`` and RESULTS.md's ``dq_options`` section.
"""

from __future__ import annotations

import argparse
import collections
import copy
import datetime
import json
import os
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from .dae_pooling import choose_by_category
from .results_md import markdown_table, write_json, write_section

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SECTION = "dq_options"
# A rescored output may differ from its dumped score by the dump's rounding of each question's numbers.
SAME_SCORE = 2e-5


def rescored(example: Dict, pooling: str = "mean", keep=None) -> float:
    """An output's score against its table (source 0) from its dumped questions, pooled by
    ``pooling``; ``keep(question)`` False drops a table question (the answerability filter)."""
    from metrics.data_questeval.pipeline import _finish

    table = dict(example["sources"][0])  # _finish writes its scores into it; the questions are only read
    if keep is not None:
        table["from_source"] = [q for q in table["from_source"] if keep(q)]
    # an empty text has no questions, and a source without questions scores 0 as an empty text does
    return _finish({"sources": [table]}, empty=False, reduction="max", pooling=pooling)["score"]


def figures(dataset, scores: Sequence[float]) -> Dict:
    """benchmarks.run's WebNLG figures (segment and system correlations with CIs) of ``scores``; the
    module takes references, so benchmarks.run judges its binary agreement on the systems' outputs only."""
    from .adapters import Scores
    from .meta import analyze_webnlg

    return analyze_webnlg(dataset, Scores(scores=np.asarray(scores, dtype=float)), uses_references=True)


def headline(measures: Dict) -> Dict[str, float]:
    seg, sysl = measures["segment"]["semantics"], measures["system"]["semantics"]
    return {"pearson": seg["pearson"]["value"], "pearson_ci": [seg["pearson"]["low"], seg["pearson"]["high"]],
            "spearman": seg["spearman"]["value"], "system_pearson": sysl["pearson"]["value"]}


def read_rows(path: str, dataset) -> List[Dict]:
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    if len(rows) != len(dataset.items):
        raise SystemExit(f"{path}: {len(rows)} rows, the WebNLG loader {len(dataset.items)} items")
    for i, (row, item) in enumerate(zip(rows, dataset.items)):
        if (row["input_id"], row["system"], row["prediction"]) != (item.input_id, item.system, item.prediction):
            raise SystemExit(f"{path}: row {i} is not the loader's item {i}")
        if not isinstance(row.get("example"), dict) or "sources" not in row["example"]:
            raise SystemExit(f"{path}: row {i} has no per-question output (run with --dump-examples)")
    return rows


def check_rescoring(rows: Sequence[Dict]) -> float:
    worst = max(abs(rescored(r["example"]) - r["score"]) for r in rows)
    if worst > SAME_SCORE:
        raise SystemExit(f"rescoring the dump gives scores up to {worst:.2e} from the dumped ones: not the run's code")
    return worst


def answerable_verdicts(rows: Sequence[Dict], dataset) -> Callable[[str], Callable[[Dict], bool]]:
    """For every table question of the dump, whether the metric's table QA answers it on its table
    with its value; → ``keeper(table)``, the ``keep`` predicate of :func:`rescored` for a WebNLG table."""
    import d2t_metrics
    from d2t_metrics.inputs import decode_table, encode_table
    from d2t_metrics.linearize import linearize
    from metrics.data_questeval.pipeline import check_answerable

    metric = d2t_metrics.load("data_questeval", model=d2t_metrics.checkpoint_path("data_questeval"))
    table_qa = metric.load_model()["table_qa"]
    linearized = {}
    jobs = {}
    for row, item in zip(rows, dataset.items):
        if item.table not in linearized:
            linearized[item.table] = linearize(decode_table(encode_table(item.table)))
        for q in row["example"]["sources"][0]["from_source"]:
            jobs.setdefault((linearized[item.table], q["question"], q["answer"]), None)
    keys = list(jobs)
    verdicts = check_answerable(table_qa, [k[1] for k in keys], [k[2] for k in keys], [k[0] for k in keys],
                                show_progress=True)
    kept = {k: verdict for k, (verdict, _result) in zip(keys, verdicts)}
    return lambda table: lambda q: kept[(linearized[table], q["question"], q["answer"])]


def measure(dump: str, filter_questions: bool = True) -> Dict:
    from d2t_metrics.datasets import shared_dir
    from metrics.data_questeval.scoring import POOLINGS

    from .data import load_dataset
    from .generalization import webnlg_categories

    dataset = load_dataset("webnlg")
    categories, unseen = webnlg_categories(dataset, shared_dir())
    rows = read_rows(dump, dataset)
    record = {"dump": os.path.basename(dump), "n": len(rows), "rescoring_max_diff": check_rescoring(rows)}

    rated = np.array([it.system != dataset.reference_system for it in dataset.items])
    human = np.array([it.human["semantics"] for it in dataset.items], dtype=float)
    pooled = {p: np.array([rescored(r["example"], p) for r in rows]) for p in POOLINGS}
    chosen, oof = choose_by_category({p: s[rated] for p, s in pooled.items()}, human[rated],
                                     [c for c, r in zip(categories, rated) if r])
    oof_all = np.array([r["score"] for r in rows], dtype=float)
    oof_all[rated] = oof
    record["pooling"] = {
        "chosen": chosen,
        "out_of_fold": headline(figures(dataset, oof_all)),
        "in_sample": {p: headline(figures(dataset, s)) for p, s in pooled.items()},
    }
    if filter_questions:
        keeper = answerable_verdicts(rows, dataset)
        asked = dropped = values = lost = 0
        variants = {p: [] for p in POOLINGS}
        for row, item in zip(rows, dataset.items):
            keep = keeper(item.table)
            questions = row["example"]["sources"][0]["from_source"]
            asked += len(questions)
            dropped += sum(not keep(q) for q in questions)
            by_value = collections.defaultdict(list)
            for q in questions:
                by_value[q["candidate"]].append(keep(q))
            values += len(by_value)
            lost += sum(not any(v) for v in by_value.values())
            for p in POOLINGS:
                variants[p].append(rescored(row["example"], p, keep))
        record["filter"] = {
            "table_questions": asked, "dropped": dropped, "values": values, "values_without_question": lost,
            "on": {p: headline(figures(dataset, s)) for p, s in variants.items()},
        }
    record["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return record


def _row(name: str, h: Dict) -> List[str]:
    return [name, f"{h['pearson']:.3f} [{h['pearson_ci'][0]:.3f}, {h['pearson_ci'][1]:.3f}]",
            f"{h['spearman']:.3f}", f"{h['system_pearson']:.3f}"]


def render(record: Dict) -> str:
    pooling = record["pooling"]
    counts = collections.Counter(pooling["chosen"].values())
    headers = ["scores", "segment Pearson [95% CI]", "segment Spearman", "system Pearson"]
    rows = [_row(f"pooling `{p}` (chosen by {counts.get(p, 0)} of 15 folds)", h) for p, h in pooling["in_sample"].items()]
    rows.append(_row("**out of fold** (each category scored with its fold's choice)", pooling["out_of_fold"]))
    lines = [
        "## data_questeval: pooling and answerable table questions, from one run's questions (issues #37, #38)",
        "",
        f"WebNLG 2017, {record['n']} outputs, figures as `benchmarks.run` computes them (segment: the rated "
        "system outputs against mean semantics). Every output is rescored from the dumped questions with the "
        f"metric's own functions; rescored with the run's own settings (no filter, mean pooling), every output "
        f"gets its dumped score back (largest difference {record['rescoring_max_diff']:.1e}). Poolings fixed before "
        "scoring; each category held out in turn and scored with the pooling that has the best Spearman on the "
        "other 14. Shipped since data_questeval 2.0: mean pooling, filter on (with the project's table QG).",
        "",
        markdown_table(headers, rows),
    ]
    if "filter" in record:
        f = record["filter"]
        lines += [
            "",
            f"`filter_table_questions=True` (the table QA must answer a table question on its own table with "
            f"its value): {f['dropped']} of {f['table_questions']} table questions dropped "
            f"({100 * f['dropped'] / max(f['table_questions'], 1):.1f} %); {f['values_without_question']} of "
            f"{f['values']} asked values lose every question.",
            "",
            markdown_table(headers, [_row(f"filter on, pooling `{p}`", h) for p, h in f["on"].items()]),
        ]
    lines += ["", f"Measured {record['date']} from `{record['dump']}`. Command: "
              "`python -m benchmarks.dq_options --dump DIR/data_questeval.webnlg.jsonl`."]
    return "\n".join(lines)


def rescored_record(base: Dict, dump: str, pooling: str, filtered: bool, speed: Dict, command: str,
                    dumped_filtered: bool = False) -> Dict:
    """A ``meta_eval/data_questeval.json`` record (``benchmarks.run``'s form, ``base`` giving its
    other fields) whose WebNLG scores and figures are those of ``pooling`` (and, with ``filtered``,
    of the answerable table questions only), rescored from a run made without the filter: exact
    (the same questions and answers; the filter only drops table questions, by the table QA), so
    they are what a run of the metric with those settings stores. ``dumped_filtered``: the run
    had the filter on already (2.0's default), so its table questions are the kept ones.
    ``speed``: the dumped run's."""
    import d2t_metrics

    from .data import load_dataset
    from .run import _git_commit

    dataset = load_dataset("webnlg")
    rows = read_rows(dump, dataset)
    check_rescoring(rows)
    keep_of = [None] * len(rows)
    if filtered:
        keeper = answerable_verdicts(rows, dataset)
        keep_of = [keeper(item.table) for item in dataset.items]
    record = copy.deepcopy(base)
    metric = d2t_metrics.load("data_questeval", model=d2t_metrics.checkpoint_path("data_questeval"))
    record["datasets"]["webnlg"] = dict(
        record["datasets"].get("webnlg", {}), n=len(rows), smoke=False,
        signature=metric.signature(use_references=False, pooling=pooling, filter_table_questions=filtered or dumped_filtered),
        speed=speed,
        measures=figures(dataset, [rescored(r["example"], pooling, keep) for r, keep in zip(rows, keep_of)]), command=command,
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), commit=_git_commit())
    return record


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", help="data_questeval.webnlg.jsonl from benchmarks.run --dump-examples")
    ap.add_argument("--no-filter", action="store_true", help="skip the answerability study (no model loads)")
    ap.add_argument("--render-only", action="store_true", help="rewrite the RESULTS.md section from OUT/dq_options.json")
    ap.add_argument("--out", default=os.path.join(BENCH_DIR, "meta_eval"))
    ap.add_argument("--record-pooling", metavar="POOLING",
                    help="instead: rewrite OUT/data_questeval.json's WebNLG entry with this pooling's rescored figures")
    ap.add_argument("--record-filter", action="store_true", help="with --record-pooling: with the answerability filter on")
    ap.add_argument("--dumped-filtered", action="store_true",
                    help="with --record-pooling: the dump's run had the filter on (the default since 2.0)")
    ap.add_argument("--run-seconds", type=float, default=float("nan"), help="with --record-pooling: the dumped run's scoring time")
    ap.add_argument("--run-command", default="", help="with --record-pooling: the command that made the dump")
    args = ap.parse_args(argv)
    from d2t_metrics.datasets import shared_dir

    if not shared_dir():
        ap.error("no shared data directory: set D2T_SHARED")
    if args.render_only:
        with open(os.path.join(args.out, "dq_options.json"), encoding="utf-8") as f:
            write_section(SECTION, render(json.load(f)))
        return 0
    if not args.dump:
        ap.error("--dump is needed (the per-question file of benchmarks.run --dump-examples)")
    if args.record_pooling:
        path = os.path.join(args.out, "data_questeval.json")
        with open(path, encoding="utf-8") as f:
            base = json.load(f)
        nan = float("nan")
        speed = {"device": "cpu", "load_seconds": nan, "seconds": args.run_seconds, "rss_peak_delta_mb": nan,
                 "max_rss_mb": nan, "cuda_peak_mb": nan, "python_peak_mb": nan, "python_peak_n": 0,
                 "load_average": nan, "cpu_count": os.cpu_count()}
        command = (f"{args.run_command}; python -m benchmarks.dq_options --dump <its dump> --record-pooling "
                   f"{args.record_pooling}" + (" --record-filter" if args.record_filter else "")
                   + (" --dumped-filtered" if args.dumped_filtered else ""))
        record = rescored_record(base, args.dump, args.record_pooling, args.record_filter, speed, command,
                                 dumped_filtered=args.dumped_filtered)
        write_json(path, record)
        print(_row(args.record_pooling, headline(record["datasets"]["webnlg"]["measures"])))
        return 0
    record = measure(args.dump, filter_questions=not args.no_filter)
    write_json(os.path.join(args.out, "dq_options.json"), record)
    write_section(SECTION, render(record))
    print(render(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
