"""Scorers: the neural DAE model and the paper's rule-based arc-overlap baseline.

Both load their spaCy pipeline (and model) once, parse with ``nlp.pipe`` in
batches, and return one dict per example::

    {"score": mean P(entailed) over arcs, "min_score": lowest arc probability,
     "ok": arcs exist and none is below the threshold,
     "not_entailed": count of arcs below it, "num_arcs": ...,
     "no_arcs": the text has no dependency arc to judge,
     "arcs": [{"head", "relation", "child", "head_index", "child_index",
     "probability"}], "truncated": the source was windowed or a word of the
     hypothesis was cut (below)}

**A text without arcs** (empty or whitespace-only, one word, or text the
parser links into no arc, e.g. one long token of non-English script) scores
0.0, with ``min`` 0.0, ``ok`` False and ``no_arcs`` True, in both scorers.
DAE can only credit what a text says through its arcs; a text that states
nothing verifiable cannot be credited as faithful, and giving it the best
possible score (nothing to contradict) would rank an empty output above
every real one (in the WebNLG 2020 human evaluation an empty output got
every rating 0).

**Windowing.** The encoder reads ``[CLS] source [SEP] hypothesis [SEP]`` in
``max_length`` sub-tokens (128, as trained). The hypothesis is cut into
segments (consecutive sentences packed together; a sentence longer than the
segment budget into word chunks); each segment is paired with its own
window of the source: the whole source when it fits, else the source
sentences sharing the most content words with the segment, kept in source
order, else the best-matching span of the best sentence
(``arcs.select_window``). An arc takes its head and child vectors from the
segment each word sits in. A word is represented by its first sub-token, so
a hypothesis word of more than ``MAX_WORD_PIECES`` sub-tokens (a long URL, a
run of CJK characters, ``1.1.1...``) is fed to the encoder as its longest
prefix of at most that many sub-tokens (and at most the segment budget), and
the example is marked ``truncated``. Every segment therefore fits
``max_length`` by construction, and no input crashes on length.

A checkpoint over a causal LM (recipe ``"task": "decoder"``) reads
``source <sep> hypothesis`` instead (``max_length`` from its recipe, e.g.
320), each word by its *last* sub-token (``model.DecoderPairEncoder``); the
windowing, caps and results are the same.

**Bounded work.** Parsing and scoring grow with the text, so each scorer
reads at most :data:`MAX_PARSE_CHARS` characters of a prediction and
:data:`MAX_SOURCE_CHARS` of a source (cut at a space), and scores at most
:data:`MAX_ARCS` arcs of a prediction (the first ones, in text order); only
the segments holding a scored arc's words are encoded. An example past a cap
is marked ``truncated``; its score is the mean over the arcs read. The caps
are far above the texts DAE is made for (summaries and data-to-text outputs
of a few hundred characters), and a 100,000-character text then costs what
its first 10,000 characters cost.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from d2t_metrics.timing import stage

from .arcs import LEXICAL_FEATURES, Arc, SourceIndex, arc_keys, doc_arcs, load_spacy, rule_score, select_window
from .model import DEFAULT_MAX_LENGTH, DecoderPairEncoder, encode_pairs, is_decoder, load_dae_checkpoint

THRESHOLD = 0.5

# The caps on work per example (module docstring): characters of a prediction
# and of a source that are parsed, and arcs of a prediction that are scored.
MAX_PARSE_CHARS = 10_000
MAX_SOURCE_CHARS = 20_000
MAX_ARCS = 1_000

# Sub-tokens of one hypothesis word the encoder sees. The word's vector is its
# first sub-token's, so a few more only add context; more than this would let
# one word (a URL, a run of CJK characters) crowd out its sentence, or not fit at all.
MAX_WORD_PIECES = 16


def cap_text(text: str, limit: int) -> Tuple[str, bool]:
    """``(text, False)`` within ``limit`` characters, else ``(its first part, True)``:
    cut at the last white space of the first ``limit`` characters (or at the
    limit when that space sits in its first half)."""
    if len(text) <= limit:
        return text, False
    cut = text[:limit]
    space = max(cut.rfind(c) for c in " \n\t")
    return (cut[:space] if space > limit // 2 else cut), True


def capped_arcs(doc, max_arcs: Optional[int] = None) -> Tuple[List[Arc], bool]:
    """The first ``max_arcs`` (default :data:`MAX_ARCS`) arcs of ``doc`` (text order) and whether there were more."""
    max_arcs = MAX_ARCS if max_arcs is None else int(max_arcs)
    arcs = doc_arcs(doc)
    return arcs[:max_arcs], len(arcs) > max_arcs


def _cap_inputs(sources: Sequence[str], hypotheses: Sequence[str]) -> Tuple[List[str], List[str], List[bool]]:
    """Sources and hypotheses within the parse caps, and per example whether either was cut."""
    srcs = [cap_text(s, MAX_SOURCE_CHARS) for s in sources]
    hyps = [cap_text(h, MAX_PARSE_CHARS) for h in hypotheses]
    return [s for s, _ in srcs], [h for h, _ in hyps], [a or b for (_, a), (_, b) in zip(srcs, hyps)]


def parse_unique(nlp, texts: Sequence[str], batch_size: int = 64) -> Dict[str, Any]:
    """spaCy docs for the distinct texts (sources repeat across predictions)."""
    unique = list(dict.fromkeys(texts))
    disable = [p for p in ("ner",) if p in getattr(nlp, "pipe_names", [])]
    return dict(zip(unique, nlp.pipe(unique, batch_size=batch_size, disable=disable)))


def _no_arcs_result(truncated: bool = False) -> Dict[str, Any]:
    """A text with no arc says nothing verifiable: the lowest score, never ok
    (the module docstring gives the reasons)."""
    return {"score": 0.0, "min_score": 0.0, "ok": False, "not_entailed": 0, "num_arcs": 0, "no_arcs": True, "arcs": [], "truncated": truncated}


def _result(arcs: Sequence[Arc], probs: Sequence[float], threshold: float, truncated: bool = False) -> Dict[str, Any]:
    if not arcs:
        return _no_arcs_result(truncated)
    probs = [float(p) for p in probs]
    bad = sum(p < threshold for p in probs)
    return {
        "score": sum(probs) / len(probs),
        "min_score": min(probs),
        "ok": bad == 0,
        "not_entailed": bad,
        "num_arcs": len(arcs),
        "no_arcs": False,
        "arcs": [dict(a.as_dict(), probability=round(p, 6)) for a, p in zip(arcs, probs)],
        "truncated": truncated,
    }


class RuleScorer:
    """Goyal & Durrett's rule-based baseline: the fraction of hypothesis arcs
    (lemma-level head, relation, child) that are arcs of the source."""

    name = "rule"

    def __init__(self, spacy_model: Any = None):
        self.nlp = load_spacy(spacy_model)

    def score(self, sources: Sequence[str], hypotheses: Sequence[str], batch_size: int = 32, show_progress: bool = False,
              threshold: float = THRESHOLD) -> List[Dict[str, Any]]:
        sources, hypotheses, cut = _cap_inputs(sources, hypotheses)
        with stage("parse"):
            docs = parse_unique(self.nlp, list(sources) + list(hypotheses))
        out = []
        with stage("arcs"):
            src_keys = {s: arc_keys(doc_arcs(docs[s])) for s in set(sources)}
            for src, hyp, text_cut in zip(sources, hypotheses, cut):
                arcs, more = capped_arcs(docs[hyp])
                _, per_arc = rule_score(arcs, src_keys[src])
                out.append(_result(arcs, per_arc, threshold, text_cut or more))
        return out


class DAEScorer:
    """The dependency arc entailment model, loaded once (bert_score-style)."""

    name = "dae"

    def __init__(self, model_path: str, spacy_model: Any = None, device: Optional[str] = None, dtype=None,
                 max_length: Optional[int] = None):
        from d2t_metrics.models import default_dtype, get_device

        self.device = get_device(device)
        self.dtype = dtype if dtype is not None else default_dtype(self.device)
        self.tokenizer, self.encoder, self.head, self.meta = load_dae_checkpoint(model_path, device=self.device, dtype=self.dtype)
        # the decoder backbone reads "source <sep> hypothesis" (model.DecoderPairEncoder), the encoder "[CLS] s [SEP] h [SEP]"
        self.decoder = is_decoder(self.meta)
        self.pair_encoder = DecoderPairEncoder(self.tokenizer, self.meta) if self.decoder else None
        limit = getattr(self.encoder.config, "max_position_embeddings", 512) - (0 if self.decoder else 2)
        self.max_length = min(int(max_length or self.meta.get("max_length") or DEFAULT_MAX_LENGTH), limit)
        self.nlp = load_spacy(spacy_model)
        # sub-tokens a (source, hypothesis) pair may take besides the special tokens ([CLS] and two [SEP], or <sep>)
        self.room = self.max_length - (1 if self.decoder else self.tokenizer.num_special_tokens_to_add(pair=True))
        if self.room < 2:
            raise ValueError(f"max_length {self.max_length} leaves no room for a source and a hypothesis")
        self._piece_counts: Dict[str, int] = {}
        self._capped: Dict[Tuple[str, int], str] = {}
        num_features = int(getattr(self.head, "num_features", 0))
        # a checkpoint names its features in its metadata; one that does not has the five lexical ones
        self.feature_names = list(self.meta.get("arc_features") or (LEXICAL_FEATURES if num_features else ()))
        if len(self.feature_names) != num_features:
            raise ValueError(f"{model_path}: the arc head takes {num_features} features but the metadata names {len(self.feature_names)}")

    # ---- segmentation -------------------------------------------------
    def _count_pieces_uncached(self, words: Sequence[str]) -> List[int]:
        """Sub-tokens of each word, counted as ``encode_pairs`` tokenizes it
        (a word of a pre-split sequence), so the segment budgets are exact."""
        if not words:
            return []
        if self.decoder:
            return [len(x) for x in self.pair_encoder.piece_ids_uncached(words)]
        # verbose=False: long words are expected here and capped by the caller;
        # the tokenizer's "longer than the maximum sequence length" warning would mislead
        ids = self.tokenizer([[w] for w in words], is_split_into_words=True, add_special_tokens=False, verbose=False)["input_ids"]
        return [len(x) for x in ids]

    def _count_pieces(self, words: Sequence[str]) -> List[int]:
        missing = [w for w in dict.fromkeys(words) if w not in self._piece_counts]
        self._piece_counts.update(zip(missing, self._count_pieces_uncached(missing)))
        return [self._piece_counts[w] for w in words]

    def _pieces(self, word: str) -> int:
        return self._count_pieces([word])[0]

    def _capped_word(self, word: str, cap: int) -> str:
        """The longest prefix of ``word`` with at most ``cap`` sub-tokens
        (binary search; only prefixes whose count was checked are returned, so
        the result always fits, and ``""`` at worst, which borrows the
        previous word's position)."""
        key = (word, cap)
        if key not in self._capped:
            lo, hi = 0, len(word)  # word[:lo] fits; word[:hi] may not
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self._count_pieces_uncached([word[:mid]])[0] <= cap:
                    lo = mid
                else:
                    hi = mid - 1
            self._capped[key] = word[:lo]
        return self._capped[key]

    def _source_sentences(self, doc) -> Tuple[List[List[str]], List[List[int]]]:
        sents = [s.text.split() for s in doc.sents]
        sents = [s for s in sents if s]
        return sents, [self._count_pieces(s) for s in sents]

    def segments(self, hyp_doc, src_sents, src_lens) -> List[Tuple[int, List[str], List[str], bool]]:
        """``(word offset, hypothesis words, source words, truncated)`` per segment.

        Every segment fits ``max_length`` with its source window: each word is
        capped to ``word_cap`` <= ``hyp_budget`` sub-tokens, a segment holds at
        most ``hyp_budget`` and its source window at most the rest.
        ``truncated`` is set when the source was windowed or a word capped."""
        room = self.room
        src_total = sum(sum(ls) for ls in src_lens)
        hyp_budget = max(room // 2, room - src_total)
        word_cap = min(MAX_WORD_PIECES, hyp_budget)
        words = [t.text for t in hyp_doc]
        lens = self._count_pieces(words)
        capped = set()
        for i, n in enumerate(lens):
            if n > word_cap:
                words[i] = self._capped_word(words[i], word_cap)
                lens[i] = self._pieces(words[i])
                capped.add(i)
        # word ranges: sentences packed while they fit, long sentences split
        ranges: List[Tuple[int, int]] = []
        for sent in hyp_doc.sents:
            start = sent.start
            while start < sent.end:
                end, used = start, 0
                while end < sent.end and (used + lens[end] <= hyp_budget or end == start):
                    used += lens[end]
                    end += 1
                ranges.append((start, end))
                start = end
        packed: List[Tuple[int, int]] = []
        for r in ranges:
            if packed and sum(lens[packed[-1][0] : r[1]]) <= hyp_budget:
                packed[-1] = (packed[-1][0], r[1])
            else:
                packed.append(r)
        out = []
        for a, b in packed or [(0, len(words))]:
            seg_words = words[a:b]
            # >= 1 whenever the source has a sub-token (hyp_budget < room then); 0 only for a source without any
            budget = room - sum(lens[a:b])
            src_words, truncated = select_window(src_sents, src_lens, seg_words, budget) if src_sents else ([], False)
            out.append((a, seg_words, src_words, truncated or any(a <= i < b for i in capped)))
        return out

    # ---- scoring ------------------------------------------------------
    def _encode(self, sources: Sequence[Sequence[str]], hypotheses: Sequence[Sequence[str]]):
        """The backbone's inputs for (source words, hypothesis words) pairs and, per pair, the position of
        each hypothesis word's vector (first sub-token for the encoder, last for the decoder)."""
        if self.decoder:
            return self.pair_encoder.encode(sources, hypotheses, self.max_length)
        return encode_pairs(self.tokenizer, sources, hypotheses, self.max_length)

    def score(self, sources: Sequence[str], hypotheses: Sequence[str], batch_size: int = 32, show_progress: bool = False,
              threshold: float = THRESHOLD) -> List[Dict[str, Any]]:
        import torch

        from d2t_metrics.batching import length_sorted_batches
        from d2t_metrics.hub import progress

        sources, hypotheses, truncated = _cap_inputs(sources, hypotheses)
        with stage("parse"):
            docs = parse_unique(self.nlp, list(sources) + list(hypotheses))
        with stage("arcs"):
            src_cache = {s: self._source_sentences(docs[s]) for s in set(sources)}
            use_features = bool(self.feature_names)
            src_index = {s: SourceIndex(docs[s]) for s in set(sources)} if use_features else {}
            all_arcs: List[List[Arc]] = []
            segs = []  # (example, offset, hyp words, src words)
            for i, (src, hyp) in enumerate(zip(sources, hypotheses)):
                arcs, more = capped_arcs(docs[hyp])
                all_arcs.append(arcs)
                truncated[i] = truncated[i] or more
                if not arcs:
                    continue
                words = sorted({w for a in arcs for w in (a.head_i, a.child_i)}) if more else []
                for off, hw, sw, cut in self.segments(docs[hyp], *src_cache[src]):
                    if more and not any(off <= w < off + len(hw) for w in words):
                        continue  # past MAX_ARCS: no scored arc has a word here, so it is not encoded
                    segs.append((i, off, hw, sw))
                    truncated[i] = truncated[i] or cut
            needed = {(i, w) for i, arcs in enumerate(all_arcs) for a in arcs for w in (a.head_i, a.child_i)}
        vec_index: Dict[Tuple[int, int], int] = {}
        vectors = []
        batches = length_sorted_batches([len(hw) + len(sw) for _, _, hw, sw in segs], batch_size)
        with stage("arc scoring"), torch.inference_mode():
            for batch in progress(batches, total=len(batches), desc="DAE", enabled=show_progress):
                enc, positions = self._encode([segs[k][3] for k in batch], [segs[k][2] for k in batch])
                enc = {k: v.to(self.device) for k, v in enc.items()}
                hidden = self.encoder(**enc).last_hidden_state
                rows, cols, keys = [], [], []
                for b, k in enumerate(batch):
                    i, off, hw, _ = segs[k]
                    for w in range(len(hw)):
                        if (i, off + w) in needed:
                            rows.append(b)
                            cols.append(positions[b][w])
                            keys.append((i, off + w))
                if rows:
                    picked = hidden[torch.tensor(rows, device=self.device), torch.tensor(cols, device=self.device)]
                    for key, vec in zip(keys, picked):
                        vec_index[key] = len(vectors)
                        vectors.append(vec)
            probs_flat: List[float] = []
            flat = [(i, a) for i, arcs in enumerate(all_arcs) for a in arcs]
            for s in range(0, len(flat), 4096):
                part = flat[s : s + 4096]
                h = torch.stack([vectors[vec_index[(i, a.head_i)]] for i, a in part])
                c = torch.stack([vectors[vec_index[(i, a.child_i)]] for i, a in part])
                r = torch.tensor([a.relation_id() for _, a in part], device=self.device)
                f = None
                if use_features:
                    f = torch.tensor(
                        [src_index[sources[i]].features(a, docs[hypotheses[i]], self.feature_names) for i, a in part], device=self.device
                    )
                probs_flat += torch.sigmoid(self.head(h, c, r, f).float()).tolist()
        out, pos = [], 0
        for i, arcs in enumerate(all_arcs):
            out.append(_result(arcs, probs_flat[pos : pos + len(arcs)], threshold, truncated[i]))
            pos += len(arcs)
        return out
