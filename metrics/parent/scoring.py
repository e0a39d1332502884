"""PARENT (Dhingra et al., ACL 2019) on tokenized inputs, fast and exact.

The numbers are those of the reference implementation (google-research/language,
``language/table_text_eval/table_text_eval.py``, function ``parent``) to
floating-point rounding (≤ 1e-9 in practice, tested on 15,460 golden examples);
only the arithmetic is arranged differently:

* every token is mapped to an integer id once per call, and an n-gram of order
  *n* becomes one integer ``((id1·B + id2)·B + ...)`` with ``B`` = vocabulary
  size + 1, so n-grams of all orders live in one hash set and hash for free;
* n-gram counts, entailment weights ``w(g)`` and the LCS mention
  probabilities are computed once per (text, table), not once per
  (prediction, reference) pair: a reference shared by 21 E2E systems is
  analysed once;
* for a (prediction, reference) pair only the shared n-grams matter, because
  the precision numerator ``Σ c·(p + (1−p)·w)`` with ``c·p = min(c, c_ref)``
  equals ``Σ c·w + Σ_shared min(c, c_ref)·(1 − w)``, and the recall numerator
  is ``Σ_shared min(c, c_ref)·w``. Repeats of an n-gram get distinct "copy"
  keys, so ``|copies(pred) ∩ copies(ref)| = Σ min(c, c_ref)``, and for word
  overlap the weight numerator ``a`` (table tokens in the n-gram, ``w = a/n``)
  rides in the key's low bits: a pair costs one set intersection and one
  C-level sum per order, with integer arithmetic until the final division;
* LCS lengths use the bit-parallel algorithm of Allison & Dix / Crochemore et
  al. (one big-integer step per table token) instead of an O(nm) table.

Formula (as the reference computes it, per reference r):

* entailed precision ``E_p^n`` and recall ``E_r^n`` for n = 1..max_order; a
  prediction with no n-gram of order n has ``E_p^n = 0``, a reference whose
  order-n n-grams all have ``w = 0`` has ``E_r^n = 1``;
* zeros of orders 2..max_order are replaced by ``smoothing``; then
  ``E_p`` = geometric mean (0 if ``E_p^1 = 0``), ``E_r(R)`` = geometric mean
  (``smoothing`` if ``E_r^1 = 0``);
* table recall ``E_r(T)`` = mean over table entries of LCS(value, prediction) /
  |value| (``smoothing`` if 0);
* ``E_r = E_r(R)^(1−λ) · E_r(T)^λ`` with λ given, or per reference
  ``λ = 1 − mean LCS(value, reference) / |value|``;
* ``F = 2·E_p·E_r / (E_p + E_r + 1e-8)``; with several references the one with
  the highest F gives P, R and F (the first one on ties).

Departures from the reference, all in cases where it crashes: table entries
whose value has no tokens are left out of table recall and of λ (the reference
divides by zero); a table with no value token at all is refused.
"""

from __future__ import annotations

import gc
import math
import os
from collections import Counter, defaultdict
from itertools import compress, count, repeat
from operator import add, mul
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

OVERLAP = "overlap"
COOCCURRENCE = "cooccurrence"
ENTAILMENT_MODELS = (OVERLAP, COOCCURRENCE)

DEFAULT_SMOOTHING = 0.00001
DEFAULT_MAX_ORDER = 4
# Added to P + R in the F-score denominator, as in the reference.
F_EPSILON = 1e-8
# Separator of the co-occurrence count keys "table_token|||text_token".
PAIR_SEPARATOR = "|||"
# Smaller inputs finish before a progress bar would tell anything.
PROGRESS_MIN_EXAMPLES = 1000


# ---------------------------------------------------------------------------
# Small exact pieces, usable on their own


def lcs_length(x: Sequence, y: Sequence) -> int:
    """Length of the longest common subsequence of two sequences (bit-parallel)."""
    if len(x) > len(y):
        x, y = y, x
    return _lcs_with_masks(x, _position_masks(y), len(y))


def _position_masks(text: Sequence) -> Dict[Any, int]:
    masks: Dict[Any, int] = {}
    bit = 1
    for token in text:
        masks[token] = masks.get(token, 0) | bit
        bit <<= 1
    return masks


def _lcs_with_masks(value: Sequence, masks: Dict[Any, int], m: int) -> int:
    # Crochemore, Iliopoulos, Pinzon & Reid (2001): V starts all ones; for each
    # symbol with match mask M, U = V & M, V = (V + U) | (V - U); the LCS length
    # is the number of zero bits among the low m bits of V.
    full = (1 << m) - 1
    v = full
    for token in value:
        match = masks.get(token)
        if match:
            u = v & match
            v = ((v + u) | (v - u)) & full
    return m - bin(v).count("1")


def overlap_probability(ngram: Sequence[str], table: Sequence) -> float:
    """Word-overlap entailment of an n-gram by a token table (fraction of its tokens among the values)."""
    values = {tok for entry in table for tok in _entry_value(entry)}
    return float(sum(1 for tok in ngram if tok in values)) / float(len(ngram))


def mention_probability(entry: Sequence, text: Sequence[str]) -> float:
    """LCS(value, text) / |value| for one table entry (0 for an entry with no value tokens)."""
    value = _entry_value(entry)
    return lcs_length(value, text) / len(value) if value else 0.0


def _entry_value(entry: Sequence) -> Sequence[str]:
    return list(entry[1]) if len(entry) == 2 else list(entry[0]) + list(entry[2])


def cooccurrence_table_tokens(table: Sequence) -> set:
    """Lexical items of a token table for the co-occurrence model: one token per attribute, plus the values."""
    items = set()
    for entry in table:
        if len(entry) == 2:
            items.add("_".join(entry[0]))
            items.update(entry[1])
        else:
            items.update(entry[0])
            items.add("_".join(entry[1]))
            items.update(entry[2])
    return items


def cooccurrence_token_probability(token: str, table_items: set, counts: Dict[str, float]) -> float:
    """Pr(token ⇐ table) = max over table items v of count(v|||token) / count(v); 1 if the token is in the table."""
    if token in table_items:
        return 1.0
    best = 0.0
    for item in table_items:
        total = counts.get(item)
        if total is None:
            continue
        p = float(counts.get(item + PAIR_SEPARATOR + token, 0.0)) / total
        if p > best:
            best = p
    return best


# ---------------------------------------------------------------------------
# The scorer


class _TableInfo:
    """What the scorer needs of one table, in token ids."""

    __slots__ = ("values", "value_set", "items", "probs")

    def __init__(self, values, value_set, items):
        self.values = values  # one id tuple per entry with a non-empty value
        self.value_set = value_set  # ids of all value tokens (word-overlap model)
        self.items = items  # co-occurrence lexical items (strings)
        self.probs: Dict[int, float] = {}  # co-occurrence Pr(token ⇐ table), memoized


class _Prepared:
    """Inputs mapped to token ids, ready to score (and to ship to worker processes)."""

    def __init__(self, predictions, references, tables, *, lambda_weight, smoothing, max_order, entailment, counts, keep_tokens):
        vocab: Dict[str, int] = defaultdict(count(1).__next__)
        lookup = vocab.__getitem__
        table_ids: Dict[Any, int] = {}
        self.tables: List[_TableInfo] = []
        self.examples: List[Tuple[Tuple[int, ...], List[Tuple[int, ...]], int]] = []
        for pred, refs, table in zip(predictions, references, tables):
            key = _freeze(table)
            t = table_ids.get(key)
            if t is None:
                t = table_ids[key] = len(self.tables)
                values = []
                for entry in key:
                    value = tuple(map(lookup, entry[1]))
                    if value:
                        values.append(value)
                items = cooccurrence_table_tokens(key) if entailment == COOCCURRENCE else None
                self.tables.append(_TableInfo(tuple(values), frozenset(v for value in values for v in value), items))
            self.examples.append((tuple(map(lookup, pred)), [tuple(map(lookup, r)) for r in refs], t))
        self.base = len(vocab) + 1
        # Word overlap keys carry the weight a (0..n) in their low bits.
        self.weight_base = 1 << max_order.bit_length()
        self.weight_mask = self.weight_base - 1
        # Above every n-gram key: numbers the repeats of an n-gram (see _Worker._copies).
        self.copy_base = self.base ** max_order * self.weight_base
        self.tokens = list(vocab) if (keep_tokens or entailment == COOCCURRENCE) else None
        self.lambda_weight = lambda_weight
        self.smoothing = smoothing
        self.max_order = max_order
        self.entailment = entailment
        self.counts = counts


def _freeze(table) -> Tuple:
    """A hashable ``((attribute, value), ...)`` table; ``(head, relation, tail)`` becomes ``(relation, head + tail)``."""
    out = []
    for entry in table:
        if len(entry) == 3:
            out.append((tuple(entry[1]), tuple(entry[0]) + tuple(entry[2])))
        else:
            out.append((tuple(entry[0]), tuple(entry[1])))
    return tuple(out)


class _TextInfo:
    """N-gram statistics of one text under one table.

    Entailment weights are kept *scaled*: for word overlap ``w = a / n`` with
    ``a`` the integer number of table tokens in the n-gram, and the scorer
    works with ``a`` and scale ``n`` so that sums stay exact integers; for the
    co-occurrence model ``a = w`` and the scale is 1.
    """

    __slots__ = ("orders", "keys", "denom", "mention")

    def __init__(self):
        # Prediction side, per order: (set of n-gram copy keys, copy key -> a,
        # scale, Σ count·a, Σ count). See _Worker._copies.
        self.orders = None
        # Reference side: copy keys of all orders (orders never collide), and
        # per order the recall denominator Σ count·a.
        self.keys = None
        self.denom = None
        # Both: mean LCS mention probability of the table entries in this text.
        self.mention = 0.0


def _cached(cache: Dict[Tuple[Tuple[int, ...], int], _TextInfo], build: Callable[[Tuple[int, ...], int], _TextInfo],
            ids: Tuple[int, ...], t: int) -> _TextInfo:
    """``cache[(ids, t)]``, built by ``build(ids, t)`` the first time."""
    key = (ids, t)
    info = cache.get(key)
    if info is None:
        info = cache[key] = build(ids, t)
    return info


class _Worker:
    """Scores examples of a :class:`_Prepared`, caching per (text, table) statistics."""

    def __init__(self, prep: _Prepared):
        self.prep = prep
        self.overlap = prep.entailment == OVERLAP
        self.pred_cache: Dict[Tuple[Tuple[int, ...], int], _TextInfo] = {}
        self.ref_cache: Dict[Tuple[Tuple[int, ...], int], _TextInfo] = {}
        self.example_cache: Dict[Any, tuple] = {}

    # -- per text -----------------------------------------------------------

    def _token_weights(self, ids: Tuple[int, ...], t: int) -> list:
        table = self.prep.tables[t]
        if self.overlap:
            values = table.value_set
            return [1 if i in values else 0 for i in ids]
        probs = table.probs
        out = []
        for i in ids:
            p = probs.get(i)
            if p is None:
                p = probs[i] = cooccurrence_token_probability(self.prep.tokens[i - 1], table.items, self.prep.counts)
            out.append(p)
        return out

    def _ngrams(self, ids: Tuple[int, ...], t: int):
        """Per order: (n-gram keys by position, scaled weights ``a`` by position, scale)."""
        tok_w = self._token_weights(ids, t)
        keys = list(ids)
        acc = tok_w
        out = [(keys, acc, 1)]
        combine = add if self.overlap else mul
        scaled = repeat(self.prep.base)
        for n in range(2, self.prep.max_order + 1):
            keys = list(map(add, map(mul, keys, scaled), ids[n - 1:]))
            # Running count of table tokens, or running product of token
            # probabilities multiplied in token order, as the reference does.
            acc = list(map(combine, acc, tok_w[n - 1:]))
            out.append((keys, acc, n))
        if self.overlap:
            # The weight rides in the low bits of the key: a shared key tells
            # its weight without a lookup (a <= n < weight_base).
            wb = repeat(self.prep.weight_base)
            return [(list(map(add, map(mul, k, wb), a)), a, n) for k, a, n in out]
        # Co-occurrence: w = product ** (1 / n), used unscaled.
        return [(k, [math.pow(x, 1.0 / n) for x in a], 1) for (k, a, _), n in zip(out, count(1))]

    def _mention(self, ids: Tuple[int, ...], t: int) -> float:
        """Mean over table entries of LCS(value, text) / |value|."""
        table = self.prep.tables[t]
        values = table.value_set
        # Position masks of the text tokens that occur in some value; others
        # cannot be part of a common subsequence.
        masks: Dict[int, int] = {}
        for pos in compress(range(len(ids)), map(values.__contains__, ids)):
            tok = ids[pos]
            masks[tok] = masks.get(tok, 0) | (1 << pos)
        m = len(ids)
        total = 0.0
        for value in table.values:
            if len(value) == 1:
                total += 1.0 if value[0] in masks else 0.0
            else:
                total += _lcs_with_masks(value, masks, m) / len(value)
        return total / len(table.values)

    def _copies(self, keys: list, a_of: Dict[int, Any]) -> set:
        """The set of keys with repeats made distinct: the j-th repeat of g is g + j·copy_base.

        With repeats numbered on both sides, |copies(pred) ∩ copies(ref)| is
        Σ_g min(count_pred(g), count_ref(g)), so clipped counts become one set
        intersection. ``a_of`` (key -> weight) gets the new keys too.
        """
        step = self.prep.copy_base
        out = set(keys)
        for g, c in Counter(keys).items():
            if c > 1:
                for j in range(1, c):
                    out.add(g + j * step)
                    if a_of is not None:
                        a_of[g + j * step] = a_of[g]
        return out

    def prediction(self, ids: Tuple[int, ...], t: int) -> _TextInfo:
        """A prediction's n-grams against table ``t``, computed once per (text, table)."""
        return _cached(self.pred_cache, self._prediction_info, ids, t)

    def reference(self, ids: Tuple[int, ...], t: int) -> _TextInfo:
        """A reference's n-grams against table ``t``, computed once per (text, table)."""
        return _cached(self.ref_cache, self._reference_info, ids, t)

    def _prediction_info(self, ids: Tuple[int, ...], t: int) -> _TextInfo:
        info = _TextInfo()
        orders = []
        for keys, acc, scale in self._ngrams(ids, t):
            a_of = None if self.overlap else dict(zip(keys, acc))
            copies = set(keys)
            if len(copies) != len(keys):
                copies = self._copies(keys, a_of)
            weight_of = self.prep.weight_mask.__and__ if self.overlap else a_of.__getitem__
            # Σ over positions of a = Σ over distinct n-grams of count·a.
            orders.append((copies, weight_of, scale, sum(acc), len(keys)))
        info.orders = orders
        info.mention = self._mention(ids, t)
        return info

    def _reference_info(self, ids: Tuple[int, ...], t: int) -> _TextInfo:
        info = _TextInfo()
        every = set()
        denom = []
        for keys, acc, _ in self._ngrams(ids, t):
            n_before = len(every)
            every.update(keys)
            if len(every) - n_before != len(keys):
                every |= self._copies(keys, None)
            denom.append(sum(acc))
        info.keys = every
        info.denom = denom
        info.mention = self._mention(ids, t) if self.prep.lambda_weight is None else 0.0
        return info

    # -- per pair and per example --------------------------------------------

    def pair(self, p: _TextInfo, r: _TextInfo):
        """(precision, recall, f, λ, reference recall, table recall) of one prediction-reference pair.

        Per order, with m_g = min(count in prediction, count in reference) over
        shared n-grams g and weights scaled by s (see :class:`_TextInfo`):
        precision = (Σ count·a + Σ m_g·(s − a_g)) / (s·Σ count) and
        recall = Σ m_g·a_g / Σ_ref count·a.
        """
        prep = self.prep
        smoothing = prep.smoothing
        rkeys = r.keys
        precs, recs = [], []
        for oi, (copies, a_of, scale, base, total) in enumerate(p.orders):
            shared = copies.intersection(rkeys)
            m = len(shared)
            sa = sum(map(a_of, shared)) if m else 0
            prec = (base + m * scale - sa) / (scale * total) if total else 0.0
            d = r.denom[oi]
            rec = sa / d if d != 0 else 1.0
            if oi:
                if prec == 0.0:
                    prec = smoothing
                if rec == 0.0:
                    rec = smoothing
            precs.append(prec)
            recs.append(rec)
        w = 1.0 / prep.max_order
        if 0.0 in precs:
            c_prec = 0.0
        else:
            c_prec = math.exp(math.fsum([w * math.log(x) for x in precs]))
        if 0.0 in recs:
            ref_rec = smoothing
        else:
            ref_rec = math.exp(math.fsum([w * math.log(x) for x in recs]))
        table_rec = p.mention
        if table_rec == 0.0:
            table_rec = smoothing
        lam = prep.lambda_weight if prep.lambda_weight is not None else 1.0 - r.mention
        if ref_rec == 0.0 or table_rec == 0.0:
            c_rec = 0.0
        else:
            c_rec = math.exp((1.0 - lam) * math.log(ref_rec) + lam * math.log(table_rec))
        f = (2.0 * c_prec * c_rec) / (c_prec + c_rec + F_EPSILON)
        return c_prec, c_rec, f, lam, ref_rec, table_rec

    def example(self, i: int) -> tuple:
        """(precision, recall, f, λ, reference index, reference recall, table recall) of example i."""
        pred, refs, t = self.prep.examples[i]
        memo_key = (pred, tuple(refs), t)
        hit = self.example_cache.get(memo_key)
        if hit is not None:
            return hit
        p = self.prediction(pred, t)
        best = None
        seen = set()
        for j, ref in enumerate(refs):
            if ref in seen:  # an identical earlier reference gives the same numbers
                continue
            seen.add(ref)
            scores = self.pair(p, self.reference(ref, t))
            if best is None or scores[2] > best[2]:
                best = scores + (j,)
        c_prec, c_rec, f, lam, ref_rec, table_rec, j = best
        out = (c_prec, c_rec, f, lam, j, ref_rec, table_rec)
        self.example_cache[memo_key] = out
        return out


# ---------------------------------------------------------------------------
# Explanations (which n-grams the table entails, which the reference matches)


def _explain(prep: _Prepared, worker: _Worker, i: int, j: int) -> Dict[str, List[Dict[str, Any]]]:
    pred, refs, t = prep.examples[i]
    ref = refs[j]
    tokens = prep.tokens

    def rows(ids, other_ids, other_name):
        other = Counter()
        for keys, _, _ in worker._ngrams(other_ids, t):
            other.update(keys)
        out = []
        for oi, (keys, acc, scale) in enumerate(worker._ngrams(ids, t)):
            n = oi + 1
            counts = Counter(keys)
            first: Dict[int, int] = {}
            for pos, g in enumerate(keys):
                first.setdefault(g, pos)
            for g, c in counts.items():
                pos = first[g]
                out.append({
                    "ngram": " ".join(tokens[x - 1] for x in ids[pos:pos + n]),
                    "order": n,
                    "count": c,
                    "table_entailment": acc[pos] / scale,
                    other_name: other.get(g, 0),
                })
        return out

    return {
        "prediction_ngrams": rows(pred, ref, "reference_count"),
        "reference_ngrams": rows(ref, pred, "prediction_count"),
    }


# ---------------------------------------------------------------------------
# Parallel runs

# Inputs and options of the current parallel call, set in the parent before
# forking so that workers read them from memory instead of a pickle.
_SHARED: Optional[tuple] = None


def _score_all(prep: _Prepared, show_progress: bool = False) -> List[tuple]:
    worker = _Worker(prep)
    indices = range(len(prep.examples))
    if show_progress and len(indices) >= PROGRESS_MIN_EXAMPLES:
        from d2t_metrics.hub import progress

        indices = progress(indices, total=len(indices), desc="PARENT")
    return [worker.example(i) for i in indices]


def _score_chunk(indices: List[int], shared: Optional[tuple] = None) -> List[tuple]:
    """Worker: prepare and score its own examples (own vocabulary and caches)."""
    predictions, references, tables, options = shared if shared is not None else _SHARED
    gc.disable()  # forked workers inherit this; spawned ones need it set
    prep = _Prepared(
        [predictions[i] for i in indices], [references[i] for i in indices], [tables[i] for i in indices], **options
    )
    return _score_all(prep)


def _balanced_chunks(references: Sequence, n_jobs: int) -> List[List[int]]:
    """Split examples among workers, keeping examples whose first reference is the same together.

    Examples of one table usually share their references (21 E2E systems per
    MR), and a worker analyses each reference once, so such groups stay whole.
    """
    groups: Dict[int, List[int]] = {}
    for i, refs in enumerate(references):
        groups.setdefault(hash(tuple(refs[0])), []).append(i)
    cost = {key: sum(len(references[i]) + 1 for i in idx) for key, idx in groups.items()}
    chunks: List[List[int]] = [[] for _ in range(n_jobs)]
    loads = [0] * n_jobs
    for key in sorted(groups, key=lambda key: (-cost[key], groups[key][0])):
        k = loads.index(min(loads))
        chunks[k].extend(groups[key])
        loads[k] += cost[key]
    return [sorted(c) for c in chunks if c]


def _run_parallel(predictions, references, tables, options: Dict[str, Any], n_jobs: int) -> List[tuple]:
    import multiprocessing

    chunks = _balanced_chunks(references, n_jobs)
    global _SHARED
    if "fork" in multiprocessing.get_all_start_methods():
        # Freezing the collector's view of the parent's objects keeps the
        # workers from touching (and so copying) every inherited page.
        _SHARED = (predictions, references, tables, options)
        gc.freeze()
        try:
            with multiprocessing.get_context("fork").Pool(len(chunks)) as pool:
                parts = pool.map(_score_chunk, chunks, chunksize=1)
        finally:
            gc.unfreeze()
            _SHARED = None
    else:  # pragma: no cover - spawn-only platforms
        payloads = [
            (c, ([predictions[i] for i in c], [references[i] for i in c], [tables[i] for i in c], options)) for c in chunks
        ]
        with multiprocessing.get_context().Pool(len(chunks)) as pool:
            parts = pool.starmap(_score_chunk, [(list(range(len(c))), data) for c, data in payloads], chunksize=1)
    out: List[Optional[tuple]] = [None] * len(predictions)
    for chunk, part in zip(chunks, parts):
        for i, scores in zip(chunk, part):
            out[i] = scores
    return out


# ---------------------------------------------------------------------------
# Public entry point


def check_options(lambda_weight, smoothing, max_order, entailment, counts, n_jobs) -> None:
    if lambda_weight is not None:
        if isinstance(lambda_weight, bool) or not isinstance(lambda_weight, (int, float)) or not 0.0 <= lambda_weight <= 1.0:
            raise ValueError(f"lambda_weight must be None or a number in [0, 1], got {lambda_weight!r}")
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or smoothing < 0:
        raise ValueError(f"smoothing must be a number >= 0, got {smoothing!r}")
    if isinstance(max_order, bool) or not isinstance(max_order, int) or max_order < 1:
        raise ValueError(f"max_order must be an integer >= 1, got {max_order!r}")
    if entailment not in ENTAILMENT_MODELS:
        raise ValueError(f"entailment must be one of {list(ENTAILMENT_MODELS)}, got {entailment!r}")
    if entailment == COOCCURRENCE and not isinstance(counts, dict):
        raise ValueError("entailment='cooccurrence' needs co-occurrence counts (a dict, or cooccurrence_counts='counts.json')")
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1):
        raise ValueError(f"n_jobs must be a positive integer or -1 (all cores), got {n_jobs!r}")


def parent_tokenized(
    predictions: Sequence[Sequence[str]],
    references: Sequence[Sequence[Sequence[str]]],
    tables: Sequence[Sequence[Tuple[Sequence[str], Sequence[str]]]],
    *,
    lambda_weight: Optional[float] = None,
    smoothing: float = DEFAULT_SMOOTHING,
    max_order: int = DEFAULT_MAX_ORDER,
    entailment: str = OVERLAP,
    counts: Optional[Dict[str, float]] = None,
    n_jobs: Optional[int] = 1,
    return_ngrams: bool = False,
    show_progress: bool = False,
) -> List[Dict[str, Any]]:
    """PARENT of tokenized inputs, one dict per example.

    Args:
        predictions: one token list per example.
        references: per example, a non-empty list of token lists.
        tables: per example, a list of ``(attribute_tokens, value_tokens)``
            entries (see ``table_tokens.py`` for how tables become this form).
        lambda_weight: weight of table recall; ``None`` sets it per example and
            reference to 1 − (mean mention probability of the entries in the reference).
        smoothing: value that replaces zero precisions/recalls (see module docstring).
        max_order: longest n-gram order.
        entailment: ``"overlap"`` (PARENT-W) or ``"cooccurrence"`` (PARENT-C, needs ``counts``).
        counts: co-occurrence counts: ``{token: n, "table_token|||text_token": n}``.
        n_jobs: worker processes (``-1``: all cores); results do not depend on it.
        return_ngrams: add ``prediction_ngrams`` and ``reference_ngrams`` (for the best reference).

    Returns:
        A list of dicts with ``precision``, ``recall``, ``f1``, ``score`` (= f1),
        ``lambda``, ``reference_index`` (the reference that gave the best F),
        ``reference_recall`` and ``table_recall``.
    """
    check_options(lambda_weight, smoothing, max_order, entailment, counts, n_jobs)
    n = len(predictions)
    if len(references) != n or len(tables) != n:
        raise ValueError(f"got {n} predictions, {len(references)} references and {len(tables)} tables; pass one of each per example")
    for i, refs in enumerate(references):
        if not refs:
            raise ValueError(f"example {i}: no reference given")
    for i, table in enumerate(tables):
        if not table or not any(len(_entry_value(entry)) for entry in table):
            raise ValueError(f"example {i}: empty table (or no entry has a value token)")
    if n_jobs == -1:
        n_jobs = os.cpu_count() or 1
    # The scorer builds millions of small containers but no reference cycles;
    # pausing the cyclic collector saves its repeated sweeps of the caller's
    # (often large) heap, about a quarter of the run time.
    options = dict(
        lambda_weight=None if lambda_weight is None else float(lambda_weight),
        smoothing=float(smoothing), max_order=max_order, entailment=entailment, counts=counts,
        keep_tokens=return_ngrams,
    )
    n_jobs = min(n_jobs or 1, n)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        prep = None
        if n_jobs > 1:
            scores = _run_parallel(predictions, references, tables, options, n_jobs)
        else:
            prep = _Prepared(predictions, references, tables, **options)
            scores = _score_all(prep, show_progress)
        if return_ngrams and prep is None:
            prep = _Prepared(predictions, references, tables, **options)
    finally:
        if gc_was_enabled:
            gc.enable()
    results = []
    worker = _Worker(prep) if return_ngrams else None
    for i, (c_prec, c_rec, f, lam, j, ref_rec, table_rec) in enumerate(scores):
        row = {
            "precision": c_prec,
            "recall": c_rec,
            "f1": f,
            "score": f,
            "lambda": lam,
            "reference_index": j,
            "reference_recall": ref_rec,
            "table_recall": table_rec,
        }
        if return_ngrams:
            row.update(_explain(prep, worker, i, j))
        results.append(row)
    return results


def corpus_scores(examples: Sequence[Dict[str, Any]]) -> Dict[str, float]:
    """Means of precision, recall and f1 over examples (the system-level PARENT)."""
    n = len(examples)
    if not n:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    return {
        "precision": sum(e["precision"] for e in examples) / n,
        "recall": sum(e["recall"] for e in examples) / n,
        "f1": sum(e["f1"] for e in examples) / n,
    }
