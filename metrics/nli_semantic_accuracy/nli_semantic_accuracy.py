"""NLI semantic accuracy (Dušek & Kasner, INLG 2020): omissions and hallucinations
of data-to-text outputs, found with a natural language inference model."""

import os

import evaluate

from d2t_metrics.inputs import TABLE
from d2t_metrics.inputs import TEXT
from d2t_metrics.inputs import check_batch_size
from d2t_metrics.inputs import decode_column
from d2t_metrics.inputs import plain_table
from d2t_metrics.metric import D2TMetric
from d2t_metrics.timing import stage
from d2t_metrics.untrusted import plain_text
from d2t_metrics.verbalize import DEFAULT_TEMPLATE_SETS
from d2t_metrics.verbalize import Verbalizer
from d2t_metrics.verbalize import load_templates

from .checks import combine
from .checks import corpus_summary
from .checks import make_facts
from .checks import plan_checks
from .nli_model import NLIScorer

_CITATION = """\
@inproceedings{dusek-kasner-2020-evaluating,
    title = "Evaluating Semantic Accuracy of Data-to-Text Generation with Natural Language Inference",
    author = "Du{\\v{s}}ek, Ond{\\v{r}}ej and Kasner, Zden{\\v{e}}k",
    booktitle = "Proceedings of the 13th International Conference on Natural Language Generation",
    year = "2020",
    address = "Dublin, Ireland",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2020.inlg-1.19",
    pages = "131--137",
}
"""

_DESCRIPTION = """\
Checks whether a generated text says all of its input data and only that, with
an NLI model, in both directions. Omission check: the text is the premise and
each fact, verbalized by a template, is a hypothesis; a fact that is not
entailed is omitted. Hallucination check: all fact sentences are the premise
and the text is the hypothesis; if the text is not entailed it says more than
the data. Each example gets a 4-way label (OK, omission, hallucination,
omission+hallucination) and a confidence: the smallest entailment probability
over its checks.

Configs: "default" verbalizes facts with templates extracted from WebNLG
training data and handcrafted E2E templates (back-off for unknown
predicates); "backoff" uses only "The <predicate> of <subject> is <object>.".
The model is chosen at load time (default: roberta-large-mnli, the paper's);
offline, pass a local path such as the project's checkpoint
checkpoints/nli_semantic_accuracy.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): generated texts, one per table.
    tables (list): the input data, one table per prediction, in any form
        d2t_metrics.tables.parse_table reads: WebNLG "s | p | o" strings
        (several joined by <br> or given as a list), (s, p, o) triples,
        E2E meaning representations "name[X], eatType[pub]", attribute-value
        lists or dicts. A declared input: add(), add_batch(), num_process
        shards and evaluate.combine carry it; every input is checked before
        evaluate stores it (ValueError naming the example).
    per_example (bool): also return "examples", one dict per prediction.
    batch_size (int): NLI pairs per forward pass (default 32).
    show_progress (bool): show a progress bar (default True).
    e2e_ignore_restaurant (bool): E2E only: an omitted eatType[restaurant]
        fact is not an omission (the paper's lenient switch; default False).
Returns:
    ok_rate (float): share of examples with neither omission nor hallucination.
    omission_rate (float): share of examples with at least one omitted fact.
    hallucination_rate (float): share of examples whose text is not entailed by the data.
    confidence (float): mean per-example confidence.
    examples (list of dict, with per_example=True): "label" (OK / omission /
        hallucination / omission+hallucination), "ok" (bool), "score" and
        "confidence" (min entailment probability over the example's checks),
        "omission", "hallucination" (bools), "omitted_facts" (fact, sentence,
        probabilities), "facts" (the fact sentences), "truncated" (True
        only when part of a check's input was never read: a single sentence
        of the text longer than half the model's window) and "checks" (per
        NLI check: its probabilities, "entailed", "truncated" and
        "windows", the forward passes it was read in). "truncated" is also
        True when the text is longer than nli_model.MAX_TEXT_TOKENS (2048)
        tokens: only its beginning is read ("text_truncated").
    Texts and table values are read as plain text: a "[SEP]" or "</s>" in
    them is characters, never a special token, and zero-width, bidi and
    control characters are dropped before the model reads them.
Examples:
    >>> import d2t_metrics
    >>> # The project's offline checkpoint; by default the paper's roberta-large-mnli from the Hub.
    >>> metric = d2t_metrics.load("nli_semantic_accuracy", "default",
    ...                           model=d2t_metrics.checkpoint_path("nli_semantic_accuracy"))
    >>> results = metric.compute(
    ...     predictions=["Alan Bean was born in Wheeler, Texas."],
    ...     tables=[["Alan_Bean | birthPlace | Wheeler,_Texas"]],
    ...     per_example=True, show_progress=False)
    >>> sorted(results)
    ['confidence', 'examples', 'hallucination_rate', 'ok_rate', 'omission_rate']
    >>> results["examples"][0]["label"]
    'OK'
"""

DEFAULT_MODEL = "roberta-large-mnli"
CONFIGS = ("default", "backoff")


def make_verbalizer(config_name, templates=None):
    """The fact verbalizer of a config; ``templates`` (dict or JSON path) overrides it."""
    if templates is not None:
        return Verbalizer(load_templates(templates) if isinstance(templates, str) else templates)
    if config_name == "backoff":
        return Verbalizer()
    return Verbalizer.from_names(*DEFAULT_TEMPLATE_SETS)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class NLISemanticAccuracy(D2TMetric):
    INPUTS = {"predictions": TEXT, "tables": TABLE}
    DEFAULT_MODEL = DEFAULT_MODEL
    CHECKPOINT = "nli_semantic_accuracy"

    def __init__(self, *args, model=DEFAULT_MODEL, device=None, dtype=None, max_length=None, templates=None, **kwargs):
        super().__init__(*args, **kwargs)
        if self.config_name not in CONFIGS:
            raise ValueError(f"unknown config {self.config_name!r}; choose one of {list(CONFIGS)}")
        self.model_name = os.path.expanduser(model) if isinstance(model, str) else model
        self.device_name = device
        self.dtype = dtype
        self.max_length = max_length
        self.verbalizer = make_verbalizer(self.config_name, templates)
        self.scorer = None

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # Tables are stored as one canonical JSON string each (d2t_metrics.inputs).
            features=self.declared_features(),
            codebase_urls=["https://github.com/ufal/nlgi_eval"],
            reference_urls=["https://aclanthology.org/2020.inlg-1.19"],
        )

    def load_model(self):
        # Loaded once per metric object (and cached per process by d2t_metrics.models).
        if self.scorer is None:
            self.scorer = NLIScorer(self.model_name, device=self.device_name, dtype=self.dtype, max_length=self.max_length)
        return self.scorer

    def _check_option_values(self, options):
        check_batch_size(options.get("batch_size", 32))

    def corpus_scores(self, examples):
        """The label shares and mean confidence of the per-example results (shards join by it)."""
        return corpus_summary(examples)

    def _compute(self, predictions, tables, per_example=False, batch_size=32, show_progress=True, e2e_ignore_restaurant=False):
        # Checked by compute()/add_batch()/add() before evaluate stored them.
        # The model reads what a reader sees: no invisible characters (untrusted.plain_text).
        with stage("templates"):
            parsed = [plain_table(t) for t in decode_column(tables)]
            facts = [make_facts(t, self.verbalizer, e2e_ignore_restaurant) for t in parsed]
        scorer = self.load_model()
        with stage("nli"):
            # a text's work grows with its length: read at most MAX_TEXT_TOKENS of it (nli_model docstring)
            texts = [plain_text(t) for t in predictions]
            # (a scorer of another kind, e.g. a test's stand-in, may read texts whole)
            capped = scorer.cap_texts(texts) if hasattr(scorer, "cap_texts") else [(t, False) for t in texts]
            plans = [plan_checks(i, f, text) for i, (f, (text, _)) in enumerate(zip(facts, capped))]
            flat = [c for plan in plans for c in plan]
            probs = scorer([c.premise for c in flat], [c.hypothesis for c in flat], batch_size=batch_size, show_progress=show_progress)

        examples, k = [], 0
        for f, plan, (_, text_cut) in zip(facts, plans, capped):
            rows = probs[k : k + len(plan)]
            k += len(plan)
            example = combine(f, plan, [scorer.as_dict(r) for r in rows], [scorer.is_entailed(r) for r in rows])
            example["text_truncated"] = text_cut
            example["truncated"] = example["truncated"] or text_cut
            examples.append(example)
        result = self.corpus_scores(examples)
        if per_example:
            result["examples"] = examples
        return result
