"""Speed of the batched NLI metric against a one-pair-at-a-time loop.

    python benchmarks/nli_speed.py [--model checkpoints/nli_semantic_accuracy --pairs 500 --threads 1]

Both sides use the same model and the same (premise, hypothesis) pairs: the
omission and hallucination checks of the first WebNLG 2017 human-evaluation
outputs (default templates), distinct pairs only. The loop runs the way the
reference code (ufal/nlgi_eval) does: one tokenizer call and one forward pass
per pair. The batched side is the metric's scorer: pairs sorted by length,
dynamically padded batches. Labels (argmax) of both sides are compared.
Writes section "nli_speed" of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "metrics", "nli_semantic_accuracy"))

from benchmarks.results_md import markdown_table, write_section  # noqa: E402


def webnlg_pairs(shared: str, n_pairs: int, verbalizer):
    from checks import make_facts, plan_checks  # the metric's own sibling module

    from d2t_metrics.tables import parse_table

    seen, out = set(), []
    with open(os.path.join(shared, "data", "webnlg2017", "human_eval.csv"), newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            facts = make_facts(parse_table(row["mr"], i), verbalizer)
            for c in plan_checks(i, facts, row["text"]):
                if (c.premise, c.hypothesis) not in seen:
                    seen.add((c.premise, c.hypothesis))
                    out.append((c.premise, c.hypothesis))
            if len(out) >= n_pairs:
                return out[:n_pairs]
    return out


def one_at_a_time(scorer, pairs):
    """The reference code's way: one tokenizer call and one forward pass per pair
    (with the metric's own truncation, so both sides see identical inputs)."""
    import torch

    out = []
    with torch.inference_mode():
        for p, h in pairs:
            enc = scorer.encode([p], [h]).to(scorer.device)
            out.append(torch.softmax(scorer.model(**enc).logits.float(), dim=-1)[0].tolist())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "checkpoints", "nli_semantic_accuracy"))
    ap.add_argument("--pairs", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)

    import torch

    from d2t_metrics.datasets import shared_dir
    from d2t_metrics.verbalize import Verbalizer
    from nli_model import NLIScorer

    torch.set_num_threads(args.threads)
    shared = shared_dir()
    if not shared:
        raise SystemExit("shared data folder not found (set D2T_SHARED)")
    scorer = NLIScorer(args.model)
    pairs = webnlg_pairs(shared, args.pairs, Verbalizer.from_names("webnlg", "e2e"))
    premises, hyps = [p for p, _ in pairs], [h for _, h in pairs]

    # Warm up both paths (first calls allocate).
    scorer(premises[:32], hyps[:32], batch_size=args.batch_size, show_progress=False)
    one_at_a_time(scorer, pairs[:8])

    t0 = time.perf_counter()
    batched = scorer(premises, hyps, batch_size=args.batch_size, show_progress=False)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    looped = one_at_a_time(scorer, pairs)
    t_loop = time.perf_counter() - t0

    agree = sum(scorer.is_entailed(a) == scorer.is_entailed(b) and max(range(len(a)), key=a.__getitem__) == max(range(len(b)), key=b.__getitem__) for a, b in zip(batched, looped))
    max_diff = max(abs(x - y) for a, b in zip(batched, looped) for x, y in zip(a, b))
    n = len(pairs)
    rows = [
        ["one pair at a time (reference style)", n, f"{t_loop:.1f}", f"{n / t_loop:.1f}", "1.00×"],
        [f"batched, length-sorted, batch {args.batch_size}", n, f"{t_batched:.1f}", f"{n / t_batched:.1f}", f"{t_loop / t_batched:.2f}×"],
    ]
    table = markdown_table(["path", "pairs", "seconds", "pairs/s", "speed-up"], rows)
    summary = (
        f"Label agreement (argmax over {len(scorer.labels)} labels): {agree}/{n} ({agree / n:.1%}); "
        f"largest probability difference {max_diff:.2e}."
    )
    print(table)
    print(summary)
    if not args.no_write:
        md = (
            "## NLI semantic accuracy: batched vs one pair at a time\n\n"
            f"Command: `python benchmarks/nli_speed.py --pairs {args.pairs} --threads {args.threads}`; model "
            f"`{os.path.relpath(args.model, ROOT) if os.path.isabs(args.model) else args.model}`; CPU "
            f"({platform.processor() or platform.machine()}, torch threads {args.threads}, machine shared with other jobs); "
            f"pairs: the omission and hallucination checks of the first WebNLG 2017 human-evaluation outputs "
            f"(default templates, distinct pairs). Both paths are timed in the same run.\n\n"
            + table + "\n\n" + summary + "\n"
        )
        write_section("nli_speed", md)


if __name__ == "__main__":
    main()
