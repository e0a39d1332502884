"""DAE: Dependency Arc Entailment (Goyal & Durrett, Findings of EMNLP 2020).
Scores how much of what a generated text says is entailed by its source,
one dependency arc at a time, and shows which arcs are not."""

import json
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
from d2t_metrics.models import arithmetic_part
from d2t_metrics.models import check_dtype
from d2t_metrics.untrusted import non_claims
from d2t_metrics.untrusted import plain_text
from d2t_metrics.untrusted import removed_pieces
from d2t_metrics.hub import missing_model_error
from d2t_metrics.verbalize import default_verbalizer

from .arcs import DEFAULT_SPACY_MODEL
from .arcs import load_spacy
from .model import DEFAULT_MAX_LENGTH
from .scorer import THRESHOLD
from .scorer import DAEScorer
from .scorer import RuleScorer
from .verdicts import DIRECTIONS
from .verdicts import POOLINGS
from .verdicts import pooled
from .verdicts import source_check

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
are reported too, so errors are localised to words. For a table the check
also runs the other way: the arcs of each fact's sentence against the
text, so a fact the text leaves out or changes is found too (direction).

Configs: "default" is the neural model (the project's checkpoints: LoRA over
all-MiniLM-L6-v2 trained on automatically labelled arcs). A text source is
read by the summary model (checkpoints/dae); a table by the data-to-text
model (checkpoints/dae/data_to_text, trained on verbalized WebNLG / E2E
tables against references and corrupted references) when the checkpoint
folder has one. "data_to_text" reads every input with the data-to-text model
(e.g. sources that are already verbalized tables). "rule" is the paper's
rule-based baseline, the fraction of output arcs that are also arcs of the
source (lemma level), which needs only spaCy. For data-to-text, pass tables=
instead of sources=: each table is verbalized with templates and the fact
sentences are the source.
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
    pooling (str): how an example's arc probabilities make its score: "mean" (the
        paper's mean pooling), "min" (the paper's definition: one arc not entailed
        makes the text non-factual) or "mean_min" (the average of the two). Default
        None: "mean_min" for tables= with the neural configs (chosen by leave-one-
        category-out on WebNLG 2017: one wrong value moves it twice as much as the
        mean), "mean" for sources= and the "rule" config (as in the paper).
    direction (str): "text" (the paper: the prediction's arcs against the
        source; what the prediction leaves out stays unseen) or "both" (also
        the source's own arcs, a table's fact sentences', against the
        prediction: an omitted or changed fact has arcs the prediction does
        not entail; the score is the lower of the two, the source's pooled
        as "mean_min"). Default None: "both" for tables= with the neural
        configs (chosen by leave-one-category-out on WebNLG 2017), "text" for
        sources= and the "rule" config.
Returns:
    score (float): mean over examples of the pooled arc entailment probability
        (with direction "both", of the lower of the two directions' scores).
    mean_score (float): mean over examples of the mean arc probability of the prediction.
    min_score (float): mean over examples of the lowest arc probability of the prediction.
    ok_rate (float): share of examples that have arcs and none below the
        threshold (with direction "both": labelled OK).
    examples (list of dict, with per_example=True): "score" (the arc
        probabilities pooled by ``pooling``; 0.0 for a text without arcs),
        "mean_score" and "min_score" (the mean and the lowest arc
        probability), "ok" (False for a text without arcs),
        "not_entailed" (arcs below threshold), "num_arcs", "no_arcs" (True
        when the text has no dependency arc to judge: empty, one word, or
        unparsed text; it states nothing verifiable, so it is not credited),
        "truncated" (the source was windowed, a word of the prediction
        longer than 16 sub-tokens was fed to the model as its first 16, or
        a cap on work was reached: only the first 10,000 characters of a
        prediction and 20,000 of a source are parsed, and the first 1,000
        arcs of a prediction scored; see scorer.MAX_PARSE_CHARS,
        MAX_SOURCE_CHARS, MAX_ARCS), "ignored" (pieces of the prediction
        that are no claim of it and are not parsed: control strings, a copy
        of the input in its format, sentences addressed to the evaluator;
        d2t_metrics.untrusted.non_claims; a prediction of nothing else
        scores as "") and "arcs": head, relation, child, their word indices
        and the probability of each arc. With direction "both" also
        "text_score" and "source_score" (each direction's pooled score;
        "source_score" is None when the source has no arc, and the score is
        then the prediction's),
        "label" (OK / omission / hallucination / omission+hallucination: a
        fact's arcs, or the source's, pooled as "mean_min" below the
        threshold; the prediction's score below it) and, for a table,
        "facts" (per fact: "fact", "sentence", its "arcs" against the
        prediction, their pooled "score" and "covered") and
        "omitted_facts"; for a text source, "source_arcs".
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

CONFIGS = ("default", "rule", "data_to_text")
CHECKPOINT_SUBDIR = os.path.join("checkpoints", "dae")
# The data-to-text model lives beside the summary model, in this subfolder of its checkpoint,
# so whoever passes the summary checkpoint (the command line, the benchmarks) gets both.
DATA_TO_TEXT_SUBDIR = "data_to_text"


def default_model_path():
    """The project's checkpoint of DAE: ``d2t_metrics.checkpoint_path("dae")`` (the
    checkout's checkpoints/dae, or the installed package's copy), else ./checkpoints/dae;
    ``None`` when neither holds a checkpoint's weights (``checkpoints.weight_files``)."""
    for path in (DAE.checkpoint_path(), CHECKPOINT_SUBDIR):
        if path and weight_files(path):  # the adapters and the arc head
            return os.path.abspath(path)
    return None


def _sentence_case_start(text):
    """``text`` with its first character upper-cased when it is a lower-case letter: spaCy parsed
    "the museum is in Rome." and "The museum is in Rome." into different arcs, so the first
    letter's case moved the score (issue #38); many systems write all in lower case."""
    return text[:1].upper() + text[1:] if text[:1].islower() else text


def data_to_text_model_path(model_path):
    """The data-to-text companion of a checkpoint folder (``<model_path>/data_to_text``) when it
    holds a checkpoint's weights, else ``model_path`` itself: a checkpoint without a companion
    reads tables too, as before there was one."""
    if model_path and os.path.isdir(str(model_path)):
        companion = os.path.join(str(model_path), DATA_TO_TEXT_SUBDIR)
        if weight_files(companion):
            return companion
    return model_path


def _decoder_max_length(path):
    """The recipe's max_length of a checkpoint over a decoder backbone (read 320 sub-tokens, not the
    encoder's 128), else ``None``."""
    recipe = os.path.join(str(path), "d2t_config.json") if path else ""
    if not recipe or not os.path.isfile(recipe):
        return None
    try:
        with open(recipe, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    return meta.get("max_length") if meta.get("task") == "decoder" else None


def source_texts(inputs):
    """The source text of each stored input, as plain text (``untrusted.plain_text``:
    no zero-width, bidi or control characters): a text as it is, a table
    verbalized into one sentence per fact (templates, with the generic back-off)."""
    return [text for text, _ in source_facts(inputs)]


def source_facts(inputs):
    """``(source text, facts)`` per stored input: ``facts`` is ``[(fact, sentence)]`` for a
    table (its sentences, joined by spaces, are the source text; :func:`source_texts`)
    and ``None`` for a text."""
    verbalizer = default_verbalizer()  # built once per process, not per call
    out = []
    for x in inputs:
        if isinstance(x, str):
            out.append((plain_text(x), None))
            continue
        triples = plain_table(x).to_triples()
        facts = [(str(t), verbalizer(t)) for t in triples]
        out.append((" ".join(sentence for _, sentence in facts), facts))
    return out


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

    def __init__(self, *args, model=None, table_model=None, spacy_model=DEFAULT_SPACY_MODEL, device=None, dtype=None,
                 max_length=None, **kwargs):
        super().__init__(*args, **kwargs)
        if self.config_name not in CONFIGS:
            raise ValueError(f"unknown config {self.config_name!r}; choose one of {list(CONFIGS)}")
        self.model_name = os.path.expanduser(model) if isinstance(model, str) else model
        # the checkpoint for tables= input; by default the data-to-text companion of ``model``
        self.table_model_name = os.path.expanduser(table_model) if isinstance(table_model, str) else table_model
        self.spacy_model = spacy_model
        self.device_name = device
        self.dtype = check_dtype(dtype)  # a bad one is refused here, before anything loads
        self.max_length = max_length
        self.scorer = None  # the scorer of text sources (the only one of "rule")
        self.table_scorer = None  # the scorer of tables
        self.nlp = None  # the spaCy pipeline both share

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self.declared_features(table_id="source"),
            codebase_urls=["https://github.com/tagoyal/dae-factuality"],
            reference_urls=["https://aclanthology.org/2020.findings-emnlp.322"],
        )

    def model_paths(self):
        """``(checkpoint for text sources, checkpoint for tables)`` of the neural configs."""
        path = self.model_name or default_model_path()
        table_path = self.table_model_name or data_to_text_model_path(path)
        if self.config_name == "data_to_text":
            return table_path, table_path
        return path, table_path

    def _scorer(self, path, nlp):
        return DAEScorer(path, spacy_model=nlp, device=self.device_name, dtype=self.dtype, max_length=self.max_length)

    def _require_checkpoint(self, path):
        if not path or not os.path.isdir(path):
            raise missing_model_error(
                path or self.model_name or CHECKPOINT_SUBDIR,
                FileNotFoundError("no DAE checkpoint directory (adapter_model.safetensors and arc_head.safetensors) found; "
                                  "train one with python -m training.dae.train"),
                metric="dae",
            )

    def _download_and_prepare(self, dl_manager):
        # evaluate.load loads spaCy and the tables' model; the summary model (a 135M decoder, 7.5 times
        # slower to load and run on a CPU than the tables' MiniLM) loads with the first text source.
        self.load_model(text_sources=False)

    def load_model(self, text_sources=True, tables=True):
        """The scorers of the kinds of input asked for (both by default), each loaded once per metric
        object, spaCy once for both; one model serves both kinds when both resolve to the same checkpoint.
        ``compute`` loads only the kinds its inputs have: tables alone never load the summary model."""
        if self.config_name == "rule":
            if self.scorer is None:
                self.nlp = load_spacy(self.spacy_model)
                self.scorer = self.table_scorer = RuleScorer(self.nlp)
            return self.scorer
        path, table_path = self.model_paths()
        for checkpoint in (path, table_path):  # a wrong table_model= fails before spaCy or any model loads
            self._require_checkpoint(checkpoint)
        shared = os.path.realpath(str(table_path)) == os.path.realpath(str(path))
        for kind, where, asked in (("scorer", path, text_sources), ("table_scorer", table_path, tables)):
            if not asked or getattr(self, kind) is not None:
                continue
            if self.nlp is None:
                self.nlp = load_spacy(self.spacy_model)
            setattr(self, kind, self._scorer(where, self.nlp))
            if shared:
                self.scorer = self.table_scorer = getattr(self, kind)
        return self.scorer if text_sources else self.table_scorer

    def signature(self, **options):
        if self.config_name == "rule":
            model = "rule"
        else:
            path, table_path = self.model_paths()
            model = self._model_label(path, self.model_name or "checkpoints/dae")
            if os.path.realpath(str(table_path)) != os.path.realpath(str(path)):
                # tables are read by another checkpoint: name it too
                model += "+tables:" + self._model_label(table_path, table_path)
        spacy_name = self.spacy_model if isinstance(self.spacy_model, str) else "custom"
        length = self.max_length or (None if self.config_name == "rule" else _decoder_max_length(path)) or DEFAULT_MAX_LENGTH
        if self.config_name != "rule" and not self.max_length:
            table_length = _decoder_max_length(table_path) or DEFAULT_MAX_LENGTH
            if table_length != length:  # the summary decoder reads 320 sub-tokens, the tables' encoder 128
                length = f"{length}+tables:{table_length}"
        # 1.1: tables verbalized with the WebNLG 3.0 templates too (d2t_metrics/templates/webnlg_v3.json);
        # texts read without invisible characters, long ones capped (``truncated``)
        # 1.2: tables read by the data-to-text checkpoint (checkpoints/dae/data_to_text) when there is one
        # 1.4: a table's score pools its arcs as the mean of their mean and minimum (``pooling``)
        # 1.5: a table's own arcs are checked against the text too, the lower score wins (``direction``)
        # 1.6: a bare list of the table's values at a text's end is no claim (untrusted.value_list_spans)
        pooling = options.get("pooling") or "auto"
        direction = options.get("direction") or "auto"
        arithmetic = "" if self.config_name == "rule" else arithmetic_part(self.device_name, self.dtype)
        return (f"dae|config:{self.config_name}|model:{model}|spacy:{spacy_name}|max_len:{length}|pooling:{pooling}"
                f"|direction:{direction}|version:1.6{arithmetic}")

    @staticmethod
    def _model_label(path, name):
        label = os.path.basename(os.path.normpath(str(name)))
        if path and os.path.normpath(str(path)).endswith(os.sep + DATA_TO_TEXT_SUBDIR):
            label = os.path.basename(os.path.dirname(os.path.normpath(str(path)))) + "/" + DATA_TO_TEXT_SUBDIR
        fingerprint = checkpoint_fingerprint(path)
        return label + ("@" + fingerprint if fingerprint else "")

    def _check_option_values(self, options):
        threshold = options.get("threshold", THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < float(threshold) < 1.0:
            raise ValueError(f"threshold must be a number in (0, 1), got {threshold!r}")
        check_batch_size(options.get("batch_size", 32))
        pooling = options.get("pooling")
        if pooling is not None and pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {list(POOLINGS)} or None, got {pooling!r}")
        direction = options.get("direction")
        if direction is not None and direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {list(DIRECTIONS)} or None, got {direction!r}")

    def corpus_scores(self, examples):
        """Means of the per-example score, mean and lowest arc probability and OK flag (shards join by it)."""
        n = max(len(examples), 1)
        return {
            "score": sum(e["score"] for e in examples) / n,
            "mean_score": sum(e["mean_score"] for e in examples) / n,
            "min_score": sum(e["min_score"] for e in examples) / n,
            "ok_rate": sum(e["ok"] for e in examples) / n,
        }

    def _neural_table(self, source):
        """Whether a stored input is a table read by a neural config: the inputs whose defaults
        are this project's (``pooling``, ``direction``) rather than the paper's."""
        return not isinstance(source, str) and self.config_name != "rule"

    def pooling_of(self, source, pooling=None):
        """The pooling an example's score uses: ``pooling`` if given, else "mean_min" for a table
        read by a neural config and "mean" otherwise (``_KWARGS_DESCRIPTION``)."""
        if pooling is not None:
            return pooling
        return "mean_min" if self._neural_table(source) else "mean"

    def direction_of(self, source, direction=None):
        """What an example checks: ``direction`` if given, else "both" for a table read by a
        neural config and "text" otherwise (``_KWARGS_DESCRIPTION``)."""
        if direction is not None:
            return direction
        return "both" if self._neural_table(source) else "text"

    def _compute(self, predictions, tables, per_example=False, batch_size=32, show_progress=True, threshold=THRESHOLD,
                 pooling=None, direction=None):
        # Checked by compute()/add_batch()/add() before evaluate stored them.
        # The parser and the model read what a reader sees (untrusted.plain_text), less what is no
        # claim of the text: control strings, a copy of the input, instructions (untrusted.non_claims);
        # its words one space apart (spaCy makes tokens, and arcs, of extra white space).
        inputs = decode_column(tables, table_only=False)
        visible = [plain_text(t) for t in predictions]
        # a bare list of a table's values at the text's end states no relation (untrusted.value_list_spans)
        claims = [non_claims(t, values=() if isinstance(x, str) else x.values()) for t, x in zip(visible, inputs)]
        texts = [_sentence_case_start(" ".join(c.split())) for c, _ in claims]
        sources = source_facts(inputs)
        srcs = [text for text, _ in sources]
        self.load_model(text_sources=any(isinstance(x, str) for x in inputs), tables=any(not isinstance(x, str) for x in inputs))
        # a text source goes to the summary model, a table to the data-to-text model
        scorers = [self.scorer if isinstance(x, str) else self.table_scorer for x in inputs]
        options = {"batch_size": int(batch_size), "show_progress": show_progress, "threshold": float(threshold)}
        examples = score_by_kind(scorers, srcs, texts, **options)
        # the other direction: the source's own arcs, checked against the text (what it leaves out)
        both = [i for i, x in enumerate(inputs) if self.direction_of(x, direction) == "both"]
        reverse = score_by_kind([scorers[i] for i in both], [texts[i] for i in both], [srcs[i] for i in both], **options)
        reverse = dict(zip(both, reverse))
        for i, (example, source, text, (_, spans)) in enumerate(zip(examples, inputs, visible, claims)):
            example["mean_score"] = example["score"]
            example["score"] = pooled(example["mean_score"], example["min_score"], self.pooling_of(source, pooling))
            if i in reverse:
                facts = sources[i][1]
                example.update(source_check(example, reverse[i], facts, srcs[i], scorers[i].nlp, float(threshold)))
            example["ignored"] = removed_pieces(text, spans)
        result = self.corpus_scores(examples)
        if per_example:
            result["examples"] = examples
        return result


def score_by_kind(scorers, sources, texts, **options):
    """Score example ``i`` with ``scorers[i]`` (text sources and tables may have different
    models), each scorer once over its examples, and return the results in input order."""
    groups = {}
    for i, scorer in enumerate(scorers):
        groups.setdefault(id(scorer), (scorer, []))[1].append(i)
    out = [None] * len(texts)
    for scorer, idx in groups.values():
        for i, example in zip(idx, scorer.score([sources[i] for i in idx], [texts[i] for i in idx], **options)):
            out[i] = example
    return out
