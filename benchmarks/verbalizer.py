"""The learned fact verbalizer on WebNLG 2017, seen vs unseen categories (issue #34).

    python -m benchmarks.verbalizer --learned-2017 /tmp/verbalizer17
    python -m benchmarks.verbalizer --learned-2017 /tmp/verbalizer17 --limit 200   # a quick look

``nli_semantic_accuracy`` (the project's checkpoint) scores WebNLG 2017's 2,007 rated
system outputs four ways, and each is correlated with the mean semantics rating on the
seen and the unseen categories (``benchmarks.generalization``):

1. **2017 templates, back-off**: only templates from WebNLG 2017's training data (and
   the attribute-value and E2E sets): 110 facts of the unseen half have none, as for a
   new domain, and read "The <predicate> of <subject> is <object>.";
2. **2017 templates, learned 2017**: the same, with the facts lacking a template written
   by a verbalizer trained on WebNLG 2017's training data only (``--learned-2017``, from
   ``python -m training.nli_semantic_accuracy.train_verbalizer --data .../webnlg2017/xml/train``), which never saw
   the unseen categories: the clean test of the verbalizer on predicates it never met;
3. **shipped templates, back-off** (WebNLG 3.0's templates too: 9 unseen facts lack one);
4. **shipped templates, learned**: the shipped default (``checkpoints/nli_semantic_accuracy/verbalizer``).

Per row: which facts each source wrote, segment Pearson / Spearman with 95% input-bootstrap
CIs on each half, system Pearson, and the share of unseen outputs labelled OK at the shipped
threshold. Results go to ``meta_eval/verbalizer.json`` and RESULTS.md's ``verbalizer``
section, with a sample of the learned sentences for the unseen facts.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import sys
import time
from collections import Counter
from typing import Dict, List

import numpy as np

from benchmarks import generalization as gen
from benchmarks.results_md import markdown_table, write_section
from d2t_metrics.locations import checkpoint_path, load
from d2t_metrics.verbalize import Verbalizer

OUTPUT = os.path.join(gen.META_DIR, "verbalizer.json")
SECTION = "verbalizer"
TEMPLATES_2017 = ("attribute_value", "webnlg", "e2e")  # without webnlg_v3 (WebNLG 3.0's)
N_BOOT, N_SYS_BOOT, SEED = 1000, 500, 0


def score(items, templates, verbalizer, batch_size: int) -> Dict:
    metric = load("nli_semantic_accuracy", "default", model=checkpoint_path("nli_semantic_accuracy"),
                  templates=templates, verbalizer=verbalizer)
    start = time.time()
    out = metric.compute(predictions=[it.prediction for it in items], tables=[it.table for it in items],
                         per_example=True, batch_size=batch_size, show_progress=True)
    return {"seconds": round(time.time() - start, 1), "examples": out["examples"], "signature": metric.signature()}


def measure(name, run, items, categories, unseen, semantics, ids, systems, threshold) -> Dict:
    scores = np.array([e["score"] for e in run["examples"]], dtype=float)
    confidence = np.array([e["confidence"] for e in run["examples"]], dtype=float)
    mask_u = np.array([c in unseen for c in categories])
    halves = {}
    for half, mask in (("seen", ~mask_u), ("unseen", mask_u), ("all", np.ones_like(mask_u))):
        halves[half] = gen.half_measures(scores, semantics, ids, systems, mask, N_BOOT, N_SYS_BOOT, SEED)
        sources = Counter(s for e, m in zip(run["examples"], mask) if m for s in e["verbalized_by"])
        halves[half]["facts_by_source"] = dict(sources)
        ok = confidence[mask] >= threshold  # the labels follow the confidence, not the pooled score
        halves[half]["ok_share"] = float(ok.mean()) if mask.any() else None
        halves[half]["raters_ok_share"] = float((semantics[mask] >= 2.0).mean()) if mask.any() else None
    # the outputs the verbalizer can change: those with a fact no template covers (the same
    # outputs in rows that share templates), where a difference between rows shows undiluted
    touched = np.array([any(s != "template" for s in e["verbalized_by"]) for e in run["examples"]])
    halves["touched"] = gen.half_measures(scores, semantics, ids, systems, touched, N_BOOT, N_SYS_BOOT, SEED)
    return {"name": name, "seconds": run["seconds"], "signature": run["signature"], "halves": halves,
            "scores": [round(float(x), 6) for x in scores]}


def learned_sample(run, items, categories, unseen, n: int = 12) -> List[Dict]:
    seen, out = set(), []
    for e, it, c in zip(run["examples"], items, categories):
        if c not in unseen:
            continue
        for sentence, source, check in zip(e["facts"], e["verbalized_by"], [x for x in e["checks"] if x["type"] == "omission"]):
            if source == "learned" and sentence not in seen:
                seen.add(sentence)
                out.append({"fact": check.get("fact"), "sentence": sentence, "category": c})
    step = max(1, len(out) // n)
    return out[::step][:n]


def render(results: Dict) -> str:
    header = ["Row", "facts: template / learned / back-off (unseen)", "Pearson seen [95% CI]", "Pearson unseen [95% CI]",
              "gap", "Spearman seen", "Spearman unseen", "Pearson all", "system P. all", "OK share unseen (raters)",
              "outputs with a fact no template covers: n, Pearson [95% CI]"]
    rows = []
    for r in results["rows"]:
        h = r["halves"]
        f = h["unseen"]["facts_by_source"]
        ci = lambda d: f"{d['value']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"
        rows.append([r["name"], f"{f.get('template', 0)} / {f.get('learned', 0)} / {f.get('backoff', 0)}",
                     ci(h["seen"]["pearson"]), ci(h["unseen"]["pearson"]),
                     f"{h['unseen']['pearson']['value'] - h['seen']['pearson']['value']:+.3f}",
                     f"{h['seen']['spearman']['value']:.3f}", f"{h['unseen']['spearman']['value']:.3f}",
                     f"{h['all']['pearson']['value']:.3f}", f"{h['all']['system_pearson']['value']:.3f}",
                     f"{h['unseen']['ok_share']:.1%} ({h['unseen']['raters_ok_share']:.1%})",
                     f"{h['touched']['n']}: {ci(h['touched']['pearson'])}" if h["touched"]["n"] > 2 else "none"])
    cell = lambda text: str(text).replace("|", "\\|")  # a fact's "|" would split the table's cell
    sample = [[s["category"], cell(s["fact"]), cell(s["sentence"])] for s in results["learned_sample"]]
    lines = [
        f"Command: `{results['command']}` ({results['date']}, commit {results['commit']}); CPU, "
        f"{results['n']} rated WebNLG 2017 system outputs, `nli_semantic_accuracy` with the project's checkpoint. "
        "Facts counted per output (a fact in 9 systems' outputs counts 9 times). OK share: confidence >= "
        f"{results['threshold']:.4g} (the shipped threshold), raters' OK: mean semantics >= 2.0.",
        "",
        markdown_table(header, rows),
        "",
        "Learned sentences of unseen-category facts (row 2's verbalizer, trained on WebNLG 2017 train only; a sample):",
        "",
        markdown_table(["Category", "Fact", "Sentence"], sample),
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.verbalizer", description=__doc__.split("\n")[0])
    ap.add_argument("--learned-2017", required=True, help="a verbalizer trained on WebNLG 2017 train only")
    ap.add_argument("--learned", default=None, help="the shipped verbalizer (default checkpoints/nli_semantic_accuracy/verbalizer)")
    ap.add_argument("--limit", type=int, default=0, help="score only the first N outputs (a quick look; not written)")
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args(argv)
    loaded = gen.rated_system_outputs_or_none("verbalizer")
    if loaded is None:
        return 1
    items, categories, unseen = loaded
    if args.limit:
        items, categories = items[: args.limit], categories[: args.limit]
    semantics = np.array([it.human["semantics"] for it in items], dtype=float)
    ids = [it.input_id for it in items]
    systems = [it.system for it in items]
    threshold = float((gen.shipped_thresholds().get("nli_semantic_accuracy") or {}).get("threshold", 0.5))
    templates_2017 = Verbalizer.from_names(*TEMPLATES_2017).templates
    own = checkpoint_path("nli_semantic_accuracy")
    learned = args.learned or (os.path.join(own, "verbalizer") if own and os.path.isdir(os.path.join(own, "verbalizer")) else None)
    plan = [("2017 templates, back-off", templates_2017, "templates"),
            ("2017 templates, learned 2017", templates_2017, args.learned_2017),
            ("shipped templates, back-off", None, "templates"),
            ("shipped templates, learned (shipped)", None, learned)]
    rows, sample = [], []
    for name, templates, verbalizer in plan:
        if verbalizer is None:
            print(f"{name}: no verbalizer checkpoint, skipped", file=sys.stderr)
            continue
        run = score(items, templates, verbalizer, args.batch_size)
        rows.append(measure(name, run, items, categories, unseen, semantics, ids, systems, threshold))
        if verbalizer == args.learned_2017:
            sample = learned_sample(run, items, categories, unseen)
        print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("halves", "scores")}), file=sys.stderr)
    from benchmarks.run import _git_commit

    commit = _git_commit()
    results = {"command": shlex.join(["python", "-m", "benchmarks.verbalizer"] + list(sys.argv[1:] if argv is None else argv)),
               "date": datetime.date.today().isoformat(), "commit": commit, "n": len(items), "threshold": threshold,
               "rows": rows, "learned_sample": sample}
    text = render(results)
    print(text)
    if not args.limit:
        stored = dict(results, rows=[{k: v for k, v in r.items() if k != "scores"} for r in rows])
        with open(OUTPUT, "w", encoding="utf-8") as f:
            json.dump(stored, f, indent=1, ensure_ascii=False)
            f.write("\n")
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
