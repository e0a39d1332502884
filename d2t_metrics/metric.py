"""The metric protocol: what every d2t-metrics evaluate module declares, in one place.

Each metric's main file (``metrics/<name>/<name>.py``) subclasses
:class:`D2TMetric` and reads like one of evaluate's own modules: docstrings
with a runnable example, ``_info``, ``_compute`` and, for a model-based
metric, :meth:`D2TMetric.load_model`. What the command line and the
playground need to plan a run *before any model loads* is declared here, as
class attributes and properties, instead of being probed for:

==========================  ====================================================
``INPUTS``                  each declared input (an evaluate feature) and its kind
``OPTIONAL_INPUTS``         declared inputs the metric can do without
``ALTERNATIVE_INPUTS``      other keywords that fill a declared input's column
``MODEL_FREE_CONFIGS``      configurations that load no model
``DEFAULT_MODEL``           the paper's model: the API's default
``CHECKPOINT``              the project's checkpoint folder: the CLI's default
``uses_model``              whether this constructed metric loads a model
``model_name``              the model it loads, as shown to users
``signature(**options)``    the settings a score depends on, for result tables
``load_model()``            the one loading hook (idempotent)
``corpus_scores(examples)`` the corpus scores from per-example ones (sharding)
==========================  ====================================================

evaluate loads models in ``download_and_prepare``; :class:`D2TMetric` routes
that to :meth:`~D2TMetric.load_model`, which ``_compute`` also calls, so a
metric built without ``download_and_prepare`` (its constructor called
directly) loads on first use.

A metric run in one process (``num_process=1``, the default) keeps its inputs in
memory (``keep_in_memory=True``, whatever ``evaluate.load`` passes): evaluate
otherwise stores them in ``~/.cache/huggingface/metrics/<name>/<config>/*.arrow``
with a ``.lock`` beside, and a run that fails or is killed leaves that file,
users' texts inside, behind (evaluate removes it only after a successful
``_compute``; the ``.lock`` files stay even then). In one process the file has
no use: it exists to gather several processes' inputs, so ``num_process > 1``
keeps evaluate's files (and its own cleanup).

This module imports ``evaluate``: import it only where a metric is loaded
(``d2t_metrics`` itself and the command line's ``--help``, ``list`` and
``doctor`` do not).
"""

from __future__ import annotations

import abc
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import datasets
import evaluate

from .inputs import REFERENCES
from .inputs import TABLE
from .inputs import TEXT
from .inputs import CheckedInputs
from .locations import checkpoint_path


class D2TMetric(CheckedInputs, evaluate.Metric, metaclass=abc.ABCMeta):
    """Base class of the d2t-metrics evaluate modules (see the module docstring for the protocol).

    Abstract (each metric defines ``_info``), so that evaluate's loader, which
    takes the first concrete ``evaluate.Metric`` subclass a module holds, takes
    the metric's class and not this one, which the module imports first.
    """

    #: Inputs: each feature name and its kind (``d2t_metrics.inputs.TEXT``, ``REFERENCES``, ``TABLE``).
    INPUTS: Dict[str, str] = CheckedInputs.INPUTS
    #: Declared inputs the metric can do without. Given, they are checked like the others;
    #: missing, each example stores an empty value (no references, no table), and the command
    #: line passes them only when every input line has them. A metric whose inputs besides
    #: ``predictions`` are all optional needs at least one of them.
    OPTIONAL_INPUTS: Tuple[str, ...] = ()
    #: ``{keyword: (declared input it fills, kind)}`` (DAE: ``sources=`` texts fill ``tables``).
    ALTERNATIVE_INPUTS: Dict[str, Tuple[str, str]] = CheckedInputs.ALTERNATIVE_INPUTS
    #: Configurations that load no model; the command line gives them none.
    MODEL_FREE_CONFIGS: Tuple[str, ...] = ()
    #: The paper's model (a hub id, or a dict role -> hub id): the default of ``load(name)``.
    #: ``None`` when the API's default is the project's checkpoint.
    DEFAULT_MODEL: Optional[Union[str, Mapping[str, str]]] = None
    #: The project's checkpoint: ``checkpoints/<CHECKPOINT>/`` (``d2t_metrics.checkpoint_path``),
    #: which the command line passes as ``model=`` so that the metric runs offline. ``None``: no model.
    CHECKPOINT: Optional[str] = None
    #: A combination of other metrics (semantic_accuracy): the command line passes the folder of
    #: the project's checkpoints (one per component) as ``model=``, and runs it only when named.
    COMPONENT_CHECKPOINTS: bool = False

    #: The model this metric object loads, as shown to users (set by the constructor).
    model_name: Optional[str] = None

    def __init__(self, *args, keep_in_memory: bool = False, num_process: int = 1, **kwargs):
        # One process: no cache file of the inputs (see the module docstring). Forced, since
        # evaluate.load always passes keep_in_memory=False, its own default.
        super().__init__(*args, keep_in_memory=keep_in_memory or num_process == 1, num_process=num_process, **kwargs)

    @property
    def uses_model(self) -> bool:
        """Whether this metric object loads a model: any configuration outside
        :attr:`MODEL_FREE_CONFIGS` of a metric with a default model or checkpoint."""
        has_model = self.DEFAULT_MODEL is not None or self.CHECKPOINT is not None
        return has_model and self.config_name not in self.MODEL_FREE_CONFIGS

    @classmethod
    def checkpoint_path(cls) -> Optional[str]:
        """The folder of the project's checkpoint (:attr:`CHECKPOINT`), or ``None`` when there is none."""
        return checkpoint_path(cls.CHECKPOINT) if cls.CHECKPOINT else None

    def signature(self, **options: Any) -> Optional[str]:
        """The settings a score depends on (config, model and its fingerprint, the
        compute options given), as one string for result tables; ``None`` for a
        metric that keeps none of its own (``benchmarks`` then writes its
        settings as ``metric:<name>|config:...``, as recorded for PARENT and NLI)."""
        return None

    def load_model(self) -> Any:
        """Load what ``_compute`` needs (models, spaCy pipelines) once per metric
        object and return it; later calls return the same object. Model-free
        metrics load nothing."""
        return None

    def corpus_scores(self, examples: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
        """The corpus-level part of ``compute(..., per_example=True)``'s result (every key but
        ``"examples"``), computed from the per-example dicts alone, in input order.

        The command line scores a metric that has it in blocks of lines (:mod:`d2t_metrics.blocks`),
        and shards those over processes (:mod:`d2t_metrics.sharding`): the corpus scores of the
        whole come from the joined per-example dicts, which must give exactly what ``_compute``
        gives on all of them at once (the same sums, in the same order). A metric overrides it
        when its corpus scores follow from its per-example ones; one that does not is scored in
        one call, by one process. ``NotImplementedError`` here."""
        raise NotImplementedError(f"{self.name} does not say how its corpus scores follow from per-example ones")

    def declared_features(self, table_id: str = "table") -> datasets.Features:
        """evaluate's features for :attr:`INPUTS`, in their order: a string per text,
        a sequence of strings per references, a canonical table string per table
        (``d2t_metrics.inputs``; ``table_id`` names what the column may hold)."""
        kinds = {
            TEXT: lambda: datasets.Value("string"),
            REFERENCES: lambda: datasets.Sequence(datasets.Value("string")),
            TABLE: lambda: datasets.Value("string", id=table_id),
        }
        return datasets.Features({name: kinds[kind]() for name, kind in self.INPUTS.items()})

    # -- evaluate's hooks --------------------------------------------------
    @abc.abstractmethod
    def _info(self) -> evaluate.MetricInfo:
        """The metric's description, citation and features (its declared inputs)."""

    def _download_and_prepare(self, dl_manager) -> None:
        # Where evaluate.load (and the command line) loads models.
        self.load_model()

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Compute the metric on the given examples and on those added before.

        Every input is checked first (``ValueError`` naming the argument and the
        example index), before evaluate stores anything.
        """
        self._check_metric_call({"predictions": predictions, "references": references, **kwargs})
        return super().compute(predictions=predictions, references=references, **kwargs)

    def check(self, *, predictions=None, references=None, **kwargs) -> None:
        """What :meth:`compute` checks, storing and computing nothing (``ValueError`` naming
        the argument and the example index); no model is loaded."""
        self._check_metric_call({"predictions": predictions, "references": references, **kwargs})
        super().check(predictions=predictions, references=references, **kwargs)

    def _check_metric_call(self, given: Dict[str, Any]) -> None:
        if given["predictions"] is not None:
            self._check_call({k: v for k, v in given.items() if k in self.accepted_inputs and v is not None},
                             {k: v for k, v in given.items() if k not in self.accepted_inputs})

    def _check_call(self, inputs: Dict[str, Any], options: Dict[str, Any]) -> None:
        """Refuse a call whose options need an input it was not given (metrics override this)."""

    def _checked_columns(self, given: Dict[str, Any], offset: int) -> Dict[str, list]:
        """Every input checked and encoded (an optional input not given stores its
        empty value); refused when every input besides the predictions is missing."""
        others = [name for name in self.INPUTS if name != "predictions"]
        if others and all(name in self.OPTIONAL_INPUTS and not self._is_given(name, given) for name in others):
            others.sort(key=lambda name: self.INPUTS[name] != TABLE)  # the input data first
            wanted = " or ".join(f"{name}= (one per prediction)" for name in others)
            raise ValueError(f"{' and '.join(others)} are None; {self.name} needs {wanted}")
        return super()._checked_columns(given, offset)

    def _is_given(self, name: str, given: Dict[str, Any]) -> bool:
        return name in given or any(column == name and alt in given for alt, (column, _) in self.ALTERNATIVE_INPUTS.items())
