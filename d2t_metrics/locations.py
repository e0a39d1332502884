"""Where the project's metric modules and checkpoints are, in a checkout and installed.

The repository keeps the evaluate modules in ``metrics/<name>/`` and the
project's trained checkpoints in ``checkpoints/<name>/``, next to the
``d2t_metrics`` package. A wheel (``pip install .``) carries both as package
data of ``d2t_metrics``::

    checkout                      installed (site-packages)
    metrics/<name>/         ->    d2t_metrics/metrics/<name>/
    checkpoints/<name>/     ->    d2t_metrics/_checkpoints/<name>/

(``_checkpoints``: ``d2t_metrics/checkpoints.py`` is the checkpoint-format
module.) This module is the one place that answers "where is metric X" and
"where is the project checkpoint of X": the package data when it is there
(an installed wheel), else the top-level folders of the checkout the package
sits in (an editable install, or the source tree on ``sys.path``). The
current directory plays no part, so the answers hold from any directory.

Only the standard library is imported here; :func:`load` imports
``evaluate`` when it is called.
"""

from __future__ import annotations

import os
from typing import List, Optional

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
CHECKOUT_ROOT = os.path.dirname(PACKAGE_DIR)

# Folder names inside the installed package (setup.py maps the top-level folders onto them).
PACKAGED_METRICS = "metrics"
PACKAGED_CHECKPOINTS = "_checkpoints"

__all__ = ["available_metrics", "checkpoint_path", "checkpoints_dir", "load", "metric_path", "metrics_dir"]


def _has_metrics(folder: str) -> bool:
    try:
        return os.path.isdir(folder) and any(_is_metric(folder, name) for name in os.listdir(folder))
    except OSError:
        return False


def _is_metric(folder: str, name: str) -> bool:
    return not name.startswith((".", "_")) and os.path.isfile(os.path.join(folder, name, f"{name}.py"))


def metrics_dir() -> Optional[str]:
    """The folder holding ``<name>/<name>.py`` for every project metric, or ``None``.

    Installed from a wheel: ``d2t_metrics/metrics`` (package data). In a
    checkout (editable install, or the source tree on ``sys.path``): the
    top-level ``metrics/`` next to the package.
    """
    for folder in (os.path.join(PACKAGE_DIR, PACKAGED_METRICS), os.path.join(CHECKOUT_ROOT, "metrics")):
        if _has_metrics(folder):
            return folder
    return None


def checkpoints_dir() -> Optional[str]:
    """The folder holding the project's ``<name>/`` checkpoints, or ``None``.

    Installed: ``d2t_metrics/_checkpoints``; in a checkout: the top-level
    ``checkpoints/`` next to the package. It comes from the same copy as
    :func:`metrics_dir`, so metrics and checkpoints never mix two copies.
    """
    packaged = os.path.join(PACKAGE_DIR, PACKAGED_CHECKPOINTS)
    checkout = os.path.join(CHECKOUT_ROOT, "checkpoints")
    found = metrics_dir()
    if found == os.path.join(PACKAGE_DIR, PACKAGED_METRICS):
        candidates = (packaged,)
    elif found is not None:
        candidates = (checkout,)
    else:
        candidates = (packaged, checkout)
    for folder in candidates:
        if os.path.isdir(folder):
            return folder
    return None


def available_metrics() -> List[str]:
    """The names of the project's metrics (folders ``<name>/<name>.py``), sorted."""
    folder = metrics_dir()
    if folder is None:
        return []
    return sorted(name for name in os.listdir(folder) if _is_metric(folder, name))


def metric_path(name: str) -> str:
    """The folder of metric ``name`` (holding ``<name>.py``), for ``evaluate.load``.

    Raises ``ValueError`` naming the available metrics when there is no such metric.
    """
    folder = metrics_dir()
    if not isinstance(name, str) or folder is None or not _is_metric(folder, name):
        known = available_metrics()
        where = folder or f"{os.path.join(PACKAGE_DIR, PACKAGED_METRICS)} or {os.path.join(CHECKOUT_ROOT, 'metrics')}"
        raise ValueError(f"unknown metric {name!r} (no {name}/{name}.py in {where}); available: {', '.join(known) or 'none'}")
    return os.path.join(folder, name)


def checkpoint_path(name: str) -> Optional[str]:
    """The folder of the project's own checkpoint for metric ``name``, or ``None``
    when the project has none for it (the folder is missing or holds only hidden files).

    This is the offline model the command line passes by default:
    ``d2t_metrics.load(name, model=d2t_metrics.checkpoint_path(name))``.
    """
    folder = checkpoints_dir()
    if folder is None or not isinstance(name, str) or not name or os.sep in name or name.startswith("."):
        return None
    path = os.path.join(folder, name)
    try:
        if os.path.isdir(path) and any(not f.startswith(".") for f in os.listdir(path)):
            return path
    except OSError:
        pass
    return None


def load(name: str, config: Optional[str] = None, **kwargs):
    """``evaluate.load`` of the project's metric ``name``, from any directory.

    Same as ``evaluate.load(d2t_metrics.metric_path(name), config, **kwargs)``:
    ``config`` is the metric's configuration name and ``kwargs`` go to
    ``evaluate.load`` and the metric's constructor (``model=``, ``device=``,
    ``num_process=``, ...). An unknown ``name`` raises ``ValueError`` listing
    the available metrics.

    The model is the metric's own default, as with ``evaluate.load`` of the
    folder: the paper's model for ``nli_semantic_accuracy``
    (``roberta-large-mnli`` from the Hub), the project checkpoint for ``dae``
    (whose only neural default it is). The project's offline checkpoint is
    not swapped in silently, so scores stay comparable with the paper and
    with ``evaluate.load("./metrics/<name>")``; pass it explicitly when
    working offline (the command line does this by default)::

        d2t_metrics.load("nli_semantic_accuracy", model=d2t_metrics.checkpoint_path("nli_semantic_accuracy"))
    """
    path = metric_path(name)
    import evaluate  # the base install stays light: evaluate comes with the metric extras

    return evaluate.load(path, config, **kwargs)
