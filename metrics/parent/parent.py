"""PARENT: Precision And Recall of Entailed N-grams from the Table (Dhingra et al., ACL 2019)."""

import os

import datasets
import evaluate

from d2t_metrics.inputs import REFERENCES
from d2t_metrics.inputs import TABLE
from d2t_metrics.inputs import TEXT
from d2t_metrics.metric import D2TMetric
from d2t_metrics.tokenize import MemoTokenizer

from .counts import load_counts
from .scoring import COOCCURRENCE
from .scoring import DEFAULT_MAX_ORDER
from .scoring import DEFAULT_SMOOTHING
from .scoring import OVERLAP
from .scoring import corpus_scores
from .scoring import parent_tokenized
from .table_tokens import to_token_tables
from .tokenized import checked_columns

_CITATION = """\
@inproceedings{dhingra-etal-2019-handling,
    title = "Handling Divergent Reference Texts when Evaluating Table-to-Text Generation",
    author = "Dhingra, Bhuwan and Faruqui, Manaal and Parikh, Ankur and Chang, Ming-Wei and Das, Dipanjan and Cohen, William",
    booktitle = "Proceedings of the 57th Annual Meeting of the Association for Computational Linguistics",
    year = "2019",
    address = "Florence, Italy",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/P19-1483",
    doi = "10.18653/v1/P19-1483",
    pages = "4884--4895",
}
"""

_DESCRIPTION = """\
PARENT compares a generated text with both its reference text(s) and its input table.
Entailed precision credits a prediction n-gram that is in the reference, or else
by its probability w(g) of being entailed by the table; entailed recall is the
geometric mean of recall against the reference (each reference n-gram weighted
by w(g), so divergent reference content is ignored) and recall of the table
entries (longest common subsequence of each value with the prediction). The
F-score of the best reference is the instance score; the corpus score is the
mean. The numbers match the reference implementation (google-research/language
table_text_eval) to 1e-9, and are computed about 20 times faster.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`, or `list` of token lists): generated texts.
    references (`list`): per prediction, one reference string or a list of
        reference strings (token lists when predictions are token lists).
    tables (`list`): per prediction, its table in any form d2t_metrics reads:
        WebNLG "s | p | o" strings (joined by <br>), lists of triples, E2E
        meaning representations "name[X], eatType[pub]", attribute-value pairs
        or dicts; or pre-tokenized: a list of [attribute_tokens, value_tokens]
        pairs or [head_tokens, relation_tokens, tail_tokens] triples.
    lambda_weight (`float` or `None`): weight of table recall in [0, 1]. Default
        None: per example and reference, 1 - the mean mention probability of the
        table entries in the reference.
    smoothing (`float`): replaces zero precisions/recalls; default 1e-5.
    max_order (`int`): longest n-gram; default 4.
    entailment (`str`): "overlap" (PARENT-W, default) or "cooccurrence" (PARENT-C).
    cooccurrence_counts (`str` or `dict`): counts JSON for PARENT-C (learn with
        `python -m training.parent.cooccurrence`).
    tokenizer (`str` or callable): "nltk" (default: nltk.word_tokenize(
        text.lower(), preserve_line=True), the Treebank tokenizer the paper's
        WebNLG correlations and the reference's golden values were made with;
        no punkt download), "whitespace" (text.lower().split(), what the
        reference's command-line reader does: punctuation stays on words) or
        a callable str -> list of str. Unused for pre-tokenized inputs,
        except for tables given as strings.
    per_example (`bool`): add "examples", one dict per prediction.
    return_ngrams (`bool`): add the n-grams of the prediction and of the best
        reference with their table entailment and counts to each example.
    n_jobs (`int`): worker processes (-1: all cores); results do not change.
    show_progress (`bool`): progress bar (also off with D2T_NO_PROGRESS=1).
    batch_size: accepted and ignored (PARENT runs no model), so that
        evaluate.combine can pass the common options to every metric.

    predictions, references and tables are declared inputs: add(),
    add_batch(), num_process shards and evaluate.combine carry them. Every
    example is checked before evaluate stores it (ValueError naming the
    argument and example index).

Returns:
    precision (`float`): mean entailed precision.
    recall (`float`): mean entailed recall.
    f1 (`float`): mean PARENT F-score: the system-level PARENT.
    examples (`list` of `dict`, with per_example=True): precision, recall, f1,
        score (= f1), lambda, reference_index (the reference with the best F),
        reference_recall, table_recall; with return_ngrams=True also
        prediction_ngrams and reference_ngrams.

Examples:

    >>> import d2t_metrics
    >>> parent = d2t_metrics.load("parent")  # evaluate.load("./metrics/parent") in a checkout
    >>> tables = [[("name", "Blue Spice"), ("eatType", "coffee shop"), ("area", "riverside")]]
    >>> references = [["Blue Spice is a coffee shop by the river."]]
    >>> predictions = ["Blue Spice is a coffee shop in the riverside area."]
    >>> results = parent.compute(predictions=predictions, references=references, tables=tables)
    >>> print({k: round(v, 4) for k, v in results.items()})
    {'precision': 0.6861, 'recall': 0.8234, 'f1': 0.7485}

    A prediction that adds a fact the table does not have loses precision:

    >>> predictions = ["Blue Spice is a cheap coffee shop in the riverside area."]
    >>> results = parent.compute(predictions=predictions, references=references, tables=tables, per_example=True)
    >>> ex = results["examples"][0]
    >>> print(round(ex["precision"], 4), round(ex["recall"], 4), round(ex["lambda"], 4))
    0.5491 0.5926 0.3333

    Pre-tokenized input, as in the reference implementation's test:

    >>> results = parent.compute(
    ...     predictions=[["michael", "dahlquist", "was", "a", "drummer", "."]],
    ...     references=[[["michael", "dahlquist", "was", "a", "drummer", "in", "silkworm", "."]]],
    ...     tables=[[[["name"], ["michael", "dahlquist"]], [["occupation"], ["drummer"]]]],
    ...     lambda_weight=0.5,
    ... )
    >>> print(round(results["f1"], 4))
    0.864
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Parent(D2TMetric):
    """PARENT-W / PARENT-C with exact parity to the reference implementation."""

    INPUTS = {"predictions": TEXT, "references": REFERENCES, "tables": TABLE}

    def _info(self):
        # Tables are stored as one canonical JSON string each (d2t_metrics.inputs),
        # so they travel with their predictions through add_batch and num_process shards.
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(
                    {
                        "predictions": datasets.Value("string", id="sequence"),
                        "references": datasets.Sequence(datasets.Value("string", id="sequence"), id="references"),
                        "tables": datasets.Value("string", id="table"),
                    }
                ),
                datasets.Features(
                    {
                        "predictions": datasets.Sequence(datasets.Value("string", id="token")),
                        "references": datasets.Sequence(datasets.Sequence(datasets.Value("string", id="token")), id="references"),
                        "tables": datasets.Value("string", id="table"),
                    }
                ),
            ],
            codebase_urls=["https://github.com/google-research/language/tree/master/language/table_text_eval"],
            reference_urls=["https://aclanthology.org/P19-1483"],
        )

    def _checked_columns(self, given, offset):
        # Pre-tokenized predictions, references and tables are PARENT's own forms.
        return checked_columns(given, offset)

    def _compute(
        self,
        predictions,
        references,
        tables,
        lambda_weight=None,
        smoothing=DEFAULT_SMOOTHING,
        max_order=DEFAULT_MAX_ORDER,
        entailment=OVERLAP,
        cooccurrence_counts=None,
        tokenizer="nltk",
        per_example=False,
        return_ngrams=False,
        n_jobs=1,
        show_progress=True,
        batch_size=None,
    ):
        # Inputs come back from evaluate's Arrow store, checked by compute(),
        # add_batch() or add() before they were stored.
        tokenized = not isinstance(predictions[0], str)
        tokenize = MemoTokenizer(tokenizer)
        token_tables = to_token_tables(tables, tokenize)
        if not tokenized:
            predictions = [tokenize(p) for p in predictions]
            references = [[tokenize(r) for r in refs] for refs in references]
        counts = None
        if entailment == COOCCURRENCE:
            if cooccurrence_counts is None:
                raise ValueError("entailment='cooccurrence' needs cooccurrence_counts= (a JSON path or a dict)")
            counts = load_counts(cooccurrence_counts)
        examples = parent_tokenized(
            predictions,
            references,
            token_tables,
            lambda_weight=lambda_weight,
            smoothing=smoothing,
            max_order=max_order,
            entailment=entailment,
            counts=counts,
            n_jobs=n_jobs,
            return_ngrams=return_ngrams,
            show_progress=show_progress,
        )
        result = self.corpus_scores(examples)
        if per_example or return_ngrams:
            result["examples"] = examples
        return result

    def signature(self, entailment=OVERLAP, lambda_weight=None, smoothing=DEFAULT_SMOOTHING, max_order=DEFAULT_MAX_ORDER,
                  tokenizer="nltk", cooccurrence_counts=None, **_ignored):
        """The settings a score depends on, as sacrebleu's signatures give them: the entailment model
        (PARENT-W ``overlap`` or PARENT-C ``cooccurrence``), lambda (``auto``: per example, from the
        reference), smoothing, the longest n-gram and the tokenizer (``custom`` for a callable)."""
        lam = "auto" if lambda_weight is None else f"{float(lambda_weight):g}"
        tok = tokenizer if isinstance(tokenizer, str) else "custom"
        parts = [f"parent|entailment:{entailment}", f"lambda:{lam}", f"smoothing:{float(smoothing):g}",
                 f"max_order:{max_order}", f"tok:{tok}"]
        if entailment == COOCCURRENCE:
            parts.append("counts:" + (os.path.basename(str(cooccurrence_counts)) if isinstance(cooccurrence_counts, str)
                                      else "custom"))
        return "|".join(parts)

    def corpus_scores(self, examples):
        """Means of the per-example precision, recall and F1 (the command line's shards join by it)."""
        return corpus_scores(examples)
