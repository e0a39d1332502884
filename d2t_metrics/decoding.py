"""Greedy decoding and beam search for many prompts that begin alike, on a
CPU's budget and at a GPU's scale.

The prompts d2t-metrics generates from repeat themselves: the questions
Data-QuestEval asks about one text share the text, and the outputs of the
systems scored on one input often share their first words. Here prompts
are grouped by their common beginning (:func:`prefix_groups`); each group's
beginning runs through the model once, and its keys and values are copied
to every member; members then run in batches sorted by the length of what
is left of them, and a row leaves the batch as soon as it stops (greedy) or
its prompt's beams can no longer change (beam search), so one runaway
continuation no longer keeps a whole batch decoding.

While a batch decodes, its keys and values live in a cache with room for
new tokens (:class:`RoomyLayer`, growing as rows go on): a step writes its position in place
where transformers' ``DynamicCache`` concatenates (a copy of the whole cache
per step), and beam search copies, for the beams that take another beam's
place, only the positions generated since the prompt (its ``reorder_cache``
copies every row, prompt included, every step). The numbers the model reads
are the same, so are the continuations; on the table questions of the 20
bundled examples this took a fifth off the work (:data:`CACHE_WORK` counts
the copies; ``benchmarks/generation_speed.py`` measures).

The continuations are those of transformers' ``generate`` with greedy
search or with beam search at its defaults (``length_penalty=1.0``,
``early_stopping=False``; tests compare the two on the same prompts). Beam
search here also runs a prompt once before its beams part, where
``generate`` runs it once per beam. On the questions asked about the first
60 WebNLG outputs greedy decoding computes a quarter of the prompt tokens
and takes half the time of ``generate`` on length-sorted batches (2-core
CPU). transformers' continuous batching also shares prefixes, but its paged
attention ran 2x slower than plain ``generate`` there.

On a CPU, a chunk's batches decode side by side, :data:`CPU_DECODE_WORKERS`
at a time on their share of torch's threads (:func:`decode_workers`): one
step's matrix products are too small to keep two threads busy, two batches
are. Each batch is the one decoded alone; a chunk of fewer batches than
workers is cut into as many, which changes a row's batch, and so its float32
sums only as batching always may (the outputs of the bundled lines, the
hostile inputs and WebNLG samples stayed byte-identical: RESULTS.md
`quiet_checks`). On an x86-64 CPU the models
:func:`d2t_metrics.generator.load_generator` loads run their linear layers
by oneDNN on weights packed once (:mod:`d2t_metrics.cpu_linear`), and each
chunk gives its freed memory back to the system when it ends.

A GPU decodes one batch at a time, without cuDNN's attention
(:data:`CUDA_SDPA_BACKENDS`), its batches' caches bounded by its free memory
(:func:`token_bounds`), and greedy decoding there drafts tokens from the
prompt (:class:`PromptLookup`) and keeps those the model agrees with: a
GPU's step costs about the same for several tokens a row as for one. On
fact_accuracy's extraction of 64 WebNLG outputs this took 97 forward calls
instead of 244, outputs byte-identical (counted on a CPU in float32; a CPU's
step grows with its tokens, so there drafting cost 1.6x the time and is off).

Only decoders whose forward takes ``position_ids``, a 2-D ``attention_mask``
with holes and a :class:`transformers.DynamicCache` are run this way
(:data:`PREFIX_SHARING_MODELS`); :func:`d2t_metrics.generator.generate`
uses transformers' ``generate`` for the others.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from .cpu_linear import give_back_free_memory
from .hub import progress

PREFIX_SHARING_MODELS = ("llama",)
MAX_GROUP = 64  # the grouping looks this many sorted prompts back: linear time
CHUNK_TOKENS_PER_ROW = 512
# Bounds on what is held at once, so that long prompts cannot take memory without limit
# (issue #38: 32 digit-heavy prompts of 384 tokens in beam search with 3 beams took 2.8 GB over
# the loaded models; the command line peaked at 4.5 GB). A decoding batch holds at most
# DECODE_BATCH_TOKENS (row, position) pairs of key/value cache: its rows (a prompt's beams are
# rows each) times their prompt and new tokens (46 KB a pair for SmolLM2-135M in float32); a
# prefix pass reads at most PREFILL_BATCH_TOKENS tokens, padding included; a chunk keeps the
# prefixes of at most CHUNK_TOKENS tokens while it decodes. A prompt longer than a bound is a
# batch of its own. They bound beam search (:func:`beam_continuations`: a prompt's cache is held
# once per beam); greedy decoding keeps its batches of batch_size prompts on a CPU (fact_accuracy's
# extractor stays at 1.5 GB on that text, and smaller batches cost it 1.4x), and keeps to the
# bounds on CUDA (:func:`greedy_row_cost`). Measured on a quiet
# 2-core CPU (RESULTS.md `quiet_checks`): the 100,000-character text peaks at 2.35-2.43 GB
# (2.65-3.07 GB with a decoding bound of 8,192), and data_questeval on the bundled example lines
# gives identical results at 1.08-1.17x the CPU time.
DECODE_BATCH_TOKENS = 4096
PREFILL_BATCH_TOKENS = 2048
CHUNK_TOKENS = 8192
# On a GPU those CPU bounds cut beam search into batches of a few prompts, and a step costs about the
# same for 32 rows as for 256 (38 and 41 ms on an H200: RESULTS.md `gpu_checks`), so there the bounds
# come from the device's free memory instead (:func:`token_bounds`): a decoding batch's cache and a
# chunk's prefixes may each take this share of it, never less than the CPU's bounds.
GPU_MEMORY_SHARE = 0.2
# On a CPU, a decoding step's matrix products are small (tens of rows by 576) and scale poorly
# over threads: two batches decoded side by side, one thread each, did the same work in 0.70x
# the CPU time and 0.75x the wall time of one batch at a time on both threads (2-core CPU, the
# text questions of the 20 bundled lines, four alternating runs in one process; RESULTS.md
# `quiet_checks`). At most this many run at once, each holding its own cache (DECODE_BATCH_TOKENS
# bounds each one); a GPU decodes one at a time.
CPU_DECODE_WORKERS = 2
# Room for new tokens a decoding batch's cache takes at first; it doubles when full (RoomyLayer).
FIRST_ROOM = 48
# The attention kernels a decoding loop may use on CUDA: not cuDNN's. Its attention spends about 1.5 ms
# of host time per call when the key length changes, as it does at every step here: on an H200 (torch
# 2.11, which picks it for bf16 on that GPU) a step of SmolLM2-135M over 256 rows took 97 ms with it and
# 41 ms without, 88 and 38 over 32 rows (`python -m benchmarks.decode_step_probe`, RESULTS.md
# `gpu_checks`). Another kernel rounds bf16 differently, as a new torch or GPU may; a CPU is untouched.
CUDA_SDPA_BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)
# Greedy decoding on a GPU drafts tokens from the prompt (:class:`PromptLookup`): a step there costs about
# the same for one token a row as for several (launch-bound, above), and what the metrics generate is
# mostly copied from their prompts (a triple's entities, an answer's span), so a step that checks up
# to this many drafted tokens a row and keeps those the model would have chosen saves steps. The tokens
# kept are the model's own greedy choices. A CPU, whose step grows with its tokens, does not draft.
GPU_DRAFT_TOKENS = 6
# the suffix lengths a draft is looked up by, longest first
DRAFT_NGRAMS = (3, 2, 1)

Group = Tuple[int, List[int]]  # (shared prefix length, member indices)


class CacheWork:
    """What the decoders copied inside the key/value cache, counted in
    (row, position) pairs over all layers' keys and values divided by their
    number: one row of ``n`` positions copied is ``n`` whatever the model.
    ``moved`` counts positions copied into a roomy cache or from row to row
    in it (beams taking their source's continuation, rows closing the gap a
    finished one left). Tests compare it with what transformers'
    ``DynamicCache`` copies (the whole cache at every step and every
    reorder), without timing anything."""

    def __init__(self):
        self.moved = 0
        self._lock = threading.Lock()  # batches may decode side by side (CPU_DECODE_WORKERS)

    def reset(self) -> None:
        self.moved = 0

    def add(self, positions: int) -> None:
        with self._lock:
            self.moved += positions


CACHE_WORK = CacheWork()


class RoomyLayer(DynamicLayer):
    """A cache layer whose keys and values live in buffers with room for new
    tokens: a step writes its position in place (``DynamicLayer``
    concatenates, copying the whole cache each step), and rows move only
    where they change (:meth:`take_rows`, :meth:`keep_rows`). The model sees
    ``keys``/``values`` as views of the used rows and positions: the same
    numbers as ``DynamicLayer``'s, so the same attention. When the room runs
    out, the room for new tokens doubles, up to ``limit`` positions: a batch
    whose rows stop early never holds the room of the longest continuation
    allowed (greedy extraction allows 192 new tokens)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int, rows: int, limit: Optional[int] = None):
        super().__init__()
        self.key_buffer, self.value_buffer = keys, values
        self.length, self.rows, self.start = length, rows, length
        self.limit = keys.shape[2] if limit is None else max(int(limit), keys.shape[2])
        self.device = keys.device
        self.is_initialized = True
        self._views()

    def _views(self) -> None:
        self.keys = self.key_buffer[: self.rows, :, : self.length]
        self.values = self.value_buffer[: self.rows, :, : self.length]

    def _grow(self, needed: int) -> None:
        if needed > self.limit:
            raise RuntimeError(f"cache room exhausted: {needed} > {self.limit} positions")
        room = min(self.limit, max(needed, self.start + 2 * (self.key_buffer.shape[2] - self.start)))
        for name in ("key_buffer", "value_buffer"):
            old = getattr(self, name)
            new = old.new_empty((self.rows, old.shape[1], room, old.shape[3]))
            new[: self.rows, :, : self.length] = old[: self.rows, :, : self.length]
            setattr(self, name, new)
        CACHE_WORK.add(self.rows * self.length)

    def update(self, key_states, value_states, *args, **kwargs):
        q = key_states.shape[-2]
        if self.length + q > self.key_buffer.shape[2]:
            self._grow(self.length + q)
        self.key_buffer[: self.rows, :, self.length: self.length + q] = key_states
        self.value_buffer[: self.rows, :, self.length: self.length + q] = value_states
        self.length += q
        self._views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def take_rows(self, sources: torch.Tensor, changed: torch.Tensor, start: int) -> None:
        """Row ``r`` (for ``r`` in ``changed``) becomes row ``sources[r]``, from position ``start`` on
        (the positions before are equal in both rows: beams of one prompt)."""
        src = sources[changed]
        # advanced indexing on the right copies first: rows that swap are read before either is written
        self.key_buffer[changed, :, start: self.length] = self.key_buffer[src, :, start: self.length]
        self.value_buffer[changed, :, start: self.length] = self.value_buffer[src, :, start: self.length]

    def keep_rows(self, kept: torch.Tensor, first_moved: int) -> None:
        """Keep rows ``kept`` (ascending), packed at the top; rows before ``first_moved`` stay where they are."""
        tail = kept[first_moved:]
        if len(tail):
            self.key_buffer[first_moved: len(kept), :, : self.length] = self.key_buffer[tail, :, : self.length]
            self.value_buffer[first_moved: len(kept), :, : self.length] = self.value_buffer[tail, :, : self.length]
        self.rows = len(kept)
        self._views()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:  # what generate-style callers use: a full gather
        self.key_buffer[: len(beam_idx), :, : self.length] = self.key_buffer[beam_idx, :, : self.length]
        self.value_buffer[: len(beam_idx), :, : self.length] = self.value_buffer[beam_idx, :, : self.length]
        self.rows = len(beam_idx)
        self._views()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.reorder_cache(indices)


def _roomy_cache(layers: Sequence[Tuple[torch.Tensor, torch.Tensor]], length: int, rows: int,
                 limit: Optional[int] = None) -> DynamicCache:
    cache = DynamicCache()
    cache.layers = [RoomyLayer(k, v, length, rows, limit) for k, v in layers]
    return cache


def _room_for(cache: DynamicCache, rows: int, positions: int, copies: Optional[torch.Tensor] = None,
              limit: Optional[int] = None) -> DynamicCache:
    """A roomy cache of ``rows`` rows and ``positions`` positions (growing up to ``limit``) holding
    ``cache``'s used part, row ``r`` from row ``copies[r]`` (all rows in order without ``copies``)."""
    layers = []
    for layer in cache.layers:
        n = layer.get_seq_length()
        keys = layer.keys.new_empty((rows, layer.keys.shape[1], positions, layer.keys.shape[3]))
        values = layer.values.new_empty((rows, layer.values.shape[1], positions, layer.values.shape[3]))
        keys[:, :, :n] = layer.keys if copies is None else layer.keys[copies]
        values[:, :, :n] = layer.values if copies is None else layer.values[copies]
        layers.append((keys, values))
    length = cache.layers[0].get_seq_length() if cache.layers else 0
    CACHE_WORK.add(rows * length)
    return _roomy_cache(layers, length, rows, limit)


def _take_rows(cache: DynamicCache, sources: torch.Tensor, start: int) -> None:
    """Each row ``r`` of ``cache`` becomes row ``sources[r]`` from position ``start`` on; rows whose
    source is themselves are not touched."""
    changed = (sources != torch.arange(len(sources), device=sources.device)).nonzero().flatten()
    if not len(changed):
        return
    for layer in cache.layers:
        layer.take_rows(sources, changed, start)
    CACHE_WORK.add(len(changed) * max(0, cache.layers[0].length - start))


def _keep_rows(cache: DynamicCache, kept: List[int]) -> None:
    """Only rows ``kept`` (ascending) stay, in that order; a row before the first dropped one does not move."""
    first_moved = next((j for j, r in enumerate(kept) if r != j), len(kept))
    index = torch.tensor(kept, dtype=torch.long, device=cache.layers[0].key_buffer.device)
    for layer in cache.layers:
        layer.keep_rows(index, first_moved)
    CACHE_WORK.add((len(kept) - first_moved) * cache.layers[0].length)


def supports_prefix_sharing(model) -> bool:
    return getattr(getattr(model, "config", None), "model_type", None) in PREFIX_SHARING_MODELS


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def prefix_groups(token_ids: Sequence[Sequence[int]], max_group: int = MAX_GROUP) -> List[Group]:
    """Prompts (as token ids, all distinct) → groups ``(prefix length, members)``
    whose members share their first ``prefix length`` tokens and each have at
    least one token after them. Sorted prompts are cut into runs so that the
    tokens saved, (members − 1) × prefix length summed over the groups, are the
    most possible (dynamic programming over runs of at most ``max_group``)."""
    order = sorted(range(len(token_ids)), key=lambda i: list(token_ids[i]))
    n = len(order)
    if n == 0:
        return []
    # shared length of neighbours in sorted order, leaving each at least one token of its own
    link = [min(_common_prefix(token_ids[order[k]], token_ids[order[k + 1]]),
                len(token_ids[order[k]]) - 1, len(token_ids[order[k + 1]]) - 1) for k in range(n - 1)]
    saved, start = [0] * (n + 1), [0] * (n + 1)
    for end in range(1, n + 1):
        saved[end], start[end] = saved[end - 1], end - 1  # the last prompt alone
        shared = None
        for first in range(end - 2, max(-1, end - 1 - max_group), -1):
            shared = link[first] if shared is None else min(shared, link[first])
            if shared <= 0:
                break
            if saved[first] + (end - first - 1) * shared > saved[end]:
                saved[end], start[end] = saved[first] + (end - first - 1) * shared, first
    groups, end = [], n
    while end > 0:
        first = start[end]
        members = [order[k] for k in range(first, end)]
        shared = min(link[first:end - 1]) if end - first > 1 else len(token_ids[order[first]]) - 1
        groups.append((max(shared, 0), members))
        end = first
    return groups[::-1]


def _left_padded(rows: Sequence[Sequence[int]], pad_id: int, device):
    width = max([len(r) for r in rows] + [0])
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, tokens in enumerate(rows):
        if tokens:
            ids[r, width - len(tokens):] = torch.tensor(list(tokens), dtype=torch.long)
            mask[r, width - len(tokens):] = 1
    return ids.to(device), mask.to(device)


class PrefixStates:
    """The keys and values of prefixes run through the model in batches (:func:`_prefix_states`):
    ``layers[b]`` holds batch ``b``'s per-layer ``(keys, values)``, left-padded, and ``where[i]`` says
    where prefix ``i`` lies, ``(batch, row, length)`` (``None`` for an empty prefix)."""

    def __init__(self, count: int):
        self.layers: List[List[Tuple[torch.Tensor, torch.Tensor]]] = []
        self.where: List[Optional[Tuple[int, int, int]]] = [None] * count

    def length(self, i: int) -> int:
        return self.where[i][2] if self.where[i] is not None else 0


def _prefix_states(model, prefixes: Sequence[Sequence[int]], batch_size: int, pad_id: int, device,
                   max_tokens: Optional[int] = None) -> PrefixStates:
    """Each prefix's keys and values, per layer, as rows of the batches that computed them."""
    states = PrefixStates(len(prefixes))
    order = sorted((i for i, p in enumerate(prefixes) if p), key=lambda i: -len(prefixes[i]))
    batches: List[List[int]] = []
    for i in order:  # longest first; a new batch once padding would pass a fifth of the tokens
        if (not batches or len(batches[-1]) == batch_size or len(prefixes[i]) < 0.8 * len(prefixes[batches[-1][0]])
                or (max_tokens and (len(batches[-1]) + 1) * len(prefixes[batches[-1][0]]) > max_tokens)):  # width × rows
            batches.append([])
        batches[-1].append(i)
    for chosen in batches:
        ids, mask = _left_padded([prefixes[i] for i in chosen], pad_id, device)
        cache = DynamicCache()
        model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0), cache=cache,
              use_cache=True, logits_to_keep=1)
        for r, i in enumerate(chosen):
            states.where[i] = (len(states.layers), r, len(prefixes[i]))
        states.layers.append([(layer.keys, layer.values) for layer in cache.layers])
        del cache
    return states


def _cache_of(states: PrefixStates, prefixes: Sequence[int], device):
    """A DynamicCache holding prefixes ``prefixes`` of ``states`` (one per row), left-padded to the
    longest, and its mask.

    Each prefix batch's rows are copied with one gather per layer (a copy per row and layer cost a
    GPU 15,360 launches for 256 rows: RESULTS.md ``gpu_checks``): the last ``width`` positions of
    a left-padded batch hold each row's prefix at its end, and whatever lies before it there (the
    batch's own padding) is masked, so it weighs exactly nothing, as the zeros did before."""
    lengths = [states.length(i) for i in prefixes]
    width = max(lengths + [0])
    mask = (torch.arange(width, device=device)[None, :] >= width - torch.tensor(lengths, device=device)[:, None]).long()
    cache = DynamicCache()
    if width == 0:
        return cache, mask
    sources: dict = {}  # prefix batch -> (rows here, rows there)
    for r, i in enumerate(prefixes):
        if states.where[i] is not None:
            b, row, _ = states.where[i]
            sources.setdefault(b, ([], []))
            sources[b][0].append(r)
            sources[b][1].append(row)
    sources = {b: (torch.tensor(here, device=device), torch.tensor(there, device=device)) for b, (here, there) in sources.items()}
    for layer, (k0, v0) in enumerate(states.layers[next(iter(sources))]):
        keys = k0.new_zeros((len(prefixes), k0.shape[1], width, k0.shape[3]))
        values = v0.new_zeros((len(prefixes), v0.shape[1], width, v0.shape[3]))
        for b, (here, there) in sources.items():
            k, v = states.layers[b][layer]
            w = min(width, k.shape[2])
            keys[here, :, width - w:] = k[there, :, k.shape[2] - w:]
            values[here, :, width - w:] = v[there, :, v.shape[2] - w:]
        cache.update(keys, values, layer)
    return cache, mask


def _run_rests(model, cache, mask, rests: Sequence[Sequence[int]], pad_id: int):
    """Runs each row's own tokens after its prefix in ``cache``: ``(last logits, mask, last position)``."""
    rest_ids, rest_mask = _left_padded(rests, pad_id, mask.device)
    # the rest sits after the left-padded prefix: holes in the mask, positions continued by hand
    positions = mask.sum(-1, keepdim=True) + (rest_mask.cumsum(-1) - 1).clamp(min=0)
    mask = torch.cat([mask, rest_mask], dim=1)
    logits = model(input_ids=rest_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                   logits_to_keep=1).logits[:, -1]
    return logits, mask, positions[:, -1:]


class PromptLookup:
    """Drafts for one row: the tokens that followed the latest earlier occurrence of the row's last
    :data:`DRAFT_NGRAMS` tokens, in its prompt or in what it generated (prompt lookup decoding).
    Each n-gram is indexed once, so a draft costs no scan of the row."""

    def __init__(self, prompt: Sequence[int]):
        self.tokens: List[int] = list(prompt)
        self.indexed = 0  # n-grams ending before this position are in ``last``
        self.last: dict = {}

    def extend(self, tokens: Sequence[int]) -> None:
        self.tokens.extend(tokens)

    def draft(self, count: int) -> List[int]:
        tokens = self.tokens
        end = len(tokens) - 1  # the n-grams ending at the last token are what is looked up, not indexed yet
        for p in range(self.indexed, end):
            for n in DRAFT_NGRAMS:
                if p + 1 >= n:
                    self.last[(n, *tokens[p + 1 - n: p + 1])] = p
        self.indexed = max(self.indexed, end)
        if count <= 0:
            return []
        for n in DRAFT_NGRAMS:
            if len(tokens) >= n:
                p = self.last.get((n, *tokens[len(tokens) - n:]))
                if p is not None:
                    return tokens[p + 1: p + 1 + count]
        return []


def _decode_rows(model, cache, mask, rests: Sequence[Sequence[int]], prompts: Sequence[Sequence[int]],
                 max_new_tokens: int, stop, pad_id: int, draft_tokens: int = 0, budget: int = 0) -> List[List[int]]:
    """Greedy continuations (up to and with the stop token) of rows whose prefixes are in ``cache``;
    a row leaves the batch once it stops. With ``draft_tokens``, each step feeds a row its last token
    and up to that many drafted ones (:class:`PromptLookup` over ``prompts``, the rows' whole
    prompts), and keeps the model's greedy choices as far as the draft agrees with them, plus the
    model's next choice. Positions of rejected drafts stay in the cache as holes in the mask
    (weighing nothing), so drafts shrink, down to none, where the cache would pass ``budget`` (row,
    position) pairs (:func:`token_bounds`); what is kept never depends on them. Without drafts a
    step is one token a row, as it always was."""
    logits, mask, position = _run_rests(model, cache, mask, rests, pad_id)
    length = cache.get_seq_length()
    # room for new tokens, written in place (RoomyLayer); a step writes at most draft_tokens + 1
    # positions and keeps at least one token
    cache = _room_for(cache, len(rests), length + min(max_new_tokens, FIRST_ROOM),
                      limit=length + max_new_tokens * (draft_tokens + 1))
    stops = set(stop.tolist())
    alive = list(range(len(rests)))
    out: List[List[int]] = [[token] for token in logits.argmax(-1).tolist()]
    lookups = [PromptLookup(list(p) + out[i]) for i, p in enumerate(prompts)] if draft_tokens else None
    while True:
        going = [r for r, i in enumerate(alive) if out[i][-1] not in stops and len(out[i]) < max_new_tokens]
        if not going:
            break
        if len(going) < len(alive):  # finished rows leave the batch
            _keep_rows(cache, going)
            keep = torch.tensor(going, device=mask.device)
            mask, position = mask[keep], position[keep]
            alive = [alive[r] for r in going]
        if lookups is None:
            drafts = [[] for _ in alive]
        else:
            room = min(draft_tokens, budget // len(alive) - mask.shape[1] - 1)  # the holes cost memory
            drafts = [lookups[i].draft(min(room, max_new_tokens - len(out[i]) - 1)) for i in alive]
        width = 1 + max(len(d) for d in drafts)
        ids = torch.tensor([[out[i][-1]] + d + [pad_id] * (width - 1 - len(d)) for i, d in zip(alive, drafts)],
                           dtype=torch.long, device=mask.device)
        positions = position + 1 + torch.arange(width, device=mask.device)[None, :]
        mask = torch.cat([mask, mask.new_ones(len(alive), width)], dim=1)
        chosen = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                       logits_to_keep=width).logits.argmax(-1).tolist()
        fed = []  # per row, how many of this step's inputs stay in the cache (its last token and the drafts kept)
        for r, (i, draft) in enumerate(zip(alive, drafts)):
            kept = 0
            for t in range(width):
                token = chosen[r][t]
                out[i].append(token)
                kept = t + 1
                if token in stops or len(out[i]) >= max_new_tokens or t >= len(draft) or draft[t] != token:
                    break
            if lookups is not None:
                lookups[i].extend(out[i][len(out[i]) - kept:])
            fed.append(kept)
        fed_t = torch.tensor(fed, device=mask.device)
        mask[:, -width:] = (torch.arange(width, device=mask.device)[None, :] < fed_t[:, None]).to(mask.dtype)
        position = position + fed_t[:, None]
    return out


def draft_tokens_for(device, draft_tokens: Optional[int] = None) -> int:
    """Tokens drafted a row and step (:func:`greedy_continuations`): ``draft_tokens`` if given, else
    :data:`GPU_DRAFT_TOKENS` on CUDA and none elsewhere."""
    if draft_tokens is not None:
        if isinstance(draft_tokens, bool) or not isinstance(draft_tokens, int) or draft_tokens < 0:
            raise ValueError(f"draft_tokens must be a whole number >= 0, got {draft_tokens!r}")
        return draft_tokens
    return GPU_DRAFT_TOKENS if torch.device(device).type == "cuda" else 0


def greedy_continuations(model, token_ids: Sequence[Sequence[int]], max_new_tokens: int, stop_ids: Sequence[int],
                         pad_id: int, batch_size: int = 32, chunk_batches: int = 8, show_progress: bool = True,
                         desc: str = "generating", draft_tokens: Optional[int] = None) -> List[List[int]]:
    """Greedy continuations (token ids, up to and with the stop token) of distinct prompts.

    Prompts are grouped (:func:`prefix_groups`) and taken a chunk of about
    ``chunk_batches`` batches at a time, fewer where the chunk's prefixes
    would hold more than ``batch_size`` × :data:`CHUNK_TOKENS_PER_ROW` tokens
    (they stay in memory while the chunk decodes: about what one batch of
    512-token prompts holds): each group's prefix runs once, then the rows run in batches of
    ``batch_size`` sorted by the length of their own tokens, so little padding
    is computed, and decode until every row has stopped. With ``draft_tokens`` (default: on a GPU
    only, :func:`draft_tokens_for`) each step also checks that many tokens a row drafted from its
    prompt (:func:`_decode_rows`)."""
    device = next(model.parameters()).device
    stop = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    drafting = draft_tokens_for(device, draft_tokens)
    bounds = token_bounds(model, device)

    def decode(cache, mask, rests, prompts):
        return _decode_rows(model, cache, mask, rests, prompts, max_new_tokens, stop, pad_id, drafting, bounds[0])

    return _run_sharing_prefixes(model, token_ids, decode, batch_size, batch_size, chunk_batches, pad_id, show_progress, desc,
                                 row_cost=greedy_row_cost(device, max_new_tokens), bounds=bounds)


def greedy_row_cost(device, max_new_tokens: int) -> Optional[Callable]:
    """What a greedy row's cache may hold, for the device's bounds (:func:`token_bounds`): on CUDA its
    prompt and new tokens, so that batches of a GPU's size shrink where its free memory is short (a
    model training beside the metric, in a ``Trainer``'s ``compute_metrics``); on a CPU nothing, so
    that greedy batches keep their ``batch_size`` rows there (smaller ones cost the extractor 1.4x)."""
    if torch.device(device).type != "cuda":
        return None
    return lambda ids: len(ids) + int(max_new_tokens)


def beam_continuations(model, token_ids: Sequence[Sequence[int]], num_beams: int, max_new_tokens: int,
                       stop_ids: Sequence[int], pad_id: int, batch_size: int = 32, length_penalty: float = 1.0,
                       chunk_batches: int = 8, show_progress: bool = True, desc: str = "generating") -> List[List[List[int]]]:
    """Each distinct prompt's ``num_beams`` best continuations by beam search,
    best first (token ids, up to and with the stop token): those of
    transformers' ``generate(num_beams=n, num_return_sequences=n)`` with
    ``eos_token_id=stop_ids``, ``length_penalty`` and ``early_stopping=False``.

    Prompts share their prefixes as in :func:`greedy_continuations`; a batch
    holds ``batch_size`` beams (``batch_size // num_beams`` prompts), and a
    prompt's beams leave it once no running beam can beat its finished ones."""
    k = int(num_beams)
    stop = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=next(model.parameters()).device)

    def decode(cache, mask, rests, _prompts):
        return _beam_rows(model, cache, mask, rests, k, max_new_tokens, stop, pad_id, length_penalty)

    return _run_sharing_prefixes(model, token_ids, decode, max(1, batch_size // k), batch_size, chunk_batches, pad_id,
                                 show_progress, desc, row_cost=lambda ids: k * (len(ids) + int(max_new_tokens)))


def kv_bytes_per_position(model) -> int:
    """Bytes one (row, position) pair of ``model``'s key/value cache holds: keys and values of every layer."""
    config = model.config
    heads = getattr(config, "num_attention_heads", 1) or 1
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2 * config.num_hidden_layers * kv_heads * head_dim * next(model.parameters()).element_size()


def token_bounds(model, device) -> Tuple[int, int, int]:
    """``(decoding batch, prefix pass, chunk)`` bounds in (row, position) pairs on ``device``: on a
    CPU :data:`DECODE_BATCH_TOKENS`, :data:`PREFILL_BATCH_TOKENS` and :data:`CHUNK_TOKENS`; on CUDA
    what :data:`GPU_MEMORY_SHARE` of the device's free memory holds, for the batch and the chunk
    each (the prefix pass: half the batch's), never below the CPU's bounds."""
    device = torch.device(device)
    if device.type != "cuda":
        return DECODE_BATCH_TOKENS, PREFILL_BATCH_TOKENS, CHUNK_TOKENS
    free, _total = torch.cuda.mem_get_info(device)
    # what this process's allocator holds unused is free to it too (a training beside the metric holds much)
    free += max(0, torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    pairs = int(GPU_MEMORY_SHARE * free / kv_bytes_per_position(model))
    return max(DECODE_BATCH_TOKENS, pairs), max(PREFILL_BATCH_TOKENS, pairs // 2), max(CHUNK_TOKENS, pairs)


def decode_batches(costs: Sequence[int], rows_per_batch: int, budget: Optional[int] = None) -> List[Tuple[int, int]]:
    """``(start, end)`` ranges cutting consecutive prompts into batches of at most ``rows_per_batch``
    prompts whose ``costs`` (cache positions each holds) sum to at most ``budget``
    (:data:`DECODE_BATCH_TOKENS` by default); a prompt that alone costs more is a batch of its own."""
    budget = DECODE_BATCH_TOKENS if budget is None else budget
    out, start, held = [], 0, 0
    for i, cost in enumerate(costs):
        if i > start and (i - start == rows_per_batch or held + cost > budget):
            out.append((start, i))
            start, held = i, 0
        held += cost
    if start < len(costs):
        out.append((start, len(costs)))
    return out


def decoding_attention(device):
    """A context choosing the attention kernels a decoding loop runs on ``device``: on CUDA, every
    SDPA kernel but cuDNN's (:data:`CUDA_SDPA_BACKENDS`); elsewhere torch's choice, untouched."""
    if torch.device(device).type != "cuda":
        return contextlib.nullcontext()
    return sdpa_kernel(list(CUDA_SDPA_BACKENDS))


def decode_workers(device) -> Tuple[int, int]:
    """``(batches decoded at once, threads each)`` on ``device``: on a CPU with at least two of
    torch's threads, :data:`CPU_DECODE_WORKERS` batches share them (``D2T_DECODE_WORKERS=1`` in the
    environment: one at a time, which holds one batch's cache instead of two); elsewhere one batch
    at a time."""
    threads = torch.get_num_threads()
    if torch.device(device).type != "cpu" or threads < 2:
        return 1, threads
    workers = min(_cpu_workers(), threads)
    return workers, threads // workers


def _cpu_workers() -> int:
    value = os.environ.get("D2T_DECODE_WORKERS")
    if value is None or not value.strip():
        return CPU_DECODE_WORKERS
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"D2T_DECODE_WORKERS must be a whole number of at least 1, got {value!r}")
    return int(value)


@contextlib.contextmanager
def _torch_threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _map_side_by_side(work: Callable, jobs: list, workers: int, threads: int):
    """``work(job)`` for each job, in order; ``workers`` at once, each on ``threads`` of torch's threads."""
    if workers <= 1 or len(jobs) <= 1:
        yield from map(work, jobs)
        return
    inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()  # both are per thread

    def in_worker(job):  # torch's thread count is read from the setting made below; these two are not
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            return work(job)

    with _torch_threads(threads):
        pool = ThreadPoolExecutor(min(workers, len(jobs)))
        try:
            futures = [pool.submit(in_worker, job) for job in jobs]
            for future in futures:
                yield future.result()
        finally:  # an error or an interrupt: the batches not started yet are dropped, not decoded
            pool.shutdown(wait=True, cancel_futures=True)


def _run_sharing_prefixes(model, token_ids, decode, rows_per_batch: int, batch_size: int, chunk_batches: int, pad_id: int,
                          show_progress: bool, desc: str, row_cost: Optional[Callable] = None,
                          bounds: Optional[Tuple[int, int, int]] = None) -> list:
    """``decode(cache, mask, rests, prompts)`` over batches of ``rows_per_batch`` prompts, prefixes run once (see
    above). With ``row_cost`` (the cache positions a prompt's rows hold; beam search), a batch holds
    fewer prompts where their costs pass the device's decoding bound, and prefix passes and chunks
    keep to theirs (:func:`token_bounds`). A chunk's batches decode side by
    side where :func:`decode_workers` says so; a chunk of fewer batches than workers is cut into
    as many batches as there are workers."""
    bounded = row_cost is not None
    for i, ids in enumerate(token_ids):
        if not len(ids):
            raise ValueError(f"prompt {i} has no tokens: a decoder needs at least one to continue")
    device = next(model.parameters()).device
    workers, threads = decode_workers(device)
    bounds = (bounds or token_bounds(model, device)) if bounded else None  # the caller's, when it has them
    groups = prefix_groups(token_ids)
    chunk_tokens = batch_size * CHUNK_TOKENS_PER_ROW
    if bounded:
        chunk_tokens = min(chunk_tokens, bounds[2])
    chunks, current, rows, held = [], [], 0, 0
    for group in groups:  # neighbours in sorted order: similar prefixes, similar lengths
        current.append(group)
        rows += len(group[1])
        held += group[0]
        if rows >= rows_per_batch * chunk_batches or held >= chunk_tokens:
            chunks.append(current)
            current, rows, held = [], 0, 0
    if current:
        chunks.append(current)
    out: list = [[] for _ in token_ids]
    bar = progress(None, total=len(token_ids), desc=desc, enabled=show_progress) if show_progress else None
    with decoding_attention(device):
        for chunk in chunks:
            _decode_chunk(model, token_ids, chunk, decode, rows_per_batch, batch_size, pad_id, device, bounds, row_cost,
                          workers, threads, out, bar)
            give_back_free_memory()  # the chunk's caches and prefixes, freed on return (d2t_metrics.cpu_linear)
    if bar is not None:
        bar.close()
    return out


def _decode_chunk(model, token_ids, chunk, decode, rows_per_batch, batch_size, pad_id, device, bounds, row_cost,
                  workers, threads, out, bar) -> None:
    """One chunk of :func:`_run_sharing_prefixes`: its prefixes run once, its batches decode, results into ``out``."""
    states = _prefix_states(model, [token_ids[members[0]][:shared] for shared, members in chunk], batch_size, pad_id, device,
                            bounds[1] if bounds else None)
    members = sorted(((g, i) for g, (shared, ms) in enumerate(chunk) for i in ms),
                     key=lambda gi: len(token_ids[gi[1]]) - chunk[gi[0]][0])
    costs = [row_cost(token_ids[i]) if bounds else 0 for _, i in members]  # 0: only rows_per_batch binds
    budget = bounds[0] if bounds else None
    cuts = decode_batches(costs, rows_per_batch, budget)
    if 1 < workers and len(cuts) < min(workers, len(members)):  # so that no worker waits idle
        cuts = decode_batches(costs, math.ceil(len(members) / workers), budget)
    batches = [members[lo:hi] for lo, hi in cuts]

    def decode_batch(batch):
        cache, mask = _cache_of(states, [g for g, _ in batch], device)
        return decode(cache, mask, [token_ids[i][chunk[g][0]:] for g, i in batch], [token_ids[i] for _, i in batch])

    for batch, results in zip(batches, _map_side_by_side(decode_batch, batches, workers, threads)):
        for (_, i), result in zip(batch, results):
            out[i] = result
        if bar is not None:
            bar.update(len(batch))


def _beam_rows(model, cache, mask, rests: Sequence[Sequence[int]], k: int, max_new_tokens: int, stop, pad_id: int,
               length_penalty: float) -> List[List[List[int]]]:
    """Beam search over rows whose prefixes are in ``cache``: transformers'
    bookkeeping (per prompt, the best ``max(2, 1 + len(stop)) × k``
    candidates; the first ``k`` that stop are finished hypotheses scored by
    their summed log-probabilities over their length; the best ``k`` that do
    not stop go on; a prompt is done once its best running beam, scored at
    the current length, cannot beat its worst finished one), one prompt's
    ``k`` beams side by side in the cache."""
    n = len(rests)
    logits, mask, position = _run_rests(model, cache, mask, rests, pad_id)
    # the prompt ran once; its beams start as k copies of it, only the first one live, in a cache
    # with room for new tokens. The prompt's positions stay equal in its k rows: a beam taking
    # another's place copies only the positions generated since (from `prompt_end` on).
    copies = torch.arange(n, device=mask.device).repeat_interleave(k)
    prompt_end = cache.get_seq_length()
    cache = _room_for(cache, n * k, prompt_end + min(max_new_tokens, FIRST_ROOM), copies, limit=prompt_end + max_new_tokens)
    mask, position = mask[copies], position[copies]
    log_probs = torch.log_softmax(logits.float(), dim=-1)[copies]
    vocab = log_probs.shape[-1]
    wide = max(2, 1 + len(stop)) * k
    first_k = torch.arange(wide, device=mask.device) < k
    running = torch.full((n, k), -1.0e9, device=mask.device)
    running[:, 0] = 0.0
    running_tokens = torch.full((n, k, max_new_tokens), pad_id, dtype=torch.long, device=mask.device)
    finished_tokens = running_tokens.clone()
    finished_scores = torch.full((n, k), -1.0e9, device=mask.device)
    finished = torch.zeros((n, k), dtype=torch.bool, device=mask.device)
    finished_length = torch.zeros((n, k), dtype=torch.long, device=mask.device)
    improvable = torch.ones((n, 1), dtype=torch.bool, device=mask.device)
    alive = list(range(n))  # prompts still in the batch
    out: List[List[List[int]]] = [[] for _ in rests]

    def settle(rows: List[int]):
        for r, beams in zip(rows, finished_beams(finished, finished_length, finished_tokens, rows)):
            out[alive[r]] = beams

    for step in range(max_new_tokens):
        m = len(alive)
        scores = (log_probs.view(m, k, vocab) + running[:, :, None]).view(m, k * vocab)
        top_scores, top_index = scores.topk(wide, dim=-1)
        source, token = top_index // vocab, top_index % vocab
        candidates = running_tokens.gather(1, source[:, :, None].expand(-1, -1, max_new_tokens)).clone()
        candidates[:, :, step] = token
        stops = torch.isin(token, stop) | (step == max_new_tokens - 1)
        # the best k candidates that go on
        going_on = top_scores - stops.float() * 1.0e9
        keep = going_on.topk(k, dim=-1).indices
        running_tokens = candidates.gather(1, keep[:, :, None].expand(-1, -1, max_new_tokens))
        running = going_on.gather(1, keep)
        beam_source = source.gather(1, keep)
        # the first k candidates that stop join the finished ones, if they beat them
        just_finished = stops & first_k[None, :]
        new_scores = top_scores / ((step + 1) ** length_penalty)
        new_scores = new_scores - (~improvable).float() * 1.0e9 - (~just_finished).float() * 1.0e9
        pool_scores = torch.cat([finished_scores, new_scores], dim=1)
        best = pool_scores.topk(k, dim=-1).indices
        finished_scores = pool_scores.gather(1, best)
        finished_tokens = torch.cat([finished_tokens, candidates], dim=1).gather(1, best[:, :, None].expand(-1, -1, max_new_tokens))
        finished = torch.cat([finished, just_finished], dim=1).gather(1, best)
        lengths = torch.full((m, wide), step + 1, dtype=torch.long, device=mask.device)
        finished_length = torch.cat([finished_length, lengths], dim=1).gather(1, best)
        best_running = running[:, :1] / ((step + 1) ** length_penalty)
        worst_finished = torch.where(finished, finished_scores.min(dim=1, keepdim=True).values, torch.full_like(finished_scores, -1.0e9))
        improvable = improvable & (best_running > worst_finished).any(dim=-1, keepdim=True)
        if step == max_new_tokens - 1 or bool(stops.all()):
            break
        done = (~improvable[:, 0]).nonzero().flatten().tolist()
        if done:  # their finished beams can no longer change: they leave the batch
            settle(done)
            kept = sorted(set(range(m)) - set(done))
            if not kept:
                alive = []
                break
            rows = torch.tensor(kept, device=mask.device)
            beam_rows = (rows[:, None] * k + torch.arange(k, device=mask.device)).flatten()
            _keep_rows(cache, beam_rows.tolist())
            mask, position = mask[beam_rows], position[beam_rows]
            running, running_tokens, beam_source = running[rows], running_tokens[rows], beam_source[rows]
            finished_scores, finished_tokens = finished_scores[rows], finished_tokens[rows]
            finished, finished_length, improvable = finished[rows], finished_length[rows], improvable[rows]
            alive = [alive[r] for r in kept]
            m = len(alive)
        # each beam's cache row becomes that of the beam it continues (only the rows that change,
        # only the positions generated so far)
        _take_rows(cache, (torch.arange(m, device=mask.device)[:, None] * k + beam_source).flatten(), prompt_end)
        mask = torch.cat([mask, mask.new_ones(m * k, 1)], dim=1)
        position = position + 1
        step_tokens = running_tokens[:, :, step].reshape(-1, 1)
        logits = model(input_ids=step_tokens, attention_mask=mask, position_ids=position, cache=cache, use_cache=True,
                       logits_to_keep=1).logits[:, -1]
        log_probs = torch.log_softmax(logits.float(), dim=-1)
    settle(list(range(len(alive))))
    return out


def finished_beams(finished, lengths, tokens, rows: Sequence[int]) -> List[List[List[int]]]:
    """The finished beams' tokens of each of ``rows``: ``tokens[r, b, :lengths[r, b]]`` for each beam
    ``b`` with ``finished[r, b]``. The rows are copied to the CPU at once: read element by element on a
    GPU, each beam cost three waits for the device."""
    index = torch.as_tensor(list(rows), dtype=torch.long, device=finished.device)
    done, length, toks = finished[index].cpu().tolist(), lengths[index].cpu().tolist(), tokens[index].cpu().tolist()
    return [[toks[j][b][:length[j][b]] for b in range(len(done[j])) if done[j][b]] for j in range(len(index))]


def stop_token_ids(tokenizer, stop_strings: Sequence[str]) -> List[int]:
    """Every vocabulary entry whose text contains one of ``stop_strings`` (cached on the tokenizer)."""
    key = tuple(sorted(set(stop_strings)))
    if not key:
        return []
    cached = getattr(tokenizer, "_d2t_stop_ids", {})
    if key not in cached:
        size = len(tokenizer)
        texts = tokenizer.batch_decode([[i] for i in range(size)], skip_special_tokens=False)
        cached[key] = [i for i, text in enumerate(texts) if any(s in text for s in key)]
        tokenizer._d2t_stop_ids = cached
    return cached[key]
