"""DAE: Dependency Arc Entailment (Goyal & Durrett, Findings of EMNLP 2020).
Scores how much of what a generated text says is entailed by its source,
one dependency arc at a time, and shows which arcs are not."""

import os

import evaluate

from d2t_metrics.checkpoints import checkpoint_fingerprint
from d2t_metrics.checkpoints import weight_files
from d2t_metrics.inputs import SOURCE_TEXT
from d2t_metrics.inputs import TABLE
from d2t_metrics.inputs import TEXT
from d2t_metrics.inputs import check_batch_size
from d2t_metrics.inputs import decode_column
from d2t_metrics.inputs import plain_table
from d2t_metrics.metric import D2TMetric
from d2t_metrics.untrusted import plain_text
from d2t_metrics.hub import missing_model_error
from d2t_metrics.verbalize import default_verbalizer

from .arcs import DEFAULT_SPACY_MODEL
from .arcs import load_spacy
from .model import DEFAULT_MAX_LENGTH
from .scorer import THRESHOLD
from .scorer import DAEScorer
from .scorer import RuleScorer

_CITATION = """\
@inproceedings{goyal-durrett-2020-evaluating,
    title = "Evaluating Factuality in Generation with Dependency-level Entailment",
    author = "Goyal, Tanya and Durrett, Greg",
    booktitle = "Findings of the Association for Computational Linguistics: EMNLP 2020",
    year = "2020",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2020.findings-emnlp.322",
    pages = "3592--3603",
}
"""

_DESCRIPTION = """\
DAE decomposes factuality into the dependency arcs of the generated text:
each arc (head word, relation, child word) of a spaCy parse is judged
entailed or not by the source, by a classifier over the encoder's vectors of
the head and child words (reading source and hypothesis together) and an
embedding of the relation. The example score is the mean arc probability;
the minimum, the count of arcs below 0.5 and every arc with its probability
are reported too, so errors are localised to words.

Configs: "default" is the neural model (the project's checkpoint,
checkpoints/dae: LoRA over all-MiniLM-L6-v2 trained on automatically
labelled arcs); "rule" is the paper's rule-based baseline, the fraction of
output arcs that are also arcs of the source (lemma level), which needs only
spaCy. For data-to-text, pass tables= instead of sources=: each table is
verbalized with templates and the fact sentences are the source.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): generated texts.
    sources (list of str): the input text of each prediction (document,
        article sentence); long sources are windowed around the content that
        overlaps the prediction, never truncated blindly.
    tables (list): alternatively, the input data of each prediction in any
        form d2t_metrics.tables.parse_table reads ("s | p | o" strings, E2E
        MRs, attribute-value lists); verbalized into sentences. When both
        are given, sources are used. tables is a declared input (sources
        are stored in its column), so add(), add_batch(), num_process
        shards and evaluate.combine carry it; every input is checked
        before evaluate stores it (ValueError naming the example).
    per_example (bool): also return "examples", one dict per prediction.
    batch_size (int): (source, hypothesis) segments per forward pass (default 32).
    show_progress (bool): show a progress bar (default True).
    threshold (float): an arc below this probability is "not entailed" (default 0.5).
Returns:
    score (float): mean over examples of the mean arc entailment probability.
    min_score (float): mean over examples of the lowest arc probability.
    ok_rate (float): share of examples that have arcs and none below the threshold.
    examples (list of dict, with per_example=True): "score" (mean arc
        probability; 0.0 for a text without arcs), "min_score" (the lowest
        arc probability), "ok" (False for a text without arcs),
        "not_entailed" (arcs below threshold), "num_arcs", "no_arcs" (True
        when the text has no dependency arc to judge: empty, one word, or
        unparsed text; it states nothing verifiable, so it is not credited),
        "truncated" (the source was windowed, a word of the prediction
        longer than 16 sub-tokens was fed to the model as its first 16, or
        a cap on work was reached: only the first 10,000 characters of a
        prediction and 20,000 of a source are parsed, and the first 1,000
        arcs of a prediction scored; see scorer.MAX_PARSE_CHARS,
        MAX_SOURCE_CHARS, MAX_ARCS) and
        "arcs": head, relation, child, their word indices and the
        probability of each arc.
    Texts, sources and table values are read as plain text: "[SEP]" in them
    is characters, never a special token, and zero-width, bidi and control
    characters are dropped before parsing.
Examples:
    >>> import d2t_metrics
    >>> dae = d2t_metrics.load("dae", "rule")  # evaluate.load("./metrics/dae", "rule") in a checkout
    >>> results = dae.compute(
    ...     predictions=["The cat sat on the mat.", "The dog sat on the mat."],
    ...     sources=["The cat sat on the mat.", "The cat sat on the mat."],
    ...     per_example=True, show_progress=False)
    >>> [round(ex["score"], 2) for ex in results["examples"]]
    [1.0, 0.5]
    >>> [(a["head"], a["relation"], a["child"]) for a in results["examples"][1]["arcs"] if a["probability"] < 0.5]
    [('sat', 'nsubj', 'dog')]
"""

CONFIGS = ("default", "rule")
CHECKPOINT_SUBDIR = os.path.join("checkpoints", "dae")


def default_model_path():
    """The project's checkpoint of DAE: ``d2t_metrics.checkpoint_path("dae")`` (the
    checkout's checkpoints/dae, or the installed package's copy), else ./checkpoints/dae;
    ``None`` when neither holds a checkpoint's weights (``checkpoints.weight_files``)."""
    for path in (DAE.checkpoint_path(), CHECKPOINT_SUBDIR):
        if path and weight_files(path):  # the adapters and the arc head
            return os.path.abspath(path)
    return None


def source_texts(inputs):
    """The source text of each stored input, as plain text (``untrusted.plain_text``:
    no zero-width, bidi or control characters): a text as it is, a table
    verbalized into one sentence per fact (templates, with the generic back-off)."""
    verbalizer = default_verbalizer()  # built once per process, not per call
    return [plain_text(x) if isinstance(x, str) else verbalizer.verbalize_text(plain_table(x)) for x in inputs]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class DAE(D2TMetric):
    # One declared input column holds each prediction's source: a table
    # (tables=) or a text (sources=), so that evaluate.combine with the
    # table-based metrics carries it; a text is stored as {"kind": "text"}.
    INPUTS = {"predictions": TEXT, "tables": TABLE}
    ALTERNATIVE_INPUTS = {"sources": ("tables", SOURCE_TEXT)}
    # The rule-based baseline loads no model (the command line passes it no checkpoint).
    MODEL_FREE_CONFIGS = ("rule",)
    # The paper's model is not published; the API's default is the project's checkpoint too.
    CHECKPOINT = "dae"

    def __init__(self, *args, model=None, spacy_model=DEFAULT_SPACY_MODEL, device=None, dtype=None, max_length=None, **kwargs):
        super().__init__(*args, **kwargs)
        if self.config_name not in CONFIGS:
            raise ValueError(f"unknown config {self.config_name!r}; choose one of {list(CONFIGS)}")
        self.model_name = os.path.expanduser(model) if isinstance(model, str) else model
        self.spacy_model = spacy_model
        self.device_name = device
        self.dtype = dtype
        self.max_length = max_length
        self.scorer = None

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self.declared_features(table_id="source"),
            codebase_urls=["https://github.com/tagoyal/dae-factuality"],
            reference_urls=["https://aclanthology.org/2020.findings-emnlp.322"],
        )

    def load_model(self):
        # spaCy and the model load once per metric object.
        if self.scorer is not None:
            return self.scorer
        nlp = load_spacy(self.spacy_model)
        if self.config_name == "rule":
            self.scorer = RuleScorer(nlp)
            return self.scorer
        path = self.model_name or default_model_path()
        if not path or not os.path.isdir(path):
            raise missing_model_error(
                self.model_name or CHECKPOINT_SUBDIR,
                FileNotFoundError("no DAE checkpoint directory (adapter_model.safetensors and arc_head.safetensors) found; "
                                  "train one with python -m training.dae.train"),
                metric="dae",
            )
        self.scorer = DAEScorer(path, spacy_model=nlp, device=self.device_name, dtype=self.dtype, max_length=self.max_length)
        return self.scorer

    def signature(self, **options):
        if self.config_name == "rule":
            model = "rule"
        else:
            model = os.path.basename(os.path.normpath(self.model_name)) if self.model_name else "checkpoints/dae"
            fingerprint = checkpoint_fingerprint(self.model_name or default_model_path())
            if fingerprint:
                model += "@" + fingerprint
        spacy_name = self.spacy_model if isinstance(self.spacy_model, str) else "custom"
        length = self.max_length or DEFAULT_MAX_LENGTH
        # 1.1: tables verbalized with the WebNLG 3.0 templates too (d2t_metrics/templates/webnlg_v3.json);
        # texts read without invisible characters, long ones capped (``truncated``)
        return f"dae|config:{self.config_name}|model:{model}|spacy:{spacy_name}|max_len:{length}|version:1.1"

    def _check_option_values(self, options):
        threshold = options.get("threshold", THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < float(threshold) < 1.0:
            raise ValueError(f"threshold must be a number in (0, 1), got {threshold!r}")
        check_batch_size(options.get("batch_size", 32))

    def corpus_scores(self, examples):
        """Means of the per-example score, lowest arc probability and OK flag (shards join by it)."""
        n = max(len(examples), 1)
        return {
            "score": sum(e["score"] for e in examples) / n,
            "min_score": sum(e["min_score"] for e in examples) / n,
            "ok_rate": sum(e["ok"] for e in examples) / n,
        }

    def _compute(self, predictions, tables, per_example=False, batch_size=32, show_progress=True, threshold=THRESHOLD):
        # Checked by compute()/add_batch()/add() before evaluate stored them.
        # The parser and the model read what a reader sees (untrusted.plain_text).
        texts = [plain_text(t) for t in predictions]
        srcs = source_texts(decode_column(tables, table_only=False))
        scorer = self.load_model()
        examples = scorer.score(srcs, texts, batch_size=int(batch_size), show_progress=show_progress, threshold=float(threshold))
        result = self.corpus_scores(examples)
        if per_example:
            result["examples"] = examples
        return result
