"""The input boundary every metric shares (d2t_metrics.inputs): declared table
inputs carried by add/add_batch/num_process/datasets/combine, and checks that
run before evaluate stores anything."""

import glob
import inspect
import os
import threading

import evaluate
import pytest

from conftest import metric_path
from d2t_metrics import parse_table
from d2t_metrics.inputs import MAX_TEXT_CHARS, decode_source, decode_table, encode_source_text, encode_table
from test_tables import ROUND_TRIP_INPUTS

PREDICTIONS = [
    "Alan Bean was born in Wheeler, Texas.",
    "The Eagle is a coffee shop near Burger King.",
    "Jane Doe is an actor.",
    "Alan Bean was a test pilot born in Wheeler.",
    "Blue Spice is a pub by the river.",
    "Jane Doe, born in 1965, is a singer.",
]
REFERENCES = [
    ["Alan Bean was born in Wheeler, Texas."],
    ["The Eagle coffee shop is near Burger King."],
    ["Jane Doe is an actor and a singer."],
    ["Alan Bean, born in Wheeler, Texas, was a test pilot."],
    ["Blue Spice is a pub in the riverside area."],
    ["Jane Doe was born in 1965."],
]
TABLES = [
    ["Alan_Bean | birthPlace | Wheeler,_Texas"],
    "name[The Eagle], eatType[coffee shop], near[Burger King]",
    {"name": "Jane Doe", "occupation": ["actor", "singer"]},
    "Alan_Bean | occupation | Test_pilot<br>Alan_Bean | birthPlace | Wheeler,_Texas",
    [["name", "Blue Spice"], ["eatType", "pub"], ["area", "riverside"]],
    {"name": "Jane Doe", "born": "1965"},
]


def _cache_files(cache_dir):
    return glob.glob(os.path.join(str(cache_dir), "**", "*.arrow"), recursive=True)


@pytest.fixture()
def cache_dir(tmp_path):
    return tmp_path / "cache"


@pytest.fixture()
def parent(cache_dir):
    return evaluate.load(metric_path("parent"), cache_dir=str(cache_dir))


@pytest.fixture(scope="module")
def nli(tiny_nli):
    return evaluate.load(metric_path("nli_semantic_accuracy"), model=tiny_nli, device="cpu")


@pytest.fixture(scope="module")
def dae_rule():
    return evaluate.load(metric_path("dae"), "rule")


def _plain(metric, **extra):
    return metric.compute(predictions=PREDICTIONS, references=REFERENCES, tables=TABLES, per_example=True, show_progress=False, **extra)


# ---------------------------------------------------------------------------
# The canonical string form


@pytest.mark.parametrize("raw", ROUND_TRIP_INPUTS, ids=range(len(ROUND_TRIP_INPUTS)))
def test_encoding_is_lossless(raw):
    table = parse_table(raw)
    encoded = encode_table(raw)
    assert isinstance(encoded, str)
    again = decode_table(encoded)
    assert again == table and again.kind == table.kind
    assert encode_table(encoded) == encoded  # an encoded table passes through


def test_source_text_encoding_and_bad_canonical_strings():
    assert decode_source(encode_source_text("A text with \x00 and ü.")) == "A text with \x00 and ü."
    with pytest.raises(ValueError, match="expected a table"):
        decode_table(encode_source_text("a text"))
    with pytest.raises(ValueError, match="not a canonical table string"):
        encode_table('{"kind": "nonsense", "entries": []}')


# ---------------------------------------------------------------------------
# Tables travel with their predictions


@pytest.mark.parametrize("name", ["parent", "nli", "dae_rule"])
def test_add_batch_and_add_give_the_plain_compute(name, parent, nli, dae_rule):
    metric = {"parent": parent, "nli": nli, "dae_rule": dae_rule}[name]
    expected = _plain(metric)
    for start in range(0, len(PREDICTIONS), 4):
        end = start + 4
        kwargs = dict(predictions=PREDICTIONS[start:end], tables=TABLES[start:end])
        if name == "parent":
            kwargs["references"] = REFERENCES[start:end]
        metric.add_batch(**kwargs)
    assert metric.compute(per_example=True, show_progress=False) == expected
    for i in range(len(PREDICTIONS)):
        metric.add(prediction=PREDICTIONS[i], reference=REFERENCES[i] if name == "parent" else None, tables=TABLES[i])
    assert metric.compute(per_example=True, show_progress=False) == expected


def test_dae_sources_travel_as_well(dae_rule):
    sources = [" ".join(r) for r in REFERENCES]
    expected = dae_rule.compute(predictions=PREDICTIONS, sources=sources, per_example=True, show_progress=False)
    dae_rule.add_batch(predictions=PREDICTIONS[:3], sources=sources[:3])
    dae_rule.add_batch(predictions=PREDICTIONS[3:], sources=sources[3:])
    assert dae_rule.compute(per_example=True, show_progress=False) == expected
    # Given both, DAE reads the source texts (the tables are for the other metrics of a combine).
    assert dae_rule.compute(predictions=PREDICTIONS, sources=sources, tables=TABLES, per_example=True, show_progress=False) == expected
    assert dae_rule.accepted_inputs == ("predictions", "tables", "sources")


def test_two_processes_with_interleaved_shards(tmp_path):
    """What DistributedSampler gives: process r holds examples r, r+2, r+4, ..."""
    results, errors = {}, []

    def run(rank):
        try:
            metric = evaluate.load(metric_path("parent"), num_process=2, process_id=rank, experiment_id="interleaved",
                                   cache_dir=str(tmp_path / "cache"), timeout=60)
            metric.add_batch(predictions=PREDICTIONS[rank::2], references=REFERENCES[rank::2], tables=TABLES[rank::2])
            results[rank] = metric.compute(per_example=True)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert results[1] is None  # only process 0 computes
    order = list(range(0, 6, 2)) + list(range(1, 6, 2))
    single = evaluate.load(metric_path("parent"), cache_dir=str(tmp_path / "single")).compute(
        predictions=[PREDICTIONS[i] for i in order], references=[REFERENCES[i] for i in order],
        tables=[TABLES[i] for i in order], per_example=True)
    assert results[0] == single
    assert results[0]["f1"] == pytest.approx(evaluate.load(metric_path("parent"), cache_dir=str(tmp_path / "s2")).compute(
        predictions=PREDICTIONS, references=REFERENCES, tables=TABLES)["f1"], abs=1e-12)


def test_datasets_column_of_dict_tables_with_differing_keys(parent, nli):
    datasets = pytest.importorskip("datasets")
    rows = [{"prediction": p, "references": r, "table": {"name": "Jane Doe", "born": "1965"} if i % 2 else {"name": "Jane Doe", "occupation": "actor"}}
            for i, (p, r) in enumerate(zip(PREDICTIONS, REFERENCES))]
    ds = datasets.Dataset.from_list(rows)
    assert ds[0]["table"]["born"] is None  # Arrow fills the keys a row lacks with None
    plain_tables = [r["table"] for r in rows]
    for metric, with_refs in ((parent, True), (nli, False)):
        kwargs = {"references": ds["references"]} if with_refs else {}
        from_ds = metric.compute(predictions=ds["prediction"], tables=ds["table"], per_example=True, show_progress=False, **kwargs)
        kwargs = {"references": REFERENCES} if with_refs else {}
        plain = metric.compute(predictions=PREDICTIONS, tables=plain_tables, per_example=True, show_progress=False, **kwargs)
        assert from_ds == plain


def test_datasets_column_of_triple_lists(parent):
    datasets = pytest.importorskip("datasets")
    tables = [[["Alan_Bean", "birthPlace", "Wheeler,_Texas"]], [["Alan_Bean", "occupation", "Test_pilot"], ["Alan_Bean", "birthPlace", "Wheeler,_Texas"]]]
    ds = datasets.Dataset.from_dict({"p": PREDICTIONS[::3], "r": REFERENCES[::3], "t": tables})
    assert parent.compute(predictions=ds["p"], references=ds["r"], tables=ds["t"]) == parent.compute(
        predictions=PREDICTIONS[::3], references=REFERENCES[::3], tables=tables)


def test_combine_of_all_metrics_gives_each_metrics_numbers(parent, nli, dae_rule):
    combined = evaluate.combine([parent, nli, dae_rule])
    result = combined.compute(predictions=PREDICTIONS, references=REFERENCES, tables=TABLES, show_progress=False, batch_size=4)
    alone = [m.compute(predictions=PREDICTIONS, references=REFERENCES, tables=TABLES, show_progress=False) for m in (parent, nli, dae_rule)]
    # Keys that clash (ok_rate and score of NLI and DAE) carry the metric's name; the others stay plain.
    assert result["nli_semantic_accuracy_ok_rate"] == alone[1]["ok_rate"]
    assert result["dae_ok_rate"] == alone[2]["ok_rate"]
    assert result["nli_semantic_accuracy_score"] == alone[1]["score"] and result["dae_score"] == alone[2]["score"]
    assert result["f1"] == alone[0]["f1"] and result["confidence"] == alone[1]["confidence"]
    assert result["min_score"] == alone[2]["min_score"]
    assert "ok_rate" not in result and "score" not in result
    # add_batch through the combination carries the tables to all three.
    combined.add_batch(predictions=PREDICTIONS[:2], references=REFERENCES[:2], tables=TABLES[:2])
    combined.add_batch(predictions=PREDICTIONS[2:], references=REFERENCES[2:], tables=TABLES[2:])
    assert combined.compute(show_progress=False) == result
    # So does add().
    for p, r, t in zip(PREDICTIONS, REFERENCES, TABLES):
        combined.add(prediction=p, reference=r, tables=t)
    assert combined.compute(show_progress=False) == result


def test_combine_keeps_per_example_results_apart(parent, dae_rule):
    result = evaluate.combine([parent, dae_rule]).compute(
        predictions=PREDICTIONS, references=REFERENCES, tables=TABLES, per_example=True, show_progress=False)
    assert len(result["parent_examples"]) == len(result["dae_examples"]) == len(PREDICTIONS)


# ---------------------------------------------------------------------------
# Checks before anything is stored

TABLE = ["Alan_Bean | birthPlace | Wheeler,_Texas"]
BAD_CALLS = [
    # (inputs, fragment of the message)
    (dict(predictions=["ok", 123, ["x", "y"], 4.5], tables=[TABLE] * 4), "example 1: prediction must be a str, got int"),
    (dict(predictions=["ok", "fine", ["x", "y"]], tables=[TABLE] * 3), "example 2: prediction must be a str, got list"),
    (dict(predictions="Hi", tables=[TABLE] * 2), "predictions must be a list with one entry per example, got a single string"),
    (dict(predictions=None, tables=[TABLE]), "predictions is None"),
    (dict(predictions=[], tables=[]), "predictions is empty"),
    (dict(predictions=[123], tables=[TABLE]), "example 0: prediction must be a str, got int"),
    (dict(predictions=["ok", "\ud800"], tables=[TABLE] * 2), "example 1: prediction is not valid Unicode: lone surrogate '\\ud800' at character 0"),
    (dict(predictions=["ok"], tables=[["Alan | p | \udc80"]]), "example 0: table is not valid Unicode"),
    (dict(predictions=["x" * (MAX_TEXT_CHARS + 1)], tables=[TABLE]), "example 0: prediction has 1,000,001 characters"),
    (dict(predictions=["a", "b"], tables=[TABLE]), "got 2 predictions but 1 tables"),
    (dict(predictions=["a"]), "tables is None"),
    (dict(predictions=["a", "b"], tables=[TABLE, "<br>"]), "example 1: empty table"),
    (dict(predictions=["a"], tables=[[""]]), "example 0: empty table"),
    (dict(predictions=["a"], tables=-82), "tables must be a list with one entry per example, got int"),
    (dict(predictions=["a"], tables=[TABLE], no_such_option=1), "unknown argument 'no_such_option'"),
    (dict(predictions=["a"], tables=[TABLE], batch_size=0), "batch_size must be a positive int"),
]


@pytest.mark.parametrize("kwargs,fragment", BAD_CALLS, ids=[f[:40] for _, f in BAD_CALLS])
@pytest.mark.parametrize("name", ["nli_semantic_accuracy", "dae"])
def test_bad_input_is_refused_before_anything_is_stored(name, kwargs, fragment, tmp_path, tiny_nli):
    model = {"model": tiny_nli, "device": "cpu"} if name == "nli_semantic_accuracy" else {}
    metric = evaluate.load(metric_path(name), "rule" if name == "dae" else None, cache_dir=str(tmp_path), **model)
    with pytest.raises(ValueError) as info:
        metric.compute(show_progress=False, **kwargs)
    assert fragment in str(info.value), str(info.value)
    assert _cache_files(tmp_path) == []  # the users' texts were not written anywhere
    # No lock is left behind: the next call runs at once.
    assert metric.compute(predictions=["Alan Bean was born in Wheeler."], tables=[TABLE], show_progress=False)
    assert _cache_files(tmp_path) == []


def test_add_batch_refuses_a_bad_batch_and_keeps_the_good_ones(parent, cache_dir):
    parent.add_batch(predictions=PREDICTIONS[:3], references=REFERENCES[:3], tables=TABLES[:3])
    with pytest.raises(ValueError, match="example 1: table is None"):
        parent.add_batch(predictions=PREDICTIONS[3:5], references=REFERENCES[3:5], tables=[TABLES[3], None])
    with pytest.raises(ValueError, match="add_batch\\(\\) takes only the inputs"):
        parent.add_batch(predictions=PREDICTIONS[3:], references=REFERENCES[3:], tables=TABLES[3:], per_example=True)
    parent.add_batch(predictions=PREDICTIONS[3:], references=REFERENCES[3:], tables=TABLES[3:])
    assert parent.compute() == parent.compute(predictions=PREDICTIONS, references=REFERENCES, tables=TABLES)


def test_compute_with_nothing_added_says_what_to_pass(parent):
    with pytest.raises(ValueError, match="nothing to compute: pass predictions=, references=, tables="):
        parent.compute()


def test_a_failure_while_computing_leaves_no_cache_file(parent, cache_dir):
    # PARENT-C without its counts fails inside _compute, after evaluate stored the inputs.
    with pytest.raises(ValueError, match="cooccurrence_counts"):
        parent.compute(predictions=PREDICTIONS, references=REFERENCES, tables=TABLES, entailment="cooccurrence")
    assert _cache_files(cache_dir) == []
    assert parent.compute(predictions=PREDICTIONS, references=REFERENCES, tables=TABLES)["f1"] > 0


def test_numpy_and_dataset_like_inputs_are_read_as_lists(parent):
    np = pytest.importorskip("numpy")
    plain = parent.compute(predictions=PREDICTIONS, references=REFERENCES, tables=TABLES)
    assert parent.compute(predictions=np.array(PREDICTIONS), references=REFERENCES, tables=tuple(TABLES)) == plain


# ---------------------------------------------------------------------------
# The options every metric takes are checked alike (issue #38, item 9)


class _RuleQG:
    """A model-free question generator for data_questeval (its loaders are never reached here)."""

    backend, name_or_path = "rule", "rule-qg"

    def generate(self, answers, contexts, batch_size=None, show_progress=True):
        return [f"What is {a}?" for a in answers]


class _RuleQA:
    backend, name_or_path = "rule", "rule-qa"

    def answer(self, questions, contexts, batch_size=None, show_progress=True):
        from metrics.data_questeval.qa import QAResult

        return [QAResult("", 0.0) for _ in questions]


def _each_metric(name, tiny_nli, cache_dir):
    """A cheap instance of each of the five metrics, whose model loader fails if reached."""
    qg, qa = _RuleQG(), _RuleQA()
    options = {
        "parent": ((), {}),
        "nli_semantic_accuracy": ((), {"model": tiny_nli, "device": "cpu"}),
        "data_questeval": ((), {"text_qg": qg, "table_qg": qg, "text_qa": qa, "table_qa": qa}),
        "dae": (("rule",), {}),
        "fact_accuracy": (("openie",), {}),
    }[name]
    metric = evaluate.load(metric_path(name), *options[0], cache_dir=str(cache_dir), **options[1])

    def must_not_load():
        raise AssertionError(f"{name} reached its model loader with a bad option")

    metric.load_model = must_not_load
    return metric


BAD_COMMON_OPTIONS = [
    ({"per_example": 1}, "per_example must be True or False, got 1"),
    ({"per_example": "yes"}, "per_example must be True or False"),
    ({"per_example": None}, "per_example must be True or False, got None"),
    ({"show_progress": "no"}, "show_progress must be True or False, got 'no'"),
    ({"show_progress": 0}, "show_progress must be True or False, got 0"),
    ({"batch_size": 0}, "batch_size must be a positive int, got 0"),
    ({"batch_size": 2.5}, "batch_size must be a positive int, got 2.5"),
    ({"batch_size": True}, "batch_size must be a positive int, got True"),
    ({"batch_size": "8"}, "batch_size must be a positive int, got '8'"),
]
FIVE_METRICS = ["parent", "nli_semantic_accuracy", "data_questeval", "dae", "fact_accuracy"]


@pytest.mark.parametrize("name", FIVE_METRICS)
def test_common_options_are_checked_alike_before_anything_loads(name, tiny_nli, tmp_path):
    """fact_accuracy took per_example=1 and show_progress="no" (which turned bars on)
    where data_questeval refused them: now every metric refuses them, before anything
    is stored or loaded."""
    metric = _each_metric(name, tiny_nli, tmp_path)
    inputs = dict(predictions=PREDICTIONS[:2], references=REFERENCES[:2], tables=[TABLE, TABLE])
    for option, fragment in BAD_COMMON_OPTIONS:
        with pytest.raises(ValueError) as info:
            metric.compute(**inputs, **option)
        assert fragment in str(info.value), (name, option, str(info.value))
    assert _cache_files(tmp_path) == []
    assert set(metric.COMMON_OPTIONS) <= set(inspect.signature(metric._compute).parameters)


def test_batch_size_none_only_where_it_is_the_default(parent, nli):
    """PARENT runs no model: its batch_size defaults to None and None is accepted; a metric
    that batches refuses None."""
    assert parent.compute(predictions=PREDICTIONS[:1], references=REFERENCES[:1], tables=TABLES[:1], batch_size=None)["f1"] > 0
    with pytest.raises(ValueError, match="batch_size must be a positive int, got None"):
        nli.compute(predictions=PREDICTIONS[:1], tables=TABLES[:1], batch_size=None)


def test_check_flag():
    from d2t_metrics.inputs import check_flag

    assert check_flag(True, "x") is True and check_flag(False, "x") is False
    for bad in (1, 0, "no", "True", None, 1.0, [True]):
        with pytest.raises(ValueError, match="x must be True or False"):
            check_flag(bad, "x")
