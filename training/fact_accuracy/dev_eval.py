"""Precision, recall and F1 of a fact extractor against the gold triples of
WebNLG 2017 lexicalizations (the measure of the paper's Table 3, on WebNLG).

    python -m training.fact_accuracy.dev_eval --extractor end_to_end|relations|openie \\
        [--model PATH] [--data ../shared/data/webnlg2017/xml/dev] [--limit N] \\
        [--batch-size 32] [--fuzzy-threshold T] [--no-tables] [--tokenized-lowercase] [--no-restore-form] [--device cpu]

Every lexicalization of every entry is one text; its gold facts are the
entry's (modified) triples. A predicted fact is correct when a gold triple
has its subject, relation and object, compared with the metric's matcher
(``metrics.fact_accuracy.matching.Matcher``: normalized strings, dates, numbers with units, the
relation through the schema); a fact predicted twice for one text counts
once. Precision = correct / predicted, recall = gold triples found / gold
triples, pooled over all texts (micro); F1 their harmonic mean. The table
is given to the extractor as the metric gives it (the relation classifier
takes its entities as candidates, OpenIE maps its phrases onto its
predicates, an end-to-end model trained on listed relations is told the
table's relations; here they are exactly the gold ones, none omitted by the
text, so withhold them for the schema-free figure); ``--no-tables`` withholds it.
Prints one JSON object; ``extractor_prf`` is the same for benchmarks.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import time
from typing import Any, Dict, Optional, Sequence

from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.datasets import shared_dir
# the module, not its names: tests replace extractors.load_extractor
from metrics.fact_accuracy import extractors
from metrics.fact_accuracy.matching import DEFAULT_FUZZY_THRESHOLD
from metrics.fact_accuracy.matching import Matcher
from metrics.fact_accuracy.matching import score_facts
from training.fact_accuracy.triples_data import tokenized_lowercase

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository root, where the report's paths are relative to


def _prf(correct: int, predicted: int, found: int, gold: int) -> Dict[str, Any]:
    precision = correct / predicted if predicted else 0.0
    recall = found / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "correct": correct, "predicted": predicted, "found": found, "gold": gold}


def extractor_prf(extractor, entries: Sequence, matcher=None, use_tables: bool = True, show_progress: bool = False,
                  limit: Optional[int] = None) -> Dict[str, Any]:
    """P/R/F1 of ``extractor`` (anything with ``extract(texts, tables=None,
    show_progress=True)``) on the lexicalizations of WebNLG ``entries``
    (``d2t_metrics.datasets.WebNLGEntry``; the first ``limit`` entries when
    given). Returns the pooled figures, the counts, the same per triple-set
    size (``by_size``), ``texts`` and ``seconds`` (extraction time)."""
    matcher = matcher or Matcher()
    entries = list(entries)[:limit] if limit else list(entries)
    texts, tables, sizes = [], [], []
    for entry in entries:
        for text in entry.lexicalizations:
            texts.append(text)
            tables.append(entry.table)
            sizes.append(len(entry.table))
    if hasattr(extractor, "matcher"):
        extractor.matcher = matcher
    start = time.perf_counter()
    predicted = extractor.extract(texts, tables=tables if use_tables else None, show_progress=show_progress) if texts else []
    seconds = time.perf_counter() - start
    totals: Dict[Any, list] = {}
    for facts, table, size in zip(predicted, tables, sizes):
        s = score_facts(facts, extractors.table_facts(table), matcher)
        for key in ("all", size):
            t = totals.setdefault(key, [0, 0, 0, 0])
            t[0] += s["num_supported"]
            t[1] += s["num_generated"]
            t[2] += s["num_found"]
            t[3] += s["num_ground_truth"]
    out = _prf(*totals.get("all", [0, 0, 0, 0]))
    out.update(texts=len(texts), entries=len(entries), seconds=round(seconds, 2),
               texts_per_second=round(len(texts) / seconds, 2) if seconds > 0 else None,
               by_size={str(k): _prf(*v) for k, v in sorted((k, v) for k, v in totals.items() if k != "all")})
    return out


def _threshold_or_none(value: str) -> Optional[float]:
    return None if value.strip().lower() in ("none", "no", "off") else float(value)


def _default_data() -> str:
    shared = shared_dir()
    return os.path.join(shared, "data", "webnlg2017", "xml", "dev") if shared else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.fact_accuracy.dev_eval", description=__doc__.split("\n")[0])
    ap.add_argument("--extractor", required=True, choices=extractors.EXTRACTORS)
    ap.add_argument("--model", default=None, help="checkpoint folder (default: checkpoints/fact_accuracy/<triples|relations>)")
    ap.add_argument("--data", default=_default_data(), help="WebNLG 2017 XML file or folder (default: ../shared/data/webnlg2017/xml/dev)")
    ap.add_argument("--limit", type=int, default=0, help="use the first N entries only (0: all)")
    ap.add_argument("--sample", type=int, default=0,
                    help="score N entries drawn at random (with --seed) instead: the files are sorted by size, so the first N are all one-triple entries")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--fuzzy-threshold", type=_threshold_or_none, default=DEFAULT_FUZZY_THRESHOLD,
                    help=f"the matcher's (default {DEFAULT_FUZZY_THRESHOLD}, the metric's; none: exact after normalization)")
    ap.add_argument("--no-tables", action="store_true", help="do not give the extractor the entry's table")
    ap.add_argument("--tokenized-lowercase", action="store_true",
                    help="score the texts lower-cased with punctuation split off, as WebNLG 2017's system outputs are written")
    ap.add_argument("--no-restore-form", action="store_true",
                    help="end-to-end extractor: read lower-cased, tokenized texts as written, without the table values' casing given back")
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    if not args.data or not os.path.exists(args.data):
        ap.error(f"no WebNLG data at {args.data!r}; pass --data (a WebNLG 2017 XML folder)")
    if args.batch_size < 1 or args.limit < 0 or args.sample < 0:
        ap.error("--batch-size must be >= 1, --limit and --sample >= 0")
    if args.threads:
        import torch  # lazy: torch, only to set --threads

        torch.set_num_threads(args.threads)
    try:
        matcher = Matcher(args.fuzzy_threshold)
    except ValueError as e:
        ap.error(str(e))
    entries = load_webnlg_xml(args.data)
    if args.sample and args.sample < len(entries):
        entries = random.Random(args.seed).sample(entries, args.sample)
    if args.tokenized_lowercase:
        entries = [dataclasses.replace(e, lexicalizations=[tokenized_lowercase(t) for t in e.lexicalizations]) for e in entries]
    extractor = extractors.load_extractor(args.extractor, model=args.model, device=args.device, batch_size=args.batch_size,
                               restore_form=not args.no_restore_form)
    result = extractor_prf(extractor, entries, matcher, use_tables=not args.no_tables, show_progress=args.progress,
                           limit=args.limit or None)
    model = None if args.extractor == "openie" else extractors.resolve_model_path(args.model, args.extractor)
    report = {"extractor": args.extractor, "model": os.path.relpath(model, ROOT) if model and os.path.isabs(model) else model,
              "data": os.path.relpath(args.data, ROOT) if os.path.isabs(args.data) else args.data,
              "sample": args.sample or None, "seed": args.seed if args.sample else None,
              "tables_given": not args.no_tables, "tokenized_lowercase": args.tokenized_lowercase,
              "restore_form": not args.no_restore_form, "fuzzy_threshold": args.fuzzy_threshold, **result}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
