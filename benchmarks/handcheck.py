"""How often do the metrics' explanations hold up? A hand check on 100 WebNLG 2017 outputs (issue #37).

    nice -n 10 python -m benchmarks.handcheck run --metric fact_accuracy    # then data_questeval, dae
    python -m benchmarks.handcheck items      # benchmarks/handcheck/items.jsonl from the runs
    python -m benchmarks.handcheck --report   # accepted shares -> RESULTS.md section ``handcheck``
    python -m benchmarks.handcheck dq-from-dump --dump DIR/data_questeval.webnlg.jsonl --question-sample 100

A fixed sample of 100 rated system outputs (:func:`draw_sample`: seed 0, non-empty texts,
spread evenly over the 9 systems and the seen / unseen categories) is scored by
fact_accuracy, data_questeval and dae with the project's checkpoints, per example.
Their explanations become the items a person judges (``benchmarks/handcheck/README.md``
is the guideline):

* ``fact``: a fact fact_accuracy kept (with its evidence span and its verdict against the table);
  ``fact_ungrounded``: one it dropped because its subject or object is not in the text;
* ``table_question``: a question data_questeval generated about a table value, with that
  value and the text QA's answer; ``text_question``: one generated about a span of the
  text, with that span and the table QA's answer (a seeded sample of each, :data:`QUESTION_SAMPLE`);
* ``arc``: a dependency arc DAE says the table does not entail.

Each item has a stable id (``<output id>:<kind>:<index>``). The raw per-example results of
the runs stay in ``--raw-dir`` (scratch, not in the repository). ``--report`` computes, from
``items.jsonl`` and the hand annotations ``annotations.jsonl``, the share a person accepts
per metric and kind, with 95 % Wilson intervals, by seen / unseen category, and the share of
fact verdicts accepted.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import sys
from collections import OrderedDict, defaultdict
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
HANDCHECK_DIR = os.path.join(BENCH_DIR, "handcheck")
ITEMS_PATH = os.path.join(HANDCHECK_DIR, "items.jsonl")
ANNOTATIONS_PATH = os.path.join(HANDCHECK_DIR, "annotations.jsonl")
POPULATION_PATH = os.path.join(HANDCHECK_DIR, "population.json")
TABLE_QA_PATH = os.path.join(HANDCHECK_DIR, "table_qa_on_table.jsonl")
DEFAULT_RAW_DIR = "/tmp/handcheck_raw"
SECTION = "handcheck"

SAMPLE_SIZE = 100
SAMPLE_SEED = 0
# Questions are many (five per table value, three per text span): a seeded sample of each kind is judged.
QUESTION_SAMPLE = 250
QUESTION_SEED = 0
METRICS = ("fact_accuracy", "data_questeval", "dae")
KINDS = OrderedDict([
    ("fact", "fact_accuracy"),
    ("fact_ungrounded", "fact_accuracy"),
    ("table_question", "data_questeval"),
    ("text_question", "data_questeval"),
    ("arc", "dae"),
])
Z95 = 1.959963984540054


# ---------------------------------------------------------------- the sample


def load_outputs() -> List[Dict[str, Any]]:
    """Every rated system output of WebNLG 2017 (the references' team left out) with its CSV id,
    category and seen / unseen split, in the loader's order (checked against ``human_eval.csv``)."""
    from .data import load_webnlg

    dataset = load_webnlg()
    with open(dataset.path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if len(rows) != len(dataset.items):
        raise ValueError(f"human_eval.csv has {len(rows)} rows, the loader {len(dataset.items)} items")
    outputs = []
    for index, (row, item) in enumerate(zip(rows, dataset.items)):
        if row["mr"] != item.table or row["team"] != item.system:
            raise ValueError(f"row {row['id']}: human_eval.csv and the loader disagree")
        if item.system == dataset.reference_system:
            continue
        # index: the item's place in the loader (and in a benchmarks.run --dump-examples file)
        outputs.append({"output_id": row["id"], "index": index, "system": item.system, "category": row["category"],
                        "seen": row["type"] == "seen", "table": item.table, "text": item.prediction,
                        "semantics": item.human["semantics"]})
    return outputs


def draw_sample(outputs: Sequence[Dict[str, Any]], n: int = SAMPLE_SIZE, seed: int = SAMPLE_SEED) -> List[Dict[str, Any]]:
    """``n`` non-empty outputs spread evenly over the strata (system, seen / unseen).

    Each stratum gets ``n // strata`` outputs; the remainder goes to strata chosen at random.
    Within a stratum outputs are drawn at random, preferring inputs not drawn yet (so one
    table is not judged many times). Deterministic for a given ``seed`` and input order."""
    rng = random.Random(seed)
    strata: Dict[Tuple[str, bool], List[Dict[str, Any]]] = defaultdict(list)
    for o in outputs:
        if o["text"].strip():
            strata[(o["system"], o["seen"])].append(o)
    keys = sorted(strata)
    if not keys:
        raise ValueError("no non-empty outputs to sample")
    quota = {k: n // len(keys) for k in keys}
    for k in rng.sample(keys, n % len(keys)):
        quota[k] += 1
    chosen, tables = [], set()
    for k in keys:
        pool = list(strata[k])
        rng.shuffle(pool)
        # New tables first, in the shuffled order; repeated tables only when a stratum runs out.
        pool.sort(key=lambda o: o["table"] in tables)
        for o in pool[:quota[k]]:
            chosen.append(o)
            tables.add(o["table"])
    if len(chosen) != n:
        raise ValueError(f"drew {len(chosen)} outputs, wanted {n}")
    return sorted(chosen, key=lambda o: int(o["output_id"]))


# ---------------------------------------------------------------- the runs


def first_outputs(sample: Sequence[Dict[str, Any]], limit: Optional[int]) -> List[Dict[str, Any]]:
    """The first ``limit`` outputs of the sample taken in turn from each (system, seen / unseen)
    stratum, so that a part of the sample stays spread like the whole (in the sample's order)."""
    if not limit or limit >= len(sample):
        return list(sample)
    strata: Dict[Tuple[str, bool], List[Dict[str, Any]]] = defaultdict(list)
    for o in sample:
        strata[(o["system"], o["seen"])].append(o)
    in_turn = [o for rank in range(max(len(v) for v in strata.values()))
               for k in sorted(strata) for o in strata[k][rank:rank + 1]]
    chosen = {o["output_id"] for o in in_turn[:limit]}
    return [o for o in sample if o["output_id"] in chosen]


def run_metric(name: str, sample: Sequence[Dict[str, Any]], raw_dir: str, limit: Optional[int] = None) -> str:
    """Score the sample (its first ``limit`` outputs) with metric ``name`` and the project's
    checkpoint, per example; the raw examples go to ``raw_dir/<name>.json``."""
    import d2t_metrics

    part = first_outputs(sample, limit)
    metric = d2t_metrics.load(name, model=d2t_metrics.checkpoint_path(name))
    result = metric.compute(predictions=[o["text"] for o in part], tables=[o["table"] for o in part],
                            per_example=True, show_progress=True)
    os.makedirs(raw_dir, exist_ok=True)
    path = os.path.join(raw_dir, f"{name}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"output_ids": [o["output_id"] for o in part], "examples": result["examples"]}, f)
    return path


# ---------------------------------------------------------------- items


def _triple(f: Dict[str, Any]) -> Dict[str, Any]:
    return {"subject": f.get("subject"), "relation": f.get("relation"), "object": f.get("object")}


def fact_items(example: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    """``(kind, item)`` of fact_accuracy's example: each kept fact with its verdict and evidence, then
    each dropped (ungrounded) one. The ``ignored`` pieces ride along on the first item."""
    verdict_of = {}
    for verdict in ("supported", "contradicted", "unverifiable"):
        for f in example.get(verdict) or []:
            verdict_of[tuple(_triple(f).values())] = (verdict, f)
    items = []
    for f in example.get("generated") or []:
        verdict, full = verdict_of.get(tuple(_triple(f).values()), ("unverifiable", f))
        item = {**_triple(f), "verdict": verdict}
        if verdict == "contradicted":
            item["expected"] = list(full.get("expected") or [])
        for key in ("evidence", "evidence_start", "evidence_end"):
            if key in f:
                item[key] = f[key]
        items.append(("fact", item))
    for f in example.get("ungrounded") or []:
        items.append(("fact_ungrounded", {**_triple(f), "not_in_text": f.get("not_in_text")}))
    if example.get("ignored") and items:
        items[0][1]["ignored_in_text"] = example["ignored"]
    return items


def question_items(example: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    """``(kind, item)`` of data_questeval's example: its table source's questions (no references are passed)."""
    items = []
    source = (example.get("sources") or [{}])[0]
    for kind, key in (("table_question", "from_source"), ("text_question", "from_text")):
        for q in source.get(key) or []:
            items.append((kind, {k: q.get(k) for k in ("question", "answer", "predicted", "answerability", "f1", "bertscore", "score")}))
    return items


def arc_items(example: Dict[str, Any], threshold: float = 0.5) -> List[Tuple[str, Dict[str, Any]]]:
    """``(kind, item)`` of DAE's example: the arcs below the threshold."""
    return [("arc", {k: a.get(k) for k in ("head", "relation", "child", "head_index", "child_index", "probability")})
            for a in example.get("arcs") or [] if a.get("probability", 1.0) < threshold]


EXTRACTORS: Dict[str, Callable[[Dict[str, Any]], List[Tuple[str, Dict[str, Any]]]]] = {
    "fact_accuracy": fact_items, "data_questeval": question_items, "dae": arc_items,
}


def build_items(sample: Sequence[Dict[str, Any]], raw: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Every item of every metric's raw run (``raw[name] = {"output_ids", "examples"}``), each with a
    stable id ``<output id>:<kind>:<index>`` and its output's table and text."""
    by_id = {o["output_id"]: o for o in sample}
    items = []
    for name in METRICS:
        if name not in raw:
            continue
        for output_id, example in zip(raw[name]["output_ids"], raw[name]["examples"]):
            o = by_id[output_id]
            counters: Dict[str, int] = defaultdict(int)
            for kind, item in EXTRACTORS[name](example):
                index = counters[kind]
                counters[kind] += 1
                items.append({"id": f"{output_id}:{kind}:{index}", "output_id": output_id, "metric": name, "kind": kind,
                              "system": o["system"], "category": o["category"], "seen": o["seen"],
                              "table": o["table"].split("<br>"), "text": o["text"], "item": item})
    return items


def sample_questions(items: Sequence[Dict[str, Any]], n: int = QUESTION_SAMPLE, seed: int = QUESTION_SEED) -> List[Dict[str, Any]]:
    """All facts and arcs, and a seeded random sample of up to ``n`` questions of each kind, in the input order."""
    keep = []
    rng = random.Random(seed)
    for kind in ("table_question", "text_question"):
        ids = [it["id"] for it in items if it["kind"] == kind]
        keep += ids if len(ids) <= n else rng.sample(ids, n)
    keep_set = set(keep)
    return [it for it in items if not it["kind"].endswith("_question") or it["id"] in keep_set]


def population(items: Sequence[Dict[str, Any]], outputs_run: Dict[str, int], question_sample: int = QUESTION_SAMPLE) -> Dict[str, Any]:
    """How many outputs each metric scored and how many items of each kind there were before the question sample."""
    counts: Dict[str, int] = defaultdict(int)
    for it in items:
        counts[it["kind"]] += 1
    return {"outputs_run": outputs_run, "items": dict(counts), "question_sample": question_sample, "question_seed": QUESTION_SEED}


def read_jsonl(path: str) -> List[Dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path: str, rows: Iterable[Dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------- the report


def wilson(accepted: int, n: int, z: float = Z95) -> Tuple[Optional[float], Optional[float]]:
    """The Wilson score interval of ``accepted / n`` (``(None, None)`` for ``n == 0``)."""
    if n == 0:
        return None, None
    p = accepted / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def check_annotations(items: Sequence[Dict[str, Any]], annotations: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Annotations by id; a ``ValueError`` for an unknown or repeated id, a non-boolean judgement,
    or a fact without its verdict judgement."""
    kinds = {it["id"]: it["kind"] for it in items}
    by_id: Dict[str, Dict[str, Any]] = {}
    for i, a in enumerate(annotations):
        if a.get("id") not in kinds:
            raise ValueError(f"annotation {i}: id {a.get('id')!r} is not an item")
        if a["id"] in by_id:
            raise ValueError(f"annotation {i}: id {a['id']!r} annotated twice")
        if not isinstance(a.get("accept"), bool):
            raise ValueError(f"annotation {i} ({a['id']}): accept must be true or false")
        if kinds[a["id"]] == "fact" and not isinstance(a.get("verdict_accept"), bool):
            raise ValueError(f"annotation {i} ({a['id']}): a fact needs verdict_accept true or false")
        by_id[a["id"]] = a
    return by_id


def share_rows(items: Sequence[Dict[str, Any]], by_id: Dict[str, Dict[str, Any]],
               keep: Callable[[Dict[str, Any]], bool] = lambda it: True, field: str = "accept") -> Tuple[int, int]:
    """``(accepted, judged)`` over the annotated items that ``keep`` selects."""
    judged = [by_id[it["id"]] for it in items if it["id"] in by_id and keep(it) and field in by_id[it["id"]]]
    return sum(1 for a in judged if a[field]), len(judged)


def compute_report(items: Sequence[Dict[str, Any]], annotations: Sequence[Dict[str, Any]],
                   question_filter: Optional[Callable[[Dict[str, Any]], bool]] = None) -> List[Dict[str, Any]]:
    """Rows ``{metric, kind, subset, accepted, n, share, low, high}``: per kind (all, seen, unseen),
    the fact verdicts (all and per verdict), and, when ``question_filter`` is given (True: the
    question is kept), the table questions it keeps and drops."""
    by_id = check_annotations(items, annotations)
    rows = []

    def add(metric, kind, subset, accepted_n):
        accepted, n = accepted_n
        low, high = wilson(accepted, n)
        rows.append({"metric": metric, "kind": kind, "subset": subset, "accepted": accepted, "n": n,
                     "share": accepted / n if n else None, "low": low, "high": high})

    for kind, metric in KINDS.items():
        of_kind = [it for it in items if it["kind"] == kind]
        add(metric, kind, "all", share_rows(of_kind, by_id))
        add(metric, kind, "seen", share_rows(of_kind, by_id, lambda it: it["seen"]))
        add(metric, kind, "unseen", share_rows(of_kind, by_id, lambda it: not it["seen"]))
        if kind == "fact":
            add(metric, "fact verdict", "all", share_rows(of_kind, by_id, field="verdict_accept"))
            for verdict in ("supported", "contradicted", "unverifiable"):
                add(metric, "fact verdict", verdict,
                    share_rows(of_kind, by_id, lambda it, v=verdict: it["item"]["verdict"] == v, field="verdict_accept"))
            # The verdict of a fact the text does state: what a user relies on.
            add(metric, "fact verdict", "facts accepted",
                share_rows(of_kind, by_id, lambda it: by_id.get(it["id"], {}).get("accept") is True, field="verdict_accept"))
        if kind == "table_question" and question_filter is not None:
            add(metric, kind, "kept by the filter", share_rows(of_kind, by_id, question_filter))
            add(metric, kind, "dropped by the filter", share_rows(of_kind, by_id, lambda it: not question_filter(it)))
    return rows


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def report_markdown(rows: Sequence[Dict[str, Any]], pop: Dict[str, Any], annotated: int) -> str:
    from .results_md import markdown_table

    unjudged = sorted({r["kind"] for r in rows if r["subset"] == "all" and r["n"] == 0})
    rows = [r for r in rows if r["n"] > 0]
    table = markdown_table(
        ["metric", "item", "subset", "accepted / judged", "share %", "95% Wilson CI"],
        [[r["metric"], r["kind"], r["subset"], f"{r['accepted']} / {r['n']}", _pct(r["share"]),
          "-" if r["low"] is None else f"[{_pct(r['low'])}, {_pct(r['high'])}]"] for r in rows])
    counts = ", ".join(f"{k} {v}" for k, v in sorted(pop.get("items", {}).items()))
    runs = ", ".join(f"{k} {v}" for k, v in pop.get("outputs_run", {}).items())
    return (
        "## Hand check of the explanations (issue #37)\n\n"
        "`python -m benchmarks.handcheck --report`: 100 WebNLG 2017 system outputs (seed 0, spread over the 9 "
        "systems and seen / unseen categories), explained by the project's checkpoints and judged by hand "
        "(guideline, annotator and date: `benchmarks/handcheck/README.md`; items and judgements: "
        "`benchmarks/handcheck/items.jsonl`, `annotations.jsonl`). Accepted: a fact the text states, a verdict "
        "that is right against the table, a table question answerable from the table alone with the value as its "
        "answer, a text question answerable from the text with its span, a non-entailed arc whose relation the "
        "table indeed does not support.\n\n"
        f"Outputs scored per metric: {runs}. Items extracted: {counts}; questions judged: a seeded sample of at most "
        f"{pop.get('question_sample')} per kind. Judgements: {annotated}."
        + (f" Not judged yet: {', '.join(unjudged)}." if unjudged else "") + "\n\n" + table + "\n"
    )


def load_question_filter(answers_path: str = TABLE_QA_PATH) -> Optional[Callable[[Dict[str, Any]], bool]]:
    """The table-question answerability filter of data_questeval (``qa.answerable``, issue #37) as a
    predicate on items, fed with what the table QA answered to each question on its own table
    (``answers_path``, written by ``answer-on-table``); ``None`` when either is missing."""
    try:
        from metrics.data_questeval.qa import answerable
    except ImportError:
        return None
    if not os.path.exists(answers_path):
        return None
    on_table = {row["id"]: row["predicted_on_table"] for row in read_jsonl(answers_path)}
    return lambda it: answerable(it["item"]["question"], it["item"]["answer"], on_table.get(it["id"], ""))


def answer_on_table(items: Sequence[Dict[str, Any]], out_path: str = TABLE_QA_PATH) -> str:
    """Ask the project's table QA each table question on the question's own table, linearized as
    data_questeval does; one ``{id, predicted_on_table}`` line per question."""
    import d2t_metrics
    from d2t_metrics.linearize import linearize
    from metrics.data_questeval.qa import load_qa

    questions = [it for it in items if it["kind"] == "table_question"]
    qa = load_qa(os.path.join(d2t_metrics.checkpoint_path("data_questeval"), "table_qa"))
    got = qa.answer([it["item"]["question"] for it in questions], [linearize(it["table"]) for it in questions],
                    show_progress=False)
    write_jsonl(out_path, [{"id": it["id"], "predicted_on_table": r.answer} for it, r in zip(questions, got)])
    return out_path


def dq_raw_from_dump(dump_path: str, sample: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """data_questeval's raw run on every output of the sample, read from a full WebNLG 2017 run's
    per-example file (``benchmarks.run --metrics data_questeval --datasets webnlg --dump-examples``,
    table only, in the loader's order): the same examples as ``run --metric data_questeval``."""
    rows = read_jsonl(dump_path)
    examples = []
    for o in sample:
        row = rows[o["index"]] if o["index"] < len(rows) else {}
        if (row.get("system"), row.get("prediction")) != (o["system"], o["text"]):
            raise ValueError(f"{dump_path}: row {o['index']} is not output {o['output_id']} of the loader")
        examples.append(row["example"])
    return {"output_ids": [o["output_id"] for o in sample], "examples": examples}


def redo_questions(items: Sequence[Dict[str, Any]], annotations: Sequence[Dict[str, Any]],
                   question_items: Sequence[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], int]:
    """``items`` with data_questeval's replaced by ``question_items``, and ``annotations`` with the
    old questions' judgements carried to a new item that asks the same question about the same
    answer on the same output (re-keyed to its id) and the others' dropped; → (items, annotations,
    judgements carried)."""
    old = {it["id"]: it for it in items if it["metric"] == "data_questeval"}
    key = lambda it: (it["output_id"], it["kind"], it["item"]["question"], it["item"]["answer"])  # noqa: E731
    judged = {key(old[a["id"]]): a for a in annotations if a["id"] in old}
    kept_annotations = [a for a in annotations if a["id"] not in old]
    carried = 0
    for it in question_items:
        if key(it) in judged:
            kept_annotations.append(dict(judged[key(it)], id=it["id"]))
            carried += 1
    return [it for it in items if it["metric"] != "data_questeval"] + list(question_items), kept_annotations, carried


def report(items_path: str = ITEMS_PATH, annotations_path: str = ANNOTATIONS_PATH, write: bool = True,
           use_filter: bool = True) -> List[Dict[str, Any]]:
    items = read_jsonl(items_path)
    annotations = read_jsonl(annotations_path)
    question_filter = load_question_filter() if use_filter else None
    rows = compute_report(items, annotations, question_filter)
    pop = json.load(open(POPULATION_PATH, encoding="utf-8")) if os.path.exists(POPULATION_PATH) else {}
    markdown = report_markdown(rows, pop, len(annotations))
    if write:
        from .results_md import write_section

        write_section(SECTION, markdown)
    print(markdown)
    return rows


# ---------------------------------------------------------------- command line


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", choices=("sample", "run", "items", "answer-on-table", "dq-from-dump"),
                        help="what to do (or --report)")
    parser.add_argument("--dump", help="dq-from-dump: data_questeval.webnlg.jsonl of benchmarks.run --dump-examples")
    parser.add_argument("--metric", choices=METRICS, help="run: the metric to score the sample with")
    parser.add_argument("--limit", type=int, help="run: only the first N outputs of the sample")
    parser.add_argument("--question-sample", type=int, default=QUESTION_SAMPLE, help="items: questions of each kind kept")
    parser.add_argument("--raw-dir", default=DEFAULT_RAW_DIR, help="where the runs' raw per-example results go")
    parser.add_argument("--report", action="store_true", help="accepted shares from items.jsonl and annotations.jsonl")
    parser.add_argument("--no-write", action="store_true", help="--report: print only, leave RESULTS.md as it is")
    args = parser.parse_args(argv)
    if args.report:
        report(write=not args.no_write)
        return 0
    if args.command is None:
        parser.error("give a command (sample, run, items) or --report")
    sample = draw_sample(load_outputs())
    if args.command == "sample":
        for o in sample:
            print(o["output_id"], o["system"], o["category"], "seen" if o["seen"] else "unseen")
        return 0
    if args.command == "run":
        if args.metric is None:
            parser.error("run needs --metric")
        print(run_metric(args.metric, sample, args.raw_dir, args.limit))
        return 0
    if args.command == "answer-on-table":
        print(answer_on_table(read_jsonl(ITEMS_PATH)))
        return 0
    if args.command == "dq-from-dump":
        if not args.dump:
            parser.error("dq-from-dump needs --dump")
        every = build_items(sample, {"data_questeval": dq_raw_from_dump(args.dump, sample)})
        items, annotations, carried = redo_questions(read_jsonl(ITEMS_PATH), read_jsonl(ANNOTATIONS_PATH),
                                                     sample_questions(every, args.question_sample))
        write_jsonl(ITEMS_PATH, items)
        write_jsonl(ANNOTATIONS_PATH, annotations)
        pop = json.load(open(POPULATION_PATH, encoding="utf-8"))
        pop["outputs_run"]["data_questeval"] = len(sample)
        pop["items"].update(population(every, {})["items"])
        pop["question_sample"] = args.question_sample
        with open(POPULATION_PATH, "w", encoding="utf-8") as f:
            json.dump(pop, f, indent=1)
        print(f"{ITEMS_PATH}: {sum(it['metric'] == 'data_questeval' for it in items)} data_questeval items, "
              f"{carried} judgements carried over")
        return 0
    raw = {}
    for name in METRICS:
        path = os.path.join(args.raw_dir, f"{name}.json")
        if os.path.exists(path):
            raw[name] = json.load(open(path, encoding="utf-8"))
    items = build_items(sample, raw)
    os.makedirs(HANDCHECK_DIR, exist_ok=True)
    kept = sample_questions(items, args.question_sample)
    write_jsonl(ITEMS_PATH, kept)
    with open(POPULATION_PATH, "w", encoding="utf-8") as f:
        json.dump(population(items, {k: len(v["output_ids"]) for k, v in raw.items()}, args.question_sample), f, indent=1)
    print(f"{ITEMS_PATH}: {len(kept)} items of {len(items)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
