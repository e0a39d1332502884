"""Co-occurrence counts for PARENT-C, learned from (table, reference) training pairs.

The co-occurrence entailment model (Glickman & Dagan 2005, as used by
Dhingra et al. 2019) estimates the probability that a text token ``x`` is
entailed by a table lexical item ``v`` as::

    Pr(x ⇐ v) = count("v|||x") / count("v")

where, over the training pairs,

* ``count("v")`` is the number of (table, reference) pairs whose table has
  the lexical item ``v``, and
* ``count("v|||x")`` is the number of those pairs whose reference also has
  the token ``x``.

A table's lexical items are one token per attribute (its tokens joined by
``_``; for triples, the relation) plus every value token (for triples, the
head and tail tokens). Counts are saved as one flat JSON object in the format
the reference implementation reads (``--cooccurrence_counts``)::

    {"eattype": 4862, "eattype|||pub": 1290, "riverside": 1301, ...}

Learn counts with the tokenizer you will score with; tokens are lowercased by
both named tokenizers. Command line (from the repository root)::

    python -m training.parent.cooccurrence \\
        --webnlg ../shared/data/webnlg2017/xml/train --tokenizer nltk --out counts.json

then ``parent.compute(..., entailment="cooccurrence", cooccurrence_counts="counts.json",
tokenizer="nltk")``; the metric reads the file with
``metrics/parent/counts.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from d2t_metrics.datasets import load_e2e_csv
from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.tokenize import MemoTokenizer
from metrics.parent.scoring import PAIR_SEPARATOR
from metrics.parent.scoring import cooccurrence_table_tokens
from metrics.parent.table_tokens import to_token_table

TokenPair = Tuple[Sequence[Tuple[Sequence[str], Sequence[str]]], Sequence[str]]


def learn_counts(pairs: Iterable[TokenPair], min_count: int = 1) -> Dict[str, int]:
    """Co-occurrence counts from ``(token table, reference tokens)`` pairs.

    ``min_count`` drops ``"v|||x"`` pairs seen fewer times (single-item counts
    are always kept); 1 keeps everything.
    """
    items: Counter = Counter()
    joint: Counter = Counter()
    n = 0
    for table, reference in pairs:
        table_items = cooccurrence_table_tokens(table)
        text = set(reference)
        items.update(table_items)
        joint.update(v + PAIR_SEPARATOR + x for v in table_items for x in text)
        n += 1
    if n == 0:
        raise ValueError("no (table, reference) pairs to learn co-occurrence counts from")
    counts: Dict[str, int] = dict(items)
    for key, c in joint.items():
        if c >= min_count:
            counts[key] = c
    return counts


def save_counts(counts: Dict[str, Any], path: str) -> str:
    """Write counts as one JSON object (sorted keys, so files diff well)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(counts, f, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return path


# ---------------------------------------------------------------------------
# Training pairs from the project's data formats


def webnlg_pairs(path: str, tokenize) -> Iterator[TokenPair]:
    """(table, reference) pairs of WebNLG XML files: one per lexicalization."""
    for entry in load_webnlg_xml(path):
        table = to_token_table(entry.table, tokenize)
        for text in entry.lexicalizations:
            yield table, tokenize(text)


def e2e_pairs(path: str, tokenize) -> Iterator[TokenPair]:
    """(table, reference) pairs of an E2E CSV (``mr,ref``): one per reference."""
    for example in load_e2e_csv(path):
        table = to_token_table(example.table, tokenize)
        for text in example.references:
            yield table, tokenize(text)


def jsonl_pairs(path: str, tokenize) -> Iterator[TokenPair]:
    """Pairs of a JSON-lines file with ``table`` and ``reference`` (a string) or ``references`` (a list)."""
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f):
            if not line.strip():
                continue
            row = json.loads(line)
            table = to_token_table(row.get("table"), tokenize, line_no)
            texts = row.get("references", row.get("reference"))
            if isinstance(texts, str):
                texts = [texts]
            if not texts:
                raise ValueError(f"{path}:{line_no + 1}: no 'reference' or 'references'")
            for text in texts:
                yield table, tokenize(text)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m training.parent.cooccurrence",
        description="Learn PARENT-C co-occurrence counts from (table, reference) training pairs.",
    )
    parser.add_argument("--webnlg", action="append", default=[], help="WebNLG XML file or directory (repeatable)")
    parser.add_argument("--e2e", action="append", default=[], help="E2E CSV with mr,ref columns (repeatable)")
    parser.add_argument("--jsonl", action="append", default=[], help="JSON lines with 'table' and 'reference(s)' (repeatable)")
    parser.add_argument("--tokenizer", default="nltk", choices=["whitespace", "nltk"], help="tokenizer; use the one you score with (default: nltk, as PARENT)")
    parser.add_argument("--min-count", type=int, default=1, help="drop item|||token pairs seen fewer times (default 1: keep all)")
    parser.add_argument("--out", required=True, help="output JSON file")
    args = parser.parse_args(argv)
    if not (args.webnlg or args.e2e or args.jsonl):
        parser.error("give at least one of --webnlg, --e2e, --jsonl")

    tokenize = MemoTokenizer(args.tokenizer)

    def all_pairs():
        for path in args.webnlg:
            yield from webnlg_pairs(path, tokenize)
        for path in args.e2e:
            yield from e2e_pairs(path, tokenize)
        for path in args.jsonl:
            yield from jsonl_pairs(path, tokenize)

    counts = learn_counts(all_pairs(), min_count=args.min_count)
    save_counts(counts, args.out)
    n_items = sum(1 for k in counts if PAIR_SEPARATOR not in k)
    print(f"wrote {args.out}: {n_items} table items, {len(counts) - n_items} item|||token pairs (tokenizer={args.tokenizer})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
