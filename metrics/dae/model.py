"""The DAE network: an encoder over ``[CLS] source [SEP] hypothesis [SEP]`` and
a linear arc classifier.

An arc's representation is ``[E(x;h)[head]; E(x;h)[child]; R(relation)]``
(Goyal & Durrett, 2020, §3): the contextual vectors of the head word and the
child word (each word is represented by its **first sub-token**), and a
learned embedding of the relation label (``RELATIONS``; the paper embeds the
label's word pieces with the encoder's own embeddings, a fixed table is
simpler and as expressive for a closed label set). The shipped model adds
alignment features of the arc against the source (``arcs.ARC_FEATURES``,
named in the checkpoint's metadata: arc found in the source, with the same
base relation, head and child linked in the source, head / child word in the
source, their closeness in the source tree, a dropped or added negation). A
linear layer maps it all to one logit; ``sigmoid(logit)`` is P(entailed). One encoder pass serves all
the arcs of a (source, hypothesis) pair.

Checkpoints use the project's PEFT layout (``d2t_metrics.checkpoints``): LoRA
adapters over all-MiniLM-L6-v2 (``adapter_config.json``,
``adapter_model.safetensors``, loadable with ``peft.PeftModel`` over
``transformers.AutoModel``), the head tensors ``rel_emb.weight``,
``arc_head.weight`` and ``arc_head.bias`` in ``arc_head.safetensors``, and
the recipe in ``d2t_config.json`` (kind, relations, arc feature names, max
length, hidden size).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from d2t_metrics.checkpoints import HEAD_FILES

from .arcs import RELATIONS

DEFAULT_MAX_LENGTH = 128
CHECKPOINT_TASK = "encoder"
ARC_MODEL_KIND = "dae-arc-classifier"
HEAD_FILE = HEAD_FILES[ARC_MODEL_KIND]  # "arc_head.safetensors", beside the adapters


def make_arc_head(hidden_size: int, num_relations: int = len(RELATIONS), num_features: int = 0):
    """The trainable head: relation embeddings and the arc classifier, over
    ``[head; child; relation]`` and, when ``num_features`` > 0, the arc's
    lexical alignment features against the source (``arcs.ARC_FEATURES``)."""
    import torch

    class ArcHead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.num_features = num_features
            self.rel_emb = torch.nn.Embedding(num_relations, hidden_size)
            self.arc_head = torch.nn.Linear(3 * hidden_size + num_features, 1)
            torch.nn.init.normal_(self.rel_emb.weight, std=0.02)
            torch.nn.init.normal_(self.arc_head.weight, std=0.02)
            torch.nn.init.zeros_(self.arc_head.bias)

        def forward(self, head_vecs, child_vecs, rel_ids, features=None):
            parts = [head_vecs, child_vecs, self.rel_emb(rel_ids).to(head_vecs.dtype)]
            if self.num_features:
                parts.append(features.to(head_vecs.dtype))
            return self.arc_head(torch.cat(parts, dim=-1)).squeeze(-1)

    return ArcHead()


def head_tensors(head) -> Dict[str, Any]:
    return {
        "rel_emb.weight": head.rel_emb.weight,
        "arc_head.weight": head.arc_head.weight,
        "arc_head.bias": head.arc_head.bias,
    }


def load_head(extra: Dict[str, Any], hidden_size: int):
    num_features = extra["arc_head.weight"].shape[1] - 3 * hidden_size
    head = make_arc_head(hidden_size, num_relations=extra["rel_emb.weight"].shape[0], num_features=num_features)
    head.load_state_dict({k: v for k, v in extra.items() if k in ("rel_emb.weight", "arc_head.weight", "arc_head.bias")})
    return head


def pair_strategy(tokenizer, hypotheses: Sequence[Sequence[str]], max_length: int) -> str:
    """``"only_first"`` (cut only the source) when every hypothesis fits
    ``max_length`` with the special tokens, else ``"longest_first"``.

    ``only_first`` raises a bare ``Exception: Truncation error`` from the
    tokenizers library when a hypothesis alone is too long; the scorer's
    segments always fit, but training data and direct callers need not."""
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    # verbose=False: over-long hypotheses are handled here, the tokenizer's length warning would mislead
    ids = tokenizer([list(h) for h in hypotheses], is_split_into_words=True, add_special_tokens=False, verbose=False)["input_ids"]
    return "only_first" if all(len(x) <= room for x in ids) else "longest_first"


def encode_pairs(tokenizer, sources: Sequence[Sequence[str]], hypotheses: Sequence[Sequence[str]], max_length: int):
    """Tokenize (source words, hypothesis words) pairs; returns the batch and,
    per pair, the position of the first sub-token of every hypothesis word.

    The source is truncated to fit ``max_length``; a hypothesis that cannot fit
    even alone is truncated too (see :func:`pair_strategy`) instead of raising.
    A hypothesis word with no sub-token (e.g. a stray control character, or a
    word cut off by that truncation) borrows the position of the nearest
    earlier word, or of the separator."""
    enc = tokenizer(
        [list(s) for s in sources], [list(h) for h in hypotheses], is_split_into_words=True,
        truncation=pair_strategy(tokenizer, hypotheses, max_length), max_length=max_length, padding=True, return_tensors="pt",
    )
    positions: List[List[int]] = []
    for b, hyp in enumerate(hypotheses):
        first: Dict[int, int] = {}
        sep = 0
        for pos, (wid, sid) in enumerate(zip(enc.word_ids(b), enc.sequence_ids(b))):
            if sid == 1 and wid is not None and wid not in first:
                first[wid] = pos
            elif sid is None and not first and pos > 0 and sep == 0:
                sep = pos  # the [SEP] between source and hypothesis
        out, last = [], sep
        for w in range(len(hyp)):
            last = first.get(w, last)
            out.append(last)
        positions.append(out)
    return enc, positions


def load_dae_checkpoint(path: str, device: str = "cpu", dtype=None):
    """``(tokenizer, encoder, head, meta)`` from a DAE checkpoint directory
    (the PEFT layout)."""
    from d2t_metrics.checkpoints import load_checkpoint

    tokenizer, encoder, meta, extra = load_checkpoint(path, device=device, dtype=dtype)
    if meta.get("kind") != ARC_MODEL_KIND or "arc_head.weight" not in extra:
        raise ValueError(f"{path} is a d2t-metrics checkpoint but not a DAE arc classifier (kind={meta.get('kind')!r})")
    head = load_head(extra, encoder.config.hidden_size).to(device)
    if dtype is not None:
        head = head.to(dtype)
    head.eval()
    return tokenizer, encoder, head, meta
