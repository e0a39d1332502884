"""PARENT: Precision And Recall of Entailed N-grams from the Table (Dhingra et al., ACL 2019)."""

from itertools import repeat

import datasets
import evaluate

from d2t_metrics.tokenize import MemoTokenizer

from .cooccurrence import load_counts
from .scoring import COOCCURRENCE
from .scoring import DEFAULT_MAX_ORDER
from .scoring import DEFAULT_SMOOTHING
from .scoring import OVERLAP
from .scoring import corpus_scores
from .scoring import parent_tokenized
from .table_tokens import to_token_tables

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
        `python -m metrics.parent.cooccurrence`).
    tokenizer (`str` or callable): "whitespace" (default; text.lower().split(),
        the reference reader's), "nltk" (nltk.word_tokenize(text.lower(),
        preserve_line=True)) or a callable str -> list of str. Unused for
        pre-tokenized inputs, except for tables given as strings.
    per_example (`bool`): add "examples", one dict per prediction.
    return_ngrams (`bool`): add the n-grams of the prediction and of the best
        reference with their table entailment and counts to each example.
    n_jobs (`int`): worker processes (-1: all cores); results do not change.
    show_progress (`bool`): progress bar (also off with D2T_NO_PROGRESS=1).

Returns:
    precision (`float`): mean entailed precision.
    recall (`float`): mean entailed recall.
    f1 (`float`): mean PARENT F-score: the system-level PARENT.
    examples (`list` of `dict`, with per_example=True): precision, recall, f1,
        score (= f1), lambda, reference_index (the reference with the best F),
        reference_recall, table_recall; with return_ngrams=True also
        prediction_ngrams and reference_ngrams.

Examples:

    >>> import evaluate
    >>> parent = evaluate.load("metrics/parent")  # doctest: +SKIP
    >>> tables = [[("name", "Blue Spice"), ("eatType", "coffee shop"), ("area", "riverside")]]
    >>> references = [["Blue Spice is a coffee shop by the river."]]
    >>> predictions = ["Blue Spice is a coffee shop in the riverside area."]
    >>> results = parent.compute(predictions=predictions, references=references, tables=tables)
    >>> print({k: round(v, 4) for k, v in results.items()})
    {'precision': 0.7259, 'recall': 0.8234, 'f1': 0.7716}

    A prediction that adds a fact the table does not have loses precision:

    >>> predictions = ["Blue Spice is a cheap coffee shop in the riverside area."]
    >>> results = parent.compute(predictions=predictions, references=references, tables=tables, per_example=True)
    >>> ex = results["examples"][0]
    >>> print(round(ex["precision"], 4), round(ex["recall"], 4), round(ex["lambda"], 4))
    0.5707 0.5926 0.3333

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


def _is_token_list(obj) -> bool:
    return isinstance(obj, (list, tuple)) and all(map(isinstance, obj, repeat(str)))


class _TokenTables(list):
    """Tables already checked and tokenized by compute(), handed to _compute as they are."""


def _normalize_inputs(predictions, references):
    """Check predictions and references and bring references to one list per example.

    Raises ValueError naming the example index. Predictions are all strings
    (raw mode) or all token lists (pre-tokenized mode).
    """
    if predictions is None:
        raise ValueError("predictions is None; pass a list of strings (or of token lists)")
    if isinstance(predictions, str):
        raise ValueError("predictions must be a list of strings, got a single string")
    predictions = list(predictions)
    if references is None:
        raise ValueError("references is None; pass one reference (or a list of references) per prediction")
    if isinstance(references, str):
        raise ValueError("references must be a list with one entry per prediction, got a single string")
    references = list(references)
    if len(references) != len(predictions):
        raise ValueError(f"got {len(predictions)} predictions but {len(references)} references; pass exactly one entry per prediction")
    tokenized = bool(predictions) and not isinstance(predictions[0], str) and predictions[0] is not None
    out_refs = []
    for i, (pred, refs) in enumerate(zip(predictions, references)):
        if pred is None:
            raise ValueError(f"example {i}: prediction is None")
        if refs is None:
            raise ValueError(f"example {i}: reference is None")
        if tokenized:
            if not _is_token_list(pred):
                raise ValueError(f"example {i}: prediction must be a list of token strings like the others, got {pred!r}")
            if _is_token_list(refs) and (not refs or isinstance(refs[0], str)):
                refs = [refs]  # one tokenized reference
            refs = list(refs)
            for r in refs:
                if not _is_token_list(r):
                    raise ValueError(f"example {i}: a tokenized reference must be a list of strings, got {r!r}")
        else:
            if not isinstance(pred, str):
                raise ValueError(f"example {i}: prediction must be a str, got {type(pred).__name__}: {pred!r}")
            if isinstance(refs, str):
                refs = [refs]
            if not isinstance(refs, (list, tuple)):
                raise ValueError(f"example {i}: references must be a str or a list of str, got {type(refs).__name__}")
            refs = list(refs)
            for r in refs:
                if not isinstance(r, str):
                    raise ValueError(f"example {i}: reference must be a str, got {type(r).__name__}: {r!r}")
        if not refs:
            raise ValueError(f"example {i}: no reference given")
        out_refs.append(refs)
    return predictions, out_refs, tokenized


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Parent(evaluate.Metric):
    """PARENT-W / PARENT-C with exact parity to the reference implementation."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(
                    {
                        "predictions": datasets.Value("string", id="sequence"),
                        "references": datasets.Sequence(datasets.Value("string", id="sequence"), id="references"),
                    }
                ),
                datasets.Features(
                    {
                        "predictions": datasets.Sequence(datasets.Value("string", id="token")),
                        "references": datasets.Sequence(datasets.Sequence(datasets.Value("string", id="token")), id="references"),
                    }
                ),
            ],
            codebase_urls=["https://github.com/google-research/language/tree/master/language/table_text_eval"],
            reference_urls=["https://aclanthology.org/P19-1483"],
        )

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Validates inputs (ValueError naming the example) before evaluate stores them, then computes."""
        if predictions is None and references is None:
            return super().compute(**kwargs)  # batches were added with add_batch()
        predictions, references, _ = _normalize_inputs(predictions, references)
        if not predictions:
            raise ValueError("predictions is empty; PARENT needs at least one example")
        # Bad tables fail here, before any work; the tokenized tables are reused by _compute.
        tokenize = MemoTokenizer(kwargs.get("tokenizer", "whitespace"))
        kwargs["tables"] = _TokenTables(to_token_tables(kwargs.get("tables"), len(predictions), tokenize))
        self._checked = True
        try:
            return super().compute(predictions=predictions, references=references, **kwargs)
        finally:
            self._checked = False

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Validates a batch (ValueError naming the example) and adds it; tables go to compute()."""
        if not getattr(self, "_checked", False) and (predictions is not None or references is not None):
            predictions, references, _ = _normalize_inputs(predictions, references)
        return super().add_batch(predictions=predictions, references=references, **kwargs)

    def _compute(
        self,
        predictions,
        references,
        tables=None,
        lambda_weight=None,
        smoothing=DEFAULT_SMOOTHING,
        max_order=DEFAULT_MAX_ORDER,
        entailment=OVERLAP,
        cooccurrence_counts=None,
        tokenizer="whitespace",
        per_example=False,
        return_ngrams=False,
        n_jobs=1,
        show_progress=True,
    ):
        # Inputs come back from evaluate's Arrow store, typed by the features and
        # checked by compute()/add_batch(); only add() can slip a None through.
        for name, column in (("prediction", predictions), ("reference", references)):
            if None in column:
                raise ValueError(f"example {column.index(None)}: {name} is None")
        tokenized = not isinstance(predictions[0], str)
        tokenize = MemoTokenizer(tokenizer)
        if isinstance(tables, _TokenTables):
            token_tables = tables
        else:
            token_tables = to_token_tables(tables, len(predictions), tokenize)
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
        result = corpus_scores(examples)
        if per_example or return_ngrams:
            result["examples"] = examples
        return result
