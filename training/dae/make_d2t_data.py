"""Build DAE arc data for data-to-text: verbalized tables against references.

``python -m training.dae.make_d2t_data --out /tmp/dae_d2t [--webnlg3 /tmp/webnlg3/release_v3.0/en/train]``

The source of every example is the table verbalized exactly as the metric
verbalizes it (``metrics.dae.dae.source_texts``: the project's templates, one
sentence per fact), so the model learns to read what it will read when
``dae`` is given ``tables=``. Hypotheses:

* ``d2t-ref``: a training reference of the table (WebNLG 2017 train, optionally
  WebNLG 3.0 train, E2E dev): every arc entailed.
* ``d2t-swap``: a value the reference mentions (a triple's object or subject,
  an E2E slot value) replaced by another entry's value of the same predicate;
  the arcs touching the new words are not entailed, the rest entailed.
* ``d2t-number``: a number the reference shares with the table altered; the
  arcs touching it not entailed.
* ``d2t-append``: a reference sentence of another entry (the same subject where
  one exists) appended; all arcs of the appended sentence not entailed.
* ``d2t-drop``: the reference against the table without one of the facts whose
  value it mentions (the reference now adds a fact); the arcs touching that
  value not entailed.
* ``d2t-roles`` (``--role-swaps``, besides the corruption above): a fact's subject
  and object trading places in the reference ("the manager of X is Y" → "the
  manager of Y is X"); the arcs touching the two moved mentions not entailed.

An arc "touches" a changed word when its head or its child token overlaps the
changed characters (:func:`label_arcs`). WebNLG 2017 dev is built the same way
and is the dev split (model selection); the 2017 test inputs are never read
except to remove WebNLG 3.0 entries with the same input
(``d2t_metrics.extract_templates.input_key``), and 2017 dev inputs are removed
from the training data the same way. Output: ``train.jsonl`` and
``dev.jsonl`` in ``training.dae.make_data``'s format, and ``stats.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
from collections import Counter, defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

from d2t_metrics.datasets import load_e2e_csv
from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.datasets import shared_dir
from d2t_metrics.normalize import exchange_spans
from d2t_metrics.normalize import names_an_entity
from d2t_metrics.normalize import normalize_entity
from d2t_metrics.normalize import symmetric_predicate
from metrics.dae.arcs import arc_keys, doc_arcs, load_spacy

Span = Tuple[int, int]  # character offsets [start, end) in the hypothesis


def table_source(table) -> str:
    """The table as the metric verbalizes it for ``tables=`` input."""
    from metrics.dae.dae import source_texts  # the metric's own verbalization, not a copy of it

    return source_texts([table])[0]


def value_surface(value: str) -> str:
    """A table value as a reference writes it: ``Wheeler,_Texas`` -> ``Wheeler, Texas``."""
    return normalize_entity(value).strip().strip('"').strip()


def find_mention(text: str, value: str) -> Optional[Span]:
    """The first whole-word, case-insensitive mention of ``value`` in ``text``."""
    if len(value) < 2:
        return None
    m = re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", text, flags=re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def entry_values(table) -> List[Tuple[str, str, str]]:
    """``(role, predicate, surface value)`` of every subject and object of a table (E2E: slot values)."""
    out = []
    for t in table.to_triples():
        out.append(("object", t.predicate, value_surface(t.object)))
        out.append(("subject", t.predicate, value_surface(t.subject)))
    return out


def replace_span(text: str, span: Span, new: str) -> Tuple[str, Span]:
    return text[: span[0]] + new + text[span[1]:], (span[0], span[0] + len(new))


def swap_value(text: str, table, pools: Dict[Tuple[str, str], List[str]], rng: random.Random) -> Optional[Tuple[str, List[Span]]]:
    """Replace a mentioned value with another entry's value of the same predicate and role."""
    own = {v.lower() for _, _, v in entry_values(table)}
    cands = []
    for role, pred, value in entry_values(table):
        span = find_mention(text, value)
        if span and len(pools.get((role, pred), ())) >= 2:
            cands.append((span, role, pred))
    rng.shuffle(cands)
    for span, role, pred in cands:
        for _ in range(5):
            new = rng.choice(pools[(role, pred)])
            if new.lower() not in own and new.lower() not in text.lower():
                out, changed = replace_span(text, span, new)
                return out, [changed]
    return None


_NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)?(?![\w])")


def alter_number(text: str, source: str, rng: random.Random) -> Optional[Tuple[str, List[Span]]]:
    """Change a number the reference shares with the table (a date's year, a length, a population)."""
    cands = [m for m in _NUMBER.finditer(text) if re.search(r"(?<![\d.,])" + re.escape(m.group()) + r"(?!\d)", source)]
    if not cands:
        return None
    m = rng.choice(cands)
    digits = m.group()
    if "." in digits or "," in digits:
        sep = "." if "." in digits else ","
        whole, frac = digits.split(sep, 1)
        new = whole + sep + "".join(str(rng.randrange(10)) for _ in frac)
        if new == digits:
            new = str(int(whole) + 1) + sep + frac
    else:
        value = int(digits)
        delta = rng.choice([1, 2, 3, 5, 10, 11, 20]) if value > 30 else rng.choice([1, 2, 3])
        new = str(value + delta if rng.random() < 0.5 or value - delta < 0 else value - delta)
        if len(digits) == 4 and len(new) != 4:
            new = str(value + delta)
    out, changed = replace_span(text, (m.start(), m.end()), new)
    return out, [changed]


def swap_roles(text: str, table) -> Optional[Tuple[str, List[Span]]]:
    """The first fact (in table order) whose subject and object the text mentions apart, the two
    mentions exchanged: ``(new text, [both new spans])``. Objects that are numbers, dates or quoted
    literals and symmetric predicates are skipped (no rng: the other corruptions' draws stay as they were)."""
    for t in table.to_triples():
        subject, obj = value_surface(t.subject), value_surface(t.object)
        if (symmetric_predicate(t.predicate) or not names_an_entity(t.object)
                or subject.lower() in obj.lower() or obj.lower() in subject.lower()):
            continue
        a, b = find_mention(text, subject), find_mention(text, obj)
        swapped = exchange_spans(text, a, b) if a and b else None
        if swapped:
            return swapped[0], list(swapped[1:])
    return None


def append_fact(text: str, sentence: str) -> Tuple[str, List[Span]]:
    """``text`` followed by ``sentence``, which is all new."""
    joined = text.rstrip()
    if joined and joined[-1] not in ".!?":
        joined += "."
    start = len(joined) + 1
    return joined + " " + sentence, [(start, start + len(sentence))]


def drop_fact(text: str, table, rng: random.Random):
    """A table without one fact whose value the text mentions: ``(smaller table, [mention span])``.
    Triples lose a triple; an E2E MR loses a slot other than ``name``."""
    from d2t_metrics.tables import Table

    def value_of(entry) -> Optional[str]:
        if table.is_triples:
            return value_surface(entry.object)
        return None if entry.attribute.strip().lower() == "name" else value_surface(entry.value)

    values = [value_of(x) for x in table.entries]
    if sum(v is not None for v in values) < 2:
        return None
    stated = [v.lower() for _, _, v in entry_values(table)]
    cands = []
    for i, value in enumerate(values):
        span = find_mention(text, value) if value else None
        # the value must not also be stated by a fact that stays
        if span and stated.count(value.lower()) == 1:
            cands.append((i, span))
    if not cands:
        return None
    i, span = rng.choice(cands)
    kept = Table(tuple(x for j, x in enumerate(table.entries) if j != i), kind=table.kind)
    return kept, [span]


def label_arcs(doc, arcs, changed: Sequence[Span], source_keys=frozenset()) -> List[int]:
    """1 for an arc whose head and child lie outside every changed span, 0 for one that touches a change,
    unless the source has that very arc (lemma level): an appended sentence's *Aarhus Airport* compound is
    still a source arc, and calling it unsupported would teach that source arcs can be errors."""
    def touched(i: int) -> bool:
        tok = doc[i]
        lo, hi = tok.idx, tok.idx + len(tok.text)
        return any(lo < e and s < hi for s, e in changed)

    return [0 if (touched(a.head_i) or touched(a.child_i)) and a.key() not in source_keys else 1 for a in arcs]


def example(source: str, doc, changed: Sequence[Span], kind: str, domain: str, group: str, source_keys=frozenset()) -> Optional[dict]:
    arcs = doc_arcs(doc)
    labels = label_arcs(doc, arcs, changed, source_keys)
    if not arcs or (changed and all(labels)):  # a corruption whose change no arc touches teaches nothing
        return None
    return {"source": source, "hypothesis": doc.text, "words": [t.text for t in doc],
            "arcs": [[a.head_i, a.child_i, a.relation, y] for a, y in zip(arcs, labels)],
            "kind": kind, "domain": domain, "group": group}


# --------------------------------------------------------------------------

def value_pools(entries) -> Dict[Tuple[str, str], List[str]]:
    pools: Dict[Tuple[str, str], set] = defaultdict(set)
    for e in entries:
        for role, pred, value in entry_values(e.table):
            if value:
                pools[(role, pred)].add(value)
    return {k: sorted(v) for k, v in pools.items()}


def single_fact_sentences(entries) -> Tuple[Dict[str, List[Tuple[tuple, str]]], List[Tuple[tuple, str]]]:
    """References of one-fact entries, by subject and all together (``(fact, text)``), for appended facts."""
    by_subject: Dict[str, List[Tuple[tuple, str]]] = defaultdict(list)
    every = []
    for e in entries:
        triples = e.table.to_triples()
        if len(triples) == 1 and e.lexicalizations:
            t = triples[0]
            item = ((t.subject, t.predicate, t.object), e.lexicalizations[0])
            by_subject[value_surface(t.subject).lower()].append(item)
            every.append(item)
    return by_subject, every


def build(entries, domain: str, nlp, rng: random.Random, refs_per_entry: int, pools, facts,
          split: str, counts: Counter, append_any_subject: bool = True, role_swaps: bool = False) -> List[dict]:
    """Examples of ``entries``: per sampled reference, itself and one corruption (and its role swap,
    with ``role_swaps``)."""
    by_subject, every = facts
    jobs = []  # (source, hypothesis, changed spans, kind, group)
    for ei, e in enumerate(entries):
        refs = [r for r in e.lexicalizations if r and len(r.split()) >= 3]
        if not refs:
            continue
        source = table_source(e.table)
        group = f"{domain}:{split}:{ei}"
        facts_here = {(t.subject, t.predicate, t.object) for t in e.table.to_triples()}
        for ref in rng.sample(refs, min(refs_per_entry, len(refs))):
            jobs.append((source, ref, [], "d2t-ref", group))
            ops = ["swap", "number", "append", "drop"]
            rng.shuffle(ops)
            for op in ops:
                out = None
                src = source
                if op == "swap":
                    out = swap_value(ref, e.table, pools, rng)
                elif op == "number":
                    out = alter_number(ref, source, rng)
                elif op == "append":
                    subj = value_surface(e.table.to_triples()[0].subject).lower()
                    cands = [f for f in by_subject.get(subj, ()) if f[0] not in facts_here]
                    if not cands and append_any_subject and every:
                        cands = [rng.choice(every)]
                        cands = [f for f in cands if f[0] not in facts_here]
                    if cands:
                        out = append_fact(ref, rng.choice(cands)[1])
                elif op == "drop":
                    dropped = drop_fact(ref, e.table, rng)
                    if dropped:
                        src = table_source(dropped[0])
                        out = (ref, dropped[1])
                if out:
                    jobs.append((src, out[0], out[1], "d2t-" + op, group))
                    break
            swapped = swap_roles(ref, e.table) if role_swaps else None
            if swapped:
                jobs.append((source, swapped[0], swapped[1], "d2t-roles", group))
    sources = list(dict.fromkeys(j[0] for j in jobs))
    source_keys = {s: arc_keys(doc_arcs(d)) for s, d in zip(sources, nlp.pipe(sources, batch_size=256))}
    docs = nlp.pipe([j[1] for j in jobs], batch_size=256)
    examples = []
    for (src, hyp, changed, kind, group), doc in zip(jobs, docs):
        ex = example(src, doc, changed, kind, domain, group, source_keys[src])
        if ex:
            examples.append(ex)
            counts[(split, domain, kind)] += 1
            counts[(split, "arcs")] += len(ex["arcs"])
            counts[(split, "entailed_arcs")] += sum(a[3] for a in ex["arcs"])
    return examples


def _bucket(group: str) -> float:
    return int(hashlib.sha1(group.encode("utf-8")).hexdigest()[:8], 16) / 0x100000000


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shared", default=None)
    ap.add_argument("--webnlg3", default=None, help="WebNLG 3.0 train folder (entries whose input is a 2017 test or dev input are removed)")
    ap.add_argument("--webnlg3-entries", type=int, default=4000, help="WebNLG 3.0 entries to sample (after the removal)")
    ap.add_argument("--refs-per-entry", type=int, default=2)
    ap.add_argument("--e2e-mrs", type=int, default=547, help="E2E dev MRs to use (their references train)")
    ap.add_argument("--dev-entries", type=int, default=872, help="WebNLG 2017 dev entries in the dev split")
    ap.add_argument("--spacy-model", default=None)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--role-swaps", action="store_true",
                    help="also train on each reference with a fact's subject and object swapped (d2t-roles; the dev split stays without)")
    args = ap.parse_args(argv)

    from d2t_metrics.extract_templates import input_key

    shared = args.shared or shared_dir()
    if not shared:
        ap.error("no shared data directory: pass --shared or set D2T_SHARED")
    rng = random.Random(args.seed)
    nlp = load_spacy(args.spacy_model)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    root = os.path.join(shared, "data", "webnlg2017", "xml")
    train17 = load_webnlg_xml(os.path.join(root, "train"))
    dev17 = load_webnlg_xml(os.path.join(root, "dev"))
    stats: Counter = Counter()
    held = {input_key(e) for e in dev17}
    train_entries = [e for e in train17 if input_key(e) not in held]
    stats[("removed", "webnlg2017-train-with-dev-input")] = len(train17) - len(train_entries)
    if args.webnlg3:
        test17 = load_webnlg_xml(os.path.join(root, "test"))
        v3 = load_webnlg_xml(args.webnlg3)
        test_keys = {input_key(e) for e in test17}
        kept = [e for e in v3 if input_key(e) not in test_keys and input_key(e) not in held]
        seen17 = {input_key(e) for e in train17}
        stats[("removed", "webnlg3-train-with-2017-test-input")] = sum(input_key(e) in test_keys for e in v3)
        stats[("removed", "webnlg3-train-with-2017-dev-input")] = sum(input_key(e) in held and input_key(e) not in test_keys for e in v3)
        new = [e for e in kept if input_key(e) not in seen17]  # the rest repeat 2017 train inputs
        stats[("removed", "webnlg3-train-already-in-2017-train")] = len(kept) - len(new)
        rng.shuffle(new)
        v3_entries = new[: args.webnlg3_entries]
    else:
        v3_entries = []
    e2e = load_e2e_csv(os.path.join(shared, "data", "e2e", "devset.csv"))
    rng.shuffle(e2e)
    e2e = e2e[: args.e2e_mrs]

    all_entries = train_entries + v3_entries + list(e2e)
    pools = value_pools(all_entries)
    facts = single_fact_sentences(train_entries + v3_entries)

    class _E2E:  # an E2E MR as an entry: its table and references
        def __init__(self, ex):
            self.table, self.lexicalizations = ex.table, ex.references

    train = build(train_entries, "webnlg", nlp, rng, args.refs_per_entry, pools, facts, "train", stats, role_swaps=args.role_swaps)
    log(f"webnlg 2017 train: {len(train)}")
    if v3_entries:
        train += build(v3_entries, "webnlg3", nlp, rng, args.refs_per_entry, pools, facts, "train", stats, role_swaps=args.role_swaps)
        log(f"+ webnlg 3.0 train: {len(train)}")
    e2e_pools = value_pools([_E2E(x) for x in e2e])
    train += build([_E2E(x) for x in e2e], "e2e", nlp, rng, 3, e2e_pools, ({}, []), "train", stats, role_swaps=args.role_swaps)
    log(f"+ e2e dev: {len(train)}")
    dev_rng = random.Random(args.seed + 1)
    dev_entries = list(dev17)
    dev_rng.shuffle(dev_entries)
    dev = build(dev_entries[: args.dev_entries], "webnlg", nlp, dev_rng, 1, value_pools(dev17), single_fact_sentences(dev17), "dev", stats)
    rng.shuffle(train)
    os.makedirs(args.out, exist_ok=True)
    for name, rows in (("train", train), ("dev", dev)):
        with open(os.path.join(args.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            for e in rows:
                f.write(json.dumps(e) + "\n")
    table = {"|".join(k): v for k, v in sorted(stats.items())}
    with open(os.path.join(args.out, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)
    for k, v in table.items():
        log(k, v)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
