"""metrics/parent: parity with the reference PARENT, edge cases, bad input, PARENT-C counts, demo."""

import doctest
import gzip
import json
import math
import os
import random
import subprocess
import sys
from collections import Counter

import evaluate
import pytest

from d2t_metrics.tokenize import MemoTokenizer, get_tokenizer, nltk_tokenize, whitespace_tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRIC_DIR = os.path.join(ROOT, "metrics", "parent")

from metrics.parent import scoring, table_tokens  # noqa: E402
from training.parent import cooccurrence  # noqa: E402


@pytest.fixture(scope="module")
def parent():
    return evaluate.load(METRIC_DIR)


def _close(a, b, tol=1e-9):
    return abs(a - b) <= tol


# ---------------------------------------------------------------------------
# An independent, literal implementation of the formulas (slow; for cross-checks)


def naive_parent(pred, refs, table, lambda_weight=None, smoothing=1e-5, max_order=4, counts=None):
    """PARENT of one example, straight from the paper's equations and the reference's documented choices."""
    values = [list(v) for _, v in table if len(v)]
    value_tokens = {t for v in values for t in v}
    items = {"_".join(a) for a, _ in table} | {t for _, v in table for t in v}

    def w(ngram):
        if counts is None:
            return sum(1 for t in ngram if t in value_tokens) / len(ngram)
        prob = 1.0
        for t in ngram:
            if t not in items:
                prob *= max([counts.get(v + "|||" + t, 0) / counts[v] for v in items if v in counts] + [0.0])
        return math.pow(prob, 1.0 / len(ngram))

    def lcs(x, y):
        table_ = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
        for i in range(1, len(x) + 1):
            for j in range(1, len(y) + 1):
                table_[i][j] = table_[i - 1][j - 1] + 1 if x[i - 1] == y[j - 1] else max(table_[i - 1][j], table_[i][j - 1])
        return table_[len(x)][len(y)]

    def mention(text):
        return sum(lcs(v, text) / len(v) for v in values) / len(values)

    def grams(text, n):
        return Counter(tuple(text[i:i + n]) for i in range(len(text) - n + 1))

    best = None
    for j, ref in enumerate(refs):
        precs, recs = [], []
        for n in range(1, max_order + 1):
            pc, rc = grams(pred, n), grams(ref, n)
            if pc:
                num = sum(min(c, rc[g]) + (c - min(c, rc[g])) * w(g) for g, c in pc.items())
                precs.append(num / sum(pc.values()))
            else:
                precs.append(0.0)
            den = sum(c * w(g) for g, c in rc.items())
            recs.append(sum(min(c, pc[g]) * w(g) for g, c in rc.items()) / den if den else 1.0)
        for k in range(1, max_order):
            precs[k] = precs[k] or smoothing
            recs[k] = recs[k] or smoothing
        p = 0.0 if 0.0 in precs else math.exp(sum(math.log(x) for x in precs) / max_order)
        r_ref = smoothing if 0.0 in recs else math.exp(sum(math.log(x) for x in recs) / max_order)
        r_table = mention(pred) or smoothing
        lam = 1.0 - mention(ref) if lambda_weight is None else lambda_weight
        r = 0.0 if r_ref == 0 or r_table == 0 else math.exp((1 - lam) * math.log(r_ref) + lam * math.log(r_table))
        f = 2 * p * r / (p + r + 1e-8)
        if best is None or f > best[2]:
            best = (p, r, f, lam, j)
    return best


# ---------------------------------------------------------------------------
# The paper's example (reference implementation's unit test)

DAHLQUIST_PREDS = [
    "michael dahlquist ( december 22 , 1965 -- july 14 , 2005 ) was a drummer in the california band grateful dead .",
    "michael dahlquist ( december 22 , 1965 -- july 14 , 2005 ) was a drummer .",
    "michael dahlquist ( december 22 , 1965 -- july 14 , 2005 ) was a drummer from seattle , washington .",
]
DAHLQUIST_REF = "michael dahlquist ( december 22 , 1965 -- july 14 , 2005 ) was a drummer in the seattle band silkworm ."
DAHLQUIST_TABLE = [
    [["birth", "name"], ["michael", "dahlquist"]],
    [["born"], ["december", "22", ",", "1965"]],
    [["birth", "place"], ["seattle", ",", "washington"]],
    [["died"], ["july", "14", ",", "2005"]],
    [["death", "place"], ["skokie", ",", "illinois"]],
    [["genres"], ["male"]],
    [["occupation(s)"], ["drummer"]],
    [["instruments"], ["drums"]],
]


@pytest.mark.parametrize(
    "lambda_weight,expected_f,expected_p",
    [
        (None, [0.771749, 0.835535, 0.848193], [0.790437, 0.967473, 0.919353]),
        (0.5, [0.757281, 0.819873, 0.837351], [0.790437, 0.967473, 0.919353]),
    ],
)
def test_paper_example(parent, lambda_weight, expected_f, expected_p):
    preds = [p.split() for p in DAHLQUIST_PREDS]
    out = parent.compute(
        predictions=preds,
        references=[[DAHLQUIST_REF.split()]] * 3,
        tables=[DAHLQUIST_TABLE] * 3,
        lambda_weight=lambda_weight,
        per_example=True,
    )
    for ex, f, p in zip(out["examples"], expected_f, expected_p):
        assert round(ex["f1"], 6) == f
        assert round(ex["precision"], 6) == p
        assert ex["score"] == ex["f1"]
    # The paper's point: candidate 3 (correct extra table fact) beats 2, which beats 1 (hallucination).
    fs = [ex["f1"] for ex in out["examples"]]
    assert fs[0] < fs[1] < fs[2]
    assert _close(out["f1"], sum(fs) / 3)
    # Raw strings with the default (nltk) tokenizer and with whitespace give the same numbers.
    raw_tables = [[(" ".join(a), " ".join(v)) for a, v in DAHLQUIST_TABLE]] * 3
    raw = parent.compute(predictions=DAHLQUIST_PREDS, references=[DAHLQUIST_REF] * 3, tables=raw_tables, lambda_weight=lambda_weight)
    assert all(_close(raw[k], out[k]) for k in ("precision", "recall", "f1"))
    raw = parent.compute(predictions=DAHLQUIST_PREDS, references=[DAHLQUIST_REF] * 3, tables=raw_tables, lambda_weight=lambda_weight, tokenizer="whitespace")
    assert all(_close(raw[k], out[k]) for k in ("precision", "recall", "f1"))


# ---------------------------------------------------------------------------
# Golden files (outputs of the reference implementation)


def _golden(shared, name, every=1):
    path = os.path.join(shared, "golden", name)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for i, line in enumerate(f) if i % every == 0]


@pytest.fixture(scope="module")
def golden_webnlg(shared):
    return _golden(shared, "parent_webnlg2017.jsonl")


@pytest.fixture(scope="module")
def golden_e2e_sample(shared):
    return _golden(shared, "parent_e2e.jsonl.gz", every=20)


def _max_diff(examples, golden, key):
    return max(abs(ex[m] - g[key][m]) for ex, g in zip(examples, golden) for m in ("precision", "recall", "f1"))


@pytest.mark.parametrize("lambda_key,lambda_weight", [("lambda_none", None), ("lambda_0.5", 0.5)])
def test_golden_webnlg_tokens(parent, golden_webnlg, lambda_key, lambda_weight):
    out = parent.compute(
        predictions=[g["prediction_tokens"] for g in golden_webnlg],
        references=[g["reference_tokens"] for g in golden_webnlg],
        tables=[g["table_tokens"] for g in golden_webnlg],
        lambda_weight=lambda_weight,
        per_example=True,
    )
    assert len(out["examples"]) == 2230
    assert _max_diff(out["examples"], golden_webnlg, lambda_key) <= 1e-9
    mean_f = sum(g[lambda_key]["f1"] for g in golden_webnlg) / len(golden_webnlg)
    assert _close(out["f1"], mean_f)


def test_golden_e2e_tokens_sample(parent, golden_e2e_sample):
    out = parent.compute(
        predictions=[g["prediction_tokens"] for g in golden_e2e_sample],
        references=[g["reference_tokens"] for g in golden_e2e_sample],
        tables=[g["table_tokens"] for g in golden_e2e_sample],
        per_example=True,
    )
    assert len(out["examples"]) == len(golden_e2e_sample) == 662
    assert _max_diff(out["examples"], golden_e2e_sample, "lambda_none") <= 1e-9


def test_golden_tokens_reproduced_from_raw_strings(golden_webnlg, golden_e2e_sample, shared):
    """The nltk tokenizer and the table builder give exactly the golden token lists."""
    tok = MemoTokenizer("nltk")
    for g in golden_webnlg + golden_e2e_sample:
        assert list(tok(g["prediction"])) == g["prediction_tokens"]
        assert [list(tok(r)) for r in g["references"]] == g["reference_tokens"]
        built = [[list(a), list(v)] for a, v in table_tokens.to_token_table(g["mr"], tok)]
        assert built == g["table_tokens"], g["mr"]
    # Golden WebNLG tables come from the CSV `mr`, not the v1.6 `triples` (which drop apostrophes).
    with open(os.path.join(shared, "data", "webnlg2017", "human_eval_references.jsonl"), encoding="utf-8") as f:
        triples = {d["mr"]: d["triples"] for d in map(json.loads, f)}
    differ = {g["mr"] for g in golden_webnlg if [[list(a), list(v)] for a, v in table_tokens.to_token_table(triples[g["mr"]], tok)] != g["table_tokens"]}
    assert len(differ) == 10
    assert all("'" in mr for mr in differ)


def test_golden_from_raw_strings(parent, golden_webnlg, golden_e2e_sample):
    for golden in (golden_webnlg, golden_e2e_sample):
        out = parent.compute(
            predictions=[g["prediction"] for g in golden],
            references=[g["references"] for g in golden],
            tables=[g["mr"] for g in golden],
            tokenizer="nltk",
            per_example=True,
        )
        assert _max_diff(out["examples"], golden, "lambda_none") <= 1e-9


def test_n_jobs_gives_identical_results(golden_webnlg):
    args = ([g["prediction_tokens"] for g in golden_webnlg], [g["reference_tokens"] for g in golden_webnlg], [g["table_tokens"] for g in golden_webnlg])
    one = scoring.parent_tokenized(*args)
    two = scoring.parent_tokenized(*args, n_jobs=2)
    assert one == two
    counts = {"the": 5, "the|||is": 3, "carl": 2, "carl|||discovered": 1}
    sub = tuple(a[:300] for a in args)
    one = scoring.parent_tokenized(*sub, entailment="cooccurrence", counts=counts, lambda_weight=0.5, return_ngrams=True)
    assert one == scoring.parent_tokenized(*sub, entailment="cooccurrence", counts=counts, lambda_weight=0.5, return_ngrams=True, n_jobs=-1)


# ---------------------------------------------------------------------------
# Cross-check against the literal implementation on random inputs


def _random_case(rng, vocab):
    def text(lo=0, hi=10):
        return [rng.choice(vocab) for _ in range(rng.randint(lo, hi))]

    pred = text()
    refs = [text() for _ in range(rng.randint(1, 3))]
    table = [(text(1, 2), text(1, 4)) for _ in range(rng.randint(1, 4))]
    return pred, refs, table


@pytest.mark.parametrize("entailment", ["overlap", "cooccurrence"])
def test_matches_literal_formulas_on_random_inputs(entailment):
    rng = random.Random(7)
    vocab = list("abcdefgh")
    counts = None
    if entailment == "cooccurrence":
        counts = {}
        for v in vocab:
            counts[v] = rng.randint(1, 9)
            for x in vocab:
                if rng.random() < 0.6:
                    counts[v + "|||" + x] = rng.randint(0, counts[v])
    for _ in range(60):
        cases = [_random_case(rng, vocab) for _ in range(5)]
        lam = rng.choice([None, None, 0.0, 0.5, 1.0])
        smoothing = rng.choice([1e-5, 0.0, 0.1])
        max_order = rng.choice([4, 4, 1, 2, 3, 5])
        got = scoring.parent_tokenized(
            [c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases],
            lambda_weight=lam, smoothing=smoothing, max_order=max_order, entailment=entailment, counts=counts,
        )
        for (pred, refs, table), ex in zip(cases, got):
            p, r, f, lw, j = naive_parent(pred, refs, table, lam, smoothing, max_order, counts)
            assert _close(ex["precision"], p) and _close(ex["recall"], r) and _close(ex["f1"], f)
            assert _close(ex["lambda"], lw) and ex["reference_index"] == j


def test_lcs_length_matches_dynamic_programming():
    rng = random.Random(3)
    for _ in range(300):
        x = [rng.choice("abcd") for _ in range(rng.randint(0, 12))]
        y = [rng.choice("abcd") for _ in range(rng.randint(0, 70))]  # past one machine word of bits
        dp = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
        for i in range(len(x)):
            for j in range(len(y)):
                dp[i + 1][j + 1] = dp[i][j] + 1 if x[i] == y[j] else max(dp[i][j + 1], dp[i + 1][j])
        assert scoring.lcs_length(x, y) == dp[-1][-1]


# ---------------------------------------------------------------------------
# Multiple references, edge cases


TABLE = [("name", "Blue Spice"), ("eatType", "coffee shop"), ("area", "riverside")]


def test_best_reference_supplies_p_and_r(parent):
    good = "blue spice is a coffee shop in the riverside area ."
    bad = "there is nothing here ."
    out = parent.compute(predictions=[good], references=[[bad, good]], tables=[TABLE], per_example=True)
    alone = parent.compute(predictions=[good], references=[[good]], tables=[TABLE], per_example=True)
    ex = out["examples"][0]
    assert ex["reference_index"] == 1
    assert ex["f1"] == alone["examples"][0]["f1"] and ex["precision"] == alone["examples"][0]["precision"]
    # Ties keep the first reference.
    tie = parent.compute(predictions=[good], references=[[good, good]], tables=[TABLE], per_example=True)
    assert tie["examples"][0]["reference_index"] == 0


def test_edge_cases_never_crash(parent):
    preds = [
        "",  # empty prediction
        "blue spice is a coffee shop .",  # empty reference
        "blue spice is a coffee shop .",  # table with an empty value
        "blue spice",  # one-entry table
        "blue spice is a coffee shop in the riverside area .",  # identical to its reference
    ]
    refs = ["blue spice is a coffee shop .", "", "blue spice is a coffee shop .", "blue spice", preds[4]]
    tables = [TABLE, TABLE, TABLE + [("priceRange", "")], [("name", "Blue Spice")], TABLE]
    out = parent.compute(predictions=preds, references=refs, tables=tables, per_example=True)
    ex = out["examples"]
    assert ex[0]["precision"] == 0.0 and ex[0]["f1"] == 0.0
    assert ex[0]["recall"] == pytest.approx(1e-5)  # smoothed reference and table recall
    assert ex[1]["reference_recall"] == 1.0 and ex[1]["lambda"] == 1.0  # nothing to recall in an empty reference
    # An empty value is left out of table recall and λ: same numbers as without the entry.
    without = parent.compute(predictions=preds[2:3], references=refs[2:3], tables=[TABLE], per_example=True)
    assert ex[2]["f1"] == without["examples"][0]["f1"]
    # A 2-token text has no 3- and 4-grams: precision is smoothed, not zero.
    assert 0 < ex[3]["precision"] < 0.01 and ex[3]["table_recall"] == 1.0
    assert ex[4]["precision"] == pytest.approx(1.0) and ex[4]["reference_recall"] == pytest.approx(1.0)
    assert all(0.0 <= e[k] <= 1.0 for e in ex for k in ("precision", "recall", "f1", "lambda"))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(predictions=["a", "b"], references=["a"], tables=[TABLE, TABLE]), "2 predictions but 1 references"),
        (dict(predictions=["a", "b"], references=["a", "b"], tables=[TABLE]), "2 predictions but 1 tables"),
        (dict(predictions=["a", None], references=["a", "b"], tables=[TABLE, TABLE]), "example 1: prediction is None"),
        (dict(predictions=["a", 3], references=["a", "b"], tables=[TABLE, TABLE]), "example 1: prediction must be a str"),
        (dict(predictions=["a", "b"], references=["a", None], tables=[TABLE, TABLE]), "example 1: reference is None"),
        (dict(predictions=["a", "b"], references=["a", ["b", 2]], tables=[TABLE, TABLE]), "example 1: reference must be a str"),
        (dict(predictions=["a", "b"], references=["a", []], tables=[TABLE, TABLE]), "example 1: no reference"),
        (dict(predictions=["a", "b"], references=["a", "b"], tables=[TABLE, None]), "example 1: table is None"),
        (dict(predictions=["a", "b"], references=["a", "b"], tables=[TABLE, []]), "example 1: empty table"),
        (dict(predictions=["a", "b"], references=["a", "b"], tables=[TABLE, [("name", "")]]), "example 1: table .* has no values"),
        (dict(predictions=["a", "b"], references=["a", "b"], tables=[TABLE, "a | b"]), "example 1: malformed triple"),
        (dict(predictions=["a"], references=["a"]), "tables is None"),
        (dict(predictions=None, references=["a"], tables=[TABLE]), "predictions is None"),
        (dict(predictions=[], references=[], tables=[]), "predictions is empty"),
        (dict(predictions=["a"], references=["a"], tables=[TABLE], lambda_weight=2.0), "lambda_weight"),
        (dict(predictions=["a"], references=["a"], tables=[TABLE], tokenizer="spacy"), "unknown tokenizer"),
        (dict(predictions=["a"], references=["a"], tables=[TABLE], entailment="cooccurrence"), "cooccurrence_counts"),
    ],
)
def test_bad_input_raises_value_error(parent, kwargs, message):
    with pytest.raises(ValueError, match=message):
        parent.compute(**kwargs)


# ---------------------------------------------------------------------------
# Tokenizers and table forms


def test_tokenizers():
    assert whitespace_tokenize("The Eagle, a pub.") == ["the", "eagle,", "a", "pub."]
    assert nltk_tokenize('It\'s "1923 OAA907 XC".') == ["it", "'s", "``", "1923", "oaa907", "xc", "''", "."]
    assert get_tokenizer(None) is whitespace_tokenize and get_tokenizer("NLTK") is nltk_tokenize
    calls = []

    def upper(text):
        calls.append(text)
        return text.upper().split()

    memo = MemoTokenizer(upper)
    assert memo("a b") == ("A", "B") and memo("a b") == ("A", "B") and calls == ["a b"]
    with pytest.raises(ValueError, match="unknown tokenizer"):
        get_tokenizer("bpe")
    with pytest.raises(ValueError, match="list of strings"):
        MemoTokenizer(lambda text: "not a list")("x")


def test_table_forms_give_the_same_tokens():
    tok = MemoTokenizer("nltk")
    expected = ((("formerName",), ("1001", "gaussia", "``", "1923", "oaa907", "xc", "''")),)
    assert table_tokens.to_token_table('1001_Gaussia | formerName | "1923 OAA907 XC"', tok) == expected
    assert table_tokens.to_token_table([("1001_Gaussia", "formerName", '"1923 OAA907 XC"')], tok) == expected
    head, tail = ["1001", "gaussia"], ["``", "1923", "oaa907", "xc", "''"]
    assert table_tokens.to_token_table([[head, ["formerName"], tail]], tok) == expected
    mr = table_tokens.to_token_table("name[The Eagle], customer rating[5 out of 5]", tok)
    assert mr == ((("name",), ("the", "eagle")), (("customer", "rating"), ("5", "out", "of", "5")))
    assert table_tokens.to_token_table({"name": "The Eagle", "customer rating": "5 out of 5"}, tok) == mr


def test_table_forms_score_the_same(parent):
    pred = ["1001 gaussia was formerly known as 1923 oaa907 xc ."]
    ref = [["1001 gaussia 's former name was 1923 oaa907 xc ."]]
    results = [
        parent.compute(predictions=pred, references=ref, tables=[t], tokenizer="nltk")["f1"]
        for t in ('1001_Gaussia | formerName | "1923 OAA907 XC"', [["1001_Gaussia", "formerName", '"1923 OAA907 XC"']])
    ]
    assert results[0] == results[1] > 0.3


def test_return_ngrams(parent):
    out = parent.compute(
        predictions=["blue spice is a cheap coffee shop ."],
        references=[["blue spice is a coffee shop ."]],
        tables=[TABLE],
        return_ngrams=True,
    )
    ex = out["examples"][0]
    rows = {r["ngram"]: r for r in ex["prediction_ngrams"]}
    assert rows["blue spice"]["table_entailment"] == 1.0 and rows["blue spice"]["reference_count"] == 1
    assert rows["cheap"]["table_entailment"] == 0.0 and rows["cheap"]["reference_count"] == 0
    assert rows["cheap coffee"]["table_entailment"] == 0.5
    assert rows["is a cheap coffee"]["order"] == 4
    assert sum(r["order"] == 1 for r in ex["prediction_ngrams"]) == 8
    refs = {r["ngram"]: r for r in ex["reference_ngrams"]}
    assert refs["a coffee"]["prediction_count"] == 0 and refs["coffee shop ."]["prediction_count"] == 1


# ---------------------------------------------------------------------------
# PARENT-C co-occurrence counts


def test_learn_counts_format():
    table = (("name",), ("blue", "spice")), (("eat", "type"), ("pub",))
    counts = cooccurrence.learn_counts([(table, ["blue", "spice", "is", "a", "pub"]), (table, ["a", "bar"])])
    assert counts["eat_type"] == 2 and counts["blue"] == 2
    assert counts["eat_type|||a"] == 2 and counts["eat_type|||bar"] == 1 and counts["pub|||is"] == 1
    assert "is" not in counts  # only table items get single counts
    assert all(counts[k] <= counts[k.split("|||")[0]] for k in counts if "|||" in k)
    pruned = cooccurrence.learn_counts([(table, ["a"]), (table, ["a", "bar"])], min_count=2)
    assert "name|||bar" not in pruned and pruned["name|||a"] == 2


def test_cooccurrence_cli_and_parent_c(parent, shared, tmp_path):
    out = tmp_path / "counts.json"
    xml = os.path.join(shared, "data", "webnlg2017", "xml", "train", "1triples", "Monument.xml")
    assert cooccurrence.main(["--webnlg", xml, "--tokenizer", "nltk", "--out", str(out)]) == 0
    counts = json.loads(out.read_text())
    assert counts["location"] > 0 and any(k.startswith("location|||") for k in counts)
    # The command line entry point works too.
    cli = subprocess.run(
        [sys.executable, "-m", "training.parent.cooccurrence", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert cli.returncode == 0 and "--webnlg" in cli.stdout

    preds = ["the adare manor is located in adare , ireland .", "it is a monument ."]
    refs = [["adare manor is in adare , county limerick ."], ["the monument is in adare ."]]
    tables = ["Adare_Manor | location | Adare", "Adare_Manor | location | Adare"]
    c = parent.compute(predictions=preds, references=refs, tables=tables, tokenizer="nltk", entailment="cooccurrence",
                       cooccurrence_counts=str(out), per_example=True)
    w = parent.compute(predictions=preds, references=refs, tables=tables, tokenizer="nltk", per_example=True)
    assert c["f1"] != w["f1"]
    tok = MemoTokenizer("nltk")
    for i, ex in enumerate(c["examples"]):
        table = table_tokens.to_token_table(tables[i], tok)
        p, r, f, _, _ = naive_parent(list(tok(preds[i])), [list(tok(x)) for x in refs[i]], table, counts=counts)
        assert _close(ex["precision"], p) and _close(ex["recall"], r) and _close(ex["f1"], f)
    with pytest.raises(ValueError, match="not found"):
        parent.compute(predictions=preds, references=refs, tables=tables, entailment="cooccurrence", cooccurrence_counts=str(tmp_path / "missing.json"))


# ---------------------------------------------------------------------------
# Docstring examples and the demo


def test_docstring_examples_run(parent):
    module = sys.modules[type(parent).__module__]
    result = doctest.testmod(module, extraglobs={"parent": parent}, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 8
    assert result.failed == 0


def test_app_builds():
    pytest.importorskip("gradio")
    import importlib.util

    spec = importlib.util.spec_from_file_location("parent_space_app", os.path.join(METRIC_DIR, "app.py"))
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    assert app.demo is not None
    summary, highlighted, pred_rows, ref_rows = app.score(*app.EXAMPLES[0])
    assert "PARENT F" in summary
    labels = dict(highlighted)
    assert labels["cheap "] == "neither" and labels["blue "] == "in reference"
    assert pred_rows and ref_rows


def test_default_tokenizer_splits_punctuation(parent):
    """A correct WebNLG output ending in punctuation is not penalized by default
    (the paper's NLTK tokenization); whitespace splitting leaves "texas." and
    "wheeler," unmatched, the reference reader's behaviour, kept as an option."""
    kwargs = dict(
        predictions=["Alan Bean was born in Wheeler, Texas."],
        references=[["Alan Bean was born in Wheeler, Texas."]],
        tables=[["Alan_Bean | birthPlace | Wheeler,_Texas"]],
        per_example=True,
    )
    default = parent.compute(**kwargs)["examples"][0]
    whitespace = parent.compute(tokenizer="whitespace", **kwargs)["examples"][0]
    assert default["table_recall"] == pytest.approx(1.0)
    assert whitespace["table_recall"] < 0.9
    assert default["f1"] > whitespace["f1"]
