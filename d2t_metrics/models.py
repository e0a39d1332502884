"""Model loading, device choice and length-sorted dynamic batching.

Models load by hub id or local path through transformers, once per process:
``load_model`` caches by (name, task, device, dtype), as bert_score's scorer
keeps its model. Weights load from safetensors only and never with
``trust_remote_code``.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

MISSING_MODEL_HELP = (
    "Could not load model {name!r}: {error}\n"
    "The Hugging Face Hub may be unreachable (HF_HUB_OFFLINE={offline}). "
    "Pass a local directory instead, e.g. evaluate.load('./metrics/{metric}', '{config}', model='/path/to/model') "
    "or, on the command line, --model {metric}=/path/to/model. "
    "The project's own checkpoints live in checkpoints/<metric>/."
)


class ModelNotAvailableError(OSError):
    """A model could not be found locally and the Hub could not be reached."""


def get_device(device: Optional[str] = None) -> str:
    """``device`` if given, else ``"cuda"`` when a GPU is present, else ``"cpu"``."""
    if device:
        return str(device)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtype(device: str):
    """bf16 (or fp16 on GPUs without bf16) on CUDA, fp32 elsewhere."""
    import torch

    if str(device).startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def missing_model_error(name: str, error: Exception, metric: str = "<metric>", config: str = "default") -> ModelNotAvailableError:
    return ModelNotAvailableError(
        MISSING_MODEL_HELP.format(name=name, error=error, offline=os.environ.get("HF_HUB_OFFLINE", "0"), metric=metric, config=config)
    )


_AUTO_CLASSES = {
    "sequence-classification": "AutoModelForSequenceClassification",
    "seq2seq": "AutoModelForSeq2SeqLM",
    "encoder": "AutoModel",
    "question-answering": "AutoModelForQuestionAnswering",
    "token-classification": "AutoModelForTokenClassification",
}


@functools.lru_cache(maxsize=8)
def _load_cached(name: str, task: str, device: str, dtype_name: str, metric: str):
    import torch
    import transformers

    dtype = getattr(torch, dtype_name)
    from .checkpoints import is_compact_checkpoint, load_compact

    if os.path.isdir(name) and is_compact_checkpoint(name):
        tokenizer, model, _meta, _extra = load_compact(name, device=device, dtype=dtype)
        return tokenizer, model
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        auto = getattr(transformers, _AUTO_CLASSES[task])
        model = auto.from_pretrained(name, dtype=dtype, use_safetensors=True)
    except (OSError, ValueError) as e:
        raise missing_model_error(name, e, metric=metric) from e
    model.to(device)
    model.eval()
    return tokenizer, model


def load_model(name: str, task: str = "sequence-classification", device: Optional[str] = None, dtype=None, metric: str = "<metric>"):
    """Load ``(tokenizer, model)`` by hub id or local path, once per process.

    ``task`` is one of ``sequence-classification``, ``seq2seq``, ``encoder``,
    ``question-answering``, ``token-classification``. A missing model raises
    :class:`ModelNotAvailableError` that says how to pass a local path.
    """
    if task not in _AUTO_CLASSES:
        raise ValueError(f"unknown task {task!r}; choose one of {sorted(_AUTO_CLASSES)}")
    device = get_device(device)
    if dtype is None:
        dtype = default_dtype(device)
    dtype_name = str(dtype).replace("torch.", "")
    if os.path.isdir(os.path.expanduser(str(name))):
        name = os.path.abspath(os.path.expanduser(str(name)))
    return _load_cached(str(name), task, device, dtype_name, metric)


def clear_model_cache() -> None:
    _load_cached.cache_clear()


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> List[List[int]]:
    """Indices grouped into batches of similar length (longest first), so padding is small."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def progress(iterable, total: Optional[int] = None, desc: str = "", enabled: bool = True):
    """A tqdm progress bar that can be switched off (``enabled=False`` or ``D2T_NO_PROGRESS=1``)."""
    if not enabled or os.environ.get("D2T_NO_PROGRESS"):
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False)


def run_batched(
    items: Sequence[Any],
    lengths: Sequence[int],
    fn: Callable[[List[Any]], List[Any]],
    batch_size: int = 32,
    desc: str = "",
    show_progress: bool = True,
) -> List[Any]:
    """Apply ``fn`` to length-sorted batches of ``items``; results come back in input order.

    ``fn`` takes a list of items and returns one result per item.
    """
    results: List[Any] = [None] * len(items)
    batches = length_sorted_batches(lengths, batch_size)
    for batch in progress(batches, total=len(batches), desc=desc, enabled=show_progress):
        outs = fn([items[i] for i in batch])
        if len(outs) != len(batch):
            raise RuntimeError(f"batch function returned {len(outs)} results for {len(batch)} items")
        for i, out in zip(batch, outs):
            results[i] = out
    return results


def token_lengths(tokenizer, texts: Sequence[str], pairs: Optional[Sequence[str]] = None) -> List[int]:
    """Token counts (special tokens included) for texts or sentence pairs, without padding."""
    if pairs is None:
        enc = tokenizer(list(texts), add_special_tokens=True, truncation=False)
    else:
        enc = tokenizer(list(texts), list(pairs), add_special_tokens=True, truncation=False)
    return [len(ids) for ids in enc["input_ids"]]
