"""Greedy decoding for many prompts that begin alike, on a CPU budget.

The prompts d2t-metrics generates from repeat themselves: the questions
Data-QuestEval asks about one text share the text, and the outputs of the
systems scored on one input often share their first words. Here prompts
are grouped by their common beginning (:func:`prefix_groups`); each group's
beginning runs through the model once, and its keys and values are copied
to every member; members then run in batches sorted by the length of what
is left of them, and a row leaves the batch as soon as it stops, so one
runaway continuation no longer keeps a whole batch decoding.

The continuations are those of transformers' ``generate`` with greedy
search (tests compare the two on the same prompts). On the questions asked
about the first 60 WebNLG outputs it computes a quarter of the prompt tokens
and takes half the time of ``generate`` on length-sorted batches (2-core
CPU). transformers' continuous batching also shares prefixes, but its paged
attention ran 2x slower than plain ``generate`` there.

Only decoders whose forward takes ``position_ids``, a 2-D ``attention_mask``
with holes and a :class:`transformers.DynamicCache` are run this way
(:data:`PREFIX_SHARING_MODELS`); :func:`d2t_metrics.generator.generate`
uses transformers' ``generate`` for the others.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

PREFIX_SHARING_MODELS = ("llama",)
MAX_GROUP = 64  # the grouping looks this many sorted prompts back: linear time
CHUNK_TOKENS_PER_ROW = 512

Group = Tuple[int, List[int]]  # (shared prefix length, member indices)


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
    import torch

    width = max([len(r) for r in rows] + [0])
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, tokens in enumerate(rows):
        if tokens:
            ids[r, width - len(tokens):] = torch.tensor(list(tokens), dtype=torch.long)
            mask[r, width - len(tokens):] = 1
    return ids.to(device), mask.to(device)


def _prefix_states(model, prefixes: Sequence[Sequence[int]], batch_size: int, pad_id: int, device) -> List[List[Tuple]]:
    """Each prefix's keys and values, per layer, without padding (empty prefixes: ``[]``)."""
    import torch
    from transformers import DynamicCache

    states: List[List[Tuple]] = [[] for _ in prefixes]
    order = sorted((i for i, p in enumerate(prefixes) if p), key=lambda i: -len(prefixes[i]))
    batches: List[List[int]] = []
    for i in order:  # longest first; a new batch once padding would pass a fifth of the tokens
        if not batches or len(batches[-1]) == batch_size or len(prefixes[i]) < 0.8 * len(prefixes[batches[-1][0]]):
            batches.append([])
        batches[-1].append(i)
    for chosen in batches:
        ids, mask = _left_padded([prefixes[i] for i in chosen], pad_id, device)
        cache = DynamicCache()
        model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0), cache=cache,
              use_cache=True, logits_to_keep=1)
        for r, i in enumerate(chosen):
            n = len(prefixes[i])
            states[i] = [(layer.keys[r, :, -n:], layer.values[r, :, -n:]) for layer in cache.layers]
        del cache
    return states


def _cache_of(states: Sequence[List[Tuple]], device):
    """A DynamicCache holding ``states`` (one prefix per row) left-padded to the longest, and its mask."""
    import torch
    from transformers import DynamicCache

    width = max([s[0][0].shape[1] if s else 0 for s in states] + [0])
    mask = torch.zeros((len(states), width), dtype=torch.long, device=device)
    cache = DynamicCache()
    if width == 0:
        return cache, mask
    template = next(s for s in states if s)
    for layer, (k0, v0) in enumerate(template):
        keys = k0.new_zeros((len(states), k0.shape[0], width, k0.shape[2]))
        values = v0.new_zeros((len(states), v0.shape[0], width, v0.shape[2]))
        for r, s in enumerate(states):
            if s:
                n = s[layer][0].shape[1]
                keys[r, :, width - n:] = s[layer][0]
                values[r, :, width - n:] = s[layer][1]
        cache.update(keys, values, layer)
    for r, s in enumerate(states):
        if s:
            mask[r, width - s[0][0].shape[1]:] = 1
    return cache, mask


def _decode_rows(model, cache, mask, rests: Sequence[Sequence[int]], max_new_tokens: int, stop, pad_id: int) -> List[List[int]]:
    """Greedy continuations (up to and with the stop token) of rows whose prefixes are in ``cache``."""
    import torch

    rest_ids, rest_mask = _left_padded(rests, pad_id, mask.device)
    # the rest sits after the left-padded prefix: holes in the mask, positions continued by hand
    positions = mask.sum(-1, keepdim=True) + (rest_mask.cumsum(-1) - 1).clamp(min=0)
    mask = torch.cat([mask, rest_mask], dim=1)
    logits = model(input_ids=rest_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                   logits_to_keep=1).logits[:, -1]
    position = positions[:, -1:]
    alive = list(range(len(rests)))
    out: List[List[int]] = [[] for _ in rests]
    for step in range(max_new_tokens):
        chosen = logits.argmax(-1)
        stopped = torch.isin(chosen, stop)
        for i, token in zip(alive, chosen.tolist()):
            out[i].append(token)
        if step == max_new_tokens - 1 or bool(stopped.all()):
            break
        if bool(stopped.any()):  # a finished row leaves the batch
            keep = (~stopped).nonzero().flatten()
            cache.batch_select_indices(keep)
            mask, position, chosen = mask[keep], position[keep], chosen[keep]
            alive = [alive[k] for k in keep.tolist()]
        mask = torch.cat([mask, mask.new_ones(len(alive), 1)], dim=1)
        position = position + 1
        logits = model(input_ids=chosen[:, None], attention_mask=mask, position_ids=position, cache=cache, use_cache=True,
                       logits_to_keep=1).logits[:, -1]
    return out


def greedy_continuations(model, token_ids: Sequence[Sequence[int]], max_new_tokens: int, stop_ids: Sequence[int],
                         pad_id: int, batch_size: int = 32, chunk_batches: int = 8, show_progress: bool = True,
                         desc: str = "generating") -> List[List[int]]:
    """Greedy continuations (token ids, up to and with the stop token) of distinct prompts.

    Prompts are grouped (:func:`prefix_groups`) and taken a chunk of about
    ``chunk_batches`` batches at a time, fewer where the chunk's prefixes
    would hold more than ``batch_size`` × :data:`CHUNK_TOKENS_PER_ROW` tokens
    (they stay in memory while the chunk decodes: about what one batch of
    512-token prompts holds): each group's prefix runs once, then the rows run in batches of
    ``batch_size`` sorted by the length of their own tokens, so little padding
    is computed, and decode until every row has stopped."""
    import torch

    from .models import progress

    for i, ids in enumerate(token_ids):
        if not len(ids):
            raise ValueError(f"prompt {i} has no tokens: a decoder needs at least one to continue")
    device = next(model.parameters()).device
    stop = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    groups = prefix_groups(token_ids)
    chunks, current, rows, held = [], [], 0, 0
    for group in groups:  # neighbours in sorted order: similar prefixes, similar lengths
        current.append(group)
        rows += len(group[1])
        held += group[0]
        if rows >= batch_size * chunk_batches or held >= batch_size * CHUNK_TOKENS_PER_ROW:
            chunks.append(current)
            current, rows, held = [], 0, 0
    if current:
        chunks.append(current)
    out: List[List[int]] = [[] for _ in token_ids]
    bar = progress(None, total=len(token_ids), desc=desc, enabled=show_progress) if show_progress else None
    for chunk in chunks:
        states = _prefix_states(model, [token_ids[members[0]][:shared] for shared, members in chunk], batch_size, pad_id, device)
        members = sorted(((g, i) for g, (shared, ms) in enumerate(chunk) for i in ms),
                         key=lambda gi: len(token_ids[gi[1]]) - chunk[gi[0]][0])
        for b in range(0, len(members), batch_size):
            batch = members[b:b + batch_size]
            cache, mask = _cache_of([states[g] for g, _ in batch], device)
            rests = [token_ids[i][chunk[g][0]:] for g, i in batch]
            for (_, i), continuation in zip(batch, _decode_rows(model, cache, mask, rests, max_new_tokens, stop, pad_id)):
                out[i] = continuation
            if bar is not None:
                bar.update(len(batch))
        del states
    if bar is not None:
        bar.close()
    return out


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
