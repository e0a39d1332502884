"""data_questeval, the evaluate module: the scoring rules, both directions on
tiny random models (T5 backends for QuestEval's strings, the project's span
QA and generator QG trained a few steps), the question cache, references,
bad inputs, the command line, and the shipped checkpoints."""

import doctest
import json
import os
import shutil

import evaluate
import pytest

from conftest import ROOT
from metrics.data_questeval import scoring
from tests.test_data_questeval_models import mini_shared, text_qa, text_qg  # noqa: F401  (module fixtures)

METRIC = os.path.join(ROOT, "metrics", "data_questeval")
CHECKPOINTS = os.path.join(ROOT, "checkpoints", "data_questeval")
ROLES = ("text_qg", "text_qa", "table_qg", "table_qa")
# QuestEval's own example (its README): hypothesis and source, whose score with the public checkpoints is 0.49123
QE_HYPOTHESIS = "1950 da was discovered by carl."
QE_SOURCE = "(29075)_1950_da | discoverer | carl_a._wirtanen"
BEAN = ["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot"]


class RecordingRuleModel:
    """A rule-based stand-in for a QG or QA model; records what it is asked, one list per call."""

    backend = "rule"

    def __init__(self):
        self.calls = []


class RuleQG(RecordingRuleModel):
    """A question generator that always writes "What is <answer>?"."""

    name_or_path = "rule-qg"

    def generate(self, answers, contexts, batch_size=None, show_progress=True):
        self.calls.append(list(zip(answers, contexts)))
        return [f"What is {a}?" for a in answers]


class ExactQA(RecordingRuleModel):
    """Answers "What is X?" with X when the context holds X, spaces aside (answerability 1), else no answer (0.2)."""

    name_or_path = "exact-qa"

    def answer(self, questions, contexts, batch_size=None, show_progress=True):
        from metrics.data_questeval.qa import QAResult

        self.calls.append(list(zip(questions, contexts)))
        out = []
        for q, c in zip(questions, contexts):
            x = q[len("What is "):-1]
            squeeze = lambda t: t.replace(" ", "").lower()  # noqa: E731  ("Wheeler , Texas" is in "Wheeler, Texas")
            out.append(QAResult(x, 1.0) if squeeze(x) in squeeze(c) else QAResult("", 0.2))
        return out


def rule_metric(**kwargs):
    qg, qa = RuleQG(), ExactQA()
    m = evaluate.load(METRIC, text_qg=qg, table_qg=qg, text_qa=qa, table_qa=qa, **kwargs)
    return m, qg, qa


@pytest.fixture(scope="module")
def rules():
    return rule_metric()


# ---------------------------------------------------------------- the scoring rules


def test_question_scores_are_clipped_and_averaged():
    assert scoring.question_score(1.0, 1.0, 1.0) == 1.0
    assert scoring.question_score(1.7, -0.2, 0.5) == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert scoring.side_score([]) is None
    assert scoring.side_score([{"score": 0.2}, {"score": 0.6}]) == pytest.approx(0.4)
    assert scoring.source_score(0.2, None) == 0.2 and scoring.source_score(None, None) == 0.0
    assert scoring.source_score(0.2, 0.6) == pytest.approx(0.4)
    assert scoring.reduce_sources([0.2, 0.6]) == 0.6 and scoring.reduce_sources([0.2, 0.6], "mean") == pytest.approx(0.4)
    with pytest.raises(ValueError):
        scoring.reduce_sources([0.1], "min")


def test_a_wrong_answer_keeps_no_answerability_when_matched():
    """Issue 38: QuestEval's mean gives a question answered confidently with another value a third for
    its answerability alone, more than a question not answered; ``matched`` counts the answerability
    only as far as the answer matches (x max(F1, BERTScore))."""
    wrong, unanswered = (0.95, 0.0, 0.2), (0.05, 0.0, 0.0)
    assert scoring.question_score(*wrong) > scoring.question_score(*unanswered) + 0.3
    assert scoring.question_score(*wrong, matched=True) == pytest.approx((0.95 * 0.2 + 0.0 + 0.2) / 3)
    assert scoring.question_score(*wrong, matched=True) < 0.15
    # a matching answer keeps everything; a partial one keeps its best match's share
    assert scoring.question_score(0.9, 1.0, 1.0, matched=True) == scoring.question_score(0.9, 1.0, 1.0)
    assert scoring.question_score(0.9, 0.5, 0.8, matched=True) == pytest.approx((0.9 * 0.8 + 0.5 + 0.8) / 3)
    assert scoring.question_score(1.7, -0.2, 0.5, matched=True) == pytest.approx((0.5 + 0.0 + 0.5) / 3)  # clipped first


def test_several_questions_about_one_candidate_count_as_one():
    questions = [{"answer": "Alan Bean", "candidate": 0, "score": 1.0}, {"answer": "Alan Bean", "candidate": 0, "score": 0.0},
                 {"answer": "Alan Bean", "candidate": 0, "score": 0.2}, {"answer": "Texas", "candidate": 1, "score": 0.9}]
    assert scoring.candidate_scores(questions) == [("Alan Bean", pytest.approx(0.4)), ("Texas", 0.9)]
    # each value weighs the same: (0.4 + 0.9) / 2, not the mean of the four questions
    assert scoring.side_score(questions) == pytest.approx(0.65)
    # one question per candidate: QuestEval's mean over questions
    assert scoring.side_score([dict(q, candidate=n) for n, q in enumerate(questions)]) == pytest.approx(2.1 / 4)


def test_a_sides_candidates_pool_by_mean_min_or_both():
    questions = [{"answer": "Alan Bean", "candidate": 0, "score": 1.0}, {"answer": "Alan Bean", "candidate": 0, "score": 0.6},
                 {"answer": "Texas", "candidate": 1, "score": 0.2}, {"answer": "pilot", "candidate": 2, "score": 0.9}]
    # candidates: 0.8, 0.2, 0.9
    assert scoring.side_score(questions) == pytest.approx(1.9 / 3)
    assert scoring.side_score(questions, "min") == pytest.approx(0.2)
    assert scoring.side_score(questions, "mean_min") == pytest.approx((1.9 / 3 + 0.2) / 2)
    assert scoring.side_score([], "mean_min") is None
    assert scoring.pooled([0.7], "mean_min") == pytest.approx(0.7)
    with pytest.raises(ValueError, match="pooling"):
        scoring.pooled([0.7], "max")


def test_pooling_weighs_one_wrong_value_more(rules):
    m, _, _ = rules
    table = BEAN + ["Alan_Bean | nationality | United_States", "Alan_Bean | almaMater | UT_Austin"]
    good = "Alan Bean was born in Wheeler, Texas, studied at UT Austin and was a Test pilot of the United States."
    wrong = good.replace("Wheeler, Texas", "Boston")
    by = {p: [e["score"] for e in m.compute(predictions=[good, wrong], tables=[table, table], per_example=True,
                                            show_progress=False, pooling=p)["examples"]] for p in scoring.POOLINGS}
    drops = {p: s[0] - s[1] for p, s in by.items()}
    assert 0 < drops["mean"] < drops["mean_min"] < drops["min"]
    assert by["mean"] == [e["score"] for e in m.compute(predictions=[good, wrong], tables=[table, table], per_example=True,
                                                         show_progress=False)["examples"]]
    assert "|pooling:mean_min|" in m.signature(pooling="mean_min")


def test_the_benchmark_rescores_an_example_as_the_metric_scores_it(rules):
    from benchmarks.dq_options import rescored

    m, _, _ = rules
    texts = ["Alan Bean was born in Boston and was a test pilot.", "Alan Bean flew.", ""]
    for pooling in scoring.POOLINGS:
        got = m.compute(predictions=texts, tables=[BEAN] * 3, per_example=True, show_progress=False,
                        pooling=pooling, use_references=False)["examples"]
        plain = m.compute(predictions=texts, tables=[BEAN] * 3, per_example=True, show_progress=False)["examples"]
        assert [rescored(e, pooling) for e in plain] == pytest.approx([e["score"] for e in got], abs=1e-12)
    # the answerability filter's rescoring: dropping a table question is dropping it from the recall side
    example = plain[0]
    table = example["sources"][0]
    drop = table["from_source"][0]["question"]
    left = [q for q in table["from_source"] if q["question"] != drop]
    expected = scoring.source_score(scoring.side_score(table["from_text"]), scoring.side_score(left))
    assert rescored(example, "mean", keep=lambda q: q["question"] != drop) == pytest.approx(expected)


def test_lru_cache_forgets_the_least_recently_used():
    cache = scoring.LRUCache(2)
    cache["a"], cache["b"] = 1, 2
    assert cache.get("a") == 1
    cache["c"] = 3
    assert "b" not in cache and "a" in cache and "c" in cache and len(cache) == 2


def test_answer_bertscore_of_equal_different_and_empty_answers():
    bs = scoring.AnswerBERTScore()  # the PyPI MiniLM
    same, other, empty = bs.score([("Wheeler , Texas", "Wheeler , Texas"), ("Wheeler , Texas", "1932"), ("", "1932")])
    assert same == pytest.approx(1.0, abs=1e-5) and 0.0 <= other < same and empty == 0.0


# ---------------------------------------------------------------- both directions, with rule models


def test_both_directions_with_exact_answers(rules):
    m, _, _ = rules
    r = m.compute(predictions=["Alan Bean was born in Wheeler, Texas.", "Alan Bean was born in Boston."],
                  tables=[BEAN, BEAN], per_example=True, show_progress=False)
    good, bad = r["examples"]
    assert 0 <= bad["score"] < good["score"] <= 1
    table = good["sources"][0]
    assert good["source"] == "table" and table["source"] == "table"
    # the table's values asked on the text: its birth place is found, its occupation is not
    found = {q["answer"]: q for q in table["from_source"]}
    assert set(found) == {"Alan Bean", "Wheeler , Texas", "Test pilot"}
    assert found["Test pilot"]["predicted"] == "" and found["Test pilot"]["f1"] == 0.0
    assert found["Alan Bean"]["score"] == pytest.approx(1.0, abs=1e-5)
    assert good["missing"] == ["Test pilot"]
    # the text's claims asked on the table: Boston is not in it
    assert "Boston" in bad["unsupported"] and "Boston" not in good["unsupported"]
    # sides and scores agree with the rules of scoring.py
    assert table["recall"] == pytest.approx(sum(q["score"] for q in table["from_source"]) / 3)
    assert good["score"] == pytest.approx((table["precision"] + table["recall"]) / 2)
    assert r["score"] == pytest.approx((good["score"] + bad["score"]) / 2)
    assert r["precision"] == pytest.approx((good["precision"] + bad["precision"]) / 2)
    assert r["questions"] == sum(len(s["from_text"]) + len(s["from_source"]) for e in r["examples"] for s in e["sources"])


def test_an_empty_text_scores_zero_and_asks_nothing(rules):
    m, qg, qa = rules
    qg.calls.clear()
    qa.calls.clear()
    r = m.compute(predictions=["", "   "], tables=[BEAN, BEAN], per_example=True, show_progress=False)
    assert r["score"] == 0.0 and [e["score"] for e in r["examples"]] == [0.0, 0.0]
    assert qg.calls == [] and qa.calls == []


def test_table_questions_are_generated_once_per_table(rules):
    m, qg, _ = rules
    m.question_cache.clear()
    qg.calls.clear()
    texts = ["Alan Bean was born in Wheeler, Texas.", "Alan Bean was a test pilot.", "Alan Bean flew."]
    first = m.compute(predictions=texts, tables=[BEAN] * 3, per_example=True, show_progress=False)
    asked = [a for call in qg.calls for a, _ in call]
    assert asked.count("Wheeler , Texas") == 1  # the table's value, asked once for the three texts
    assert asked.count("Alan Bean") == 1 + 3  # the table once, each text once
    qg.calls.clear()
    again = m.compute(predictions=texts, tables=[BEAN] * 3, per_example=True, show_progress=False)
    assert qg.calls == []  # every source's questions come from the cache
    assert again["examples"] == first["examples"]
    qg.calls.clear()
    uncached = m.compute(predictions=texts, tables=[BEAN] * 3, per_example=True, show_progress=False, use_cache=False)
    assert [a for call in qg.calls for a, _ in call].count("Alan Bean") == 3 + 3  # the table thrice, each text once
    assert uncached["examples"] == first["examples"]


def test_references_are_further_sources_reduced_by_max(rules):
    m, _, _ = rules
    text = "Alan Bean was a test pilot from Texas."
    ref = "Alan Bean was a test pilot from Texas."
    alone = m.compute(predictions=[text], tables=[BEAN], per_example=True, show_progress=False)["examples"][0]
    both = m.compute(predictions=[text], tables=[BEAN], references=[[ref]], per_example=True, show_progress=False)["examples"][0]
    assert [s["source"] for s in both["sources"]] == ["table", "reference 1"]
    assert both["score"] == max(s["score"] for s in both["sources"]) and both["source"] == "reference 1"
    assert both["sources"][0]["score"] == pytest.approx(alone["score"])
    mean = m.compute(predictions=[text], tables=[BEAN], references=[[ref]], reduction="mean", per_example=True,
                     show_progress=False)["examples"][0]
    assert mean["score"] == pytest.approx(sum(s["score"] for s in both["sources"]) / 2)
    off = m.compute(predictions=[text], tables=[BEAN], references=[[ref]], use_references=False, per_example=True,
                    show_progress=False)["examples"][0]
    assert len(off["sources"]) == 1 and off["score"] == pytest.approx(alone["score"])


def test_add_batch_carries_the_tables(rules):
    m, _, _ = rules
    m.add_batch(predictions=["Alan Bean was born in Wheeler, Texas."], tables=[BEAN])
    m.add(prediction="The Eagle is a pub.", tables="name[The Eagle], eatType[pub]")
    r = m.compute(per_example=True, show_progress=False)
    assert len(r["examples"]) == 2
    assert {q["answer"] for q in r["examples"][1]["sources"][0]["from_source"]} == {"The Eagle", "pub"}


# ---------------------------------------------------------------- bad inputs, before anything runs


@pytest.mark.parametrize("kwargs, message", [
    ({"predictions": ["a", "b"], "tables": [BEAN]}, "2 predictions but 1 tables"),
    ({"predictions": ["a"]}, "tables"),
    ({"predictions": [None], "tables": [BEAN]}, "example 0: prediction is None"),
    ({"predictions": ["a", 3], "tables": [BEAN, BEAN]}, "example 1: prediction must be a str"),
    ({"predictions": ["a"], "tables": [[]]}, "example 0: empty table"),
    ({"predictions": ["a"], "tables": [["not a triple"]]}, "example 0: malformed triple"),
    ({"predictions": ["\ud800"], "tables": [BEAN]}, "lone surrogate"),
    ({"predictions": ["x" * 1_000_001], "tables": [BEAN]}, "over the limit"),
    ({"predictions": "a text", "tables": [BEAN]}, "list"),
    ({"predictions": ["a"], "tables": [BEAN], "reduction": "min"}, "reduction"),
    ({"predictions": ["a"], "tables": [BEAN], "pooling": "max"}, "pooling"),
    ({"predictions": ["a"], "tables": [BEAN], "pooling": ["mean"]}, "pooling"),
    ({"predictions": ["a"], "tables": [BEAN], "max_answers": 0}, "max_answers"),
    ({"predictions": ["a"], "tables": [BEAN], "max_table_values": 0}, "max_table_values"),
    ({"predictions": ["a"], "tables": [BEAN], "max_qa_windows": "8"}, "max_qa_windows"),
    ({"predictions": ["a"], "tables": [BEAN], "use_cache": "no"}, "use_cache"),
    ({"predictions": ["a"], "tables": [BEAN], "questions_per_value": 0}, "questions_per_value"),
    ({"predictions": ["a"], "tables": [BEAN], "questions_per_value": 9}, "questions_per_value"),
    ({"predictions": ["a"], "tables": [BEAN], "questions_per_value": True}, "questions_per_value"),
    ({"predictions": ["a"], "tables": [BEAN], "questions_per_value": "3"}, "questions_per_value"),
    ({"predictions": ["a"], "tables": [BEAN], "questions_per_text_answer": 0}, "questions_per_text_answer"),
    ({"predictions": ["a"], "tables": [BEAN], "questions_per_text_answer": 2.0}, "questions_per_text_answer"),
    ({"predictions": ["a"], "tables": [BEAN], "temperature": 1}, "temperature"),
])
def test_bad_inputs_are_refused_before_any_model_runs(kwargs, message):
    m, qg, qa = rule_metric()
    with pytest.raises(ValueError, match=None) as info:
        m.compute(show_progress=False, **kwargs)
    assert message in str(info.value)
    assert qg.calls == [] and qa.calls == []


def test_several_questions_per_value_need_a_qg_that_can_ask_them():
    m, qg, qa = rule_metric()
    assert m.questions_per_value() == 1 and "|questions_per_value:1|" in m.signature()  # not the project's generator
    assert m.questions_per_text_answer() == 1 and "|questions_per_text_answer:1|" in m.signature()
    with pytest.raises(ValueError, match="generate_alternatives"):
        m.compute(predictions=["a"], tables=[BEAN], questions_per_value=2, show_progress=False)
    with pytest.raises(ValueError, match="questions_per_text_answer=3 needs a text_qg"):
        m.compute(predictions=["a"], tables=[BEAN], questions_per_text_answer=3, show_progress=False)
    assert qg.calls == [] and qa.calls == []


class BeamRuleQG(RuleQG):
    """RuleQG that can also ask ``n`` differently worded questions per answer, the first of them generate()'s."""

    def generate_alternatives(self, answers, contexts, n, batch_size=None, show_progress=True):
        self.calls.append(("alternatives", n, list(zip(answers, contexts))))
        return [[f"What is {a}?", f"Which one is {a}?", f"Who or what is {a}?"][:n] for a in answers]


def test_several_questions_per_text_answer_each_candidate_weighs_the_same():
    text_qg, table_qg, qa = BeamRuleQG(), RuleQG(), ExactQA()
    m = evaluate.load(METRIC, text_qg=text_qg, table_qg=table_qg, text_qa=qa, table_qa=qa)
    text = "Alan Bean was born in Wheeler, Texas."
    one = m.compute(predictions=[text], tables=[BEAN], per_example=True, show_progress=False)["examples"][0]["sources"][0]
    assert len(one["from_text"]) == len({q["candidate"] for q in one["from_text"]}) > 1  # QuestEval's one question each
    assert not any(call[0] == "alternatives" for call in text_qg.calls)
    three = m.compute(predictions=[text], tables=[BEAN], per_example=True, show_progress=False,
                      questions_per_text_answer=3)["examples"][0]["sources"][0]
    asked = three["from_text"]
    assert [c[1] for c in text_qg.calls if c[0] == "alternatives"] == [3]
    assert len(asked) == 3 * len(one["from_text"])
    for q1 in one["from_text"]:  # each candidate: its first question is the greedy one, then two more
        about = [q for q in asked if q["candidate"] == q1["candidate"]]
        assert [q["question"] for q in about][0] == q1["question"] and {q["answer"] for q in about} == {q1["answer"]}
    assert three["precision"] == pytest.approx(scoring.side_score(asked))
    assert three["precision"] == pytest.approx(sum(sum(q["score"] for q in asked if q["candidate"] == q1["candidate"]) / 3
                                                   for q1 in one["from_text"]) / len(one["from_text"]))
    assert three["from_source"] == one["from_source"]  # the table side is untouched
    assert "|questions_per_text_answer:3|" in m.signature(questions_per_text_answer=3)
    assert "|questions_per_text_answer:1|" in m.signature()


def test_model_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        evaluate.load(METRIC, model=str(tmp_path / "nowhere"))
    with pytest.raises(OSError, match="text_qg"):
        evaluate.load(METRIC, model=str(tmp_path))
    with pytest.raises(ValueError, match="generate"):
        evaluate.load(METRIC, text_qg=object())
    with pytest.raises(ValueError, match="roles"):
        evaluate.load(METRIC, model={"qg": "x"})


def test_a_missing_hub_model_says_how_to_pass_a_path(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="path"):
        evaluate.load(METRIC)  # QuestEval's T5 checkpoints, not on this machine


def test_hostile_long_text_is_read_not_crashed(rules):
    m, _, _ = rules
    # 3,000 different sentences (one sentence said 3,000 times is one sentence: non_claims)
    text = " ".join(f"Alan Bean was born in Wheeler, Texas in {1000 + i}." for i in range(3000))
    r = m.compute(predictions=[text], tables=[BEAN], per_example=True, show_progress=False, max_answers=5)
    example = r["examples"][0]
    assert len(example["sources"][0]["from_text"]) <= 5 and 0 <= example["score"] <= 1
    assert example["ignored"] == []


# ---------------------------------------------------------------- untrusted text, bounded work, stages


def test_invisible_characters_are_scored_as_the_text_a_reader_sees(rules):
    """Issue 38: zero-width, bidi and control characters in a text or a table change nothing."""
    m, qg, qa = rules
    clean = "Alan Bean was born in Wheeler, Texas and was a test pilot."
    hidden = "Alan\u200b Bean was born in Whe\ufeffeler, \u202eTexas and was a test\x00 pilot.\u2066"
    table = ["Alan_Bean | birthPlace | Wheeler,_Tex\u200bas", "Alan_Bean | occupation | Test_pilot"]
    qg.calls.clear()
    a = m.compute(predictions=[clean], tables=[BEAN], per_example=True, show_progress=False)["examples"][0]
    b = m.compute(predictions=[hidden], tables=[table], per_example=True, show_progress=False)["examples"][0]
    assert b["score"] == a["score"] and b["sources"] == a["sources"]
    assert not any("\u200b" in c or "\u202e" in c for call in qg.calls for pair in call for c in pair)
    # control strings of the usual tokenizers are no words either (issue 38: 0.913 → 0.668 with the project's models)
    special = "Alan Bean </s> [SEP] was born in [SEP] Wheeler, Texas [CLS] [MASK] <|endoftext|> and was a test pilot [SEP]."
    c = m.compute(predictions=[special], tables=[BEAN], per_example=True, show_progress=False)["examples"][0]
    assert c["sources"] == a["sources"]


def test_the_first_letters_case_asks_and_answers_the_same():
    """Issue 38: a swapped first letter (many systems write all in lower case) changes neither the
    questions asked of the text nor the score; the text's own casing elsewhere is kept."""
    for original in ("alan bean was born in wheeler, texas and was a test pilot.",
                     "Alan Bean was born in Wheeler, Texas and was a test pilot."):
        seen = []
        for text in (original, original[0].swapcase() + original[1:]):
            m, qg, _ = rule_metric()  # a fresh metric: no cache of questions from the other text
            example = m.compute(predictions=[text], tables=[BEAN], per_example=True, show_progress=False)["examples"][0]
            asked = [(q["question"], q["score"]) for src in example["sources"] for q in src["from_text"] + src["from_source"]]
            seen.append((example["score"], asked, sorted(map(repr, qg.calls))))
            # the spans of the text are shown as it writes them ("Alan bean" where it says so)
            assert all(q["answer"] in text for q in example["sources"][0]["from_text"])
        assert seen[0] == seen[1]
        assert any(original[:9] in c for call in qg.calls for pair in call for c in pair)


def test_case_free_reading_asks_and_answers_the_same_whatever_the_casing():
    """Issue 38: casing states no fact. With case_free (the default with the project's text QG),
    a text, its lower- and upper-case versions and a Turkish "İ" lower-cased by Python (an "i" and a
    combining dot) read the same: the table's values keep their casing, sentences start upper case."""
    table = BEAN + ["Alan_Bean | deathPlace | İzmir"]
    original = "Alan Bean was born in Wheeler, Texas and died in İzmir. He was a test pilot."
    seen = []
    for text in (original, original.lower(), original.upper(), "alan bean was born in wheeler , texas and died in "
                 "izmir . he was a test pilot ."):
        m, qg, _ = rule_metric()
        example = m.compute(predictions=[text], tables=[table], per_example=True, show_progress=False,
                            case_free=True)["examples"][0]
        questions = [(q["question"], q["score"]) for src in example["sources"] for side in ("from_text", "from_source")
                     for q in src[side]]
        seen.append((example["score"], questions, sorted(map(repr, qg.calls)), example["read_as"]))
        # what is shown of the text is as the text writes it ("WHEELER" in the upper-case one), but for
        # Python's two-letter lower case of "İ", which no search whatever the case finds: shown as read
        shown = [q["answer"] for q in example["sources"][0]["from_text"]]
        assert shown and [a for a in shown if a not in text] == (["İzmir"] if "\u0307" in text else [])
    assert all(s == seen[0] for s in seen[1:])
    assert seen[0][3] == "Alan Bean was born in Wheeler, Texas and died in İzmir. He was a Test pilot."  # the value as written
    # a name the table does not hold loses its writer's capital: casing is read from the table alone
    m, _, _ = rule_metric()
    boston = m.compute(predictions=["Alan Bean was born in Boston."], tables=[BEAN], per_example=True,
                       show_progress=False, case_free=True)["examples"][0]
    assert boston["read_as"] == "Alan Bean was born in boston."
    assert boston["unsupported"] == ["Boston"]  # shown as the text wrote it
    # off (the default with these rule models, as with a T5 QG): read as written, first letter settled
    as_written = m.compute(predictions=["ALAN BEAN WAS BORN IN BOSTON."], tables=[BEAN], per_example=True,
                           show_progress=False)["examples"][0]
    assert as_written["read_as"] == "ALAN BEAN WAS BORN IN BOSTON." and "case:" not in m.signature()
    assert "|case:free|" in m.signature(case_free=True)
    with pytest.raises(ValueError, match="case_free must be True or False"):
        m.compute(predictions=["x"], tables=[BEAN], case_free="yes")


def test_app_shows_how_a_text_was_read():
    import importlib.util

    spec = importlib.util.spec_from_file_location("d2t_test_data_questeval_app", os.path.join(METRIC, "app.py"))
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    m, _, _ = rule_metric()
    text = "ALAN BEAN WAS BORN IN <b>BOSTON</b>."
    example = m.compute(predictions=[text], tables=[BEAN], per_example=True, show_progress=False,
                        case_free=True)["examples"][0]
    html = app.explain(example, text)
    assert "Read as (one casing, the table's values as the table writes them): Alan Bean was born in " in html
    assert "<b>" not in html.split("Read as")[1].split("</p>")[0]  # escaped, as every text shown
    assert "Read as" not in app.explain(dict(example, read_as=text), text)


def test_caps_bound_the_questions_of_a_huge_table_and_a_long_text(rules):
    """Issue 38 item 4: a 500-triple table asks about at most max_table_values values, a long text about
    at most max_answers candidates, and the example says it was truncated."""
    m, qg, _ = rules
    huge = [f"Thing_{i} | property{i} | Value_{i}" for i in range(500)]
    qg.calls.clear()
    r = m.compute(predictions=["Thing 1 has value 1.", "Alan Bean was born in Wheeler, Texas."], tables=[huge, BEAN],
                  per_example=True, show_progress=False)
    asked_on_huge = [a for call in qg.calls for a, c in call if c.startswith("entity [ Thing 0 ]")]
    assert 0 < len(asked_on_huge) == len(set(asked_on_huge)) <= 12
    assert [e["truncated"] for e in r["examples"]] == [True, False]
    text = " ".join(f"Person{i} met Person{i + 1} in City{i}." for i in range(200))
    qg.calls.clear()
    r = m.compute(predictions=[text], tables=[BEAN], per_example=True, show_progress=False, max_answers=10)
    asked_on_text = [a for call in qg.calls for a, c in call if c == text]
    assert len(asked_on_text) == 10 and r["examples"][0]["truncated"] is True
    qg.calls.clear()
    r = m.compute(predictions=[text], tables=[BEAN], per_example=True, show_progress=False)  # the default cap
    assert len([a for call in qg.calls for a, c in call if c == text]) == 32 and r["examples"][0]["truncated"] is True
    small = m.compute(predictions=[text], tables=[BEAN], per_example=True, show_progress=False, max_answers=1000)
    assert small["examples"][0]["truncated"] is False
    assert "caps:10/12/8" in m.signature(max_answers=10) and "caps:" not in m.signature()


def test_spacy_reads_the_start_of_a_huge_text_and_says_so(rules):
    """Issue 38: answer candidates come from the first MAX_CANDIDATE_CHARS characters (cut at a space)."""
    from metrics.data_questeval.pipeline import MAX_CANDIDATE_CHARS, candidate_part

    assert candidate_part("short text") == "short text"
    assert candidate_part("Alan Bean flew far", max_chars=12) == "Alan Bean"  # no word cut in two
    assert candidate_part("x" * 30, max_chars=12) == "x" * 12
    m, qg, _ = rules
    # sentences that differ in their number (a sentence said again is no claim: non_claims would leave one
    # sentence of a repeated one), long ones so that few candidates are asked; max_answers well above them,
    # so that only the character cap leaves anything out
    sentence = ("Alan Bean, the test pilot who was born in the small town of Wheeler, Texas, flew to the Moon "
                "and later painted the pictures of his long trip in a quiet studio, as he said in talk {}. ")
    parts, size = [], 0
    while size <= MAX_CANDIDATE_CHARS + 40:  # just over the cap
        parts.append(sentence.format(len(parts)))
        size += len(parts[-1])
    head = "".join(parts)
    qg.calls.clear()
    r = m.compute(predictions=[head + "Zorblax flew to Quuxville."], tables=[BEAN], per_example=True, show_progress=False,
                  max_answers=1000)
    asked = {a for call in qg.calls for a, _ in call}
    assert "Alan Bean" in asked and not asked & {"Zorblax", "Quuxville"}
    assert r["examples"][0]["truncated"] is True and r["examples"][0]["ignored"] == []
    r = m.compute(predictions=[head[:-400] + "Zorblax flew to Quuxville."], tables=[BEAN], per_example=True,
                  show_progress=False, max_answers=1000)
    assert r["examples"][0]["truncated"] is False


def test_a_bare_list_of_the_tables_values_at_the_end_is_no_claim(rules):
    """Appended as a list, the values a text leaves out earn nothing: no question is asked of them, and
    they are reported as ignored (untrusted.value_list_spans); a text of nothing else reads as empty."""
    m, _, _ = rules
    said = "Alan Bean was a test pilot."
    first, second, only, empty = m.compute(predictions=[said, said + " Wheeler, Texas.", "Alan Bean, Wheeler, Texas.", ""],
                                           tables=[BEAN] * 4, per_example=True, show_progress=False)["examples"]
    assert first["ignored"] == [] and second["ignored"] == ["Wheeler, Texas."]
    assert {k: v for k, v in second.items() if k != "ignored"} == {k: v for k, v in first.items() if k != "ignored"}
    assert only["ignored"] == ["Alan Bean, Wheeler, Texas."] and only["score"] == empty["score"]


def test_a_sentence_said_again_is_scored_as_said_once(rules):
    """A repeated sentence is no new claim: no question is asked of it again, and it is reported as ignored."""
    m, _, _ = rules
    once = "Alan Bean was born in Wheeler, Texas. He was a test pilot."
    twice = once + " Alan Bean was born in Wheeler, Texas."
    first, second = m.compute(predictions=[once, twice], tables=[BEAN] * 2, per_example=True, show_progress=False)["examples"]
    assert first["ignored"] == [] and second["ignored"] == ["Alan Bean was born in Wheeler, Texas."]
    assert {k: v for k, v in second.items() if k != "ignored"} == {k: v for k, v in first.items() if k != "ignored"}


class WindowedQA(ExactQA):
    """ExactQA with a span QA's window cap; records the cap it answers under."""

    def __init__(self):
        super().__init__()
        self.max_windows, self.seen_caps = 32, []

    def answer(self, questions, contexts, batch_size=None, show_progress=True):
        self.seen_caps.append(self.max_windows)
        return [r._replace(truncated=len(c) > 100 * self.max_windows) for r, c in
                zip(super().answer(questions, contexts, batch_size, show_progress), contexts)]


def test_the_qa_window_cap_holds_for_one_call_and_flags_truncation():
    qg, qa = RuleQG(), WindowedQA()
    m = evaluate.load(METRIC, text_qg=qg, table_qg=qg, text_qa=qa, table_qa=qa)
    long_text = "Alan Bean was born in Wheeler, Texas. " + "He flew. " * 150  # over 100 × 8 characters
    r = m.compute(predictions=[long_text, "Alan Bean was a test pilot."], tables=[BEAN, BEAN], per_example=True,
                  show_progress=False)
    assert set(qa.seen_caps) == {8} and qa.max_windows == 32  # the metric's cap for the call, then the QA's own again
    assert [e["truncated"] for e in r["examples"]] == [True, False]
    m.compute(predictions=[long_text], tables=[BEAN], show_progress=False, max_qa_windows=20)
    assert qa.seen_caps[-1] == 20 and qa.max_windows == 32


def test_compute_times_its_stages(rules):
    from d2t_metrics import timing

    m, _, _ = rules
    timing.reset()
    m.compute(predictions=["Alan Bean was born in Wheeler, Texas."], tables=[BEAN], show_progress=False, use_cache=False)
    stages = {path[-1] for path in timing.totals()}
    assert {"answer candidates (spaCy)", "table questions", "text questions", "table QA", "text QA",
            "answer similarity (BERTScore)", "scoring"} <= stages


# ---------------------------------------------------------------- answerable table questions (issue 37)


def test_a_question_is_answerable_when_its_tables_qa_gives_its_value():
    from metrics.data_questeval.qa import ANSWERABLE_F1, answerable

    assert ANSWERABLE_F1 == 0.5
    assert answerable("Where was Alan Bean born?", "Wheeler , Texas", "Wheeler, Texas")
    assert answerable("Where was Alan Bean born?", "Wheeler , Texas", "Texas")  # F1 0.67
    assert not answerable("Who was the first woman to win a Nobel Prize?", "Marie Curie", "Warsaw")
    assert not answerable("Where was Alan Bean born?", "Wheeler , Texas", "")  # no answer
    assert not answerable("  ", "Wheeler , Texas", "Wheeler , Texas")  # no question
    assert not answerable("Which year?", "the 1950s crew of Apollo", "1950s", threshold=0.9)
    assert answerable("Which one?", "-", " - ") and not answerable("Which one?", "-", "a")  # no word after normalization


class OffTableQG(RuleQG):
    """RuleQG that asks about "Test pilot" with a question the table cannot answer (a fact from outside it)."""

    def generate(self, answers, contexts, batch_size=None, show_progress=True):
        return [q.replace("What is Test pilot?", "What is Boston?") for q in super().generate(answers, contexts)]


def test_the_filter_keeps_the_table_questions_the_table_answers():
    table_qg, qa = OffTableQG(), ExactQA()
    m = evaluate.load(METRIC, text_qg=RuleQG(), table_qg=table_qg, text_qa=qa, table_qa=qa)
    texts = ["Alan Bean was born in Wheeler, Texas and was a test pilot.", "Alan Bean was born in Boston."]
    plain = m.compute(predictions=texts, tables=[BEAN, BEAN], per_example=True, show_progress=False)
    qa.calls.clear()
    kept = m.compute(predictions=texts, tables=[BEAN, BEAN], per_example=True, show_progress=False,
                     filter_table_questions=True)
    for before, after in zip(plain["examples"], kept["examples"]):
        b, a = before["sources"][0], after["sources"][0]
        assert "unanswerable_on_source" not in b
        assert [q["question"] for q in b["from_source"]] == ["What is Alan Bean?", "What is Wheeler , Texas?", "What is Boston?"]
        assert [q["question"] for q in a["from_source"]] == ["What is Alan Bean?", "What is Wheeler , Texas?"]
        assert a["unanswerable_on_source"] == [{"question": "What is Boston?", "answer": "Test pilot", "candidate": 2,
                                                "predicted": "", "f1": 0.0}]
        assert a["from_text"] == b["from_text"]  # the text's claims are asked as before
    # the table's questions were checked once for both texts, on the table
    assert qa.calls[0] == [(q, "entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ] , occupation [ Test pilot ]")
                           for q in ["What is Alan Bean?", "What is Wheeler , Texas?", "What is Boston?"]]
    # the off-table question no longer counts against the text that gives every value of the table
    assert plain["examples"][0]["recall"] < 0.8 and kept["examples"][0]["recall"] == pytest.approx(1.0, abs=1e-5)
    assert "table_questions:answerable(f1>=0.5)" in m.signature(filter_table_questions=True)
    assert "answerable" not in m.signature(filter_table_questions=False)
    assert "answerable" not in m.signature()  # a QG other than the project's generator: QuestEval's, every question
    # None is the default (decided by the table QG), not an error
    assert m.compute(predictions=texts, tables=[BEAN, BEAN], per_example=True, show_progress=False,
                     filter_table_questions=None)["examples"] == plain["examples"]
    qa.calls.clear()
    again = m.compute(predictions=texts, tables=[BEAN, BEAN], per_example=True, show_progress=False,
                      filter_table_questions=True)
    assert again["examples"] == kept["examples"]
    # the verdicts come from the cache: no table question is asked on its table again
    assert not any(c.startswith("entity [") and q == "What is Wheeler , Texas?" for call in qa.calls for q, c in call)
    with pytest.raises(ValueError, match="filter_table_questions must be True or False"):
        m.compute(predictions=texts, tables=[BEAN, BEAN], filter_table_questions="yes")


class SwappedValueQA(ExactQA):
    """ExactQA, except that a text saying "Boston" answers the birthplace question with it, confidently."""

    def answer(self, questions, contexts, batch_size=None, show_progress=True):
        from metrics.data_questeval.qa import QAResult

        out = super().answer(questions, contexts)
        return [QAResult("Boston", 0.95) if q == "What is Wheeler , Texas?" and "Boston" in c else r
                for q, c, r in zip(questions, contexts, out)]


def test_a_value_stated_otherwise_counts_as_missing_when_wrong_answers_are_penalized():
    qg, qa = RuleQG(), SwappedValueQA()
    m = evaluate.load(METRIC, text_qg=qg, table_qg=qg, text_qa=qa, table_qa=qa)
    text = ["Alan Bean was born in Boston and was a test pilot."]
    kwargs = dict(predictions=text, tables=[BEAN], per_example=True, show_progress=False)
    plain = m.compute(**kwargs)["examples"][0]
    penalized = m.compute(penalize_wrong_answers=True, **kwargs)["examples"][0]

    def birthplace(example):
        return next(q for q in example["sources"][0]["from_source"] if q["answer"] == "Wheeler , Texas")

    before, after = birthplace(plain), birthplace(penalized)
    assert before["predicted"] == after["predicted"] == "Boston" and before["answerability"] == after["answerability"] == 0.95
    assert before["score"] == pytest.approx(scoring.question_score(0.95, before["f1"], before["bertscore"]), abs=1e-6)
    assert after["score"] == pytest.approx(scoring.question_score(0.95, after["f1"], after["bertscore"], matched=True), abs=1e-6)
    assert after["score"] < before["score"] - 0.2
    assert "Wheeler , Texas" in penalized["missing"] and penalized["recall"] < plain["recall"]
    # the other questions, and the text's own claims answered on the table, are scored as before
    rest = lambda e: [q for q in e["sources"][0]["from_source"] if q["answer"] != "Wheeler , Texas"]  # noqa: E731
    assert rest(penalized) == rest(plain) and penalized["sources"][0]["from_text"] == plain["sources"][0]["from_text"]
    # off by default with QGs other than the project's generator (QuestEval's scores); None is that default
    assert m.compute(penalize_wrong_answers=None, **kwargs)["examples"][0] == plain
    assert "wrong_answers:penalized" in m.signature(penalize_wrong_answers=True)
    assert "wrong_answers" not in m.signature()
    with pytest.raises(ValueError, match="penalize_wrong_answers must be True or False"):
        m.compute(predictions=text, tables=[BEAN], penalize_wrong_answers="yes")


def test_the_batched_answerability_step_answers_each_distinct_pair_once():
    from metrics.data_questeval.pipeline import check_answerable

    qa = ExactQA()
    table = "entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ]"
    got = check_answerable(qa, ["What is Wheeler , Texas?", "What is Boston?", "What is Wheeler , Texas?"],
                           ["Wheeler , Texas", "Wheeler , Texas", "Wheeler , Texas"], [table] * 3)
    assert [kept for kept, _ in got] == [True, False, True] and got[1][1].answer == ""
    assert len(qa.calls) == 1 and len(qa.calls[0]) == 2
    with pytest.raises(ValueError, match="differ in length"):
        check_answerable(qa, ["q"], [], [table])


# ---------------------------------------------------------------- QuestEval's strings on T5 models


def test_questeval_strings_for_its_own_example(tiny_seq2seq, monkeypatch):
    """The exact QG and QA inputs built for QuestEval's README example (T5 backends)."""
    seen = {"qg": [], "qa": []}

    def spy_qg(self, inputs, num_beams=1):
        seen["qg"].extend(inputs)
        return ["who discovered 1950 da?" for _ in inputs for _ in range(num_beams)]

    def spy_qa(self, questions, contexts, batch_size=None, show_progress=True):
        seen["qa"].extend(self.format_input(q, c) for q, c in zip(questions, contexts))
        return qa_run(self, questions, contexts, batch_size=batch_size, show_progress=show_progress)

    m = evaluate.load(METRIC, text_qg=tiny_seq2seq, text_qa=tiny_seq2seq, table_qg=tiny_seq2seq, table_qa=tiny_seq2seq)
    backends = m.load_model()  # evaluate runs a copy of the module: patch the classes it loaded
    qg_run, qa_run = type(backends["table_qg"])._run, type(backends["table_qa"]).answer
    monkeypatch.setattr(type(backends["table_qg"]), "_run", spy_qg)
    monkeypatch.setattr(type(backends["table_qa"]), "answer", spy_qa)
    r = m.compute(predictions=[QE_HYPOTHESIS], tables=[[QE_SOURCE]], per_example=True, show_progress=False)
    table = "entity [ ( 29075 ) 1950 da ] , discoverer [ carl a. wirtanen ]"  # d2t_metrics.linearize, pinned in its tests
    assert f"sv1 </s> ( 29075 ) 1950 da </s> {table}" in seen["qg"]
    assert f"sv1 </s> carl a. wirtanen </s> {table}" in seen["qg"]
    assert f"sv1 </s> carl </s> {QE_HYPOTHESIS}" in seen["qg"]
    assert f"who discovered 1950 da? </s> {QE_HYPOTHESIS}" in seen["qa"]
    assert f"who discovered 1950 da? </s> {table}" in seen["qa"]
    example = r["examples"][0]
    assert {q["answer"] for q in example["sources"][0]["from_source"]} == {"( 29075 ) 1950 da", "carl a. wirtanen"}
    # QuestEval compares its T5's "unanswerable" by BERTScore: an unanswered question keeps that comparison
    assert all(0.0 <= q["bertscore"] <= 1.0 for s in ("from_text", "from_source") for q in example["sources"][0][s])


def test_t5_backends_score_the_same_padded_or_not(tiny_seq2seq):
    m = evaluate.load(METRIC, text_qg=RuleQG(), table_qg=RuleQG(), text_qa=tiny_seq2seq, table_qa=tiny_seq2seq)
    args = dict(predictions=["Alan Bean was born in Wheeler, Texas.", "The Eagle is a pub."],
                tables=[BEAN, "name[The Eagle], eatType[pub]"], per_example=True, show_progress=False)
    plain = m.compute(**args)
    padded = m.compute(pad_to_max_length=True, use_cache=False, **args)
    assert [e["score"] for e in padded["examples"]] == pytest.approx([e["score"] for e in plain["examples"]], abs=1e-5)


# ---------------------------------------------------------------- the project's backends, tiny


@pytest.fixture(scope="module")
def tiny_checkpoints(text_qa, text_qg, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp("dqe") / "data_questeval"
    for role, source in (("text_qa", text_qa), ("table_qa", text_qa), ("text_qg", text_qg), ("table_qg", text_qg)):
        shutil.copytree(source, folder / role)
    return str(folder)


def test_project_backends_run_end_to_end(tiny_checkpoints):
    m = evaluate.load(METRIC, model=tiny_checkpoints)
    assert {type(b).__name__ for b in m.load_model().values()} == {"SpanQA", "GeneratorQG"}
    r = m.compute(predictions=["Alan Bean was born in Wheeler, Texas.", ""], tables=[BEAN, BEAN], per_example=True,
                  show_progress=False, filter_table_questions=False)
    assert 0.0 <= r["score"] <= 1.0 and r["examples"][1]["score"] == 0.0
    from d2t_metrics.checkpoints import checkpoint_fingerprint

    signature = m.signature()
    assert f"text_qa:text_qa@{checkpoint_fingerprint(os.path.join(tiny_checkpoints, 'text_qa'))}," in signature
    assert "reduction:max|questions_per_value:5|questions_per_text_answer:3|" in signature and signature.endswith("|version:2.3")
    # with the project's table QG, only answerable table questions by default (a T5 QG: every question)
    assert "|table_questions:answerable(f1>=0.5)|" in signature
    # and with its text QG every text read in one casing (a T5 QG: as written)
    assert "|case:free|" in signature and "case:" not in m.signature(case_free=False)
    # and a table value answered with another value counts as missing (a T5 QG: QuestEval's mean)
    assert "|wrong_answers:penalized|" in signature and "wrong_answers" not in m.signature(penalize_wrong_answers=False)
    shouted = m.compute(predictions=["ALAN BEAN WAS BORN IN WHEELER, TEXAS."], tables=[BEAN], per_example=True,
                        show_progress=False, filter_table_questions=False)["examples"][0]
    assert shouted["read_as"] == "Alan Bean was born in Wheeler, Texas."
    assert shouted["score"] == r["examples"][0]["score"]
    asked = lambda e: [(q["question"], q["score"]) for src in e["sources"] for q in src["from_text"] + src["from_source"]]  # noqa: E731
    assert asked(shouted) == asked(r["examples"][0])
    assert "answerable" not in m.signature(filter_table_questions=False)
    assert "|questions_per_value:1|" in m.signature(questions_per_value=1)
    assert "|questions_per_text_answer:1|" in m.signature(questions_per_text_answer=1)

    # the project's table QG asks up to five questions about each table value; the value's score is their mean
    table = r["examples"][0]["sources"][0]
    asked = table["from_source"]
    values = sorted({q["candidate"] for q in asked})
    assert values == list(range(len(values))) and len(asked) <= 5 * len(values)
    for v in values:
        about = [q for q in asked if q["candidate"] == v]
        assert len({q["answer"] for q in about}) == 1 and len({q["question"] for q in about}) == len(about)
    assert table["recall"] == pytest.approx(sum(sum(q["score"] for q in asked if q["candidate"] == v) /
                                                len([q for q in asked if q["candidate"] == v]) for v in values) / len(values))
    one = m.compute(predictions=["Alan Bean was born in Wheeler, Texas."], tables=[BEAN], per_example=True,
                    show_progress=False, questions_per_value=1, questions_per_text_answer=1)["examples"][0]["sources"][0]
    assert len(one["from_source"]) == len({q["candidate"] for q in one["from_source"]}) <= len(values)

    # and up to three about each answer candidate of the text (beam search; the tiny QG's greedy line is often empty)
    by_candidate = {}
    for q in table["from_text"]:
        by_candidate.setdefault(q["candidate"], []).append(q["question"])
    assert len(table["from_text"]) <= 3 * len(by_candidate) and any(len(qs) > 1 for qs in by_candidate.values())
    assert all(len(set(qs)) == len(qs) for qs in by_candidate.values())
    assert len(one["from_text"]) == len({q["candidate"] for q in one["from_text"]}) <= len(by_candidate)

    # the answerability filter on the span QA: each table question is kept or listed as dropped, none lost
    from metrics.data_questeval.qa import answerable

    kept = m.compute(predictions=["Alan Bean was born in Wheeler, Texas."], tables=[BEAN], per_example=True,
                     show_progress=False)["examples"][0]["sources"][0]
    dropped = kept["unanswerable_on_source"]
    assert sorted(q["question"] for q in kept["from_source"] + dropped) == sorted(q["question"] for q in asked)
    assert not any(answerable(q["question"], q["answer"], q["predicted"]) for q in dropped)
    assert kept["from_text"] == table["from_text"]


def test_an_example_scores_the_same_alone_and_in_a_batch(tiny_checkpoints):
    """Issue 38 item 10: batch composition moves float32 sums in their last digits; per-question numbers
    are rounded to 6 decimals, so an example's score alone and in a batch agree within the card's 1e-6."""
    m = evaluate.load(METRIC, model=tiny_checkpoints)
    texts = ["Alan Bean was born in Wheeler, Texas.", "The Eagle is a pub near the river in the city centre.",
             "Alan Bean, a test pilot, was born in Wheeler."]
    tables = [BEAN, "name[The Eagle], eatType[pub], area[city centre]", BEAN]
    alone = m.compute(predictions=texts[:1], tables=tables[:1], per_example=True, show_progress=False)["examples"][0]
    m.question_cache.clear()  # the batch generates its questions again, in other batches
    batch = m.compute(predictions=texts[::-1], tables=tables[::-1], per_example=True, show_progress=False,
                      batch_size=2)["examples"][-1]
    questions = lambda e: [q["question"] for s in ("from_text", "from_source") for q in e["sources"][0][s]]  # noqa: E731
    assert questions(batch) == questions(alone)
    assert abs(batch["score"] - alone["score"]) <= 1e-6


def test_command_line_scores_with_a_checkpoint_folder(tiny_checkpoints, tmp_path, capsys):
    from d2t_metrics.cli import main

    rows = [{"id": "a", "prediction": "Alan Bean was born in Wheeler, Texas.", "table": BEAN},
            {"id": "b", "prediction": "The Eagle is a pub.", "table": "name[The Eagle], eatType[pub]"}]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    code = main(["score", "--metrics", "data_questeval", "--model", f"data_questeval={tiny_checkpoints}", "--input", str(inp),
                 "--output", str(out), "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert 0.0 <= json.loads(captured.out)["data_questeval"]["score"] <= 1.0
    assert len(out.read_text().splitlines()) == 2


# ---------------------------------------------------------------- the shipped checkpoints


def test_shipped_checkpoints_are_small_adapters_with_cards():
    total = 0
    for role in ROLES:
        folder = os.path.join(CHECKPOINTS, role)
        for name in ("adapter_config.json", "adapter_model.safetensors", "d2t_config.json", "README.md"):
            assert os.path.isfile(os.path.join(folder, name)), (role, name)
        recipe = json.load(open(os.path.join(folder, "d2t_config.json")))
        assert recipe["training"]["command"].startswith("python -m metrics.data_questeval.train")
        assert recipe.get("dev_scores"), role
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    assert total <= 50 * 10**6


def test_docstring_example_runs_on_the_shipped_checkpoints(monkeypatch):
    monkeypatch.chdir(ROOT)
    m = evaluate.load(METRIC, model=CHECKPOINTS)
    parser = doctest.DocTestParser()
    test = parser.get_doctest(m.inputs_description, {}, "data_questeval", None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0 and runner.tries >= 4


def test_shipped_checkpoints_prefer_the_faithful_text():
    m = evaluate.load(METRIC, model=CHECKPOINTS)
    texts = ["Alan Bean was born in Wheeler, Texas. He was a test pilot.",
             "Alan Bean was born in Paris, France. He was a famous chef."]
    r = m.compute(predictions=texts, tables=[BEAN, BEAN], per_example=True, show_progress=False)
    good, bad = r["examples"]
    assert good["score"] > bad["score"]


def test_training_commands_write_a_card_with_front_matter(text_qa, text_qg):  # noqa: F811
    from training.data_questeval.train import write_card

    for folder, pipeline in ((text_qa, "question-answering"), (text_qg, "text-generation")):
        card = open(os.path.join(folder, "README.md"), encoding="utf-8").read()  # written when the command finished
        assert card.startswith("---\n") and f"pipeline_tag: {pipeline}" in card and "base_model: " in card
        assert "python -m training.data_questeval.train text-" in card and "## Dev scores" in card
        os.remove(os.path.join(folder, "README.md"))
        assert write_card(folder).endswith("README.md") and open(os.path.join(folder, "README.md")).read() == card


class BatchRecordingQG(RuleQG):
    def generate(self, answers, contexts, batch_size=None, show_progress=True):
        self.batch_sizes = getattr(self, "batch_sizes", []) + [batch_size]
        return super().generate(answers, contexts, batch_size, show_progress)


def test_the_default_batch_is_the_devices_and_a_given_one_is_kept(monkeypatch):
    """No batch_size: d2t_metrics.models.default_batch_size of the metric's device (32 on a CPU, 256
    on a GPU, where a decoding step costs about the same for either; here the GPU is pretended); a
    given batch_size is kept."""
    import sys

    qg, qa = BatchRecordingQG(), ExactQA()
    m = evaluate.load(METRIC, text_qg=qg, table_qg=qg, text_qa=qa, table_qa=qa)
    module = sys.modules[type(m).__module__]
    for gpu, given, expected in ((False, None, 32), (True, None, 256), (True, 8, 8)):
        monkeypatch.setattr(module, "default_batch_size", lambda device, gpu=gpu: 256 if gpu else 32)
        qg.batch_sizes = []
        m.compute(predictions=["Alan Bean was born in Wheeler, Texas."], tables=[BEAN], show_progress=False,
                  use_cache=False, **({} if given is None else {"batch_size": given}))
        assert qg.batch_sizes and set(qg.batch_sizes) == {expected}
    with pytest.raises(ValueError, match="batch_size"):
        m.compute(predictions=["x"], tables=[BEAN], batch_size=0)
