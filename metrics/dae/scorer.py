"""Scorers: the neural DAE model and the paper's rule-based arc-overlap baseline.

Both load their spaCy pipeline (and model) once, parse with ``nlp.pipe`` in
batches, and return one dict per example::

    {"score": mean P(entailed) over arcs, "min": lowest arc probability,
     "ok": no arc below the threshold, "not_entailed": count of arcs below it,
     "num_arcs": ..., "arcs": [{"head", "relation", "child", "head_index",
     "child_index", "probability"}], "truncated": source was windowed}

A hypothesis without arcs (empty, one word) scores 1.0: DAE judges what is
said, and nothing was said that the source could contradict.

**Windowing.** The encoder reads ``[CLS] source [SEP] hypothesis [SEP]`` in
``max_length`` sub-tokens (128, as trained). The hypothesis is cut into
segments (consecutive sentences packed together; a sentence longer than the
segment budget into word chunks); each segment is paired with its own
window of the source: the whole source when it fits, else the source
sentences sharing the most content words with the segment, kept in source
order, else the best-matching span of the best sentence
(``arcs.select_window``). An arc takes its head and child vectors from the
segment each word sits in. Nothing is ever cut from the hypothesis, and no
input crashes on length.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .arcs import LEXICAL_FEATURES, Arc, SourceIndex, arc_keys, doc_arcs, load_spacy, rule_score, select_window
from .model import DEFAULT_MAX_LENGTH, encode_pairs, load_dae_checkpoint

THRESHOLD = 0.5


def parse_unique(nlp, texts: Sequence[str], batch_size: int = 64) -> Dict[str, Any]:
    """spaCy docs for the distinct texts (sources repeat across predictions)."""
    unique = list(dict.fromkeys(texts))
    disable = [p for p in ("ner",) if p in getattr(nlp, "pipe_names", [])]
    return dict(zip(unique, nlp.pipe(unique, batch_size=batch_size, disable=disable)))


def _result(arcs: Sequence[Arc], probs: Sequence[float], threshold: float, truncated: bool = False) -> Dict[str, Any]:
    probs = [float(p) for p in probs]
    bad = sum(p < threshold for p in probs)
    return {
        "score": sum(probs) / len(probs) if probs else 1.0,
        "min": min(probs) if probs else 1.0,
        "ok": bad == 0,
        "not_entailed": bad,
        "num_arcs": len(arcs),
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
        docs = parse_unique(self.nlp, list(sources) + list(hypotheses))
        src_keys = {s: arc_keys(doc_arcs(docs[s])) for s in set(sources)}
        out = []
        for src, hyp in zip(sources, hypotheses):
            arcs = doc_arcs(docs[hyp])
            _, per_arc = rule_score(arcs, src_keys[src])
            out.append(_result(arcs, per_arc, threshold))
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
        limit = getattr(self.encoder.config, "max_position_embeddings", 512) - 2
        self.max_length = min(int(max_length or self.meta.get("max_length") or DEFAULT_MAX_LENGTH), limit)
        self.nlp = load_spacy(spacy_model)
        self._piece_counts: Dict[str, int] = {}
        num_features = int(getattr(self.head, "num_features", 0))
        # a checkpoint names its features in its metadata; one that does not has the five lexical ones
        self.feature_names = list(self.meta.get("arc_features") or (LEXICAL_FEATURES if num_features else ()))
        if len(self.feature_names) != num_features:
            raise ValueError(f"{model_path}: the arc head takes {num_features} features but the metadata names {len(self.feature_names)}")

    # ---- segmentation -------------------------------------------------
    def _pieces(self, word: str) -> int:
        n = self._piece_counts.get(word)
        if n is None:
            n = len(self.tokenizer.tokenize(word)) if word.strip() else 0
            self._piece_counts[word] = n
        return n

    def _source_sentences(self, doc) -> Tuple[List[List[str]], List[List[int]]]:
        sents = [s.text.split() for s in doc.sents]
        sents = [s for s in sents if s]
        return sents, [[self._pieces(w) for w in s] for s in sents]

    def segments(self, hyp_doc, src_sents, src_lens) -> List[Tuple[int, List[str], List[str], bool]]:
        """``(word offset, hypothesis words, source words, truncated)`` per segment."""
        room = self.max_length - 3
        src_total = sum(sum(ls) for ls in src_lens)
        hyp_budget = max(room // 2, room - src_total)
        words = [t.text for t in hyp_doc]
        lens = [self._pieces(w) for w in words]
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
            budget = max(room - sum(lens[a:b]), 1)
            src_words, truncated = select_window(src_sents, src_lens, seg_words, budget) if src_sents else ([], False)
            out.append((a, seg_words, src_words, truncated))
        return out

    # ---- scoring ------------------------------------------------------
    def score(self, sources: Sequence[str], hypotheses: Sequence[str], batch_size: int = 32, show_progress: bool = False,
              threshold: float = THRESHOLD) -> List[Dict[str, Any]]:
        import torch

        from d2t_metrics.models import length_sorted_batches, progress

        docs = parse_unique(self.nlp, list(sources) + list(hypotheses))
        src_cache = {s: self._source_sentences(docs[s]) for s in set(sources)}
        use_features = bool(self.feature_names)
        src_index = {s: SourceIndex(docs[s]) for s in set(sources)} if use_features else {}
        all_arcs: List[List[Arc]] = []
        segs = []  # (example, offset, hyp words, src words)
        truncated = [False] * len(hypotheses)
        for i, (src, hyp) in enumerate(zip(sources, hypotheses)):
            arcs = doc_arcs(docs[hyp])
            all_arcs.append(arcs)
            if not arcs:
                continue
            for off, hw, sw, cut in self.segments(docs[hyp], *src_cache[src]):
                segs.append((i, off, hw, sw))
                truncated[i] = truncated[i] or cut
        needed = {(i, w) for i, arcs in enumerate(all_arcs) for a in arcs for w in (a.head_i, a.child_i)}
        vec_index: Dict[Tuple[int, int], int] = {}
        vectors = []
        batches = length_sorted_batches([len(hw) + len(sw) for _, _, hw, sw in segs], batch_size)
        with torch.inference_mode():
            for batch in progress(batches, total=len(batches), desc="DAE", enabled=show_progress):
                enc, positions = encode_pairs(self.tokenizer, [segs[k][3] for k in batch], [segs[k][2] for k in batch], self.max_length)
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
