"""fact_accuracy's end-to-end extractor with a listed schema: the prompts that
name the relations to look for (``text_to_triples``), the training pairs
with distractor relations, the extractor giving a table's relations to a
model trained on them, and the ``train.py triples`` command on a tiny random
decoder."""

import json
import os
import random

import pytest

from conftest import ROOT
from d2t_metrics import normalize
from metrics.fact_accuracy import extractors as ex
from metrics.fact_accuracy import text_to_triples as t2t
from training.fact_accuracy import triples_data
from tests.test_fact_accuracy_relations import ENTRIES, write_webnlg

BEAN = ["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot"]


def test_prompt_lists_relations_only_when_given():
    plain = t2t.prompt("Alan  Bean was\nborn in Wheeler.")
    assert plain == t2t.PROMPT.format(text="Alan Bean was born in Wheeler.") and "Relations:" not in plain
    listed = t2t.prompt("Alan Bean was born in Wheeler.", ["birthPlace", "occupation", "birthPlace"])
    assert "\nRelations: birthPlace, occupation\nText: Alan Bean was born in Wheeler.\nTriples:" in listed
    assert t2t.prompt("x", []) == t2t.prompt("x") == t2t.prompt("x", None)


def test_listed_relations_are_cleaned_and_bounded():
    assert t2t.listed_relations(["a,b", " c \n d ", "", "  ", "a b"]) == ["a b", "c d"]  # commas separate the list
    assert t2t.listed_relations(["r" * 1000]) == ["r" * t2t.MAX_RELATION_CHARS]
    many = [f"rel{i}" for i in range(t2t.MAX_LISTED_RELATIONS + 1)]
    assert t2t.listed_relations(many[:-1]) == many[:-1]
    assert t2t.listed_relations(many) == []  # too many to list: the schema-free prompt
    assert "Relations:" not in t2t.prompt("text", many)
    assert t2t.listed_relations(iter(["a"] * 10**6)) == ["a"]  # repeats are not "many"
    assert t2t.listed_relations(f"r{i}" for i in range(10**6)) == []  # a hostile table is not read to its end


@pytest.fixture(scope="module")
def entries(tmp_path_factory):
    from d2t_metrics.datasets import load_webnlg_xml

    return load_webnlg_xml(write_webnlg(str(tmp_path_factory.mktemp("webnlg"))))


def test_hinted_relations_hold_the_gold_and_some_distractors():
    pool = ["a", "b", "c", "d", "e"]
    for seed in range(30):
        names = triples_data.hinted_relations(["b", "x", "b"], pool, random.Random(seed), distractors=2)
        assert {"b", "x"} <= set(names) and len(names) == len(set(names)) <= 4
        assert set(names) - {"b", "x"} <= set(pool)
    assert sorted(triples_data.hinted_relations(["b"], pool, random.Random(0), distractors=0)) == ["b"]
    counts = {len(triples_data.hinted_relations(["b"], pool, random.Random(s), distractors=2)) for s in range(40)}
    assert counts == {1, 2, 3}  # 0, 1 or 2 distractors


def test_training_pairs_without_lists_are_the_plain_prompts(entries):
    pairs = triples_data.training_pairs(entries, seed=3)
    assert len(pairs) == len(entries) and all("Relations:" not in p for p, _ in pairs)
    assert pairs == triples_data.training_pairs(entries, seed=3, listed_share=0.0, distractors=5)
    assert ("Extract the facts stated in the text as subject | relation | object triples.\n"
            "Text: Denmark is led by Lars Lokke Rasmussen.\nTriples:", "Denmark | leaderName | Lars Løkke Rasmussen") in pairs


def test_training_pairs_with_lists_name_the_gold_relations_among_the_category(entries):
    pairs = triples_data.training_pairs(entries, seed=3, listed_share=1.0, distractors=3)
    pool = {t.predicate for e in entries for t in e.table}  # one category ("Test") in the fixture
    assert len(pairs) == len(entries)
    for p, target in pairs:
        listed = p.split("\nRelations: ", 1)[1].split("\nText: ", 1)[0].split(", ")
        gold = {triple.split(" | ")[1] for triple in target.split(" ; ")}
        assert gold <= set(listed) <= pool
    assert pairs == triples_data.training_pairs(entries, seed=3, listed_share=1.0, distractors=3)  # seeded
    half = triples_data.training_pairs(entries * 25, seed=3, listed_share=0.5)
    assert 0.25 < sum("Relations:" in p for p, _ in half) / len(half) < 0.75
    with pytest.raises(ValueError, match="listed_share"):
        triples_data.training_pairs(entries, listed_share=1.5)
    with pytest.raises(ValueError, match="distractors"):
        triples_data.training_pairs(entries, listed_share=0.5, distractors=-1)


def test_tokenized_lowercase_writes_texts_as_the_challenge_outputs_are():
    assert triples_data.tokenized_lowercase("Aarhus Airport serves Aarhus, Denmark (the city).") == \
        "aarhus airport serves aarhus , denmark ( the city ) ."
    assert triples_data.tokenized_lowercase("  ") == "" and triples_data.tokenized_lowercase("a  ,b") == "a , b"


def test_restore_form_gives_table_values_their_casing_back():
    written = triples_data.tokenized_lowercase("Aarhus Airport serves Aarhus, Denmark (the city). It isn't big.")
    values = ["Aarhus_Airport", '"Aarhus, Denmark"', "Aarhus", "2.0"]
    assert normalize.restore_form(written, values) == "Aarhus Airport serves Aarhus, Denmark (the city). It isn't big."
    # whole words only, longest value first, no sentence break after an initial
    assert normalize.restore_form("aarhusian food by carl a. wirtanen .", ["Aarhus", "Carl A. Wirtanen"]) == \
        "Aarhusian food by Carl A. Wirtanen."
    # a text with any capital is the writer's own
    assert normalize.restore_form("Aarhus airport , aarhus .", values) == "Aarhus airport , aarhus ."
    assert normalize.restore_form("", values) == "" and normalize.restore_form("x ( y )", []) == "X (y)"
    # regex characters in values are literal; hostile sizes stay fast
    assert normalize.restore_form("a+b (c) .", ["A+B (C)"]) == "A+B (C)."
    long_text = "aarhus " * 200_000
    assert normalize.restore_form(long_text, ["Aarhus"] * 1000 + [f"V{i}" for i in range(5000)]).startswith("Aarhus Aarhus")


def test_training_pairs_lowercase_a_share_of_the_texts_only(entries):
    plain = triples_data.training_pairs(entries, seed=3)
    lower = triples_data.training_pairs(entries, seed=3, lowercase_share=1.0)
    assert sorted(t for _, t in lower) == sorted(t for _, t in plain)  # the targets keep the corpus's spelling
    assert all(p == p.split("Text: ")[0] + "Text: " + triples_data.tokenized_lowercase(p.split("Text: ")[1][:-len("\nTriples:")]) + "\nTriples:"
               for p, _ in lower)
    assert "Text: denmark is led by lars lokke rasmussen .\n" in "".join(p for p, _ in lower)
    half = triples_data.training_pairs(entries * 25, seed=3, lowercase_share=0.5)
    assert 0.25 < sum("Text: denmark" in p or "Text: aarhus" in p or "Text: alan" in p or "Text: matteo" in p
                      for p, _ in half) / len(half) < 0.75
    with pytest.raises(ValueError, match="lowercase_share"):
        triples_data.training_pairs(entries, lowercase_share=-0.1)


@pytest.fixture(scope="module")
def trained_triples(tiny_causal_lm, tmp_path_factory):
    """``train.py triples`` on the fixture's entries: a 2-step generator whose prompts list relations."""
    from training.fact_accuracy.train import main

    data = write_webnlg(str(tmp_path_factory.mktemp("webnlg_train")), ENTRIES)
    out = str(tmp_path_factory.mktemp("triples") / "ckpt")
    argv = ["triples", "--out", out, "--base", tiny_causal_lm, "--data", data, "--steps", "2", "--batch-size", "2",
            "--max-length", "96", "--listed-share", "1", "--distractors", "2", "--lowercase-share", "0.5", "--save-every", "1", "--no-progress"]
    assert main(argv) == 0
    return out


def test_triples_command_saves_a_checkpoint_that_lists_relations(trained_triples):
    from d2t_metrics.checkpoints import checkpoint_size

    recipe = json.load(open(os.path.join(trained_triples, "d2t_config.json")))
    assert recipe["kind"] == "fact-accuracy-text-to-triples" and recipe["task"] == "causal-lm"
    assert recipe["listed_relations"] is True
    training = recipe["training"]
    assert (training["listed_share"], training["distractors"], training["steps"], training["pairs"]) == (1.0, 2, 2, len(ENTRIES))
    assert training["lowercase_share"] == 0.5
    assert "--listed-share 1" in training["command"]
    assert 0 < checkpoint_size(trained_triples) < 16 * 1024 * 1024


def test_triples_command_refuses_bad_options(tmp_path, capsys):
    from training.fact_accuracy.train import main

    data = write_webnlg(str(tmp_path / "train"))
    for bad in (["--listed-share", "2"], ["--distractors", "-1"], ["--lowercase-share", "1.5"]):
        with pytest.raises(SystemExit):
            main(["triples", "--out", str(tmp_path / "x"), "--data", data, *bad])
        assert "--listed-share and --lowercase-share must be in [0, 1]" in capsys.readouterr().err


def test_extra_data_adds_only_entries_with_new_inputs(tmp_path):
    """--extra-data (e.g. WebNLG 3.0 train): an entry whose input is a held-out one (--exclude-inputs)
    or already in --data is left out, compared as the templates' extraction compares inputs
    (underscores, quotes and case ignored)."""
    from d2t_metrics.datasets import load_webnlg_xml
    from training.webnlg_extra import extra_entries

    main_entries = load_webnlg_xml(write_webnlg(str(tmp_path / "main"), ENTRIES[:2]))
    held_out = write_webnlg(str(tmp_path / "test"), [ENTRIES[2]])
    new_entry = ([("Apollo_12", "operator", "NASA")], [("Apollo 12 was operated by NASA.", {})])
    same_as_main = ([("denmark", "leaderName", "Lars Løkke Rasmussen")], [("Another text.", {})])  # ENTRIES[1]'s input
    extra = write_webnlg(str(tmp_path / "v3"), [ENTRIES[2], same_as_main, new_entry, new_entry])
    kept, counts = extra_entries(main_entries, [extra], [held_out])
    assert [[(t.subject, t.predicate, t.object) for t in e.table] for e in kept] == [[("Apollo_12", "operator", "NASA")]]
    assert counts == {"read": 4, "removed_excluded_input": 1, "removed_already_in_data": 2, "kept": 1}


def test_triples_command_records_the_extra_data(tiny_causal_lm, tmp_path, capsys):
    from training.fact_accuracy.train import main

    data = write_webnlg(str(tmp_path / "train"), ENTRIES[:2])
    extra = write_webnlg(str(tmp_path / "v3"), ENTRIES[1:])
    held_out = write_webnlg(str(tmp_path / "test"), [ENTRIES[3]])
    out = str(tmp_path / "ckpt")
    common = ["triples", "--out", out, "--base", tiny_causal_lm, "--data", data, "--extra-data", extra,
              "--exclude-inputs", held_out, "--steps", "1", "--batch-size", "2", "--max-length", "96", "--no-progress"]
    with pytest.raises(SystemExit):
        main(common + ["--extra-per-entry", "0"])
    assert "--extra-per-entry must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(common[:-1] + ["--extra-data", str(tmp_path / "absent"), "--no-progress"])
    assert "no WebNLG XML folder" in capsys.readouterr().err
    assert main(common + ["--extra-per-entry", "2"]) == 0
    training = json.load(open(os.path.join(out, "d2t_config.json")))["training"]
    assert training["extra_entries"] == {"read": 3, "removed_excluded_input": 1, "removed_already_in_data": 1, "kept": 1}
    assert training["extra_data"] == [extra] and training["extra_per_entry"] == 2
    assert training["pairs"] == 2 + 1  # the two --data entries, and the kept one's only text (2 per entry at most)


def _prompts_seen(extractor, monkeypatch, texts, tables):
    seen = []

    def fake_generate(prompts, show_progress=True):
        seen.extend(prompts)
        return ["Alan Bean | birthPlace | Wheeler, Texas"] * len(prompts)

    monkeypatch.setattr(extractor, "generate", fake_generate)
    out = extractor.extract(texts, tables=tables, show_progress=False)
    return seen, out


def test_extractor_lists_the_table_relations_for_a_model_trained_so(trained_triples, monkeypatch):
    from d2t_metrics.tables import parse_table

    x = ex.load_extractor("end_to_end", model=trained_triples, device="cpu")
    assert x.lists_relations
    seen, out = _prompts_seen(x, monkeypatch, ["Alan Bean was born in Wheeler.", "No table here."],
                              [parse_table(BEAN), None])
    assert seen[0] == t2t.prompt("Alan Bean was born in Wheeler.", ["birthPlace", "occupation"])
    assert seen[1] == t2t.prompt("no table here.")  # a capital first letter alone follows the text's case (1.6)
    assert [f[:3] for f in out[0]] == [("Alan Bean", "birthPlace", "Wheeler, Texas")]
    seen, _ = _prompts_seen(x, monkeypatch, ["Alan Bean was born in Wheeler."], None)
    assert seen == [t2t.prompt("Alan Bean was born in Wheeler.")]
    # an E2E record's attributes are its relations
    seen, _ = _prompts_seen(x, monkeypatch, ["Eagle is cheap."], [parse_table("name[Eagle], priceRange[cheap], eatType[pub]")])
    assert "Relations: priceRange, eatType\n" in seen[0]


def test_extractor_keeps_the_plain_prompt_for_an_older_model(trained_triples, monkeypatch):
    x = ex.load_extractor("end_to_end", model=trained_triples, device="cpu")
    x.lists_relations = False  # what a checkpoint without ``listed_relations`` in its recipe gives
    seen, _ = _prompts_seen(x, monkeypatch, ["Alan Bean was born in Wheeler."], [BEAN])
    assert seen == [t2t.prompt("Alan Bean was born in Wheeler.")]


def test_metric_passes_the_tables_and_real_decoding_runs(trained_triples):
    import evaluate

    metric = evaluate.load(os.path.join(ROOT, "metrics", "fact_accuracy"), model=trained_triples, device="cpu")
    metric.extractor.max_new_tokens = 8
    seen = []
    generate = metric.extractor.generate
    metric.extractor.generate = lambda prompts, show_progress=True: seen.extend(prompts) or generate(prompts, show_progress)
    res = metric.compute(predictions=["Alan Bean was born in Wheeler."], tables=[BEAN], per_example=True, show_progress=False)
    assert seen and all("\nRelations: birthPlace, occupation\n" in p for p in seen)
    assert res["ground_truth_facts"] == 2 and len(res["examples"]) == 1


def test_the_extractor_batch_is_the_devices_default_unless_given(trained_triples, monkeypatch):
    """No batch_size: d2t_metrics.models.default_batch_size of the metric's device, greedy decoding's
    GPU size (1,024 on a GPU, pretended here; 32 on a CPU); a given batch_size is kept."""
    import sys

    import evaluate

    metric = evaluate.load(os.path.join(ROOT, "metrics", "fact_accuracy"), model=trained_triples, device="cpu")
    metric.extractor.max_new_tokens = 2
    module = sys.modules[type(metric).__module__]
    seen = []
    monkeypatch.setattr(module, "default_batch_size", lambda device, gpu: seen.append((device, gpu)) or gpu)
    metric.compute(predictions=["Alan Bean was born in Wheeler."], tables=[BEAN], show_progress=False)
    assert metric.extractor.batch_size == 1024 and seen == [("cpu", 1024)]
    metric.compute(predictions=["Alan Bean was born in Wheeler."], tables=[BEAN], batch_size=3, show_progress=False)
    assert metric.extractor.batch_size == 3 and seen == [("cpu", 1024)]
