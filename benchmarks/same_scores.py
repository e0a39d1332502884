"""Did a change move any per-example score? A fixed sample, scored before and after.

    python -m benchmarks.same_scores sample --out /tmp/same      # 100 WebNLG 2017 outputs, 40 DAE summaries
    d2t-metrics score --metrics parent,nli_semantic_accuracy,dae,fact_accuracy,data_questeval \\
        --input /tmp/same/webnlg100.jsonl --output /tmp/same/after.jsonl --overwrite   # at each commit
    python -m benchmarks.same_scores compare /tmp/same/before.jsonl /tmp/same/after.jsonl

The sample is drawn with a fixed seed from ``../shared`` (never copied into the
repository). ``compare`` reads two ``d2t-metrics score`` outputs and reports, per
metric, how many examples' per-example results differ and the largest difference
of any number in them; exit status 1 when anything differs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
from typing import Any, Dict, Iterator, List, Tuple

from .data import load_dataset

SEED = 33


def write_sample(out: str, n_webnlg: int = 100, n_dae: int = 40) -> List[str]:
    """Write the fixed sample's JSONL files under ``out``; returns their paths."""
    os.makedirs(out, exist_ok=True)
    rng = random.Random(SEED)
    webnlg = rng.sample(load_dataset("webnlg").items, n_webnlg)
    dae = rng.sample(load_dataset("dae_pairs").items, n_dae)
    rows = {
        "webnlg100.jsonl": [{"id": f"w{k}", "prediction": it.prediction, "references": it.references, "table": it.table}
                            for k, it in enumerate(webnlg)],
        "dae40.jsonl": [{"id": f"d{k}", "prediction": it.prediction, "source": it.source} for k, it in enumerate(dae)],
    }
    paths = []
    for name, lines in rows.items():
        path = os.path.join(out, name)
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        paths.append(path)
    return paths


def numbers(value: Any, path: str = "") -> Iterator[Tuple[str, float]]:
    """Every number inside a per-example result, with where it sits."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        yield path, float(value)
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from numbers(value[key], f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from numbers(item, f"{path}[{i}]")


def largest_difference(a: Any, b: Any) -> float:
    """The largest absolute difference between matching numbers (inf when shapes differ)."""
    na, nb = list(numbers(a)), list(numbers(b))
    if [p for p, _ in na] != [p for p, _ in nb]:
        return math.inf
    return max((abs(x - y) for (_, x), (_, y) in zip(na, nb) if not (math.isnan(x) and math.isnan(y))), default=0.0)


def read_output(path: str) -> List[Dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def compare(before: str, after: str) -> Dict[str, Dict[str, Any]]:
    """Per metric: examples compared, examples whose result differs at all, largest number difference."""
    rows_a, rows_b = read_output(before), read_output(after)
    if [r.get("id") for r in rows_a] != [r.get("id") for r in rows_b]:
        raise ValueError("the two outputs do not hold the same examples in the same order")
    report: Dict[str, Dict[str, Any]] = {}
    for ra, rb in zip(rows_a, rows_b):
        for metric in sorted(set(ra) | set(rb)):
            if not isinstance(ra.get(metric), dict) and not isinstance(rb.get(metric), dict):
                continue
            entry = report.setdefault(metric, {"examples": 0, "differ": 0, "largest": 0.0})
            entry["examples"] += 1
            if ra.get(metric) != rb.get(metric):
                entry["differ"] += 1
                entry["largest"] = max(entry["largest"], largest_difference(ra.get(metric), rb.get(metric)))
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.same_scores", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="write the fixed sample")
    s.add_argument("--out", required=True)
    c = sub.add_parser("compare", help="compare two d2t-metrics score outputs")
    c.add_argument("before")
    c.add_argument("after")
    args = p.parse_args(argv)
    if args.command == "sample":
        for path in write_sample(args.out):
            print(path)
        return 0
    report = compare(args.before, args.after)
    for metric, entry in report.items():
        print(f"{metric}: {entry['examples']} examples, {entry['differ']} differ, largest difference {entry['largest']:.3g}")
    return 1 if any(e["differ"] for e in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
