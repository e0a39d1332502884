"""Model loading, device choice, and batched model calls (token lengths,
token embeddings) over :mod:`d2t_metrics.batching`.

Models load by hub id or local path through transformers, once per process:
``load_model`` caches by (name, task, device, dtype), as bert_score's scorer
keeps its model. Weights load from safetensors only and never with
``trust_remote_code``. A folder holding one of the project's checkpoints
(PEFT adapters with ``adapter_config.json``, see :mod:`d2t_metrics.checkpoints`)
loads its base and merges the adapters.

Every tokenizer loaded here is *literal* (:func:`d2t_metrics.untrusted.literal_tokenizer`):
``[SEP]`` or ``</s>`` inside a user's text is read as characters, never as a
special token; the special tokens a model needs are added by id
(``add_special_tokens``). Pass ``literal=False`` only where a prompt template
must hold a special token as a string (QuestEval's T5 ``</s>``), and escape the
user's part of it with :func:`d2t_metrics.untrusted.escape_special_strings`.

Names are checked before anything loads (:func:`d2t_metrics.hub.resolve_model_name`):
a missing local path, or a hub id that is not in the local Hugging Face cache
while the Hub is off or unreachable, raises :class:`d2t_metrics.hub.ModelNotAvailableError`
at once with the fix; online, hub ids load through ``from_pretrained`` as usual.
"""

from __future__ import annotations

import functools
from typing import Any, List, Optional, Sequence

import torch
import transformers

from .batching import run_batched
from .checkpoints import is_checkpoint, load_checkpoint
from .hub import local_files_only, missing_model_error, quiet_loading, resolve_model_name
from .inputs import check_dtype_name
from .untrusted import literal_tokenizer


def get_device(device: Optional[str] = None) -> str:
    """``device`` if given, else ``"cuda"`` when a GPU is present, else ``"cpu"``."""
    if device:
        return str(device)
    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtype(device: str):
    """bf16 (or fp16 on GPUs without bf16) on CUDA, fp32 elsewhere."""
    if str(device).startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


# Prompts per batch for the generative metrics (fact_accuracy's extractor, data_questeval's question
# generation and answering) when the caller gives none: on a CPU a batch's step grows with its rows;
# on a GPU it hardly does (a step of SmolLM2-135M: 38 ms for 32 rows, 41 ms for 256 on an H200,
# RESULTS.md `gpu_checks`), so larger batches are nearly free throughput there. The decoding loop
# still bounds each batch's cache by the device's free memory (d2t_metrics.decoding.token_bounds).
CPU_BATCH_SIZE = 32
GPU_BATCH_SIZE = 256
# Greedy decoding (fact_accuracy's extractor) on a GPU: 1,000 WebNLG outputs on an H200 computed in
# 13.6 s in batches of 256 and in 8.6 s in batches of 1,024 (RESULTS.md `gpu_checks`, 2026-11-30).
# Beam search (data_questeval) keeps GPU_BATCH_SIZE: its batches of 1,024 were not measured.
GPU_GREEDY_BATCH_SIZE = 1024


# On CUDA an encoder's batch is padded to a multiple of this many tokens: every new padded length
# costs a first call its kernel choices and plans (cuDNN's attention builds one per shape), and
# length-sorted batches otherwise meet a new length almost every batch (NLI's first call over 1,670
# checks took 4.0 s on an H100, the same call again 0.7 s: RESULTS.md `gpu_checks`). A CPU pads to
# the longest row, as before.
GPU_PAD_MULTIPLE = 32


def padded_length(longest: int, device, limit: Optional[int] = None) -> int:
    """The length a batch whose longest row has ``longest`` tokens is padded to on ``device``:
    ``longest`` on a CPU; on CUDA rounded up to :data:`GPU_PAD_MULTIPLE`, never past ``limit``
    (the model's positions)."""
    if torch.device(device).type != "cuda":
        return longest
    n = -(-int(longest) // GPU_PAD_MULTIPLE) * GPU_PAD_MULTIPLE
    return max(int(longest), min(n, limit)) if limit else n


def default_batch_size(device: Optional[str] = None, gpu: int = GPU_BATCH_SIZE) -> int:
    """``gpu`` rows (default :data:`GPU_BATCH_SIZE`) on CUDA (``device``, else the one
    :func:`get_device` picks), else :data:`CPU_BATCH_SIZE`."""
    return gpu if str(get_device(device)).startswith("cuda") else CPU_BATCH_SIZE


def check_dtype(dtype):
    """``dtype`` (a torch dtype or its name, one of :data:`d2t_metrics.inputs.DTYPES`) as a torch
    dtype, or ``None`` (the device's default: :func:`default_dtype`); a ``ValueError`` otherwise,
    before anything loads."""
    name = check_dtype_name(dtype)
    return None if name is None else getattr(torch, name)


def arithmetic_label(device: Optional[str] = None, dtype=None) -> Optional[str]:
    """What a metric's signature says of the arithmetic its models run in on ``device`` with
    ``dtype`` (``None``: the defaults, as :func:`load_model` resolves them): ``None`` for exact
    float32, the CPU's default, which every recorded signature assumes; else the dtype's name
    (``"bfloat16"`` on a GPU by default), or ``"float32:<precision>"`` when torch was told to
    multiply float32 matrices at lower precision (``torch.set_float32_matmul_precision``, TF32
    on a GPU). Scores made in another arithmetic differ in their last digits or more, so two
    results are comparable only when their signatures agree (issue #35)."""
    resolved = dtype if dtype is not None else default_dtype(get_device(device))
    name = str(resolved).replace("torch.", "")
    if name != "float32":
        return name
    precision = torch.get_float32_matmul_precision()
    return None if precision == "highest" else f"float32:{precision}"


def arithmetic_part(device: Optional[str] = None, dtype=None) -> str:
    """``"|dtype:<label>"`` for a signature, or ``""`` for exact float32 (:func:`arithmetic_label`)."""
    label = arithmetic_label(device, dtype)
    return f"|dtype:{label}" if label else ""


_AUTO_CLASSES = {
    "sequence-classification": "AutoModelForSequenceClassification",
    "seq2seq": "AutoModelForSeq2SeqLM",
    "encoder": "AutoModel",
    "question-answering": "AutoModelForQuestionAnswering",
    "token-classification": "AutoModelForTokenClassification",
}


@functools.lru_cache(maxsize=8)
def _load_cached(name: str, task: str, device: str, dtype_name: str, metric: str, literal: bool = True):
    dtype = getattr(torch, dtype_name)
    # the project's checkpoints: LoRA adapters (PEFT layout) over a base they name
    if is_checkpoint(name):
        tokenizer, model, _meta, _extra = load_checkpoint(name, device=device, dtype=dtype, literal=literal)
        return tokenizer, model
    # a hub id found in the cache (resolve_model_name) while the Hub is off or silent: never ask the Hub for it again
    local_only = local_files_only(name)
    try:
        with quiet_loading():
            tokenizer = transformers.AutoTokenizer.from_pretrained(name, local_files_only=local_only)
            if literal:  # a user's "[SEP]" stays text (module docstring)
                literal_tokenizer(tokenizer)
            auto = getattr(transformers, _AUTO_CLASSES[task])
            model = auto.from_pretrained(name, dtype=dtype, use_safetensors=True, local_files_only=local_only)
    except (OSError, ValueError) as e:
        raise missing_model_error(name, e, metric=metric) from e
    model.to(device)
    model.eval()
    return tokenizer, model


def load_model(name: str, task: str = "sequence-classification", device: Optional[str] = None, dtype=None, metric: str = "<metric>",
               literal: bool = True):
    """Load ``(tokenizer, model)`` by hub id or local path, once per process.

    The tokenizer is literal (module docstring) unless ``literal=False``: then
    special-token strings in its input are live, and the caller escapes the
    users' texts (:func:`d2t_metrics.untrusted.escape_special_strings`).

    ``task`` is one of ``sequence-classification``, ``seq2seq``, ``encoder``,
    ``question-answering``, ``token-classification``. A missing model raises
    :class:`ModelNotAvailableError` that says how to pass a local path; a
    missing local path, or a hub id that cannot be downloaded, raises it at
    once (:func:`d2t_metrics.hub.resolve_model_name`).
    """
    if task not in _AUTO_CLASSES:
        raise ValueError(f"unknown task {task!r}; choose one of {sorted(_AUTO_CLASSES)}")
    name = resolve_model_name(str(name), metric=metric)
    device = get_device(device)
    if dtype is None:
        dtype = default_dtype(device)
    dtype_name = str(dtype).replace("torch.", "")
    return _load_cached(name, task, device, dtype_name, metric, bool(literal))


def clear_model_cache() -> None:
    _load_cached.cache_clear()


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


__all__ = [
    "arithmetic_label",
    "arithmetic_part",
    "check_dtype",
    "clear_model_cache",
    "default_dtype",
    "get_device",
    "load_model",
    "padded_length",
    "token_embeddings",
    "token_lengths",
]
