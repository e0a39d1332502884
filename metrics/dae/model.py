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

A checkpoint may instead sit over a causal LM (SmolLM2-135M-Instruct; recipe
``"task": "decoder"``): the same head over the hidden states of
``source <sep> hypothesis``, each word represented by its **last** sub-token
(:class:`DecoderPairEncoder`, end of this module).
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


# ---------------------------------------------------------------- the decoder backbone
#
# A causal language model (SmolLM2-135M-Instruct) can serve as the backbone instead of the encoder: it reads
# ``source <sep> hypothesis`` (no [CLS], one separator token, the tokenizer's end-of-sequence token by default),
# so every hypothesis token has seen the whole source; causal attention means a word's *last* sub-token is the
# first that has seen the whole word, so a word is represented by its last sub-token's hidden state. The arc head
# is the same. The checkpoint's recipe says which backbone it has: ``"task": "decoder"``,
# ``"word_vector": "last sub-token"``, ``"separator"`` (the separator token's string).

DECODER_TASK = "decoder"
DECODER_MAX_LENGTH = 320
WORD_VECTOR_FIRST = "first sub-token"
WORD_VECTOR_LAST = "last sub-token"
# LoRA on the attention and MLP projections of a Llama-style decoder (the generator's recipe, d2t_metrics.generator)
DECODER_LORA = {
    "r": 16, "lora_alpha": 32, "lora_dropout": 0.05,
    "target_modules": ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"],
}


def is_decoder(meta: Optional[Dict[str, Any]]) -> bool:
    """True for the recipe of a checkpoint over a causal LM (``"task": "decoder"``)."""
    return bool(meta) and meta.get("task") == DECODER_TASK


def separator_token(tokenizer, meta: Optional[Dict[str, Any]] = None) -> str:
    """The separator between source and hypothesis of the decoder backbone: the recipe's ``separator``,
    else the tokenizer's end-of-sequence token (``<|im_end|>`` for SmolLM2), else its ``[SEP]``."""
    name = (meta or {}).get("separator") or tokenizer.eos_token or tokenizer.sep_token
    if not name:
        raise ValueError("the tokenizer has no end-of-sequence or separator token to put between source and hypothesis")
    return str(name)


class DecoderPairEncoder:
    """Builds the decoder backbone's inputs, ``source <sep> hypothesis``, from words.

    Each word is tokenized on its own with a leading space (``" " + word``, as it reads inside running text),
    and the pieces are concatenated, so the word of every sub-token is known exactly and a word's sub-token
    count (:meth:`count`) is what :meth:`encode` uses. The separator is put in by id: the same string in a
    text stays characters (the tokenizer is literal). Pieces are cached per word."""

    def __init__(self, tokenizer, meta: Optional[Dict[str, Any]] = None, cache_size: int = 200_000):
        self.tokenizer = tokenizer
        self.separator = separator_token(tokenizer, meta)
        self.sep_id = tokenizer.convert_tokens_to_ids(self.separator)
        if self.sep_id is None or (tokenizer.unk_token_id is not None and self.sep_id == tokenizer.unk_token_id
                                   and self.separator != tokenizer.unk_token):
            raise ValueError(f"the separator {self.separator!r} is not a token of this tokenizer")
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.sep_id)
        self.cache_size = cache_size
        self._cache: Dict[str, List[int]] = {}

    def piece_ids_uncached(self, words: Sequence[str]) -> List[List[int]]:
        if not words:
            return []
        # verbose=False: a long word is capped by the caller; the tokenizer's length warning would mislead
        ids = self.tokenizer([" " + w for w in words], add_special_tokens=False, verbose=False)["input_ids"]
        return [list(x) for x in ids]

    def piece_ids(self, words: Sequence[str]) -> List[List[int]]:
        missing = [w for w in dict.fromkeys(words) if w not in self._cache]
        if missing:
            if len(self._cache) + len(missing) > self.cache_size:
                self._cache.clear()
            self._cache.update(zip(missing, self.piece_ids_uncached(missing)))
        return [self._cache[w] for w in words]

    def count(self, words: Sequence[str]) -> List[int]:
        return [len(x) for x in self.piece_ids(words)]

    def encode_ids(self, source: Sequence[str], hypothesis: Sequence[str], max_length: int) -> Tuple[List[int], List[int]]:
        """``(input ids, per hypothesis word the position of its last sub-token)`` of one pair.

        The source is cut at its end to fit ``max_length``; a hypothesis that cannot fit even alone is cut too
        (the scorer's segments always fit; training data and direct callers need not). A hypothesis word
        with no sub-token (an empty word, or one cut off) borrows the position of the nearest earlier word,
        or of the separator."""
        room = max(int(max_length) - 1, 0)
        hyp_pieces = self.piece_ids(list(hypothesis))
        kept: List[List[int]] = []
        used = 0
        for p in hyp_pieces:
            take = p[: max(room - used, 0)]
            kept.append(take)
            used += len(take)
        src_ids: List[int] = []
        budget = room - used
        for p in self.piece_ids(list(source)):
            if len(src_ids) >= budget:
                break
            src_ids.extend(p[: budget - len(src_ids)])
        sep_pos = len(src_ids)
        ids = src_ids + [self.sep_id]
        positions, last = [], sep_pos
        for p in kept:
            if p:
                ids.extend(p)
                last = len(ids) - 1
            positions.append(last)
        return ids, positions

    def encode(self, sources: Sequence[Sequence[str]], hypotheses: Sequence[Sequence[str]], max_length: int):
        """Batch of :meth:`encode_ids`: ``({"input_ids", "attention_mask"} tensors padded on the right, positions)``."""
        import torch

        rows, positions = [], []
        for s, h in zip(sources, hypotheses):
            ids, pos = self.encode_ids(s, h, max_length)
            rows.append(ids)
            positions.append(pos)
        width = max((len(r) for r in rows), default=1)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for b, r in enumerate(rows):
            input_ids[b, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[b, : len(r)] = 1
        return {"input_ids": input_ids, "attention_mask": mask}, positions
