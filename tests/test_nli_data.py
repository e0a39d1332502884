"""Training-data builders of the NLI model (training/nli_semantic_accuracy/nli_data.py)."""

import random
import re

import pytest

from d2t_metrics.tables import Triple
from training.nli_semantic_accuracy.nli_data import (
    CONTRADICTION,
    ENTAILMENT,
    NEUTRAL,
    Pair,
    SyntheticBuilder,
    e2e_same_value,
    e2e_slot_mentioned,
    subsample,
)


def backoff(t):
    return f"The {t.predicate} of {t.subject} is {t.object}."


@pytest.mark.parametrize(
    "predicate,a,b,same",
    [
        ("priceRange", "cheap", "less than £20", True),
        ("priceRange", "more than £30", "high", True),
        ("priceRange", "cheap", "high", False),
        ("customer rating", "5 out of 5", "high", True),
        ("customer rating", "1 out of 5", "average", False),
        ("food", "Italian", "italian", True),
        ("food", "Italian", "French", False),
    ],
)
def test_e2e_same_value_links_the_two_scales(predicate, a, b, same):
    assert e2e_same_value(predicate, a, b) is same


def test_e2e_slot_cues_accept_either_scale():
    assert e2e_slot_mentioned("priceRange", "less than £20", "A cheap pub.")
    assert e2e_slot_mentioned("priceRange", "high", "Meals cost more than £30.")
    assert not e2e_slot_mentioned("priceRange", "cheap", "An expensive pub.")
    # A rating needs rating context: "low" alone could be anything.
    assert e2e_slot_mentioned("customer rating", "1 out of 5", "It has a low customer rating.")
    assert not e2e_slot_mentioned("customer rating", "1 out of 5", "It has low prices.")
    assert e2e_slot_mentioned("familyFriendly", "yes", "Kids are welcome.")


def _e2e_records():
    def mr(name, **slots):
        return tuple(Triple(name, k, v) for k, v in slots.items())

    return [
        (mr("Aromi", priceRange="cheap", area="riverside"), ["Aromi is a cheap place in the riverside area."]),
        (mr("Aromi", priceRange="less than £20", food="Italian"), ["Aromi serves Italian food for less than £20."]),
        (mr("Aromi", priceRange="high", near="Café Rouge"), ["Aromi is an expensive place near Café Rouge."]),
        (mr("Bibimbap", priceRange="moderate", area="city centre"), ["Bibimbap has moderate prices in the city centre."]),
    ]


def test_swapped_object_is_never_the_same_value_on_the_other_scale():
    builder = SyntheticBuilder(_e2e_records(), backoff, random.Random(0), "e2e", e2e_same_value)
    cheap = Triple("Aromi", "priceRange", "cheap")
    found = [builder.other_object(cheap) for _ in range(200)]
    assert {"high", "moderate"} <= set(found)
    assert not any(o is not None and e2e_same_value("priceRange", o, "cheap") for o in found)


def test_pairs_cover_both_directions_with_sound_labels():
    records = _e2e_records()
    builder = SyntheticBuilder(records, backoff, random.Random(1), "e2e", e2e_same_value)
    pairs = [p for facts, texts in records for _ in range(20) for p in builder.pairs_for(facts, texts[0])]
    kinds = {p.source.split(":")[1] for p in pairs}
    assert {"fact_entailed", "text_entailed", "text_entailed_extra_fact", "text_fact_dropped"} <= kinds
    for p in pairs:
        kind = p.source.split(":")[1]
        if kind.endswith("entailed") or kind == "text_entailed_extra_fact":
            assert p.label == ENTAILMENT
        else:
            assert p.label in (NEUTRAL, CONTRADICTION), p
    # The added fact is about the same venue, of a slot the text doesn't have, and not mentioned in it.
    for p in pairs:
        if p.source == "e2e:text_entailed_extra_fact":
            own = next(facts for facts, texts in records if texts[0] == p.hypothesis)
            assert len(p.premise.split(". ")) == len(own) + 1
            assert all(f"The {t.predicate} of" in p.premise for t in own)


def test_subsample_keeps_whole_sources_by_prefix():
    pairs = [Pair("p", "h", 2, "sick")] * 3 + [Pair("p", "h", 2, "e2e:x")] * 5 + [Pair("p", "h", 2, "webnlg:y")] * 50
    out = subsample(pairs, 20, random.Random(0), keep_sources=("sick", "e2e"))
    assert len(out) == 20
    assert sum(p.source == "sick" for p in out) == 3
    assert sum(p.source.startswith("e2e") for p in out) == 5


def test_subsample_caps_a_source_before_sampling_the_rest():
    pairs = ([Pair("p", "h", 2, "sick")] * 3 + [Pair("p", "h", 2, f"e2e:{i}") for i in range(40)]
             + [Pair("p", "h", 2, f"webnlg3:{i}") for i in range(50)])
    out = subsample(pairs, 0, random.Random(0), source_caps={"e2e": 10, "webnlg3": 60})
    counts = {s: sum(p.source.split(":")[0] == s for p in out) for s in ("sick", "e2e", "webnlg3")}
    assert counts == {"sick": 3, "e2e": 10, "webnlg3": 50}  # a cap above a source's size keeps it whole
    assert len({p.source for p in out if p.source.startswith("e2e")}) == 10  # sampled without repeats


def _webnlg_records():
    return [
        ((Triple("FC_Dinamo_Batumi", "manager", "Levan_Khomeriki"), Triple("Aleksandre_Guruli", "club", "FC_Dinamo_Batumi")),
         ["The manager of FC Dinamo Batumi is Levan Khomeriki. Aleksandre Guruli plays for FC Dinamo Batumi."]),
        ((Triple("Ann_Lee", "spouse", "Bob_Lee"),), ["Ann Lee is married to Bob Lee."]),
    ]


def test_role_swaps_add_the_swapped_text_as_a_negative_in_both_directions_and_change_nothing_else():
    records = _webnlg_records()

    def pairs(role_swaps):
        builder = SyntheticBuilder(records, backoff, random.Random(3), "webnlg", role_swaps=role_swaps)
        return [p for _ in range(10) for facts, texts in records for p in builder.pairs_for(facts, texts[0])]

    plain, with_swaps = pairs(False), pairs(True)
    added = [p for p in with_swaps if "roles_swapped" in p.source]
    # the same random draws: the other pairs are those built without the option, in order
    assert [p for p in with_swaps if "roles_swapped" not in p.source] == plain
    assert not any("roles_swapped" in p.source for p in plain)
    kinds = {p.source: p.label for p in added}
    assert kinds == {"webnlg:text_roles_swapped_vs_fact": NEUTRAL, "webnlg:text_roles_swapped": CONTRADICTION}
    for p in added:
        swapped = p.premise if p.source.endswith("vs_fact") else p.hypothesis
        original = records[0][1][0]
        assert swapped != original and sorted(re.findall(r"\w+", swapped)) == sorted(re.findall(r"\w+", original))  # two names moved
    # a symmetric predicate's swap says the same: no negative from it
    assert not any("Ann Lee" in p.premise + p.hypothesis for p in added)
