"""DAE data creation (training/dae/make_data.py) and training (training/dae/train.py):
auto-derived labels, augmentations, the reranking dev set, a training smoke run."""

import pytest

from conftest import write_dae_training_data
from metrics.dae.arcs import ARC_FEATURES, doc_arcs, load_spacy
from metrics.dae.model import ARC_MODEL_KIND


@pytest.fixture(scope="session")
def nlp():
    return load_spacy()


class FixedBeam:
    def __init__(self, beam):
        self.beam = beam

    def generate(self, sentence, n):
        return self.beam[:n]


def test_auto_derived_labels(nlp):
    from training.dae.make_data import auto_derived_examples

    x = "The cat sat on the mat."
    gold = "The cat was sitting on the mat."
    beam = FixedBeam(["The cat sat on a red mat.", "The cat sat.", "The dog sat on the mat.", "The cat ate the mat."])
    exs = auto_derived_examples(nlp, x, gold, beam.generate(x, 4), "test", bottom=2)
    by_hyp = {e["hypothesis"]: e for e in exs}
    assert all(a[3] == 1 for a in by_hyp[gold]["arcs"])
    top = by_hyp["The cat sat on a red mat."]
    words = top["words"]
    assert all(a[3] == 1 for a in top["arcs"])  # its new arc (mat, amod, red) is unlabelled, so absent
    assert ("mat", "amod", "red") not in {(words[a[0]], a[2], words[a[1]]) for a in top["arcs"]}
    dog = by_hyp["The dog sat on the mat."]
    labels = {(dog["words"][a[0]], a[2], dog["words"][a[1]]): a[3] for a in dog["arcs"]}
    assert labels[("sat", "nsubj", "dog")] == 0 and labels[("sat", "prep:on", "mat")] == 1
    ate = by_hyp["The cat ate the mat."]
    labels = {(ate["words"][a[0]], a[2], ate["words"][a[1]]): a[3] for a in ate["arcs"]}
    assert labels[("ate", "dobj", "mat")] == 0
    assert "The cat sat." not in by_hyp  # not among the bottom 2


def test_augmentations_label_changed_arcs(nlp):
    import random

    from training.dae.make_data import sentence_examples

    sents = ["Marie Curie won the Nobel Prize in Physics in 1903 with her husband Pierre.",
             "The river flows through the old city of Prague before it reaches the sea."]
    exs = sentence_examples(nlp, sents * 3, "test", random.Random(0), {"NNP": ["London"], "NN": ["table"]}, ops_per_sentence=16, lowercase_rate=0.0)
    kinds = {e["kind"] for e in exs}
    assert {"identity", "swap-within", "hallucination"} <= kinds
    for e in exs:
        if e["kind"] == "identity":
            assert e["hypothesis"] == e["source"] and all(a[3] == 1 for a in e["arcs"])
        if e["kind"] in ("swap-within", "swap-corpus", "negation", "hallucination"):
            assert any(a[3] == 0 for a in e["arcs"]), e
        if e["kind"] == "compress":  # a faithful rewrite: every arc labelled, and entailed
            assert all(a[3] == 1 for a in e["arcs"]) and len(e["arcs"]) == len(doc_arcs(nlp(e["hypothesis"]))), e


def test_negation_deletion_and_pronoun_swap(nlp):
    import random

    from training.dae.make_data import delete_negation, sentence_examples, swap_pronoun

    for seed in range(4):
        text, offset = delete_negation(nlp("He can't prove that she did not steal it."), random.Random(seed))
        assert (text, text[offset:offset + 5]) in (("He can prove that she did not steal it.", "prove"),
                                                    ("He can't prove that she did steal it.", "steal"))
    text, offset = delete_negation(nlp("The organisms cannot be sealed."), random.Random(0))
    assert text == "The organisms can be sealed." and text[offset:].startswith("sealed")
    assert delete_negation(nlp("She stole it."), random.Random(0)) is None
    assert swap_pronoun(nlp("She gave him her book."), random.Random(1)) in ("He gave him her book.", "She gave her her book.", "She gave him his book.")
    exs = sentence_examples(nlp, ["Migrants must prove they have not committed a crime in ten years."] * 4, "test", random.Random(0), {},
                            ops_per_sentence=20, lowercase_rate=0.0)
    deleted = [e for e in exs if e["kind"] == "negation-delete"]
    assert deleted
    for e in deleted:
        labels = {(e["words"][a[0]], a[2], e["words"][a[1]]): a[3] for a in e["arcs"]}
        assert labels[("committed", "nsubj", "they")] == 0 and labels[("prove", "nsubj", "Migrants")] == 1


def test_negation_insertion_labels_the_negated_word(nlp):
    import random

    from training.dae.make_data import insert_negation, sentence_examples

    text, offset = insert_negation(nlp("The shop is cheap."), random.Random(0))
    assert text == "The shop is not cheap." and text[offset:offset + 3] == "not"
    exs = sentence_examples(nlp, ["The old shop is cheap and family friendly."] * 4, "test", random.Random(0), {},
                            ops_per_sentence=20, lowercase_rate=0.0)
    inserted = [e for e in exs if e["kind"] == "negation"]
    assert inserted
    for e in inserted:  # every arc of the negated word is not entailed, the others are
        labels = {(e["words"][a[0]], a[2], e["words"][a[1]]): a[3] for a in e["arcs"]}
        assert labels[("is", "neg", "not")] == 0 and labels[("is", "nsubj", "shop")] == 0
        assert labels[("shop", "amod", "old")] == 1


def test_argument_deletion(nlp):
    import random

    from training.dae.make_data import argument_deletion, sentence_examples, subtree_deletions

    text, offset = argument_deletion(nlp("The thousands of chickens live together in huge sheds."), random.Random(0))
    assert text == "The thousands live together in huge sheds." and text[offset:].startswith("thousands")
    text, offset = argument_deletion(nlp("The coach wants England to be more ruthless in attack."), random.Random(0))
    assert text == "The coach wants." and text[offset:].startswith("wants"), text  # "England" is the subject of "be"
    text, offset = argument_deletion(nlp("The minister tried to leave the party early on Monday."), random.Random(0))
    assert text == "The minister tried." and text[offset:].startswith("tried"), text
    assert argument_deletion(nlp("The dog barked."), random.Random(0)) is None
    # a compression never drops a partitive "of": that is the harmful deletion above
    doc = nlp("The thousands of chickens live together in huge sheds.")
    assert all("thousands live" not in t for t in subtree_deletions(doc, random.Random(0), k=20))
    exs = sentence_examples(nlp, ["The thousands of chickens live together in huge sheds near the old farm."] * 4, "test",
                            random.Random(0), {}, ops_per_sentence=20, lowercase_rate=0.0)
    deleted = [e for e in exs if e["kind"] == "argument-delete"]
    assert deleted
    for e in deleted:
        labels = {(e["words"][a[0]], a[2], e["words"][a[1]]): a[3] for a in e["arcs"]}
        assert labels[("live", "nsubj", "thousands")] == 0 and labels[("sheds", "amod", "huge")] == 1


def test_rerank_triples_pair_faithful_with_unfaithful():
    from training.dae.train import rerank_triples

    def ex(kind, hyp, labels, group="g1"):
        return {"group": group, "source": "S " + group, "hypothesis": hyp, "kind": kind, "arcs": [[0, 1, "nsubj", y] for y in labels]}

    rows = [ex("compress", "good", [1, 1]), ex("swap-within", "bad", [1, 0]), ex("compress", "odd", [1, 0]),
            ex("identity", "same", [1]), ex("span-delete", "bad2", [0], group="g2")]
    assert rerank_triples(rows) == [("S g1", "good", "bad", "swap-within")]  # g2 has no faithful rewrite


def test_train_smoke(tiny_encoder, tmp_path, nlp):
    from metrics.dae.scorer import DAEScorer
    from training.dae import train

    data = tmp_path / "data"
    data.mkdir()
    write_dae_training_data(data, nlp)
    out = tmp_path / "ck"
    assert train.main(["--data", str(data), "--out", str(out), "--base", tiny_encoder, "--batch-size", "4", "--lora-r", "2",
                       "--encoder-loss", "0.5"]) == 0
    scorer = DAEScorer(str(out), spacy_model=nlp, device="cpu")
    assert scorer.meta["kind"] == ARC_MODEL_KIND and "accuracy" in scorer.meta["dev"]
    assert scorer.meta["arc_features"] == list(ARC_FEATURES) and 0.0 <= scorer.meta["rerank_dev"]["mean"] <= 1.0
    assert len(scorer.score(["The cat sat on the mat."], ["The dog sat."])[0]["arcs"]) == 1


def test_encoder_only_logits_drop_the_feature_share():
    import torch

    from metrics.dae.model import make_arc_head
    from training.dae.train import encoder_only_logits

    torch.manual_seed(0)
    head = make_arc_head(8, num_features=3)
    h, c, r = torch.randn(5, 8), torch.randn(5, 8), torch.tensor([0, 1, 2, 3, 4])
    feats = torch.rand(5, 3)
    expected = head(h, c, r, torch.zeros(5, 3))
    assert not torch.allclose(head(h, c, r, feats), expected)
    assert torch.allclose(encoder_only_logits(head, head(h, c, r, feats), feats), expected, atol=1e-6)


# ---------------------------------------------------------------- data-to-text arcs (make_d2t_data)


def _labels(e):
    return {(e["words"][a[0]], a[2], e["words"][a[1]]): a[3] for a in e["arcs"]}


def _d2t_example(nlp, source, text, changed):
    from metrics.dae.arcs import arc_keys, doc_arcs
    from training.dae.make_d2t_data import example

    return example(source, nlp(text), changed, "t", "t", "g", arc_keys(doc_arcs(nlp(source))))


def test_d2t_swap_and_number_mark_exactly_the_changed_arcs(nlp):
    import random

    from d2t_metrics.tables import parse_table
    from training.dae.make_d2t_data import alter_number, swap_value, table_source

    table = parse_table(["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | birthYear | 1932"])
    source = table_source(table)
    assert "Wheeler, Texas" in source and "1932" in source  # the metric's own verbalization
    ref = "Alan Bean was born in Wheeler, Texas in 1932."
    pools = {("object", "birthPlace"): ["Boston", "Wheeler, Texas"]}
    text, changed = swap_value(ref, table, pools, random.Random(0))
    assert text == "Alan Bean was born in Boston in 1932." and text[changed[0][0]:changed[0][1]] == "Boston"
    labels = _labels(_d2t_example(nlp, source, text, changed))
    assert {k for k, y in labels.items() if y == 0} == {("born", "prep:in", "Boston")}, labels
    assert labels[("Bean", "compound", "Alan")] == 1
    text, changed = alter_number(ref, source, random.Random(0))
    new_year = text[changed[0][0]:changed[0][1]]
    assert new_year != "1932" and len(new_year) == 4 and text.replace(new_year, "1932") == ref
    labels = _labels(_d2t_example(nlp, source, text, changed))
    assert [k for k, y in labels.items() if y == 0] == [k for k in labels if new_year in k], labels
    assert len([y for y in labels.values() if y == 0]) == 1
    assert swap_value("Bean flew to the Moon.", table, pools, random.Random(0)) is None  # nothing of the table mentioned


def test_d2t_role_swap_marks_the_arcs_of_the_two_moved_mentions(nlp):
    from d2t_metrics.tables import parse_table
    from training.dae.make_d2t_data import swap_roles, table_source

    table = parse_table(["FC_Dinamo_Batumi | manager | Levan_Khomeriki", "Levan_Khomeriki | birthYear | 1971"])
    source = table_source(table)
    ref = "The manager of FC Dinamo Batumi is Levan Khomeriki, born in 1971."
    text, changed = swap_roles(ref, table)
    assert text == "The manager of Levan Khomeriki is FC Dinamo Batumi, born in 1971."
    assert [text[a:b] for a, b in changed] == ["Levan Khomeriki", "FC Dinamo Batumi"]
    labels = _labels(_d2t_example(nlp, source, text, changed))
    wrong = {k for k, y in labels.items() if y == 0}
    assert wrong and all(any(w in " ".join(k) for w in ("Khomeriki", "Batumi", "Levan", "FC", "Dinamo")) for k in wrong), labels
    assert all(y == 1 for k, y in labels.items() if "1971" in k[2])  # the untouched fact's arc stays entailed
    # literals, symmetric predicates and a lone mention give no swap
    assert swap_roles("Levan Khomeriki was born in 1971.", parse_table(["Levan_Khomeriki | birthYear | 1971"])) is None
    assert swap_roles("Ann Lee married Bob Lee.", parse_table(["Ann_Lee | spouse | Bob_Lee"])) is None
    assert swap_roles("He manages FC Dinamo Batumi.", table) is None


def test_d2t_append_and_drop(nlp):
    import random

    from d2t_metrics.tables import parse_table
    from training.dae.make_d2t_data import append_fact, drop_fact, table_source

    table = parse_table(["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot"])
    source = table_source(table)
    ref = "Alan Bean was born in Wheeler, Texas"
    text, changed = append_fact(ref, "Alan Bean walked on the Moon.")
    assert text == "Alan Bean was born in Wheeler, Texas. Alan Bean walked on the Moon."
    labels = _labels(_d2t_example(nlp, source, text, changed))
    assert labels[("walked", "prep:on", "Moon")] == 0 and labels[("walked", "nsubj", "Bean")] == 0
    # the appended sentence's "Alan Bean" is an arc of the source: still entailed
    assert labels[("born", "prep:in", "Wheeler")] == 1 and all(y == 1 for k, y in labels.items() if k == ("Bean", "compound", "Alan"))
    ref = "Alan Bean, a test pilot, was born in Wheeler, Texas."
    smaller, changed = drop_fact(ref, table, random.Random(0))
    assert len(smaller) == 1
    dropped_value = ref[changed[0][0]:changed[0][1]]
    assert dropped_value.lower() in ("wheeler, texas", "test pilot") and dropped_value.lower() not in table_source(smaller).lower()
    labels = _labels(_d2t_example(nlp, table_source(smaller), ref, changed))
    zero = {k for k, y in labels.items() if y == 0}
    assert zero and all(any(w in dropped_value for w in (k[0], k[2])) for k in zero), labels
    assert drop_fact("Alan Bean was born.", table, random.Random(0)) is None


def test_d2t_build_and_train_step(tiny_encoder, tmp_path, nlp):
    """Data from two tables (references and corruptions, one split each way) trains a tiny model end to end."""
    import json
    import random
    from collections import Counter

    from d2t_metrics.tables import parse_table
    from metrics.dae.scorer import DAEScorer
    from training.dae import train
    from training.dae.make_d2t_data import build, value_pools

    class Entry:
        def __init__(self, rows, refs):
            self.table, self.lexicalizations = parse_table(rows), refs

    entries = [Entry(["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | birthYear | 1932"],
                     ["Alan Bean was born in Wheeler, Texas in 1932.", "Born in 1932, Alan Bean is from Wheeler, Texas."]),
               Entry(["Elliot_See | birthPlace | Dallas", "Elliot_See | birthYear | 1927"],
                     ["Elliot See was born in Dallas in 1927."])]
    counts = Counter()
    rows = build(entries, "t", nlp, random.Random(0), 2, value_pools(entries), ({}, []), "train", counts)
    kinds = Counter(e["kind"] for e in rows)
    assert kinds["d2t-ref"] == 3 and sum(kinds.values()) > 3 and counts[("train", "arcs")] == sum(len(e["arcs"]) for e in rows)
    assert all(any(a[3] == 0 for a in e["arcs"]) for e in rows if e["kind"] != "d2t-ref")
    assert all(all(a[3] == 1 for a in e["arcs"]) for e in rows if e["kind"] == "d2t-ref")
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "dev"):
        (data / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "ck"
    assert train.main(["--data", str(data), "--out", str(out), "--base", tiny_encoder, "--batch-size", "4", "--lora-r", "2"]) == 0
    scorer = DAEScorer(str(out), spacy_model=nlp, device="cpu")
    # one reference-against-corruption pair per table whose corruption kept its source (a dropped fact changes it)
    assert scorer.meta["training"]["steps"] == 2 and 1 <= scorer.meta["rerank_dev"]["pairs"] <= 2


def test_head_only_training_keeps_the_encoder(tiny_encoder, tmp_path, nlp):
    """--head-only encodes the arcs once and fits only the head: the adapters stay the --init ones."""
    from safetensors.torch import load_file

    from metrics.dae.scorer import DAEScorer
    from training.dae import train

    data = tmp_path / "data"
    data.mkdir()
    write_dae_training_data(data, nlp)
    first, second = tmp_path / "first", tmp_path / "second"
    assert train.main(["--data", str(data), "--out", str(first), "--base", tiny_encoder, "--batch-size", "4", "--lora-r", "2"]) == 0
    assert train.main(["--data", str(data), "--out", str(second), "--base", tiny_encoder, "--batch-size", "4", "--lora-r", "2",
                       "--init", str(first), "--head-only", "--head-epochs", "5"]) == 0
    a, b = (load_file(str(p / "adapter_model.safetensors")) for p in (first, second))
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)
    ha, hb = (load_file(str(p / "arc_head.safetensors")) for p in (first, second))
    assert not bool((ha["arc_head.weight"] == hb["arc_head.weight"]).all())
    scorer = DAEScorer(str(second), spacy_model=nlp, device="cpu")
    assert scorer.meta["training"]["head_only"] and "accuracy" in scorer.meta["dev"]
