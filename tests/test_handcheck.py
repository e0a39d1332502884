"""The hand check of the explanations (benchmarks/handcheck.py, benchmarks/handcheck/): the files'
integrity, the report recomputed from them, and the deterministic sample."""

import math
import os
import random

import pytest

from benchmarks import handcheck as hc

HAVE_FILES = os.path.exists(hc.ITEMS_PATH) and os.path.exists(hc.ANNOTATIONS_PATH)
needs_files = pytest.mark.skipif(not HAVE_FILES, reason="benchmarks/handcheck/ has no items or annotations yet")


@pytest.fixture(scope="module")
def items():
    return hc.read_jsonl(hc.ITEMS_PATH)


@pytest.fixture(scope="module")
def annotations():
    return hc.read_jsonl(hc.ANNOTATIONS_PATH)


# ---------------------------------------------------------------- the files


@needs_files
def test_every_annotation_id_is_an_item_and_judged_once(items, annotations):
    ids = [it["id"] for it in items]
    assert len(ids) == len(set(ids)), "item ids repeat"
    known = set(ids)
    seen = set()
    for a in annotations:
        assert a["id"] in known, a["id"]
        assert a["id"] not in seen, a["id"]
        seen.add(a["id"])
        assert isinstance(a["accept"], bool)
        assert isinstance(a.get("reason"), str) and a["reason"].strip(), a["id"]


@needs_files
def test_every_kind_has_annotations_and_facts_have_verdicts(items, annotations):
    kind_of = {it["id"]: it["kind"] for it in items}
    judged_kinds = {kind_of[a["id"]] for a in annotations}
    present = {it["kind"] for it in items}
    assert {"fact", "arc"} <= present <= set(hc.KINDS)
    assert present <= judged_kinds, f"kinds without a judgement: {present - judged_kinds}"
    for a in annotations:
        if kind_of[a["id"]] == "fact":
            assert isinstance(a.get("verdict_accept"), bool), a["id"]


@needs_files
def test_items_are_well_formed(items):
    for it in items:
        output_id, kind, index = it["id"].split(":")
        assert output_id == it["output_id"] and kind == it["kind"] and index.isdigit()
        assert hc.KINDS[kind] == it["metric"]
        assert it["text"].strip() and it["table"] and all(t.count(" | ") == 2 for t in it["table"])
        if kind == "fact":
            assert it["item"]["verdict"] in ("supported", "contradicted", "unverifiable")
            start, end = it["item"].get("evidence_start"), it["item"].get("evidence_end")
            if start is not None:
                assert it["text"][start:end] == it["item"]["evidence"]
        if kind == "arc":
            assert it["item"]["probability"] < 0.5
    assert len({it["output_id"] for it in items}) <= hc.SAMPLE_SIZE


@needs_files
def test_all_facts_and_arcs_judged_questions_sampled(items, annotations):
    judged = {a["id"] for a in annotations}
    for it in items:
        if it["kind"] in ("fact", "fact_ungrounded", "arc"):
            assert it["id"] in judged, it["id"]
    for kind in ("table_question", "text_question"):
        assert sum(1 for it in items if it["kind"] == kind) <= hc.QUESTION_SAMPLE


@needs_files
def test_report_is_recomputed_from_the_files(items, annotations):
    rows = hc.compute_report(items, annotations)
    by_id = {a["id"]: a for a in annotations}
    for kind in hc.KINDS:
        judged = [by_id[it["id"]]["accept"] for it in items if it["kind"] == kind and it["id"] in by_id]
        row = next(r for r in rows if r["kind"] == kind and r["subset"] == "all")
        assert (row["accepted"], row["n"]) == (sum(judged), len(judged))
        if judged:
            assert row["low"] <= row["share"] <= row["high"]
    seen = next(r for r in rows if r["kind"] == "fact" and r["subset"] == "seen")
    unseen = next(r for r in rows if r["kind"] == "fact" and r["subset"] == "unseen")
    total = next(r for r in rows if r["kind"] == "fact" and r["subset"] == "all")
    assert seen["n"] + unseen["n"] == total["n"] and seen["accepted"] + unseen["accepted"] == total["accepted"]
    verdicts = [by_id[it["id"]]["verdict_accept"] for it in items if it["kind"] == "fact" and it["id"] in by_id]
    row = next(r for r in rows if r["kind"] == "fact verdict" and r["subset"] == "all")
    assert (row["accepted"], row["n"]) == (sum(verdicts), len(verdicts))


# ---------------------------------------------------------------- the functions


def _outputs(n_per=7):
    outputs, k = [], 0
    for system in ("a", "b", "c"):
        for seen in (True, False):
            for j in range(n_per):
                k += 1
                outputs.append({"output_id": str(k), "system": system, "seen": seen, "category": "C",
                                "table": f"T{j % 3} | p | o", "text": "" if j == 0 else f"text {k}"})
    return outputs


def test_sampling_is_deterministic_spread_and_skips_empty_texts():
    outputs = _outputs()
    first = hc.draw_sample(outputs, n=20, seed=0)
    assert [o["output_id"] for o in first] == [o["output_id"] for o in hc.draw_sample(list(outputs), n=20, seed=0)]
    assert [o["output_id"] for o in first] != [o["output_id"] for o in hc.draw_sample(outputs, n=20, seed=1)]
    assert all(o["text"] for o in first)
    per_stratum = {}
    for o in first:
        per_stratum[(o["system"], o["seen"])] = per_stratum.get((o["system"], o["seen"]), 0) + 1
    assert len(per_stratum) == 6 and set(per_stratum.values()) <= {3, 4}
    with pytest.raises(ValueError):
        hc.draw_sample(outputs, n=100, seed=0)  # 36 non-empty outputs only


@needs_files
def test_the_stored_items_come_from_the_seeded_sample(items):
    try:
        outputs = hc.load_outputs()
    except Exception as e:  # ../shared is not on every machine
        pytest.skip(f"WebNLG 2017 data not available: {e}")
    sample = hc.draw_sample(outputs)
    assert [o["output_id"] for o in sample] == [o["output_id"] for o in hc.draw_sample(outputs)]
    by_id = {o["output_id"]: o for o in sample}
    for it in items:
        o = by_id[it["output_id"]]
        assert it["text"] == o["text"] and it["table"] == o["table"].split("<br>")
        assert (it["system"], it["seen"]) == (o["system"], o["seen"])


def test_question_sample_is_seeded_and_keeps_facts():
    rows = [{"id": f"{i}:table_question:0", "kind": "table_question"} for i in range(30)]
    rows += [{"id": f"{i}:fact:0", "kind": "fact"} for i in range(5)]
    a = hc.sample_questions(rows, n=10, seed=0)
    assert a == hc.sample_questions(rows, n=10, seed=0)
    assert sum(r["kind"] == "table_question" for r in a) == 10 and sum(r["kind"] == "fact" for r in a) == 5


def test_wilson_interval():
    low, high = hc.wilson(8, 10)
    # The textbook value for 8 / 10 at 95 %: [0.490, 0.943].
    assert math.isclose(low, 0.4902, abs_tol=1e-3) and math.isclose(high, 0.9433, abs_tol=1e-3)
    assert hc.wilson(0, 0) == (None, None)
    assert hc.wilson(0, 5)[0] == 0.0 and hc.wilson(5, 5)[1] == 1.0


def test_bad_annotations_are_refused():
    items = [{"id": "1:fact:0", "kind": "fact", "seen": True, "item": {"verdict": "supported"}},
             {"id": "1:arc:0", "kind": "arc", "seen": False, "item": {}}]
    with pytest.raises(ValueError, match="not an item"):
        hc.check_annotations(items, [{"id": "2:arc:0", "accept": True}])
    with pytest.raises(ValueError, match="twice"):
        hc.check_annotations(items, [{"id": "1:arc:0", "accept": True}, {"id": "1:arc:0", "accept": False}])
    with pytest.raises(ValueError, match="verdict_accept"):
        hc.check_annotations(items, [{"id": "1:fact:0", "accept": True}])
    with pytest.raises(ValueError, match="true or false"):
        hc.check_annotations(items, [{"id": "1:arc:0", "accept": "yes"}])


def test_items_from_raw_examples():
    sample = [{"output_id": "7", "system": "s", "category": "C", "seen": False,
               "table": "A | birthPlace | B<br>A | occupation | C", "text": "a was born in d ."}]
    fact = {"subject": "A", "relation": "birthPlace", "object": "D", "evidence": "a was born in d .",
            "evidence_start": 0, "evidence_end": 17}
    raw = {
        "fact_accuracy": {"output_ids": ["7"], "examples": [{
            "generated": [fact], "supported": [], "unverifiable": [],
            "contradicted": [{**fact, "expected": ["B"]}],
            "ungrounded": [{"subject": "A", "relation": "occupation", "object": "E", "not_in_text": "object"}],
            "ignored": []}]},
        "dae": {"output_ids": ["7"], "examples": [{"arcs": [
            {"head": "born", "relation": "prep:in", "child": "d", "head_index": 2, "child_index": 4, "probability": 0.1},
            {"head": "born", "relation": "nsubjpass", "child": "a", "head_index": 2, "child_index": 0, "probability": 0.9}]}]},
        "data_questeval": {"output_ids": ["7"], "examples": [{"sources": [{
            "from_source": [{"question": "Where was A born?", "answer": "B", "predicted": "d", "score": 0.1}],
            "from_text": [{"question": "Who was born in d?", "answer": "a", "predicted": "A", "score": 0.9}]}]}]},
    }
    built = hc.build_items(sample, raw)
    assert [it["id"] for it in built] == ["7:fact:0", "7:fact_ungrounded:0", "7:table_question:0",
                                          "7:text_question:0", "7:arc:0"]
    assert built[0]["item"]["verdict"] == "contradicted" and built[0]["item"]["expected"] == ["B"]
    assert built[0]["table"] == ["A | birthPlace | B", "A | occupation | C"]
    assert built[4]["item"]["child"] == "d"
    annotations = [{"id": "7:fact:0", "accept": False, "verdict_accept": True, "reason": "x"},
                   {"id": "7:arc:0", "accept": True, "reason": "x"}]
    rows = hc.compute_report(built, annotations, question_filter=lambda it: random.random() < 2)
    fact = next(r for r in rows if r["kind"] == "fact" and r["subset"] == "unseen")
    assert (fact["accepted"], fact["n"]) == (0, 1)
    kept = next(r for r in rows if r["subset"] == "kept by the filter")
    assert kept["n"] == 0  # the table question was not judged


def test_a_part_of_the_sample_stays_spread_over_the_strata():
    sample = hc.draw_sample(_outputs(), n=24, seed=0)
    part = hc.first_outputs(sample, 12)
    assert len(part) == 12 and part == hc.first_outputs(sample, 12)
    assert [o for o in sample if o in part] == part  # the sample's order
    strata = [(o["system"], o["seen"]) for o in part]
    assert all(strata.count(k) == 2 for k in set(strata)) and len(set(strata)) == 6
    assert hc.first_outputs(sample, None) == sample and hc.first_outputs(sample, 99) == sample


def test_questions_from_a_full_runs_dump_keep_the_judgements_that_still_apply(tmp_path):
    import json

    sample = [{"output_id": "7", "index": 1, "system": "s", "category": "C", "seen": True,
               "table": "A | birthPlace | B", "text": "a was born in b ."}]
    example = {"sources": [{"from_source": [{"question": "Where was A born?", "answer": "B"},
                                            {"question": "Who was born in B?", "answer": "A"}],
                            "from_text": [{"question": "Who was born in b?", "answer": "a"}]}]}
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in [
        {"system": "other", "prediction": "x", "example": {}},
        {"system": "s", "prediction": "a was born in b .", "example": example}]))
    raw = hc.dq_raw_from_dump(str(dump), sample)
    assert raw == {"output_ids": ["7"], "examples": [example]}
    with pytest.raises(ValueError, match="not output 7"):
        hc.dq_raw_from_dump(str(dump), [dict(sample[0], index=0)])
    new = hc.build_items(sample, {"data_questeval": raw})
    assert [it["id"] for it in new] == ["7:table_question:0", "7:table_question:1", "7:text_question:0"]
    old_item = dict(new[1], id="7:table_question:4")  # the same question, listed elsewhere before
    gone = dict(new[0], id="7:table_question:9", item={"question": "When?", "answer": "B"})
    fact = {"id": "7:fact:0", "metric": "fact_accuracy", "kind": "fact", "output_id": "7", "item": {}}
    items, annotations, carried = hc.redo_questions(
        [fact, old_item, gone], [{"id": "7:fact:0", "accept": True, "verdict_accept": True},
                                 {"id": "7:table_question:4", "accept": False, "reason": "r"},
                                 {"id": "7:table_question:9", "accept": True}], new)
    assert carried == 1 and [it["id"] for it in items] == ["7:fact:0"] + [it["id"] for it in new]
    assert annotations == [{"id": "7:fact:0", "accept": True, "verdict_accept": True},
                           {"id": "7:table_question:1", "accept": False, "reason": "r"}]
