"""One thin adapter per metric: how the harness loads it and turns a data set into
its inputs and its outputs into numbers. To benchmark a new metric or variant,
add one entry to :data:`METRICS`.

A metric from ``metrics/<module>/`` is loaded with
``evaluate.load("<repo>/metrics/<module>", config, model=<checkpoint>)`` where
the checkpoint is ``--model <name>=PATH``, else ``checkpoints/<module>/`` when
it exists, else the metric's own default (a Hub id, unreachable offline: the
metric is then skipped with the loader's message). It is called once per data
set as ``compute(predictions=..., references=... (if a feature), tables=...,
sources=..., per_example=True, show_progress=...)``; every example dict has
``"score"`` and, for metrics that classify, ``"label"`` and ``"ok"``.
"""

from __future__ import annotations

import inspect
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from .baselines import BERTScore, SentenceBLEU, model_label
from .data import BenchDataset, normalize_label

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRICS_DIR = os.path.join(ROOT, "metrics")
CHECKPOINTS_DIR = os.path.join(ROOT, "checkpoints")


class MetricUnavailable(Exception):
    """The metric's module, model or dependencies are not on this machine: skip it."""


@dataclass
class Scores:
    """A metric's output on one data set, aligned with ``dataset.items``."""

    scores: np.ndarray
    labels: Optional[List[str]] = None  # normalized 4-way labels, for metrics that classify
    ok: Optional[List[bool]] = None
    # Per-example sufficient statistics and how to turn their sum into a
    # system score (corpus BLEU); None means the system score is the mean.
    stats: Optional[np.ndarray] = None
    aggregate: Optional[Callable[[np.ndarray, int], np.ndarray]] = None
    # The metric's own per-example output (explanations), for --dump-examples.
    examples: Optional[List[Dict]] = None


@dataclass
class Options:
    models: Dict[str, str] = field(default_factory=dict)  # --model name=path
    device: Optional[str] = None
    show_progress: bool = False
    bertscore_layer: Optional[int] = None


class Scorer:
    """A loaded metric. Subclasses set name, model, signature and implement score()."""

    name: str = ""
    model: str = "-"
    device: str = "cpu"
    signature: str = ""
    uses_references: bool = True

    def score(self, dataset: BenchDataset, show_progress: bool = False) -> Scores:
        raise NotImplementedError


# ---------------------------------------------------------------- baselines


class BLEUScorer(Scorer):
    def __init__(self, options: Options):
        self.name = "bleu"
        # Lowercased, as Dhingra et al. lowercase every text before scoring:
        # WebNLG system outputs are partly lowercased, references are not.
        self.metric = SentenceBLEU(lowercase=True)
        self.signature = self.metric.signature

    def score(self, dataset, show_progress=False):
        out = self.metric.score([it.prediction for it in dataset.items], [it.references for it in dataset.items])
        return Scores(
            scores=np.array([o["score"] for o in out]),
            stats=np.array([o["stats"] for o in out]),
            aggregate=self.metric.corpus_from_stats,
        )


class BERTScoreScorer(Scorer):
    def __init__(self, options: Options):
        self.name = "bertscore"
        path = options.models.get("bertscore")
        try:
            self.metric = BERTScore(model=path, layer=options.bertscore_layer, device=options.device)
        except (OSError, ImportError) as e:
            raise MetricUnavailable(f"BERTScore encoder not available: {e}") from e
        self.model = model_label(path)
        self.signature = self.metric.signature
        self.device = str(next(self.metric.model.parameters()).device)

    def score(self, dataset, show_progress=False):
        out = self.metric.score([it.prediction for it in dataset.items], [it.references for it in dataset.items], show_progress=show_progress)
        return Scores(scores=np.array([o["score"] for o in out]))


# ------------------------------------------------------- evaluate modules


def has_checkpoint(module: str) -> bool:
    """``checkpoints/<module>/`` holds trained weights (not just a placeholder), at
    its top or in a sub-folder per model (data_questeval's four, fact_accuracy's two)."""
    path = os.path.join(CHECKPOINTS_DIR, module)
    return any(f.endswith(".safetensors") for _, _, files in os.walk(path) for f in files)


# Compute kwargs that change speed or output format, not scores.
NOT_SETTINGS = {"predictions", "references", "tables", "sources", "per_example", "show_progress", "batch_size", "n_jobs", "return_ngrams"}


def _signature_from(name: str, config: Optional[str], model: str, kwargs: Dict) -> str:
    parts = [f"metric:{name}", f"config:{config or 'default'}", f"model:{model}"]
    parts += [f"{k}:{v}" for k, v in sorted(kwargs.items())]
    return "|".join(parts)


class ModuleScorer(Scorer):
    """A metric from ``metrics/<module>/`` loaded through ``evaluate.load``."""

    def __init__(
        self,
        name: str,
        module: str,
        options: Options,
        config: Optional[str] = None,
        compute_kwargs: Optional[Dict] = None,
        needs_model: bool = False,
        score_key: str = "score",
        none_score: Optional[float] = None,
        score_fn: Optional[Callable[[Dict], float]] = None,
    ):
        path = os.path.join(METRICS_DIR, module)
        if not os.path.isfile(os.path.join(path, f"{module}.py")):
            raise MetricUnavailable(f"metrics/{module}/{module}.py does not exist yet")
        init_kwargs = {}
        model = options.models.get(name) or options.models.get(module)
        checkpoint = os.path.join(CHECKPOINTS_DIR, module)
        if model is None and needs_model and has_checkpoint(module):
            model = checkpoint
        if model is not None:
            init_kwargs["model"] = model
        # Without one, a model-based metric uses its default Hub id; offline that
        # fails at load or first compute and the metric is skipped.
        if needs_model:
            from d2t_metrics.models import get_device  # lazy: torch, only for a metric that runs a model

            self.device = get_device(options.device)
        self.name, self.module, self.config = name, module, config
        # the per-example number correlated with human ratings, and what a None
        # there (a metric that could not score the example) counts as
        self.score_key = score_key
        self.none_score = none_score
        self.score_fn = score_fn
        self.compute_kwargs = dict(compute_kwargs or {})
        if model:
            self.model = os.path.relpath(model, ROOT) if os.path.isabs(model) and model.startswith(ROOT) else model
        else:
            self.model = "metric's default" if needs_model else "-"
        try:
            import evaluate  # lazy: evaluate, only when a metric is loaded

            self.metric = evaluate.load(path, config, **init_kwargs) if config else evaluate.load(path, **init_kwargs)
        except (OSError, ImportError) as e:
            raise MetricUnavailable(f"could not load metrics/{module}: {e}") from e
        features = self.metric.features
        features = features if isinstance(features, list) else [features]
        self.uses_references = any("references" in f for f in features)
        try:
            params = inspect.signature(self.metric._compute).parameters
        except (TypeError, ValueError):
            params = {}
        # Inputs a metric declares (d2t_metrics.inputs) need not be _compute parameters (DAE's sources=).
        self._accepts = set(params) | set(getattr(self.metric, "accepted_inputs", ())) | ({"*"} if not params or any(p.kind == p.VAR_KEYWORD for p in params.values()) else set())
        settings = {k: p.default for k, p in params.items() if k not in NOT_SETTINGS and isinstance(p.default, (str, int, float, bool, type(None))) and p.default is not inspect.Parameter.empty}
        settings.update(self.compute_kwargs)
        self.signature = self._metric_signature() or _signature_from(module, config, self.model, settings)

    def _score_of(self, i: int, example: Dict) -> float:
        if self.score_fn is not None:
            return float(self.score_fn(example))
        value = example[self.score_key]
        if value is None:
            if self.none_score is None:
                raise RuntimeError(f"{self.name}: example {i} has no {self.score_key!r} (None)")
            return float(self.none_score)
        return float(value)

    def _metric_signature(self) -> Optional[str]:
        sig = getattr(self.metric, "signature", None)
        if callable(sig):
            try:
                sig = sig(**self.compute_kwargs) if self.compute_kwargs else sig()
            except TypeError:
                try:
                    sig = sig()
                except Exception:
                    sig = None
        return str(sig) if sig else None

    def _accepts_kw(self, name: str) -> bool:
        return name in self._accepts or "*" in self._accepts

    def inputs(self, dataset: BenchDataset, show_progress: bool, overrides: Optional[Dict] = None) -> Dict:
        items = dataset.items
        kwargs = {"predictions": [it.prediction for it in items]}
        if self.uses_references:
            kwargs["references"] = [it.references for it in items]
        if items and items[0].table is not None and self._accepts_kw("tables"):
            kwargs["tables"] = [it.table for it in items]
        if items and items[0].source is not None and self._accepts_kw("sources"):
            kwargs["sources"] = [it.source for it in items]
        kwargs.update(self.compute_kwargs)
        kwargs.update(overrides or {})
        kwargs["per_example"] = True
        if self._accepts_kw("show_progress"):
            kwargs["show_progress"] = show_progress
        return kwargs

    def score(self, dataset, show_progress=False, **overrides):
        try:
            result = self.metric.compute(**self.inputs(dataset, show_progress, overrides))
        except (OSError, ImportError) as e:  # a model missing at first use
            raise MetricUnavailable(f"metrics/{self.module}: {e}") from e
        if isinstance(result, dict) and result.get("signature"):
            self.signature = str(result["signature"])
        examples = result["examples"]
        if len(examples) != len(dataset.items):
            raise RuntimeError(f"{self.name}: {len(examples)} examples returned for {len(dataset.items)} inputs")
        scores = np.array([self._score_of(i, ex) for i, ex in enumerate(examples)])
        labels = ok = None
        if all("label" in ex for ex in examples):
            labels = [normalize_label(ex["label"]) for ex in examples]
        if all("ok" in ex for ex in examples):
            ok = [bool(ex["ok"]) for ex in examples]
        elif labels is not None:
            ok = [lab == "OK" for lab in labels]
        return Scores(scores=scores, labels=labels, ok=ok, examples=examples)


# ----------------------------------------------------- speed baselines


def batch_of_one_loop(n_items: int = 100) -> Callable[[Scorer, BenchDataset], Dict]:
    """A reference-style slow path: the same metric with ``batch_size=1`` (one
    NLI/DAE pair per forward pass, as the papers' scripts ran), timed side by
    side with the batched call on the first ``n_items`` examples."""

    def run(scorer: Scorer, dataset: BenchDataset) -> Dict:
        head = BenchDataset(dataset.name, dataset.description, dataset.items[:n_items], dataset.reference_system)
        t0 = time.perf_counter()
        scorer.score(head)
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        scorer.score(head, batch_size=1)
        return {"name": "batch_size=1 loop", "n": len(head), "baseline_seconds": time.perf_counter() - t0, "ours_seconds": ours}

    return run


# ----------------------------------------------------------------- registry


@dataclass
class MetricSpec:
    name: str
    description: str
    load: Callable[[Options], Scorer]
    datasets: Tuple[str, ...]
    # Reference-style timings to quote ratios against: dataset -> (n examples, seconds, source).
    speed_reference: Dict[str, Tuple[int, float, str]] = field(default_factory=dict)
    # A reference-style slow path measured side by side in the same run, if the
    # metric offers one: (scorer, dataset) -> {"name", "n", "baseline_seconds", "ours_seconds"}.
    speed_baseline: Optional[Callable[[Scorer, BenchDataset], Dict]] = None
    # What a reader must know to compare its timings.
    speed_note: str = ""


GOLDEN_PARENT = "shared/golden/README.md: google-research/language table_text_eval.py, one process, 2-core machine"

METRICS: Dict[str, MetricSpec] = {
    "bleu": MetricSpec(
        "bleu", "sacrebleu sentence BLEU, lowercased (baseline); system level = corpus BLEU",
        BLEUScorer, ("webnlg", "e2e", "dae_pairs"),
    ),
    "bertscore": MetricSpec(
        "bertscore", "BERTScore F1, our implementation (baseline), all-MiniLM-L6-v2 last layer",
        BERTScoreScorer, ("webnlg", "e2e", "dae_pairs"),
    ),
    "parent": MetricSpec(
        "parent", "PARENT (Dhingra et al. 2019), word-overlap entailment, per-example lambda, NLTK tokens",
        lambda o: ModuleScorer("parent", "parent", o, compute_kwargs={"tokenizer": "nltk"}),
        ("webnlg", "e2e"),
        speed_reference={"webnlg": (2230, 5.2, GOLDEN_PARENT), "e2e": (13230, 86.6, GOLDEN_PARENT)},
        speed_note=(
            "our time includes NLTK tokenization of the raw strings (most of it); the reference time does not "
            "(its inputs were tokenized beforehand). Section `parent_speed` compares token-level scoring side by side."
        ),
    ),
    "nli_semantic_accuracy": MetricSpec(
        "nli_semantic_accuracy", "NLI semantic accuracy (Dušek & Kasner 2020), default (extracted) templates",
        lambda o: ModuleScorer("nli_semantic_accuracy", "nli_semantic_accuracy", o, config="default", needs_model=True),
        ("webnlg", "e2e"),
        speed_baseline=batch_of_one_loop(),
    ),
    "nli_semantic_accuracy_backoff": MetricSpec(
        "nli_semantic_accuracy_backoff", "NLI semantic accuracy, back-off template only",
        lambda o: ModuleScorer("nli_semantic_accuracy_backoff", "nli_semantic_accuracy", o, config="backoff", needs_model=True),
        ("webnlg", "e2e"),
        speed_baseline=batch_of_one_loop(),
    ),
    "dae": MetricSpec(
        "dae", "DAE, dependency arc entailment (Goyal & Durrett 2020)",
        lambda o: ModuleScorer("dae", "dae", o, config="default", needs_model=True),
        ("webnlg", "e2e", "dae_pairs"),
        speed_baseline=batch_of_one_loop(),
    ),
    "dae_rule": MetricSpec(
        "dae_rule", "DAE's rule-based dependency baseline (Goyal & Durrett 2020)",
        lambda o: ModuleScorer("dae_rule", "dae", o, config="rule"),
        ("webnlg", "e2e", "dae_pairs"),
    ),
}

def unpadded_uncached_loop(n_items: int = 60) -> Callable[[Scorer, BenchDataset], Dict]:
    """QuestEval's way of running the same models, side by side with ours on the
    first ``n_items`` examples: every QA/QG input padded to 512 tokens and no
    question cache (each call generates a table's questions again), on a fresh
    metric object so that our run's cache does not help it."""

    def run(scorer: Scorer, dataset: BenchDataset) -> Dict:
        head = BenchDataset(dataset.name, dataset.description, dataset.items[:n_items], dataset.reference_system)
        cache = getattr(getattr(scorer, "metric", None), "question_cache", None)
        if cache is not None:
            cache.clear()  # the full run before filled it: ours starts cold too
        t0 = time.perf_counter()
        scorer.score(head)
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        scorer.score(head, pad_to_max_length=True, use_cache=False)
        return {"name": "pad-to-512, no question cache", "n": len(head), "baseline_seconds": time.perf_counter() - t0,
                "ours_seconds": ours}

    return run


def accuracy_recall_f1(example: Dict) -> float:
    """fact_accuracy's per-example accuracy and recall joined as an F1, as PARENT
    joins its precision and recall: accuracy alone says nothing about
    omissions, and is None for a text none of whose facts can be checked
    (counted 0 here: it supports no fact)."""
    accuracy, recall = example["score"] or 0.0, example["recall"] or 0.0
    return 0.0 if accuracy + recall == 0 else 2 * accuracy * recall / (accuracy + recall)


def _fact_accuracy(name: str, config: str, ground_truth: str) -> MetricSpec:
    extractor = {"default": "end-to-end generator", "relations": "relation classifier", "openie": "OpenIE baseline"}[config]
    return MetricSpec(
        name, f"fact accuracy (Goodrich et al. 2019), {extractor}, text vs {ground_truth}; score = F1 of accuracy and recall",
        lambda o: ModuleScorer(name, "fact_accuracy", o, config=config, needs_model=config != "openie",
                               compute_kwargs={"ground_truth": ground_truth}, score_fn=accuracy_recall_f1),
        ("webnlg",),
    )


METRICS.update({
    "fact_accuracy": _fact_accuracy("fact_accuracy", "default", "table"),
    "fact_accuracy_relations": _fact_accuracy("fact_accuracy_relations", "relations", "table"),
    "fact_accuracy_openie": _fact_accuracy("fact_accuracy_openie", "openie", "table"),
    "fact_accuracy_ref": _fact_accuracy("fact_accuracy_ref", "default", "references"),
    "fact_accuracy_relations_ref": _fact_accuracy("fact_accuracy_relations_ref", "relations", "references"),
    "fact_accuracy_openie_ref": _fact_accuracy("fact_accuracy_openie_ref", "openie", "references"),
    "data_questeval": MetricSpec(
        "data_questeval", "Data-QuestEval (Rebuffel et al. 2021), the project's offline QG/QA models, source only",
        lambda o: ModuleScorer("data_questeval", "data_questeval", o, needs_model=True, compute_kwargs={"use_references": False}),
        ("webnlg",),
        speed_baseline=unpadded_uncached_loop(),
    ),
})

DEFAULT_METRICS = (
    "parent", "nli_semantic_accuracy", "nli_semantic_accuracy_backoff", "dae", "dae_rule", "bleu", "bertscore",
    "fact_accuracy", "fact_accuracy_relations", "fact_accuracy_openie",
    "fact_accuracy_ref", "fact_accuracy_relations_ref", "fact_accuracy_openie_ref",
)


def model_assignments(specs, error) -> Dict[str, str]:
    """``--model NAME=PATH`` values → ``{name: path}``; ``error`` (a parser's) reports a bad one."""
    models = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            error(f"--model wants NAME=PATH, got {spec!r}")
        models[name.strip()] = path.strip()
    return models
