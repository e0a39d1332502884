"""Model loading, device choice and length-sorted dynamic batching.

Models load by hub id or local path through transformers, once per process:
``load_model`` caches by (name, task, device, dtype), as bert_score's scorer
keeps its model. Weights load from safetensors only and never with
``trust_remote_code``. A folder holding one of the project's checkpoints
(PEFT adapters with ``adapter_config.json``, see :mod:`d2t_metrics.checkpoints`)
loads its base and merges the adapters.

A name that can only be a local path (absolute, starting with ``.`` or ``~``,
or ``dir/name`` whose ``dir`` exists here) and does not exist fails at once
with :class:`ModelNotAvailableError` ("no such directory"), without asking the
Hub. With ``HF_HUB_OFFLINE=1`` a hub id that is not in the local Hugging Face
cache fails at once too, instead of retrying the Hub; online, hub ids load
through ``from_pretrained`` as usual.

``D2T_NO_PROGRESS=1`` hides the progress bars of d2t-metrics and, while a
model loads, those of transformers and huggingface_hub (:func:`quiet_loading`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

_HOW_TO_PASS = (
    "e.g. evaluate.load('./metrics/{metric}', '{config}', model='/path/to/model') "
    "or, on the command line, --model {metric}=/path/to/model. "
    "The project's own checkpoints live in checkpoints/<metric>/."
)
MISSING_MODEL_HELP = (
    "Could not load model {name!r}: {error}\n"
    "The Hugging Face Hub may be unreachable (HF_HUB_OFFLINE={offline}). Pass a local directory instead, " + _HOW_TO_PASS
)
MISSING_PATH_HELP = (
    "Could not load model {name!r}: {error}\n"
    "It names a local path, so the Hugging Face Hub was not asked (a hub id is 'name' or 'org/name'). "
    "Pass an existing directory (a relative path starts from the current directory, {cwd}), " + _HOW_TO_PASS
)
NOT_CACHED_HELP = (
    "Could not load model {name!r}: it is not in the local Hugging Face cache and the Hub is off "
    "(HF_HUB_OFFLINE=1), so it cannot be downloaded.\n"
    "Unset HF_HUB_OFFLINE where the Hub can be reached, or pass a local directory instead, " + _HOW_TO_PASS
)

_TRUE = {"1", "on", "yes", "true"}
# "name" or "org/name", as the Hub spells repository ids
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class ModelNotAvailableError(OSError):
    """A model could not be found locally and the Hub could not be reached."""


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) as set now, or as
    huggingface_hub read it at import: it reads the variable only then, so a
    later setting (a test, a notebook) is honoured here."""
    if _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE"):
        return True
    try:
        from huggingface_hub import constants
    except ImportError:
        return False
    return bool(getattr(constants, "HF_HUB_OFFLINE", False))


def looks_like_path(name: str) -> bool:
    """True when ``name`` can only mean a local directory: absolute, starting
    with ``.`` or ``~``, shaped like no hub id (several ``/``, a backslash), or
    ``dir/name`` whose first component is a directory here (``models/x`` when
    ``models/`` exists). Any other ``org/name`` is a hub id."""
    if name.startswith((".", "~")) or os.path.isabs(name):
        return True
    if not _HUB_ID.match(name):
        return "/" in name or "\\" in name  # a backslash: a Windows-style path, never a hub id
    return "/" in name and os.path.isdir(name.split("/", 1)[0])


def in_hub_cache(repo_id: str) -> bool:
    """The model's ``config.json`` is in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except (ImportError, ValueError):  # no huggingface_hub, or not a valid repo id
        return False


def resolve_model_name(name: str, metric: str = "<metric>", config: str = "default") -> str:
    """The absolute path of an existing local directory, or ``name`` as a hub id.

    Raises :class:`ModelNotAvailableError` at once, without asking the Hub,
    for a path that does not exist (:func:`looks_like_path`) and, when the Hub
    is off (:func:`hub_offline`), for a hub id missing from the local cache.
    """
    name = str(name)
    expanded = os.path.expanduser(name)
    if os.path.isdir(expanded):
        return os.path.abspath(expanded)
    if looks_like_path(name):
        raise missing_model_error(name, FileNotFoundError(f"no such directory: {os.path.abspath(expanded)}"), metric=metric, config=config)
    if hub_offline() and not in_hub_cache(name):
        raise ModelNotAvailableError(NOT_CACHED_HELP.format(name=name, metric=metric, config=config))
    return name


def progress_disabled() -> bool:
    """``D2T_NO_PROGRESS`` is set (to anything but ``0``, ``false``, ``no``, ``off`` or nothing)."""
    return os.environ.get("D2T_NO_PROGRESS", "").strip().lower() not in {"", "0", "false", "no", "off"}


def _progress_switches():
    """``(huggingface_hub.utils, transformers.utils.logging)``, or ``None`` without those libraries."""
    try:
        from huggingface_hub import utils as hub_utils
        from transformers.utils import logging as transformers_logging
    except ImportError:
        return None
    return hub_utils, transformers_logging


@contextlib.contextmanager
def quiet_loading(enabled: Optional[bool] = None) -> Iterator[None]:
    """Hide the progress bars transformers and huggingface_hub draw while a
    model loads (transformers' "Loading weights" bar, download bars), and
    restore their previous settings afterwards. ``enabled=None`` (the default)
    follows ``D2T_NO_PROGRESS``; ``load_model`` and
    ``checkpoints.load_checkpoint`` load inside it."""
    if enabled is None:
        enabled = progress_disabled()
    switches = _progress_switches() if enabled else None
    if switches is None:
        yield
        return
    hub_utils, transformers_logging = switches
    hub_was_on = not hub_utils.are_progress_bars_disabled()
    transformers_was_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()  # switches huggingface_hub's off too
    hub_utils.disable_progress_bars()
    try:
        yield
    finally:
        if transformers_was_on:
            transformers_logging.enable_progress_bar()
        if hub_was_on:
            hub_utils.enable_progress_bars()
        else:
            hub_utils.disable_progress_bars()


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
    """The error for a model that cannot be loaded, saying how to pass a local
    path; a missing local path says so and does not blame the Hub."""
    if isinstance(error, FileNotFoundError) or looks_like_path(str(name)):
        return ModelNotAvailableError(MISSING_PATH_HELP.format(name=name, error=error, cwd=os.getcwd(), metric=metric, config=config))
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
    from .checkpoints import is_compact_checkpoint, load_checkpoint

    # the project's checkpoints: LoRA adapters (PEFT layout, or the legacy compact file) over a base they name
    if os.path.isdir(name) and is_compact_checkpoint(name):
        tokenizer, model, _meta, _extra = load_checkpoint(name, device=device, dtype=dtype)
        return tokenizer, model
    # offline, a hub id was found in the cache (resolve_model_name); never ask the Hub for it again
    local_only = hub_offline() and not os.path.isdir(name)
    try:
        with quiet_loading():
            tokenizer = transformers.AutoTokenizer.from_pretrained(name, local_files_only=local_only)
            auto = getattr(transformers, _AUTO_CLASSES[task])
            model = auto.from_pretrained(name, dtype=dtype, use_safetensors=True, local_files_only=local_only)
    except (OSError, ValueError) as e:
        raise missing_model_error(name, e, metric=metric) from e
    model.to(device)
    model.eval()
    return tokenizer, model


def load_model(name: str, task: str = "sequence-classification", device: Optional[str] = None, dtype=None, metric: str = "<metric>"):
    """Load ``(tokenizer, model)`` by hub id or local path, once per process.

    ``task`` is one of ``sequence-classification``, ``seq2seq``, ``encoder``,
    ``question-answering``, ``token-classification``. A missing model raises
    :class:`ModelNotAvailableError` that says how to pass a local path; a
    missing local path, or offline a hub id not in the cache, raises it at
    once (:func:`resolve_model_name`).
    """
    if task not in _AUTO_CLASSES:
        raise ValueError(f"unknown task {task!r}; choose one of {sorted(_AUTO_CLASSES)}")
    name = resolve_model_name(str(name), metric=metric)
    device = get_device(device)
    if dtype is None:
        dtype = default_dtype(device)
    dtype_name = str(dtype).replace("torch.", "")
    return _load_cached(name, task, device, dtype_name, metric)


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
    if not enabled or progress_disabled():
        return iterable
    import sys

    from tqdm.auto import tqdm

    # In a terminal the bar clears itself when done; in a captured log (CI, a
    # notebook's file, `2> log`) that clearing is a bare "\r", and the next log
    # line would be written onto the bar's line, so there the bar is left and
    # ends with its newline.
    return tqdm(iterable, total=total, desc=desc, leave=not sys.stderr.isatty())


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


def token_embeddings(model, tokenizer, texts: Sequence[str], layer: int = -1, max_length: int = 512,
                     batch_size: int = 32, desc: str = "", show_progress: bool = True) -> List[Any]:
    """One float tensor per text: the L2-normalized hidden states of ``layer``
    for its tokens, special tokens dropped (BERTScore's token vectors), in
    length-sorted batches with dynamic padding; texts past ``max_length``
    tokens are truncated."""
    import torch

    device = next(model.parameters()).device

    def encode(batch: List[str]) -> List[Any]:
        enc = tokenizer(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt",
                        return_special_tokens_mask=True)
        special = enc.pop("special_tokens_mask").bool()
        enc = {k: v.to(device) for k, v in enc.items()}
        with torch.inference_mode():
            hidden = model(**enc, output_hidden_states=True).hidden_states[layer]
        hidden = torch.nn.functional.normalize(hidden.float(), dim=-1).cpu()
        keep = enc["attention_mask"].cpu().bool() & ~special
        return [hidden[i][keep[i]] for i in range(len(batch))]

    return run_batched(list(texts), [len(t) for t in texts], encode, batch_size=batch_size, desc=desc,
                       show_progress=show_progress)
