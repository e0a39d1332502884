"""Training data for the project's offline NLI cross-encoder.

No MNLI weights are reachable here, so the metric ships its own small NLI
model. It is trained on

* general NLI: SICK (TRAIN + TRIAL; 3-way) and PASCAL RTE 1-3 development
  sets (2-way: TRUE/YES → entailment, FALSE/NO → neutral, i.e. "not entailed");
* synthetic data-to-text pairs built from the TRAINING splits only
  (WebNLG 2017 ``train`` XML, E2E ``devset.csv``), in both directions the
  metric checks:

  - omission direction (premise = a text, hypothesis = one fact sentence):
    entailment for the text's own facts; neutral for a fact missing from the
    text (a text of a strict subset of the facts; another fact of the same
    subject), for the predicate swapped, and for subject and object swapped;
    contradiction for the object swapped for another value of the same
    predicate, or for the fact against a text whose mention of it was changed;
  - hallucination direction (premise = all fact sentences, hypothesis = the
    text): entailment for the entry's own text, also with one more fact of
    the same subject in the premise (an unmentioned fact is an omission, not
    a hallucination); neutral when one fact is
    missing from the premise (or the premise is a strict subset entry's);
    contradiction when an object is swapped in the facts or in the text, or
    two entity mentions are swapped inside the text.

E2E: every reference of ``devset.csv`` that passes a lexical filter is used;
price and rating values count on both of E2E's scales (``cheap`` =
``less than £20``), and a swapped value is never its own twin.

Fact sentences are verbalized with a mix of the back-off template, the shipped
template sets (when present) and templates sampled from single-triple WebNLG
training texts, so the model serves both metric configs.

The WebNLG test inputs, the human-evaluation outputs and the E2E test MRs are
never read here.
"""

from __future__ import annotations

import csv
import glob
import os
import random
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from d2t_metrics.datasets import load_e2e_csv
from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.normalize import normalize_entity
from d2t_metrics.normalize import symmetric_predicate
from d2t_metrics.tables import Triple
from d2t_metrics.verbalize import Verbalizer

LABELS = ("contradiction", "neutral", "entailment")
CONTRADICTION, NEUTRAL, ENTAILMENT = 0, 1, 2


@dataclass(frozen=True)
class Pair:
    premise: str
    hypothesis: str
    label: int
    source: str  # "sick", "rte", "webnlg:<kind>", "e2e:<kind>"


# ---------------------------------------------------------------------------
# General NLI corpora


def load_sick(path: str, sets: Sequence[str] = ("TRAIN", "TRIAL")) -> List[Pair]:
    """SICK pairs of the given ``SemEval_set`` parts (``TRAIN``, ``TRIAL``, ``TEST``)."""
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["SemEval_set"].strip() not in sets:
                continue
            label = {"ENTAILMENT": ENTAILMENT, "NEUTRAL": NEUTRAL, "CONTRADICTION": CONTRADICTION}[row["entailment_label"].strip()]
            out.append(Pair(row["sentence_A"].strip(), row["sentence_B"].strip(), label, "sick"))
    return out


def load_rte(paths: Iterable[str]) -> List[Pair]:
    """RTE pairs (2-way): TRUE/YES → entailment, FALSE/NO → neutral (not entailed)."""
    out = []
    for path in paths:
        root = ET.parse(path).getroot()
        for pair in root.iter("pair"):
            value = (pair.get("value") or pair.get("entailment") or "").strip().upper()
            label = ENTAILMENT if value in ("TRUE", "YES") else NEUTRAL
            t, h = pair.find("t"), pair.find("h")
            out.append(Pair(" ".join(t.text.split()), " ".join(h.text.split()), label, "rte"))
    return out


# ---------------------------------------------------------------------------
# Verbalization with variety


def _detok(text: str) -> str:
    text = " ".join(re.sub(r"\s+([.,;:!?])", r"\1", text).split())
    return text if text[-1:] in ".!?" else text + "."


def sampled_webnlg_templates(entries) -> Dict[str, List[str]]:
    """Per-predicate templates read off single-triple WebNLG training texts.

    A delexicalized text ``AGENT-1 was born in PATIENT-1 .`` of a one-triple
    entry becomes ``<subject> was born in <object>.``.
    """
    out: Dict[str, List[str]] = defaultdict(list)
    for e in entries:
        if len(e.table) != 1:
            continue
        triple = e.table[0]
        for tmpl, refs in zip(e.templates, e.references):
            if not tmpl or refs.get("AGENT-1") != triple.subject or refs.get("PATIENT-1") != triple.object:
                continue
            if tmpl.count("AGENT-1") != 1 or tmpl.count("PATIENT-1") != 1 or re.search(r"(BRIDGE|AGENT|PATIENT)-[2-9]", tmpl):
                continue
            t = _detok(tmpl.replace("AGENT-1", "<subject>").replace("PATIENT-1", "<object>"))
            if len(t.split()) <= 25 and t not in out[triple.predicate]:
                out[triple.predicate].append(t)
    return dict(out)


# Variants for E2E slots (training variety only; the metric's own E2E
# templates are the shipped d2t_metrics/templates/e2e.json).
E2E_VARIANTS: Dict[str, List[str]] = {
    "eattype": ["<subject> is a <object>.", "<subject> is a <object> venue.", "There is a <object> called <subject>."],
    "food": ["<subject> serves <object> food.", "<subject> serves <object>.", "<subject> offers <object> cuisine."],
    "pricerange": ["<subject> is in the <object> price range.", "<subject> has a price range of <object>.", "Prices at <subject> are <object>."],
    "customerrating": ["<subject> has a <object> customer rating.", "<subject> is rated <object> by customers.", "The customer rating of <subject> is <object>."],
    "area": ["<subject> is located in the <object>.", "<subject> is in the <object> area."],
    "near": ["<subject> is located near <object>.", "<subject> is near <object>.", "<subject> can be found close to <object>."],
}
E2E_FAMILY = {
    "yes": ["<subject> is family-friendly.", "<subject> is kid friendly.", "Children are welcome at <subject>."],
    "no": ["<subject> is not family-friendly.", "<subject> is not kid friendly.", "<subject> does not welcome children."],
}


class FactVerbalizer:
    """Verbalizes a fact with a randomly chosen style (back-off, shipped or sampled templates)."""

    def __init__(self, sampled: Dict[str, List[str]], rng: random.Random, backoff_share: float = 0.4):
        self.backoff = Verbalizer()
        try:
            self.shipped: Optional[Verbalizer] = Verbalizer.from_names("webnlg", "e2e")
        except ValueError:  # template sets not generated yet
            self.shipped = None
        self.sampled = sampled
        self.rng = rng
        self.backoff_share = backoff_share

    def _sampled(self, triple: Triple) -> Optional[str]:
        key = Verbalizer._key(triple.predicate)
        if key == "familyfriendly":
            value = normalize_entity(triple.object).lower()
            choices = E2E_FAMILY.get(value)
        else:
            choices = E2E_VARIANTS.get(key) or self.sampled.get(triple.predicate)
        if not choices:
            return None
        return Verbalizer({triple.predicate: self.rng.choice(choices)})(triple)

    def __call__(self, triple: Triple) -> str:
        r = self.rng.random()
        if r < self.backoff_share:
            return self.backoff(triple)
        if r < self.backoff_share + 0.25 and self.shipped is not None:
            return self.shipped(triple)
        return self._sampled(triple) or (self.shipped or self.backoff)(triple)


# ---------------------------------------------------------------------------
# Synthetic data-to-text pairs


def _find_mention(text: str, name: str):
    """The first case-insensitive whole-word mention of ``name`` (2+ characters) in ``text``, or None."""
    if len(name) < 2:
        return None
    return re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text, flags=re.IGNORECASE)


def _replace_mention(text: str, old: str, new: str) -> Optional[str]:
    """``text`` with the first mention of ``old`` replaced by ``new``; None if absent."""
    m = _find_mention(text, old)
    return text[: m.start()] + new + text[m.end():] if m else None


def _swap_mentions(text: str, a: str, b: str) -> Optional[str]:
    if len(a) < 2 or len(b) < 2 or a.lower() in b.lower() or b.lower() in a.lower():
        return None
    ma, mb = _find_mention(text, a), _find_mention(text, b)
    if not ma or not mb:
        return None
    first, second = sorted([(ma, b), (mb, a)], key=lambda x: x[0].start())
    if first[0].end() > second[0].start():
        return None
    (m1, r1), (m2, r2) = first, second
    return text[: m1.start()] + r1 + text[m1.end(): m2.start()] + r2 + text[m2.end():]


class SyntheticBuilder:
    """Builds NLI pairs from (facts, texts) records of one data set."""

    def __init__(
        self,
        records: List[Tuple[Tuple[Triple, ...], List[str]]],
        verbalize: Callable[[Triple], str],
        rng: random.Random,
        name: str,
        same_value: Optional[Callable[[str, str, str], bool]] = None,
        facts_per_text: int = 2,
        role_swaps: bool = False,
    ):
        self.records = records
        # Stage 5: every text whose fact's subject and object can trade places gives that swap as a
        # negative in both directions, besides the sampled negatives. Drawn without the shared random
        # generator, so the other pairs, and the held-out ones built after, stay those of stages 1-4.
        self.role_swaps = role_swaps
        self.same_value = same_value
        self.facts_per_text = facts_per_text  # own facts entailed per text; 0 = all
        self.verbalize = verbalize
        self.rng = rng
        self.name = name
        self.by_set = defaultdict(list)
        self.objects = defaultdict(set)
        self.facts_by_subject = defaultdict(set)
        self.predicates = set()
        for facts, texts in records:
            self.by_set[frozenset(facts)].extend(texts)
            for t in facts:
                self.objects[t.predicate].add(t.object)
                self.facts_by_subject[t.subject].add(t)
                self.predicates.add(t.predicate)
        self.objects = {p: sorted(v) for p, v in self.objects.items()}
        self.predicate_list = sorted(self.predicates)

    # -- fact perturbations ------------------------------------------------
    def other_object(self, t: Triple) -> Optional[str]:
        """Another value of the predicate that means something else (None when five draws find none)."""
        pool = self.objects.get(t.predicate, [])
        if len(pool) < 2:
            return None
        for _ in range(5):
            o = self.rng.choice(pool)
            if normalize_entity(o).lower() == normalize_entity(t.object).lower():
                continue
            if self.same_value and self.same_value(t.predicate, o, t.object):
                continue
            return o
        return None

    def swap_object(self, t: Triple) -> Optional[Triple]:
        o = self.other_object(t)
        return Triple(t.subject, t.predicate, o) if o else None

    def swap_predicate(self, t: Triple, facts) -> Optional[Triple]:
        for _ in range(5):
            p = self.rng.choice(self.predicate_list)
            cand = Triple(t.subject, p, t.object)
            if p != t.predicate and cand not in facts:
                return cand
        return None

    def subsets_with_texts(self, facts: Tuple[Triple, ...]) -> List[frozenset]:
        full = frozenset(facts)
        return [full - {t} for t in facts if len(facts) > 1 and self.by_set.get(full - {t})]

    def join(self, facts: Sequence[Triple]) -> str:
        return " ".join(self.verbalize(t) for t in facts)

    # -- the pairs of one record -------------------------------------------
    def pairs_for(self, facts: Tuple[Triple, ...], text: str) -> List[Pair]:
        rng, v, out = self.rng, self.verbalize, []
        facts = tuple(facts)
        fset = set(facts)
        own_predicates = {x.predicate for x in facts}

        def add(p, h, label, kind):
            if p and h:
                out.append(Pair(p, h, label, f"{self.name}:{kind}"))

        # Omission direction: the text entails its facts.
        n_facts = len(facts) if self.facts_per_text <= 0 else min(self.facts_per_text, len(facts))
        entailed = []
        for t in rng.sample(facts, n_facts):
            entailed.append((t, v(t)))
            add(text, entailed[-1][1], ENTAILMENT, "fact_entailed")
        if self.role_swaps:
            # the right entities in the wrong roles ("the manager of X is Y" for Y manages X) state no fact of X and Y
            for t, sentence in entailed:
                roles = None if symmetric_predicate(t.predicate) else _swap_mentions(text, normalize_entity(t.subject), normalize_entity(t.object))
                if roles:
                    add(roles, sentence, NEUTRAL, "text_roles_swapped_vs_fact")
                    break
        # ... and not others.
        negatives = []
        subsets = self.subsets_with_texts(facts)
        if subsets:
            sub = rng.choice(subsets)
            missing = next(iter(frozenset(facts) - sub))
            negatives.append((rng.choice(self.by_set[sub]), v(missing), NEUTRAL, "fact_missing_subset"))
        t = rng.choice(facts)
        same_subject = [f for f in self.facts_by_subject.get(t.subject, ()) if f not in fset and f.predicate not in own_predicates]
        if same_subject:
            negatives.append((text, v(rng.choice(sorted(same_subject))), NEUTRAL, "fact_other_same_subject"))
        swapped = self.swap_object(t)
        if swapped:
            negatives.append((text, v(swapped), CONTRADICTION, "fact_object_swapped"))
        pswap = self.swap_predicate(t, fset)
        if pswap:
            negatives.append((text, v(pswap), NEUTRAL, "fact_predicate_swapped"))
        if normalize_entity(t.subject).lower() != normalize_entity(t.object).lower():
            negatives.append((text, v(Triple(t.object, t.predicate, t.subject)), NEUTRAL, "fact_subject_object_swapped"))
        # A text whose mention of the object was changed no longer supports the fact.
        o = self.other_object(t)
        changed = _replace_mention(text, normalize_entity(t.object), normalize_entity(o)) if o else None
        if changed:
            negatives.append((changed, v(t), CONTRADICTION, "text_object_changed_vs_fact"))
        for n in rng.sample(negatives, min(2, len(negatives))):
            add(*n)

        # Hallucination direction: the facts entail the text.
        order = list(facts)
        rng.shuffle(order)
        all_facts = self.join(order)
        add(all_facts, text, ENTAILMENT, "text_entailed")
        # Facts the text does not mention don't make it unsupported: that is
        # the omission check's business, not the hallucination check's.
        # (E2E texts call any venue without an eatType "a restaurant", so an added eatType could contradict.)
        absent = sorted(
            f for f in self.facts_by_subject.get(facts[0].subject, ())
            if f.predicate not in own_predicates and f.predicate != "eatType"
            and _find_mention(text, normalize_entity(f.object)) is None
        )
        if absent:
            padded = list(order)
            padded.insert(rng.randrange(len(padded) + 1), rng.choice(absent))
            add(self.join(padded), text, ENTAILMENT, "text_entailed_extra_fact")
        negatives = []
        if len(facts) > 1:
            drop = rng.choice(facts)
            negatives.append((self.join([f for f in order if f != drop]), text, NEUTRAL, "text_fact_dropped"))
        else:
            same_subject = sorted(f for f in self.facts_by_subject.get(facts[0].subject, ()) if f not in fset)
            if same_subject:
                negatives.append((v(rng.choice(same_subject)), text, NEUTRAL, "text_other_fact"))
        if changed:
            negatives.append((self.join(order), changed, CONTRADICTION, "text_object_changed"))
        elif swapped:
            negatives.append((self.join([swapped if f == t else f for f in order]), text, CONTRADICTION, "facts_object_swapped"))
        # Two entity mentions swapped inside the text (right entities, wrong relation).
        for f in rng.sample(facts, len(facts)):
            s = _swap_mentions(text, normalize_entity(f.subject), normalize_entity(f.object))
            if s:
                negatives.append((self.join(order), s, CONTRADICTION, "text_mentions_swapped"))
                if self.role_swaps and not symmetric_predicate(f.predicate):
                    add(all_facts, s, CONTRADICTION, "text_roles_swapped")
                break
        for n in rng.sample(negatives, min(2, len(negatives))):
            add(*n)
        return out

    def build(self, max_texts_per_record: int = 3) -> List[Pair]:
        out = []
        for facts, texts in self.records:
            for text in self.rng.sample(texts, min(max_texts_per_record, len(texts))):
                out.extend(self.pairs_for(facts, text))
        return out


# ---------------------------------------------------------------------------
# E2E: a lexical filter keeps references that plausibly state all their slots
# (the original E2E references are noisy), and no value of an absent slot.

# E2E price and rating values come in a numeric and a verbal scale that the
# E2E slot-error script treats as one value ("cheap" realizes "less than £20").
# Cue lists therefore accept either scale, and a swap never replaces a value by
# its twin on the other scale (that would be no contradiction).
_VERBAL_SCALE = {
    ("pricerange", "less than £20"): "cheap", ("pricerange", "£20-25"): "moderate", ("pricerange", "more than £30"): "high",
    ("customerrating", "1 out of 5"): "low", ("customerrating", "3 out of 5"): "average", ("customerrating", "5 out of 5"): "high",
}
_SCALE_CUES = {
    "pricerange": {
        "cheap": ("cheap", "low price", "low-price", "low cost", "low-cost", "inexpensive", "affordable", "budget", "20"),
        "moderate": ("moderate", "average price", "mid", "20", "25"),
        "high": ("high", "expensive", "pricey", "costly", "30"),
    },
    "customerrating": {
        "low": ("low", "poor", "bad", "1 out of 5", "one star", "1 star", "one out of five"),
        "average": ("average", "3 out of 5", "three star", "3 star", "three out of five"),
        "high": ("high", "excellent", "great", "5 out of 5", "five star", "5 star", "five out of five"),
    },
}
_E2E_CUES = {"riverside": ("river",), "city centre": ("centre", "center", "city")}


def _slot_key(predicate: str) -> str:
    return predicate.lower().replace(" ", "").replace("_", "")


def e2e_same_value(predicate: str, a: str, b: str) -> bool:
    """Whether two E2E values of a slot mean the same (``cheap`` and ``less than £20``)."""
    key = _slot_key(predicate)
    a, b = a.lower(), b.lower()
    return _VERBAL_SCALE.get((key, a), a) == _VERBAL_SCALE.get((key, b), b)


def e2e_slot_mentioned(attr: str, value: str, ref: str) -> bool:
    r, v, a = ref.lower(), value.lower(), _slot_key(attr)
    if a == "familyfriendly":
        return any(w in r for w in ("family", "kid", "child"))
    if a in _SCALE_CUES:
        cues = _SCALE_CUES[a].get(_VERBAL_SCALE.get((a, v), v), (v,))
        context = a != "customerrating" or any(w in r for w in ("rat", "review", "customer", "star"))
        return context and any(c in r for c in cues)
    return any(c in r for c in _E2E_CUES.get(v, (v,)))


def e2e_clean_records(examples, slots_absent_check: bool = True):
    """(facts, refs) for E2E MRs, keeping references that pass the lexical filter."""
    records = []
    all_foods = {av.value.lower() for ex in examples for av in ex.table if av.attribute == "food"}
    for ex in examples:
        facts = tuple(ex.table.to_triples())
        attrs = {av.attribute for av in ex.table}
        good = []
        for ref in ex.references:
            if not all(e2e_slot_mentioned(av.attribute, av.value, ref) for av in ex.table):
                continue
            r = ref.lower()
            if slots_absent_check:
                if "familyFriendly" not in attrs and any(w in r for w in ("family", "kid", "child")):
                    continue
                if "food" not in attrs and any(f in r for f in all_foods):
                    continue
                if "customer rating" not in attrs and "rating" in r:
                    continue
                if "priceRange" not in attrs and ("price" in r or "£" in r):
                    continue
                if "near" not in attrs and " near " in r:
                    continue
            good.append(ref)
        if good:
            records.append((facts, good))
    return records


# ---------------------------------------------------------------------------


def split_records(records, dev_share: float, rng: random.Random):
    records = list(records)
    rng.shuffle(records)
    n_dev = int(round(len(records) * dev_share))
    return records[n_dev:], records[:n_dev]


def build_pairs(
    shared: str,
    seed: int = 13,
    dev_share: float = 0.05,
    max_texts_per_record: int = 3,
    backoff_share: float = 0.4,
    e2e_texts_per_record: int = 3,
    e2e_facts_per_text: int = 2,
    extra_webnlg: Sequence = (),
    role_swaps: bool = False,
):
    """``(train_pairs, dev_pairs)``; dev holds out whole WebNLG entries / E2E MRs,
    plus SICK TEST and RTE test sets.

    ``role_swaps``: the training pairs also hold each text's subject-object swap as a negative in
    both directions (:class:`SyntheticBuilder`); the held-out pairs stay as without it.

    ``extra_webnlg``: entries of a further WebNLG release (already without WebNLG 2017's test and
    dev inputs, :func:`training.webnlg_extra.extra_entries`), built as their own source
    ``webnlg3`` with their own held-out share, and read for the sampled templates of their
    predicates."""
    rng = random.Random(seed)
    webnlg = load_webnlg_xml(os.path.join(shared, "data", "webnlg2017", "xml", "train"))
    verbalize = FactVerbalizer(sampled_webnlg_templates(list(webnlg) + list(extra_webnlg)), rng, backoff_share=backoff_share)

    def records(entries):
        return [(tuple(e.table.entries), list(e.lexicalizations)) for e in entries if e.lexicalizations]

    e_records = e2e_clean_records(load_e2e_csv(os.path.join(shared, "data", "e2e", "devset.csv")))

    train, dev = [], []
    settings = (
        # E2E has few MRs (547) but many references each: use them all.
        ("webnlg", records(webnlg), max_texts_per_record, None, 2),
        ("e2e", e_records, max(max_texts_per_record, e2e_texts_per_record), e2e_same_value, e2e_facts_per_text),
    )
    if extra_webnlg:  # after the two above, so their splits and seeds stay those of the earlier stages
        settings += (("webnlg3", records(extra_webnlg), max_texts_per_record, None, 2),)
    for k, (name, records, n_texts, same_value, n_facts) in enumerate(settings):
        # A split of its own seed, so the held-out entries don't move when the pairs change.
        tr, dv = split_records(records, dev_share, random.Random(seed + 1000 * (k + 1)))
        train.extend(SyntheticBuilder(tr, verbalize, rng, name, same_value, n_facts, role_swaps=role_swaps).build(n_texts))
        dev.extend(SyntheticBuilder(dv, verbalize, rng, name, same_value).build(1))

    nli = os.path.join(shared, "data", "nli")
    train.extend(load_sick(os.path.join(nli, "sick", "SICK.txt"), ("TRAIN", "TRIAL")))
    train.extend(load_rte(sorted(glob.glob(os.path.join(nli, "rte", "*_dev.xml")))))
    dev.extend(load_sick(os.path.join(nli, "sick", "SICK.txt"), ("TEST",)))
    dev.extend(load_rte(sorted(glob.glob(os.path.join(nli, "rte", "*_test.xml")))))
    return train, dev


def subsample(pairs: List[Pair], max_pairs: Optional[int], rng: random.Random, keep_sources: Tuple[str, ...] = ("sick", "rte"),
              source_caps: Optional[Dict[str, int]] = None) -> List[Pair]:
    """At most ``max_pairs`` pairs, keeping every pair whose source starts with one
    of ``keep_sources`` and sampling the rest. ``source_caps`` first samples a source
    (the part of ``Pair.source`` before ``:``) down to at most that many pairs, so that a
    warm-started stage can replay the earlier data in set shares."""
    if source_caps:
        by_source: Dict[str, List[Pair]] = defaultdict(list)
        for p in pairs:
            by_source[p.source.split(":")[0]].append(p)
        pairs = [p for name, group in by_source.items()
                 for p in (rng.sample(group, source_caps[name]) if len(group) > source_caps.get(name, len(group)) else group)]
    if not max_pairs or len(pairs) <= max_pairs:
        out = list(pairs)
    else:
        kept = [p for p in pairs if p.source.startswith(keep_sources)]
        rest = [p for p in pairs if not p.source.startswith(keep_sources)]
        out = kept + rng.sample(rest, max(0, max_pairs - len(kept)))
    rng.shuffle(out)
    return out
