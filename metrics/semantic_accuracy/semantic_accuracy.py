"""Semantic accuracy: one calibrated, explained verdict per data-to-text output, combining
the reference-less metrics of d2t-metrics with weights fitted out of fold on WebNLG 2017."""

import hashlib
import json
import os
from typing import Dict, Mapping, Optional

import evaluate

import d2t_metrics
from d2t_metrics.inputs import TABLE
from d2t_metrics.inputs import TEXT
from d2t_metrics.inputs import check_batch_size
from d2t_metrics.inputs import decode_column
from d2t_metrics.inputs import plain_table
from d2t_metrics.locations import checkpoints_dir
from d2t_metrics.metric import D2TMetric
from d2t_metrics.models import check_dtype
from d2t_metrics.timing import stage

from .combine import combined_score
from .combine import component_score
from .combine import corpus_scores
from .combine import label_of
from .combine import load_weights
from .evidence import fact_verdicts
from .evidence import table_facts
from .evidence import text_claims

_CITATION = """\
@misc{d2t-metrics-semantic-accuracy,
    title = "semantic_accuracy: reference-less data-to-text metrics combined by a ridge fitted out of fold",
    note = "d2t-metrics; components: Du{\\v{s}}ek and Kasner 2020, Rebuffel et al. 2021, Goodrich et al. 2019, Goyal and Durrett 2020",
}
"""

_DESCRIPTION = """\
Runs the reference-less metrics of d2t-metrics once each (config "default":
nli_semantic_accuracy, data_questeval, fact_accuracy and dae; config "fast":
nli_semantic_accuracy, dae's rule config and fact_accuracy's OpenIE config, no
generative model), combines their per-example scores with a ridge regression
fitted on WebNLG 2017's human semantics ratings (leave-one-category-out, see
weights.json) and returns one score in [0, 1], one label (OK / omission /
hallucination / omission+hallucination) and a verdict per table fact that
merges each metric's evidence.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): generated texts, one per table.
    tables (list): the input data, one table per prediction, in any form
        d2t_metrics.parse_table reads (WebNLG "s | p | o" strings, E2E MRs,
        attribute-value lists or dicts). Checked before anything loads.
    per_example (bool): also return "examples", one dict per prediction.
    batch_size (int or None): passed to every component (None: their defaults).
    show_progress (bool): show the components' progress bars (default True).
Returns:
    score (float): mean combined score (an estimate of the raters' mean
        semantics rating, 1-3, mapped to 0-1).
    ok_rate, omission_rate, hallucination_rate, both_rate (float): label shares.
    examples (list of dict, with per_example=True): "score", "label",
        "label_basis" and the components that located each error
        ("omission_by", "hallucination_by"), "components" (each component's
        score), "facts" (per table fact: "verdict" and the evidence of
        "nli", "qa" and "fact_accuracy"), "text_claims" (what the text says
        that no table fact supports) and "truncated".
Examples:
    >>> import d2t_metrics
    >>> # offline: the project's NLI checkpoint (the fast config's only model)
    >>> metric = d2t_metrics.load("semantic_accuracy", "fast",
    ...     model={"nli_semantic_accuracy": d2t_metrics.checkpoint_path("nli_semantic_accuracy")})
    >>> results = metric.compute(predictions=["Alan Bean was born in Wheeler, Texas."],
    ...     tables=[["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot"]],
    ...     per_example=True, show_progress=False)
    >>> sorted(results)
    ['both_rate', 'examples', 'hallucination_rate', 'ok_rate', 'omission_rate', 'score']
    >>> [(f["fact"], f["verdict"]) for f in results["examples"][0]["facts"]]
    [('Alan_Bean | birthPlace | Wheeler,_Texas', 'stated'), ('Alan_Bean | occupation | Test_pilot', 'omitted')]
"""

CONFIGS = ("default", "fast")
# Component configs that load no model: they get no model= (dae's rule, fact_accuracy's OpenIE).
MODEL_FREE_COMPONENTS = {("dae", "rule"), ("fact_accuracy", "openie")}


def load_component(metric: str, config: Optional[str], **kwargs):
    """One component metric (a module-level hook so that tests can swap the loader)."""
    return d2t_metrics.load(metric, config, **kwargs)


def component_model(feature: str, spec: Mapping, model) -> Optional[str]:
    """The model= a component gets: ``None`` (its own default), the entry for the feature or its metric
    in a dict, or ``<folder>/<metric>`` when ``model`` is a folder of checkpoints (``checkpoints/``)."""
    if model is None or (spec["metric"], spec["config"]) in MODEL_FREE_COMPONENTS:
        return None
    if isinstance(model, Mapping):
        return model.get(feature) or model.get(spec["metric"])
    folder = os.path.normpath(os.path.join(os.path.expanduser(str(model)), spec["metric"]))
    if not os.path.isdir(folder):
        raise ValueError(f"model={model!r} must be a folder holding one checkpoint folder per component, "
                         f"or a dict component -> model; it has no {spec['metric']}/")
    return folder


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SemanticAccuracy(D2TMetric):
    INPUTS = {"predictions": TEXT, "tables": TABLE}
    # The components' own defaults (their papers' models; the project's checkpoints for fact_accuracy and dae).
    DEFAULT_MODEL = {"nli_semantic_accuracy": "roberta-large-mnli", "data_questeval": "ThomasNLG/t5-*-en (4 models)",
                     "fact_accuracy": "checkpoints/fact_accuracy", "dae": "checkpoints/dae"}
    # The command line passes checkpoints/ itself as model=, the folder holding one checkpoint
    # per component (component_model picks each one's).
    COMPONENT_CHECKPOINTS = True

    def __init__(self, *args, model=None, device=None, dtype=None, components=None, weights=None, **kwargs):
        super().__init__(*args, **kwargs)
        if self.config_name not in CONFIGS:
            raise ValueError(f"unknown config {self.config_name!r}; choose one of {list(CONFIGS)}")
        self.weights = weights if isinstance(weights, Mapping) else load_weights(*([weights] if weights else []))
        self.feature_set = self._pick_feature_set(components)
        self.fitted = self.weights["feature_sets"][self.feature_set]
        self.device_name = device
        self.dtype = check_dtype(dtype)  # passed to the model components; refused here if bad
        self.models = {f: component_model(f, spec, model) for f, spec in self.fitted["components"].items()}
        self.model_name = ",".join(f"{f}:{m}" for f, m in self.models.items() if m) or None
        self.components = None

    @classmethod
    def checkpoint_path(cls):
        """The folder of the project's checkpoints, one per component (``checkpoints/``)."""
        return checkpoints_dir()

    def _pick_feature_set(self, components) -> str:
        """The config's fitted feature set, or the one whose features are exactly ``components``."""
        if components is None:
            return self.config_name
        wanted = sorted([components] if isinstance(components, str) else components)
        for name, entry in self.weights["feature_sets"].items():
            if sorted(entry["features"]) == wanted:
                return name
        fitted = {n: e["features"] for n, e in self.weights["feature_sets"].items()}
        raise ValueError(f"components={list(wanted)} is not a fitted feature set; choose one of {fitted}")

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self.declared_features(),
        )

    def load_model(self):
        """Each component metric, loaded once (``d2t_metrics.load``, with its model, ``device`` and ``dtype``)."""
        if self.components is None:
            loaded = {}
            for feature, spec in self.fitted["components"].items():
                kwargs = {"model": self.models[feature]} if self.models[feature] else {}
                if self.device_name is not None and (spec["metric"], spec["config"]) not in MODEL_FREE_COMPONENTS:
                    kwargs["device"] = self.device_name
                if self.dtype is not None and (spec["metric"], spec["config"]) not in MODEL_FREE_COMPONENTS:
                    kwargs["dtype"] = self.dtype
                with stage(f"load {feature}"):
                    loaded[feature] = load_component(spec["metric"], spec["config"], **kwargs)
            self.components = loaded
        return self.components

    def weights_version(self) -> str:
        # what the scores depend on: the features, the fitted numbers and the threshold
        fitted = {k: self.fitted[k] for k in ("features", "mean", "scale", "coef", "intercept", "threshold")}
        digest = hashlib.sha256(json.dumps(fitted, sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.weights.get('version', '?')}@{digest}"

    def signature(self, **options):
        """The feature set, each component's own signature (its model and version; loads the
        components) and the weights' version."""
        parts = [f"semantic_accuracy|config:{self.feature_set}|weights:{self.weights_version()}"]
        for feature, metric in self.load_model().items():
            spec = self.fitted["components"][feature]
            sig = metric.signature(**spec["options"]) if hasattr(metric, "signature") else None
            # a component without its own signature (NLI): the form benchmarks records for it
            sig = sig or f"metric:{spec['metric']}|config:{spec['config'] or 'default'}|model:{getattr(metric, 'model_name', None) or '-'}"
            parts.append(f"{feature}=[{sig}]")
        return "|".join(parts + ["version:1.0"])

    def _check_option_values(self, options):
        if options.get("batch_size") is not None:
            check_batch_size(options["batch_size"])

    def corpus_scores(self, examples):
        return corpus_scores(examples)

    def _compute(self, predictions, tables, per_example=False, batch_size=None, show_progress=True):
        # Inputs were checked by compute()/add_batch() before anything loaded; tables are canonical strings.
        components = self.load_model()
        common = {"per_example": True, "show_progress": show_progress, **({"batch_size": batch_size} if batch_size else {})}
        parts = {}
        for feature, metric in components.items():
            with stage(feature):
                out = metric.compute(predictions=list(predictions), tables=list(tables),
                                     **common, **self.fitted["components"][feature]["options"])
            parts[feature] = out["examples"]
        with stage("combine"):
            facts = [table_facts(plain_table(t)) for t in decode_column(tables)]
            examples = [self._example({f: parts[f][i] for f in parts}, facts[i]) for i in range(len(predictions))]
        result = corpus_scores(examples)
        if per_example:
            result["examples"] = examples
        return result

    def _example(self, parts: Dict[str, Dict], facts) -> Dict:
        specs = self.fitted["components"]
        values = [component_score(parts[f], specs[f]["score"]) for f in self.fitted["features"]]
        score = combined_score(values, self.fitted)
        example = {"score": score, **label_of(score, self.fitted["threshold"], parts),
                   "components": dict(zip(self.fitted["features"], values)),
                   "facts": fact_verdicts(facts, parts), "text_claims": text_claims(parts),
                   "truncated": any(bool(p.get("truncated")) for p in parts.values())}
        return example
