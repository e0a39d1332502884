"""Build DAE training data: (source, hypothesis, labelled arcs) examples.

``python -m training.dae.make_data --out /tmp/dae_data [--shared ../shared] [--max-pairs 30000]``

Two routes, both from the paper (Goyal & Durrett, 2020, §4 and §5.3):

1. **Auto-derived labels** (§4) from a paraphrase pair ``(x, h*)`` and the
   beam ``h_1 .. h_k`` of a paraphrase generator: arcs of ``x`` and ``h*`` are
   entailed; arcs of the bottom generations that are in neither are not
   entailed, unless they also occur in the top generation ``h_1`` (then they
   are left unlabelled). :func:`auto_derived_examples` implements the rule
   behind the :class:`ParaphraseGenerator` protocol. No neural paraphraser
   runs offline here, so :class:`PerturbationGenerator` stands in: its beam
   is ordered from meaning-preserving edits (modifier deletion) to
   meaning-changing ones (swaps, insertions). Gold paraphrase pairs come from
   WebNLG (different references of the same triple set) and SICK
   (bidirectional entailment pairs).
2. **Augmentations** (§5.3): word swapping (same POS, from elsewhere in the
   sentence or the corpus; changed arcs are not entailed), hallucination
   (delete a span from the premise; hypothesis arcs that depend on the
   deleted words are not entailed), the nearest-overlap sentence (its arcs
   absent from the source are not entailed) and identity positives.
   FactCC's transformations (Kryściński et al., 2020) are added: pronoun
   swaps, and negation insertion and *deletion*. A deletion keeps every arc
   of the source, so the arcs of the word that lost (or gained) its
   negation are labelled not entailed by hand. The same holds for the
   harmful compression that drops a word's infinitival complement or a
   quantity's *of* complement (*thousands [of chickens]*).
   Summarisation-like compressions are added: deleting a whole modifier
   subtree keeps every remaining arc (entailed), deleting a random span of
   words creates new arcs (not entailed) — the errors extractive-abstractive
   summarisers make. Every arc of a compression is entailed, re-attached
   ones included: with only the span deletions' re-attachments labelled, a
   model learns that any new link between source words is an error.

Lemma-level arc identity (head lemma, relation, child lemma) decides which
arcs are "in" a sentence. Text sources (``/work/shared/data``): SQuAD
paragraphs split into sentences (news-like Wikipedia prose, the domain
closest to CNN/DM; weighted up), WebNLG train references, E2E dev
references, SICK TRAIN/TRIAL pairs and RTE dev pairs. Half of the SQuAD
pairs are lower-cased (the CNN/DM benchmark text is). The DAE summary pairs
(``dae/summary_pairs.json``) are never used.

Output: ``train.jsonl`` and ``dev.jsonl`` (split by a hash of the source
group, so a source stays on its side when the generators change), one
example a line: ``{"source", "hypothesis", "words", "arcs": [[head_i,
child_i, relation, label], ...], "kind", "domain"}`` where ``words`` are the
hypothesis's spaCy tokens and only labelled arcs are listed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from typing import Dict, Iterable, List, Optional, Protocol, Sequence, Set, Tuple

from d2t_metrics.datasets import load_e2e_csv
from d2t_metrics.datasets import load_webnlg_xml
from d2t_metrics.datasets import shared_dir
from metrics.dae.arcs import Arc, arc_keys, doc_arcs, load_spacy

# Dependents whose whole subtree can go without changing what the rest says.
DELETABLE = ("amod", "advmod", "prep", "advcl", "appos", "relcl", "acl", "npadvmod", "conj", "nummod", "compound", "poss")
SWAPPABLE_POS = ("PROPN", "NOUN", "NUM", "VERB", "ADJ")


class ParaphraseGenerator(Protocol):
    """Anything that paraphrases: ``generate(sentence, n)`` returns up to ``n``
    candidates ordered best first (a beam)."""

    def generate(self, sentence: str, n: int) -> List[str]: ...


def detok(tokens: Iterable) -> str:
    """Join spaCy tokens keeping their original spacing."""
    return "".join(t.text_with_ws for t in tokens).strip()


def _tidy(text: str) -> str:
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)
    text = re.sub(r",\s*,", ",", text)
    text = re.sub(r"^\s*[,;:]\s*", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _span_text_without(doc, drop: Set[int]) -> str:
    return _tidy("".join(t.text_with_ws for t in doc if t.i not in drop))


_MARK = "\x00"


def _join_marking(pieces: List[str], k: int, tidy=_tidy) -> Tuple[str, int]:
    """Join token pieces (``""`` for a dropped token) and tidy the text; also
    return the character offset of piece ``k`` in the result. The offset finds
    the edited word again in the re-parsed hypothesis, whatever the tidying
    did to the spacing."""
    pieces = list(pieces)
    pieces[k] = _MARK + pieces[k]
    text = tidy("".join(pieces))
    return text.replace(_MARK, ""), text.index(_MARK)


def _pivot_token(doc, offset: int):
    """The token of a re-parsed edit at character ``offset``; a negation stands for the word it negates."""
    tok = next((t for t in doc if t.idx <= offset < t.idx + max(1, len(t.text))), None)
    if tok is not None and tok.dep_ == "neg":
        tok = tok.head
    return tok


def subtree_deletions(doc, rng: random.Random, k: int = 1) -> List[str]:
    """Sentences with one deletable modifier subtree (and an adjoining comma/cc) removed."""
    cands = []
    for tok in doc:
        if tok.dep_ in DELETABLE and tok.head is not tok and not is_partitive_of(tok):
            sub = {t.i for t in tok.subtree}
            if len(sub) >= len(doc) - 3:
                continue
            lo, hi = min(sub), max(sub)
            if lo > 0 and doc[lo - 1].text in (",", "and", "or") and tok.dep_ in ("conj", "appos", "relcl", "advcl"):
                sub.add(lo - 1)
            if hi + 1 < len(doc) and doc[hi + 1].text == "," and tok.dep_ in ("appos", "relcl", "advcl"):
                sub.add(hi + 1)
            cands.append(sub)
    rng.shuffle(cands)
    return [_span_text_without(doc, s) for s in cands[:k]]


def random_span_deletion(doc, rng: random.Random) -> Optional[str]:
    words = [t for t in doc if not t.is_punct]
    if len(words) < 6:
        return None
    n = rng.randint(1, min(4, len(words) // 3))
    start = rng.randrange(0, len(doc) - n)
    drop = set(range(start, start + n))
    if any(doc[i].is_sent_end for i in drop):
        return None
    return _span_text_without(doc, drop)


def swap_within(doc, rng: random.Random) -> Optional[str]:
    """Swap two content words (or noun chunks) of the same POS inside the sentence."""
    chunks = [c for c in getattr(doc, "noun_chunks", []) if c.root.pos_ in ("PROPN", "NOUN")]
    if len(chunks) >= 2 and rng.random() < 0.6:
        a, b = rng.sample(chunks, 2)
        if a.start > b.start:
            a, b = b, a
        if a.end <= b.start and a.text.lower() != b.text.lower():
            toks = [t.text_with_ws for t in doc]
            out = "".join(toks[: a.start]) + b.text + doc[a.end - 1].whitespace_ + "".join(toks[a.end : b.start]) + a.text + doc[b.end - 1].whitespace_ + "".join(toks[b.end :])
            return out.strip()
    by_pos = defaultdict(list)
    for t in doc:
        if t.pos_ in SWAPPABLE_POS:
            by_pos[t.pos_].append(t)
    pools = [v for v in by_pos.values() if len({t.lower_ for t in v}) >= 2]
    if not pools:
        return None
    pool = rng.choice(pools)
    a, b = rng.sample(pool, 2)
    if a.lower_ == b.lower_:
        return None
    toks = [t.text_with_ws for t in doc]
    toks[a.i] = b.text + a.whitespace_
    toks[b.i] = a.text + b.whitespace_
    return "".join(toks).strip()


def swap_from_corpus(doc, rng: random.Random, vocab: Dict[str, List[str]]) -> Optional[str]:
    """Replace one content word (an entity by an entity of the same type) with one from elsewhere in the corpus."""
    cands = [t for t in doc if t.pos_ in SWAPPABLE_POS]
    if not cands:
        return None
    tok = rng.choice(cands)
    if tok.ent_type_ and tok.ent_iob_ in ("B", "I"):
        ent = next((e for e in doc.ents if e.start <= tok.i < e.end), None)
        pool = vocab.get("ENT:" + tok.ent_type_)
        if ent is not None and pool:
            new = rng.choice(pool)
            if new.lower() != ent.text.lower():
                return (detok(doc[: ent.start]) + " " + new + doc[ent.end - 1].whitespace_ + detok(doc[ent.end :])).strip()
    pool = vocab.get(tok.tag_)
    if not pool:
        return None
    new = rng.choice(pool)
    if new.lower() == tok.lower_:
        return None
    toks = [t.text_with_ws for t in doc]
    toks[tok.i] = new + tok.whitespace_
    return "".join(toks).strip()


def replace_subject(doc, rng: random.Random) -> Optional[str]:
    """Give a verb the wrong subject: another noun chunk of the same sentence."""
    subs = [t for t in doc if t.dep_ in ("nsubj", "nsubjpass")]
    chunks = list(getattr(doc, "noun_chunks", []))
    if not subs or len(chunks) < 2:
        return None
    subj = rng.choice(subs)
    sub = sorted(t.i for t in subj.subtree)
    lo, hi = sub[0], sub[-1] + 1
    others = [c for c in chunks if c.end <= lo or c.start >= hi]
    if not others:
        return None
    new = rng.choice(others)
    if new.root.lower_ == subj.lower_:
        return None
    # the new subject followed by the verb phrase of the subject's head
    verb = subj.head
    clause = sorted(t.i for t in verb.subtree if t.i not in set(sub))
    rest = [doc[i] for i in clause if i >= lo]
    if len(rest) < 2:
        return None
    return (new.text + " " + detok(rest)).strip()


def duplicate_word(doc, rng: random.Random) -> Optional[str]:
    cands = [t for t in doc if t.is_alpha and t.pos_ in ("ADJ", "ADV", "NOUN", "VERB")]
    if not cands:
        return None
    tok = rng.choice(cands)
    toks = [t.text_with_ws for t in doc]
    toks[tok.i] = tok.text + " " + tok.text + tok.whitespace_
    return "".join(toks).strip()


def insert_negation(doc, rng: random.Random) -> Optional[Tuple[str, int]]:
    """FactCC's sentence negation: a *not* after an auxiliary. Returns the
    text and the offset of the *not*; the arcs of the word it negates are no
    longer entailed (the arc ``neg`` alone would leave the others looking
    entailed, against the ``negation_mismatch`` feature)."""
    cands = [t for t in doc if t.lower_ in ("is", "was", "are", "were", "has", "had", "have", "can", "will", "would", "could") and t.pos_ == "AUX"]
    cands = [t for t in cands if not (t.i + 1 < len(doc) and doc[t.i + 1].dep_ == "neg")]
    if not cands:
        return None
    tok = rng.choice(cands)
    pieces = [t.text_with_ws for t in doc]
    pieces[tok.i] = tok.text + " "
    pieces.insert(tok.i + 1, "not" + tok.whitespace_)
    return _join_marking(pieces, tok.i + 1, tidy=str.strip)


_CONTRACTED = {"ca": "can", "wo": "will", "sha": "shall"}


def delete_negation(doc, rng: random.Random) -> Optional[Tuple[str, int]]:
    """Drop a negation (FactCC's sentence negation, the other way round).
    Returns the text and the offset of the word that was negated: its arcs
    are no longer entailed although every one of them is still an arc of the
    source."""
    negs = [t for t in doc if t.dep_ == "neg" and t.head is not t]
    if not negs:
        return None
    tok = rng.choice(negs)
    pieces = [t.text_with_ws for t in doc]
    pieces[tok.i] = ""
    if tok.i > 0 and not doc[tok.i - 1].whitespace_:  # can't -> can, won't -> will, cannot -> can
        prev = doc[tok.i - 1]
        word = _CONTRACTED.get(prev.lower_, prev.text)
        pieces[tok.i - 1] = (word[:1].upper() + word[1:] if prev.text[:1].isupper() else word) + tok.whitespace_
    text, offset = _join_marking(pieces, tok.head.i, tidy=lambda t: re.sub(r"\s+", " ", t).strip())
    return (text, offset) if text != doc.text else None


# Words whose "of" complement says what they are: "thousands of chickens",
# "half of the income", "part of the genus". Without it the word means something else.
PARTITIVE_HEADS = frozenset(
    "thousands hundreds millions billions dozens tens scores half part most majority minority rest number lot lots "
    "some many all none each both several percent fraction share proportion third quarter group pair couple handful "
    "series bag box piece one".split()
)


def is_partitive_of(tok) -> bool:
    return tok.dep_ == "prep" and tok.lower_ == "of" and (tok.head.pos_ == "NUM" or tok.head.lower_ in PARTITIVE_HEADS)


def _is_infinitival_complement(tok) -> bool:
    # spaCy parses "wants England to be ruthless" as a ccomp with a "to" auxiliary
    return tok.dep_ == "xcomp" or (tok.dep_ == "ccomp" and any(c.dep_ == "aux" and c.lower_ == "to" for c in tok.children))


def argument_deletion(doc, rng: random.Random) -> Optional[Tuple[str, int]]:
    """A summariser's harmful compression: drop a word's open clausal
    complement (*wants England [to be ruthless]*) or the *of* complement of a
    quantity (*thousands [of chickens]*). Every remaining arc is still a source
    arc, yet the word that lost its complement now says something else, so
    its arcs are not entailed. Returns the text and that word's offset."""
    cands = []
    for tok in doc:
        if tok.head is not tok and (_is_infinitival_complement(tok) or is_partitive_of(tok)):
            sub = {t.i for t in tok.subtree}
            if tok.head.i not in sub and len(sub) < len(doc) - 3:
                cands.append((tok.head.i, sub))
    if not cands:
        return None
    head_i, drop = rng.choice(cands)
    pieces = [t.text_with_ws if t.i not in drop else "" for t in doc]
    return _join_marking(pieces, head_i)


_PRONOUN_SWAPS = {
    "he": "she", "she": "he", "him": "her", "his": "her", "hers": "his", "himself": "herself", "herself": "himself",
    "they": "we", "we": "they", "them": "us", "us": "them", "their": "our", "our": "their",
}


def swap_pronoun(doc, rng: random.Random) -> Optional[str]:
    """FactCC's pronoun swap: one personal pronoun changes gender or person."""
    cands = [t for t in doc if t.lower_ in _PRONOUN_SWAPS]
    if not cands:
        return None
    tok = rng.choice(cands)
    new = _PRONOUN_SWAPS[tok.lower_]
    if tok.lower_ == "her":
        new = "his" if tok.tag_ == "PRP$" else "him"
    if tok.text[:1].isupper():
        new = new[:1].upper() + new[1:]
    toks = [t.text_with_ws for t in doc]
    toks[tok.i] = new + tok.whitespace_
    return "".join(toks).strip()


def clause_extraction(doc) -> Optional[str]:
    """A summariser-style compression: a reported clause on its own."""
    for tok in doc:
        if tok.dep_ == "ccomp" and tok.head.dep_ == "ROOT":
            sub = [t for t in tok.subtree if t.dep_ != "mark" or t.head is not tok]
            if len(sub) >= 4:
                return detok(sub).rstrip(",") + "."
    return None


class PerturbationGenerator:
    """A rule-based stand-in for a neural paraphraser (no such model runs
    offline): its "beam" runs from meaning-preserving compressions to
    meaning-changing edits, which is what the auto-derived rule assumes of
    beam order. Works on a spaCy ``nlp`` and a corpus vocabulary."""

    def __init__(self, nlp, vocab: Dict[str, List[str]], seed: int = 0):
        self.nlp = nlp
        self.vocab = vocab
        self.rng = random.Random(seed)

    def generate(self, sentence: str, n: int) -> List[str]:
        doc = self.nlp(sentence)
        good = subtree_deletions(doc, self.rng, k=max(1, n // 2))
        bad_ops = [lambda d: swap_within(d, self.rng), lambda d: swap_from_corpus(d, self.rng, self.vocab),
                   lambda d: replace_subject(d, self.rng), lambda d: random_span_deletion(d, self.rng)]
        bad = []
        for _ in range(3 * n):
            if len(good) + len(bad) >= n:
                break
            out = self.rng.choice(bad_ops)(doc)
            if out and out != sentence and out not in bad:
                bad.append(out)
        return (good + bad)[:n]


def _example(source: str, hyp_doc, arcs: Sequence[Arc], labels: Sequence[Optional[int]], kind: str, domain: str):
    labelled = [[a.head_i, a.child_i, a.relation, int(y)] for a, y in zip(arcs, labels) if y is not None]
    if not labelled:
        return None
    return {
        "source": source, "hypothesis": hyp_doc.text, "words": [t.text for t in hyp_doc],
        "arcs": labelled, "kind": kind, "domain": domain,
    }


def label_against(hyp_doc, source_keys, new_label: Optional[int], old_label: Optional[int] = 1):
    arcs = doc_arcs(hyp_doc)
    return arcs, [old_label if a.key() in source_keys else new_label for a in arcs]


def auto_derived_examples(nlp, x: str, gold: str, generations: Sequence[str], domain: str, bottom: int = 3) -> List[dict]:
    """The paper's §4 labelling of a paraphrase pair and a generator beam.

    Entailed set E = d(x) ∪ d(h*). Examples: (x, h*) all arcs entailed;
    (x, h_1) arcs in E entailed, others unlabelled; each of the ``bottom``
    last generations: arcs in E entailed, arcs in d(h_1) unlabelled, the rest
    not entailed."""
    docs = list(nlp.pipe([x, gold] + list(generations)))
    x_doc, g_doc, gen_docs = docs[0], docs[1], docs[2:]
    entailed = arc_keys(doc_arcs(x_doc)) | arc_keys(doc_arcs(g_doc))
    out = []
    g_arcs = doc_arcs(g_doc)
    out.append(_example(x, g_doc, g_arcs, [1] * len(g_arcs), "ad-gold", domain))
    if gen_docs:
        top = gen_docs[0]
        top_arcs = doc_arcs(top)
        top_keys = arc_keys(top_arcs)
        out.append(_example(x, top, top_arcs, [1 if a.key() in entailed else None for a in top_arcs], "ad-top", domain))
        for d in gen_docs[1:][-bottom:]:
            arcs = doc_arcs(d)
            labels = [1 if a.key() in entailed else (None if a.key() in top_keys else 0) for a in arcs]
            out.append(_example(x, d, arcs, labels, "ad-bottom", domain))
    return [e for e in out if e]


# --------------------------------------------------------------------------
# Text sources

def split_sentences(nlp, paragraphs: Sequence[str]) -> List[str]:
    sents = []
    for doc in nlp.pipe(paragraphs, batch_size=64):
        for s in doc.sents:
            t = s.text.strip()
            if 6 <= len(t.split()) <= 45:
                sents.append(t)
    return sents


def load_squad_paragraphs(shared: str) -> List[str]:
    with open(os.path.join(shared, "data", "squad", "dev-v1.1.json"), encoding="utf-8") as f:
        data = json.load(f)
    return [p["context"] for art in data["data"] for p in art["paragraphs"]]


def load_webnlg_groups(shared: str) -> List[List[str]]:
    root = os.path.join(shared, "data", "webnlg2017", "xml", "train")
    groups = []
    for dirpath, _, files in os.walk(root):
        for fn in sorted(files):
            if fn.endswith(".xml"):
                for e in load_webnlg_xml(os.path.join(dirpath, fn)):
                    refs = [r for r in e.lexicalizations if r and len(r.split()) >= 4]
                    if refs:
                        groups.append(refs)
    return groups


def load_e2e_refs(shared: str) -> List[str]:
    return [r for ex in load_e2e_csv(os.path.join(shared, "data", "e2e", "devset.csv")) for r in ex.references]


def load_sick(shared: str) -> List[Tuple[str, str, str, str]]:
    rows = []
    with open(os.path.join(shared, "data", "nli", "sick", "SICK.txt"), encoding="utf-8") as f:
        header = f.readline().rstrip("\r\n").split("\t")
        for line in f:
            r = dict(zip(header, line.rstrip("\r\n").split("\t")))
            if r.get("SemEval_set") in ("TRAIN", "TRIAL"):
                rows.append((r["sentence_A"], r["sentence_B"], r["entailment_AB"], r["entailment_BA"]))
    return rows


def load_rte(shared: str) -> List[Tuple[str, str, bool]]:
    pairs = []
    for fn in ("rte1_dev.xml", "rte2_dev.xml", "rte3_dev.xml"):
        root = ET.parse(os.path.join(shared, "data", "nli", "rte", fn)).getroot()
        for p in root.iter("pair"):
            label = (p.get("value") or p.get("entailment") or "").upper() in ("TRUE", "YES")
            t, h = p.findtext("t"), p.findtext("h")
            if t and h:
                pairs.append((" ".join(t.split()), " ".join(h.split()), label))
    return pairs


def build_vocab(docs) -> Dict[str, List[str]]:
    """Corpus pools for swaps: words by fine POS tag, entities by type."""
    pools: Dict[str, Counter] = defaultdict(Counter)
    for doc in docs:
        for t in doc:
            if t.pos_ in SWAPPABLE_POS and t.is_alpha or t.pos_ == "NUM":
                pools[t.tag_][t.text] += 1
        for e in doc.ents:
            pools["ENT:" + e.label_][e.text] += 1
    return {k: [w for w, _ in c.most_common(3000)] for k, c in pools.items() if len(c) >= 5}


def nearest_overlap(docs, min_overlap: int = 3) -> List[Optional[int]]:
    """Index of the other sentence with the highest unigram (lemma) overlap."""
    index: Dict[str, List[int]] = defaultdict(list)
    bags = []
    for i, d in enumerate(docs):
        bag = {t.lemma_.lower() for t in d if t.is_alpha and not t.is_stop}
        bags.append(bag)
        for w in bag:
            index[w].append(i)
    out = []
    for i, bag in enumerate(bags):
        counts = Counter()
        for w in bag:
            if len(index[w]) < 200:
                counts.update(index[w])
        counts.pop(i, None)
        best = next(((j, c) for j, c in counts.most_common(3) if docs[j].text.lower() != docs[i].text.lower()), None)
        out.append(best[0] if best and best[1] >= min_overlap else None)
    return out


# --------------------------------------------------------------------------

def sentence_examples(nlp, sentences: Sequence[str], domain: str, rng: random.Random, vocab, ops_per_sentence: int, lowercase_rate: float) -> List[dict]:
    """Augmentation examples (identity, compressions, swaps, negation, pronouns, hallucination, nearest overlap) from single sentences."""
    texts = [s.lower() if rng.random() < lowercase_rate else s for s in sentences]
    docs = list(nlp.pipe(texts, batch_size=128))
    near = nearest_overlap(docs)
    # (source text, hypothesis text, kind, source doc index, premise-is-edited)
    jobs = []
    for i, doc in enumerate(docs):
        x = doc.text
        menu = []
        menu.append(("identity", lambda d=doc: d.text))
        menu.append(("compress", lambda d=doc: (subtree_deletions(d, rng, 1) or [None])[0]))
        menu.append(("compress", lambda d=doc: (subtree_deletions(d, rng, 1) or [None])[0]))
        menu.append(("clause", lambda d=doc: clause_extraction(d)))
        menu.append(("span-delete", lambda d=doc: random_span_deletion(d, rng)))
        menu.append(("span-delete", lambda d=doc: random_span_deletion(d, rng)))
        menu.append(("swap-within", lambda d=doc: swap_within(d, rng)))
        menu.append(("swap-within", lambda d=doc: swap_within(d, rng)))
        menu.append(("swap-corpus", lambda d=doc: swap_from_corpus(d, rng, vocab)))
        menu.append(("swap-corpus", lambda d=doc: swap_from_corpus(d, rng, vocab)))
        menu.append(("subject", lambda d=doc: replace_subject(d, rng)))
        menu.append(("duplicate", lambda d=doc: duplicate_word(d, rng)))
        menu.append(("negation", lambda d=doc: insert_negation(d, rng)))
        menu.append(("negation-delete", lambda d=doc: delete_negation(d, rng)))
        menu.append(("argument-delete", lambda d=doc: argument_deletion(d, rng)))
        menu.append(("pronoun", lambda d=doc: swap_pronoun(d, rng)))
        menu.append(("hallucination", lambda d=doc: (subtree_deletions(d, rng, 1) or [None])[0]))
        menu.append(("hallucination", lambda d=doc: random_span_deletion(d, rng)))
        if near[i] is not None:
            menu.append(("nearest", lambda j=near[i]: docs[j].text))
        picked = rng.sample(menu, min(ops_per_sentence, len(menu)))
        if not any(k == "identity" for k, _ in picked) and rng.random() < 0.3:
            picked.append(menu[0])
        for kind, fn in picked:
            out = fn()
            pivot = None  # offset of a word whose meaning the edit changed
            if isinstance(out, tuple):
                out, pivot = out
            if not out or len(out.split()) < 3:
                continue
            if kind != "identity" and out == x:
                continue
            if kind == "hallucination":
                jobs.append((out, x, kind, i, None))  # premise lost a span; the full sentence is the hypothesis
            else:
                jobs.append((x, out, kind, i, pivot))
    hyp_docs = list(nlp.pipe([j[1] for j in jobs], batch_size=128))
    prem_docs = list(nlp.pipe([j[0] for j in jobs if j[2] == "hallucination"], batch_size=128))
    prem_iter = iter(prem_docs)
    src_keys = [arc_keys(doc_arcs(d)) for d in docs]
    examples = []
    for (src, hyp, kind, i, pivot), hdoc in zip(jobs, hyp_docs):
        if kind == "identity" or kind == "compress" or kind == "clause":
            # A whole modifier subtree (or the frame of a reported clause) is gone: the rewrite is
            # faithful, so all its arcs are entailed, the re-attached ones too (the paper's rule for
            # the gold paraphrase). Random span deletion re-attaches words wrongly: those are negatives.
            arcs, labels = label_against(hdoc, src_keys[i], 1)
        elif kind == "hallucination":
            pkeys = arc_keys(doc_arcs(next(prem_iter)))
            arcs, labels = label_against(hdoc, pkeys, 0)
        elif kind == "nearest":
            arcs, labels = label_against(hdoc, src_keys[i], 0, old_label=None)
        else:
            arcs, labels = label_against(hdoc, src_keys[i], 0)
        if pivot is not None:  # the word gained or lost a negation or a complement: none of its arcs holds any more
            tok = _pivot_token(hdoc, pivot)
            if tok is None:
                continue
            labels = [0 if tok.i in (a.head_i, a.child_i) else y for a, y in zip(arcs, labels)]
        ex = _example(src, hdoc, arcs, labels, kind, domain)
        if ex:
            ex["group"] = f"{domain}:{i}"
            examples.append(ex)
    return examples


def pair_examples_sick(nlp, rows, rng) -> List[dict]:
    jobs = []
    for a, b, ab, ba in rows:
        for p, h, lab in ((a, b, ab), (b, a, ba)):
            jobs.append((p, h, lab.split("_")[1]))
    rng.shuffle(jobs)
    pdocs = list(nlp.pipe([p for p, _, _ in jobs], batch_size=128))
    hdocs = list(nlp.pipe([h for _, h, _ in jobs], batch_size=128))
    out = []
    for (p, h, lab), pd, hd in zip(jobs, pdocs, hdocs):
        keys = arc_keys(doc_arcs(pd))
        arcs = doc_arcs(hd)
        if lab == "entails":
            labels = [1] * len(arcs)
        else:  # neutral or contradiction: arcs not in the premise are not entailed, shared ones unknown
            labels = [1 if a.key() in keys else 0 for a in arcs] if lab == "contradicts" else [None if a.key() in keys else 0 for a in arcs]
        ex = _example(p, hd, arcs, labels, "sick-" + lab, "sick")
        if ex:
            ex["group"] = "sick:" + p
            out.append(ex)
    return out


def pair_examples_rte(nlp, pairs) -> List[dict]:
    pdocs = list(nlp.pipe([t for t, _, _ in pairs], batch_size=32))
    hdocs = list(nlp.pipe([h for _, h, _ in pairs], batch_size=128))
    out = []
    for (t, h, label), pd, hd in zip(pairs, pdocs, hdocs):
        keys = arc_keys(doc_arcs(pd))
        arcs = doc_arcs(hd)
        labels = [1] * len(arcs) if label else [None if a.key() in keys else 0 for a in arcs]
        ex = _example(t, hd, arcs, labels, "rte-" + ("yes" if label else "no"), "rte")
        if ex:
            ex["group"] = "rte:" + t[:50]
            out.append(ex)
    return out


def _bucket(group: str) -> float:
    return int(hashlib.sha1(group.encode("utf-8")).hexdigest()[:8], 16) / 0x100000000


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory for train.jsonl / dev.jsonl")
    ap.add_argument("--shared", default=None, help="the shared data directory (default: d2t_metrics.datasets.shared_dir())")
    ap.add_argument("--spacy-model", default=None)
    ap.add_argument("--squad-sentences", type=int, default=4000)
    ap.add_argument("--webnlg-groups", type=int, default=1500)
    ap.add_argument("--e2e-sentences", type=int, default=600)
    ap.add_argument("--sick-pairs", type=int, default=1500)
    ap.add_argument("--rte-pairs", type=int, default=600)
    ap.add_argument("--ops", type=int, default=5, help="augmentations per SQuAD sentence")
    ap.add_argument("--dev-fraction", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args(argv)

    shared = args.shared or shared_dir()
    if not shared:
        ap.error("no shared data directory: pass --shared or set D2T_SHARED")
    rng = random.Random(args.seed)
    nlp = load_spacy(args.spacy_model)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

    squad = split_sentences(nlp, load_squad_paragraphs(shared))
    rng.shuffle(squad)
    squad = squad[: args.squad_sentences]
    log(f"squad sentences: {len(squad)}")
    webnlg = load_webnlg_groups(shared)
    rng.shuffle(webnlg)
    webnlg = webnlg[: args.webnlg_groups]
    e2e = list(dict.fromkeys(load_e2e_refs(shared)))
    rng.shuffle(e2e)
    e2e = e2e[: args.e2e_sentences]

    vocab = build_vocab(nlp.pipe(squad[:3000] + [g[0] for g in webnlg[:1000]], batch_size=128))
    examples: List[dict] = []
    examples += sentence_examples(nlp, squad, "squad", rng, vocab, args.ops, lowercase_rate=0.5)
    log(f"after squad: {len(examples)}")
    examples += sentence_examples(nlp, e2e, "e2e", rng, vocab, 3, lowercase_rate=0.2)
    log(f"after e2e: {len(examples)}")

    gen = PerturbationGenerator(nlp, vocab, seed=args.seed)
    for gi, refs in enumerate(webnlg):
        if len(refs) >= 2:
            x, gold = rng.sample(refs, 2)
        else:
            x = gold = refs[0]
        for ex in auto_derived_examples(nlp, x, gold, gen.generate(x, 6), "webnlg"):
            ex["group"] = f"webnlg:{gi}"
            examples.append(ex)
    log(f"after webnlg: {len(examples)}")
    sick = load_sick(shared)
    rng.shuffle(sick)
    examples += pair_examples_sick(nlp, sick[: args.sick_pairs], rng)
    rte = load_rte(shared)
    rng.shuffle(rte)
    examples += pair_examples_rte(nlp, rte[: args.rte_pairs])
    log(f"total: {len(examples)}")

    # by a hash of the group, so a source stays on its side when generators change
    dev_groups = {g for g in {e["group"] for e in examples} if _bucket(g) < args.dev_fraction}
    os.makedirs(args.out, exist_ok=True)
    stats = Counter()
    with open(os.path.join(args.out, "train.jsonl"), "w", encoding="utf-8") as ftr, open(os.path.join(args.out, "dev.jsonl"), "w", encoding="utf-8") as fdv:
        rng.shuffle(examples)
        for e in examples:
            split = "dev" if e["group"] in dev_groups else "train"
            (fdv if split == "dev" else ftr).write(json.dumps(e) + "\n")
            stats[(split, e["kind"])] += 1
            stats[(split, "arcs")] += len(e["arcs"])
            stats[(split, "positive_arcs")] += sum(a[3] for a in e["arcs"])
    for k in sorted(stats):
        log(k, stats[k])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
