"""Tiny random-weight models for offline tests.

``make_tiny_classifier`` and ``make_tiny_seq2seq`` write a 2-layer model and a
small WordPiece tokenizer to a directory, in seconds and without a network, so
every metric's plumbing can be tested end to end.
"""

from __future__ import annotations

import os
import string
from typing import Dict, Optional, Sequence

import torch
import transformers

_WORDS = (
    "the a an is was of in on at and to by for with from it its has have be are were "
    "born city country airport restaurant food price range area near family friendly "
    "coffee shop pub eagle blue spice name rating customer located serves river"
).split()


def _write_vocab(path: str, extra_words: Sequence[str] = ()) -> str:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab = specials + chars + ["##" + c for c in string.ascii_lowercase + string.digits] + list(_WORDS) + list(extra_words)
    seen, unique = set(), []
    for tok in vocab:
        if tok not in seen:
            seen.add(tok)
            unique.append(tok)
    vocab_file = os.path.join(path, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(unique) + "\n")
    return vocab_file


def _save_tokenizer(path: str, model_max_length: int = 128):
    vocab_file = _write_vocab(path)
    tok = transformers.BertTokenizerFast(vocab=vocab_file, do_lower_case=True, model_max_length=model_max_length)
    tok.save_pretrained(path)
    return tok


def make_tiny_classifier(
    path: str,
    id2label: Optional[Dict[int, str]] = None,
    model_type: str = "bert",
    seed: int = 0,
    max_position_embeddings: int = 128,
    hidden_size: int = 32,
) -> str:
    """A 2-layer encoder with a sequence-classification head, saved to ``path``.

    ``model_type`` is ``bert``, ``roberta`` or ``electra``. The default labels
    are MNLI's ``contradiction/neutral/entailment``. At the default
    ``hidden_size`` an example's numbers do not depend on the batch it is
    padded in; at a real model's (384) they move in the 7th digit, as a real
    model's do.
    """
    os.makedirs(path, exist_ok=True)
    id2label = id2label or {0: "contradiction", 1: "neutral", 2: "entailment"}
    tok = _save_tokenizer(path, model_max_length=max_position_embeddings)
    common = dict(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=max_position_embeddings + 2,
        num_labels=len(id2label),
        id2label={int(k): v for k, v in id2label.items()},
        label2id={v: int(k) for k, v in id2label.items()},
        pad_token_id=tok.pad_token_id,
    )
    config_cls = {
        "bert": transformers.BertConfig,
        "roberta": transformers.RobertaConfig,
        "electra": transformers.ElectraConfig,
    }[model_type]
    if model_type == "electra":
        common["embedding_size"] = 32
    config = config_cls(**common)
    torch.manual_seed(seed)
    model = transformers.AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(path, safe_serialization=True)
    return path


def make_tiny_encoder(path: str, seed: int = 0, max_position_embeddings: int = 128) -> str:
    """A 2-layer BERT encoder without a head (for arc classifiers and BERTScore-like uses)."""
    os.makedirs(path, exist_ok=True)
    tok = _save_tokenizer(path, model_max_length=max_position_embeddings)
    config = transformers.BertConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=max_position_embeddings + 2, pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    transformers.AutoModel.from_config(config).save_pretrained(path, safe_serialization=True)
    return path


def make_tiny_seq2seq(path: str, seed: int = 0, max_length: int = 128) -> str:
    """A 2-layer T5-like encoder-decoder with a WordPiece tokenizer, saved to ``path``."""
    os.makedirs(path, exist_ok=True)
    tok = _save_tokenizer(path, model_max_length=max_length)
    config = transformers.T5Config(
        vocab_size=len(tok), d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=2,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.sep_token_id, decoder_start_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    transformers.T5ForConditionalGeneration(config).save_pretrained(path, safe_serialization=True)
    return path


def make_tiny_causal_lm(path: str, seed: int = 0, max_length: int = 256) -> str:
    """A 2-layer Llama-style decoder (the shape of the project's small
    generator) with a WordPiece tokenizer whose ``[SEP]`` is the end of
    sequence, saved to ``path``: a stand-in base for
    :mod:`d2t_metrics.generator` in tests."""
    os.makedirs(path, exist_ok=True)
    vocab_file = _write_vocab(path)
    tok = transformers.BertTokenizerFast(vocab=vocab_file, do_lower_case=True, model_max_length=max_length, eos_token="[SEP]")
    tok.save_pretrained(path)
    config = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=max_length, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.sep_token_id, bos_token_id=tok.cls_token_id, tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    transformers.LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    return path
