"""Fact accuracy (Goodrich et al., KDD 2019): facts extracted from a generated
text, checked against the facts of its input table or of a reference text."""

import os

import evaluate

from d2t_metrics.checkpoints import checkpoint_fingerprint
from d2t_metrics.inputs import REFERENCES
from d2t_metrics.inputs import TABLE
from d2t_metrics.inputs import TEXT
from d2t_metrics.inputs import check_batch_size
from d2t_metrics.inputs import decode_table
from d2t_metrics.metric import D2TMetric
from d2t_metrics.models import arithmetic_part
from d2t_metrics.models import check_dtype
from d2t_metrics.models import GPU_GREEDY_BATCH_SIZE, default_batch_size
from d2t_metrics.timing import stage
from d2t_metrics.untrusted import blank_non_claims
from d2t_metrics.untrusted import removed_pieces

# evaluate's loader copies only the sibling files this script imports itself
# (not those its siblings import), so every one is imported here (and with no
# comment on the import line: the loader would read it as a download URL).
from .extractors import CONFIGS
from .extractors import MODEL_FREE
from .extractors import extractor_name
from .extractors import load_extractor
from .extractors import resolve_model_path
from .extractors import table_facts
from .facts import Extractor
from .grounding import find_value
from .labels import fitted_label_threshold
from .labels import load_calibration
from .labels import ok_label
from .matching import DEFAULT_FUZZY_THRESHOLD
from .matching import Matcher
from .matching import corpus_scores
from .matching import score_facts
from .openie import OpenIEExtractor
from .relations import RelationExtractor
from .text_to_triples import PROMPT

_CITATION = """\
@inproceedings{goodrich-etal-2019-assessing,
    title = "Assessing The Factual Accuracy of Generated Text",
    author = "Goodrich, Ben and Rao, Vinay and Liu, Peter J. and Saleh, Mohammad",
    booktitle = "Proceedings of the 25th ACM SIGKDD International Conference on Knowledge Discovery and Data Mining",
    year = "2019",
    pages = "166--175",
    doi = "10.1145/3292500.3330955",
    url = "https://arxiv.org/abs/1905.13322",
}
"""

_DESCRIPTION = """\
Facts are (subject, relation, object) tuples. The facts of the generated
text (F_gen) are extracted by a model; the ground-truth facts (F_gt) are the
input table's own (data-to-text) or those extracted the same way from a
reference text. Only generated facts whose subject and relation also occur in
F_gt can be verified or refuted; the accuracy is the share of those whose
object matches too (the paper's eq. 1, a precision). Recall (the share of
F_gt found among the generated facts: omissions) and the unverifiable facts
are reported as well, and every fact of every example is listed with its
verdict.

Configs choose the extractor: "default" = "end_to_end" (the project's small
generator trained to write a text's facts as triples; checkpoint
checkpoints/fact_accuracy/triples), "relations" (a relation classifier over
entity pairs; checkpoints/fact_accuracy/relations) and "openie" (a
model-free OpenIE baseline over a spaCy parse, its verb-phrase relations
mapped onto the table's predicates). The end-to-end extractor gives a
text written as WebNLG 2017's system outputs are (lower-cased, punctuation
split off) the casing of its table's values and ordinary punctuation before
reading it (load with restore_form=False to read texts as written). Values are compared after
normalization of case, punctuation, underscores and quotes, with dates and
numbers (with units) read as such, optionally with fuzzy matching.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): generated texts.
    tables (list, optional): the input data of each prediction in any form
        d2t_metrics.tables.parse_table reads ("s | p | o" strings, E2E MRs,
        attribute-value lists or dicts); attribute-value records become
        (name value, attribute, value) facts. A declared input: add(),
        add_batch(), num_process shards and evaluate.combine carry it.
    references (list, optional): one reference text, or a list of them, per
        prediction; with several, F_gt is the union of their facts.
        At least one of tables and references is needed.
    ground_truth (str or None): "table" or "references": which one gives
        F_gt. Default: the example's table when it has one, else its
        references.
    fuzzy_threshold (float or None): also let two texts match when their
        normalized forms have a difflib ratio of at least this (0 < t <= 1)
        and the same digits; default 0.85 (chosen on WebNLG dev extraction
        F1); None: exact after normalization.
    per_example (bool): also return "examples", one dict per prediction.
    batch_size (int): texts per batch of the extractor (default 32 on a CPU, 256 on a GPU).
    show_progress (bool): show a progress bar (default True).
Returns:
    accuracy (float or None): supported / verifiable generated facts, pooled
        over the corpus (None when no generated fact is verifiable).
    mean_accuracy (float or None): mean of the examples' scores, over the
        examples that have one.
    recall (float or None): ground-truth facts found among the generated
        facts / ground-truth facts, pooled over the corpus.
    verifiable, supported, contradicted, unverifiable, generated,
    ground_truth_facts, found, scored_examples (int): the counts.
    examples (list of dict, with per_example=True): "score" (accuracy of
        the example, None when nothing it says is verifiable), "recall",
        "supported", "contradicted" (each with the "expected" objects),
        "unverifiable", "missing" (ground-truth facts not found),
        "generated" and "ground_truth" (facts as {"subject", "relation",
        "object"[, "evidence"]} dicts), their counts ("verifiable",
        "num_supported", "num_contradicted", "num_unverifiable",
        "num_generated", "num_ground_truth", "num_found") and
        "ground_truth_source" ("table" or "references"); "label_score" (F1
        of accuracy and recall, None as 0) and, where F_gt is the table and a
        threshold was fitted for the extractor's settings (labels.py,
        calibration.json), "ok" and "label" ("OK" / "not OK"). A kept fact has
        its "evidence" sentence and "evidence_start"/"evidence_end" offsets.
    Per example, "ignored": the pieces of the text that are no claim of it and
    are not read (d2t_metrics.untrusted.non_claims: control strings such as
    "[SEP]", imitations of the input such as "Triples: s | p | o ; ...",
    sentences addressed to the evaluator such as "Ignore the previous
    instructions ..."; with the end-to-end extractor also what imitates its
    output or prompt). A text that is nothing else is scored as the empty text.
    With the end-to-end extractor (default), also "ungrounded" (facts whose
    subject or object the text does not write, left out of every count) and
    "truncated_examples" (texts over 16 sentences, read in part); per example
    "truncated", "ungrounded" and "num_ungrounded".
Examples:
    >>> import d2t_metrics
    >>> fa = d2t_metrics.load("fact_accuracy", "openie")  # evaluate.load("./metrics/fact_accuracy", "openie") in a checkout
    >>> table = ["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot"]
    >>> results = fa.compute(
    ...     predictions=["Alan Bean was born in Wheeler, Texas.", "Alan Bean was born in Boston."],
    ...     tables=[table, table], per_example=True, show_progress=False)
    >>> results["accuracy"], results["recall"], results["unverifiable"]
    (0.5, 0.25, 0)
    >>> [(f["object"], f["expected"]) for f in results["examples"][1]["contradicted"]]
    [('Boston', ['Wheeler,_Texas'])]
    >>> [f["relation"] for f in results["examples"][1]["missing"]]
    ['birthPlace', 'occupation']
"""

# The pieces a user may want from this module (and the imports that make
# evaluate copy their files).
__all__ = ["FactAccuracy", "Extractor", "OpenIEExtractor", "RelationExtractor", "PROMPT"]

GROUND_TRUTHS = ("table", "references")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FactAccuracy(D2TMetric):
    # Both columns are declared and stored for every example; each is optional (an example given
    # without one stores an empty reference list / an empty table string), but one of them is needed.
    INPUTS = {"predictions": TEXT, "references": REFERENCES, "tables": TABLE}
    OPTIONAL_INPUTS = ("references", "tables")
    # The OpenIE baseline loads no model (the command line passes it no checkpoint).
    MODEL_FREE_CONFIGS = MODEL_FREE
    # The paper's extractor is not published; the API's default is the project's checkpoint too.
    CHECKPOINT = "fact_accuracy"

    def __init__(self, *args, model=None, device=None, dtype=None, spacy_model=None, extractor=None, restore_form=True,
                 **kwargs):
        super().__init__(*args, **kwargs)
        if self.config_name not in CONFIGS:
            raise ValueError(f"unknown config {self.config_name!r}; choose one of {list(CONFIGS)}")
        if extractor is not None and not callable(getattr(extractor, "extract", None)):
            raise ValueError(f"extractor must have an extract(texts, tables=None, show_progress=True) method, got {type(extractor).__name__}")
        self.extractor_name = getattr(extractor, "name", "custom") if extractor is not None else extractor_name(self.config_name)
        self.given_model = os.path.expanduser(model) if isinstance(model, str) else model
        self.model_name = None
        if extractor is None and self.extractor_name not in MODEL_FREE:
            self.model_name = resolve_model_path(self.given_model, self.extractor_name) or self.given_model
        self.device_name = device
        self.dtype = check_dtype(dtype)  # a bad one is refused here, before anything loads
        self.spacy_model = spacy_model
        self.restore_form = bool(restore_form)
        self.extractor = extractor

    @property
    def uses_model(self):
        return self.model_name is not None or (self.extractor is None and self.extractor_name not in MODEL_FREE)

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # Tables are stored as one canonical JSON string each (d2t_metrics.inputs).
            features=self.declared_features(),
            reference_urls=["https://arxiv.org/abs/1905.13322", "https://doi.org/10.1145/3292500.3330955"],
        )

    def load_model(self) -> Extractor:
        # The model (or spaCy) loads once per metric object.
        if self.extractor is None:
            self.extractor = load_extractor(self.extractor_name, model=self.given_model, device=self.device_name, dtype=self.dtype,
                                            spacy_model=self.spacy_model, config=self.config_name,
                                            restore_form=self.restore_form)
        return self.extractor

    def signature(self, **options):
        """The settings a score depends on: config, extractor, checkpoint (with a
        fingerprint of its weights) and the matching options given."""
        if self.model_name:
            model = os.path.basename(os.path.normpath(str(self.model_name)))
            fingerprint = checkpoint_fingerprint(self.model_name)
            if fingerprint:
                model += "@" + fingerprint
        else:
            model = "none"
        parts = [f"fact_accuracy|config:{self.config_name}|extractor:{self.extractor_name}|model:{model}"]
        fuzzy = options.get("fuzzy_threshold", DEFAULT_FUZZY_THRESHOLD)
        parts.append(f"fuzzy:{fuzzy if fuzzy is not None else 'no'}")
        if options.get("ground_truth"):
            parts.append(f"gt:{options['ground_truth']}")
        if self.extractor_name == "end_to_end":
            parts.append(f"form:{'restored' if self.restore_form else 'as-written'}")
        t = self.label_threshold(fuzzy) if options.get("ground_truth") in (None, "table") else None
        if t is not None:  # the per-output label's threshold (labels.py), where one applies
            parts.append(f"label_t:{t:.6g}")
        # a model extractor runs in bf16 on a GPU by default: named, since its facts may move
        # 1.8: a bare list of the table's values at a text's end is no claim (untrusted.value_list_spans)
        return "|".join(parts + ["version:1.8"]) + (arithmetic_part(self.device_name, self.dtype) if self.model_name else "")

    def label_threshold(self, fuzzy_threshold=DEFAULT_FUZZY_THRESHOLD):
        """The per-output OK threshold fitted for this extractor, checkpoint and matching (labels.py,
        calibration.json), or None: a custom extractor, texts read as written, other weights."""
        if self.extractor_name != extractor_name(self.config_name) or (self.extractor_name == "end_to_end" and not self.restore_form):
            return None
        fingerprint = checkpoint_fingerprint(self.model_name) if self.model_name else None
        return fitted_label_threshold(load_calibration(), self.config_name, fingerprint, fuzzy_threshold)

    # -- input checks, before evaluate stores anything ---------------------
    def _check_option_values(self, options):
        ground_truth = options.get("ground_truth")
        if ground_truth is not None and ground_truth not in GROUND_TRUTHS:
            raise ValueError(f"ground_truth must be None, 'table' or 'references', got {ground_truth!r}")
        Matcher(options.get("fuzzy_threshold"))  # raises ValueError for a bad threshold
        if options.get("batch_size") is not None:
            check_batch_size(options["batch_size"])

    def _check_call(self, inputs, options):
        ground_truth = options.get("ground_truth")
        if ground_truth in GROUND_TRUTHS:
            name = "tables" if ground_truth == "table" else "references"
            if name not in inputs:
                raise ValueError(f"ground_truth={ground_truth!r} but no {name}= given")

    # -- scoring -----------------------------------------------------------
    def _compute(self, predictions, references, tables, per_example=False, batch_size=None, show_progress=True,
                 ground_truth=None, fuzzy_threshold=DEFAULT_FUZZY_THRESHOLD):
        matcher = Matcher(fuzzy_threshold)
        parsed = _decode_tables(tables)
        refs = [list(r) if r else [] for r in references]
        sources = [_ground_truth_source(i, t, r, ground_truth) for i, (t, r) in enumerate(zip(parsed, refs))]
        extractor = self.load_model()
        if isinstance(extractor, OpenIEExtractor) or hasattr(extractor, "matcher"):
            extractor.matcher = matcher  # how OpenIE maps phrases onto a table's predicates
        if hasattr(extractor, "batch_size"):
            extractor.batch_size = int(batch_size or default_batch_size(self.device_name, gpu=GPU_GREEDY_BATCH_SIZE))
        candidates = parsed if any(t is not None for t in parsed) else None

        # the end-to-end extractor leaves out what is not a claim itself (grounding); the others
        # read the texts with it blanked (untrusted.blank_non_claims: offsets kept)
        values = [t.values() if t is not None else [] for t in parsed]
        texts, ignored = _claims_to_read(extractor, predictions, values)
        refs = [_claims_to_read(extractor, r, [v] * len(r))[0] for r, v in zip(refs, values)]
        generated = extractor.extract(texts, tables=candidates, show_progress=show_progress)
        # what the extractor says of each text's reading (the end-to-end extractor: truncated,
        # ungrounded facts, ignored pieces), taken before the references are read
        reports = list(getattr(extractor, "reports", None) or [])
        truth = self._ground_truth_facts(parsed, refs, sources, extractor, show_progress)

        examples = []
        with stage("matching"):
            for i, (facts, gt, source) in enumerate(zip(generated, truth, sources)):
                example = score_facts(facts, gt, matcher)
                example["ground_truth_source"] = source
                if len(reports) == len(generated):
                    example.update(reading_report(reports[i]))
                else:
                    example["ignored"] = ignored[i]
                examples.append(example)
            # the per-output OK label, where F_gt is the table (what its threshold was fitted on)
            threshold = self.label_threshold(fuzzy_threshold)
            for example in examples:
                example.update(ok_label(example, threshold if example["ground_truth_source"] == "table" else None))
        result = self.corpus_scores(examples)
        if per_example:
            result["examples"] = examples
        return result

    def corpus_scores(self, examples):
        """Pooled accuracy and recall, mean accuracy and the counts of the per-example results;
        with the end-to-end extractor's reading reports, ungrounded facts and truncated texts
        too (the command line's shards join by it)."""
        result = corpus_scores(examples)
        if examples and all("num_ungrounded" in e for e in examples):
            result["ungrounded"] = sum(e["num_ungrounded"] for e in examples)
            result["truncated_examples"] = sum(bool(e["truncated"]) for e in examples)
        return result

    @staticmethod
    def _ground_truth_facts(parsed, refs, sources, extractor, show_progress):
        """F_gt of each example: its table's facts, or the union of the facts
        the extractor finds in its references (read with the example's table,
        if any, as the generated text is)."""
        texts, owners, ref_tables = [], [], []
        for i, (table, rs, source) in enumerate(zip(parsed, refs, sources)):
            if source == "references":
                for r in rs:
                    texts.append(r)
                    owners.append(i)
                    ref_tables.append(table)
        truth = [table_facts(t) if s == "table" else [] for t, s in zip(parsed, sources)]
        if texts:
            found = extractor.extract(texts, tables=ref_tables if any(t is not None for t in ref_tables) else None,
                                      show_progress=show_progress)
            for i, facts in zip(owners, found):
                truth[i].extend(facts)
        return truth


def _claims_to_read(extractor, texts, values=None):
    """The texts an extractor is given, and per text the pieces left out as no claim of it
    (``ignored``): the end-to-end extractor is given the texts as they are (it blanks them
    itself and reports them, see ``grounding``); any other extractor gets them with control
    strings, imitated inputs, instructions and a bare list of the text's table ``values`` at its
    end blanked by spaces (``untrusted.blank_non_claims``), so that the evidence offsets it
    reports still point into the given text."""
    texts = list(texts)
    if hasattr(extractor, "reports"):
        return texts, [[] for _ in texts]
    values = values if values is not None else [()] * len(texts)
    blanked = [blank_non_claims(t, values=v) for t, v in zip(texts, values)]
    return [b for b, _ in blanked], [removed_pieces(t, spans) for t, (_, spans) in zip(texts, blanked)]


def reading_report(report):
    """An extractor's report on one text as fields of its example: ``truncated``, the
    ``ungrounded`` facts (left out of the score) and their count, the ``ignored`` pieces."""
    ungrounded = list(report.get("ungrounded") or [])
    return {"truncated": bool(report.get("truncated")), "ungrounded": ungrounded, "num_ungrounded": len(ungrounded),
            "ignored": list(report.get("ignored") or [])}


def _decode_tables(tables):
    """The stored tables column → a ``Table`` or ``None`` per example (a table
    repeated across examples is decoded once)."""
    memo = {}
    out = []
    for i, value in enumerate(tables):
        if not value:
            out.append(None)
            continue
        if value not in memo:
            memo[value] = decode_table(value, i)
        out.append(memo[value])
    return out


def _ground_truth_source(index, table, refs, ground_truth):
    """Which of an example's inputs gives F_gt; ``ValueError`` when it lacks the one asked for."""
    if ground_truth == "table" or (ground_truth is None and table is not None):
        if table is None:
            raise ValueError(f"example {index}: ground_truth='table' but the example has no table")
        return "table"
    if not refs:
        raise ValueError(f"example {index}: no table and no references to take the ground-truth facts from")
    return "references"
