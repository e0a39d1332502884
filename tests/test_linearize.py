"""Linearization, in particular the exact Data-QuestEval input format.

The expected strings were produced by the reference (``LinearizeWebnlgInput``
with spaCy's ``en_core_web_sm`` and ``linearize_e2e_input`` in
ThomasScialom/QuestEval ``questeval/utils.py``) on these inputs.
"""

import doctest
import importlib

import pytest

from d2t_metrics import Triple, parse_table
from d2t_metrics.linearize import (
    linearize,
    linearize_all,
    linearize_slots_questeval,
    linearize_triples_questeval,
    questeval_clean_predicate,
    spacy_tokenize,
)

# The package binds the names linearize/verbalize to the functions; the modules:
linearize_module = importlib.import_module("d2t_metrics.linearize")

# (triples, reference output, reference output with lowercase=True)
QUESTEVAL_WEBNLG = [
    (
        ["(29075)_1950_da | discoverer | carl_a._wirtanen"],
        "entity [ ( 29075 ) 1950 da ] , discoverer [ carl a. wirtanen ]",
        "entity [ ( 29075 ) 1950 da ] , discoverer [ carl a. wirtanen ]",
    ),
    (
        ["(15788)_1993_SB | discoverer | Donal_O'Ceallaigh", "(15788)_1993_SB | epoch | 2006-03-06"],
        "entity [ ( 15788 ) 1993 SB ] , discoverer [ Donal O'Ceallaigh ] , epoch [ 2006 - 03 - 06 ]",
        "entity [ ( 15788 ) 1993 sb ] , discoverer [ donal o'ceallaigh ] , epoch [ 2006 - 03 - 06 ]",
    ),
    (
        [
            "1036_Ganymed | discoverer | Walter_Baade",
            "Walter_Baade | deathPlace | Göttingen",
            "Walter_Baade | birthPlace | German_Empire",
            "Walter_Baade | almaMater | University_of_Göttingen",
            "Walter_Baade | doctoralStudent | Allan_Sandage",
        ],
        "entity [ 1036 Ganymed ] , discoverer [ Walter Baade ] , entity [ Walter Baade ] , deathPlace [ Gottingen ] , "
        "birthPlace [ German Empire ] , almaMater [ University of Gottingen ] , doctoralStudent [ Allan Sandage ]",
        "entity [ 1036 ganymed ] , discoverer [ walter baade ] , entity [ walter baade ] , deathPlace [ gottingen ] , "
        "birthPlace [ german empire ] , almaMater [ university of gottingen ] , doctoralStudent [ allan sandage ]",
    ),
    (
        ['William_Anders | status | "Retired"', 'William_Anders | almaMater | "AFIT, M.S. 1962"'],
        "entity [ William Anders ] , status [ Retired ] , almaMater [ AFIT , M.S. 1962 ]",
        "entity [ william anders ] , status [ retired ] , almaMater [ afit , m.s . 1962 ]",
    ),
    (
        ["(410777)_2009_FD | apoapsis | 259776702.47055 (kilometres)"],
        "entity [ ( 410777 ) 2009 FD ] , apoapsis [ 259776702.47055 ( kilometres ) ]",
        "entity [ ( 410777 ) 2009 fd ] , apoapsis [ 259776702.47055 ( kilometres ) ]",
    ),
    (
        ["Kerala | leaderName | Kochi", "AWH_Engineering_College | state | Kerala"],
        "entity [ Kerala ] , leaderName [ Kochi ] , entity [ AWH Engineering College ] , state [ Kerala ]",
        "entity [ kerala ] , leaderName [ kochi ] , entity [ awh engineering college ] , state [ kerala ]",
    ),
    (
        # Triples of one subject are grouped even when not adjacent; predicates
        # lose "( … )" spans and get underscores; entities are transliterated.
        [
            'São_Paulo | height_(in_metres) | "12.5"',
            "Ærø | ethnicgroup | A_in_B",
            "Alan_Bean | birthPlace | Wheeler,_Texas",
            "Ærø | was a crew member of | X",
            'Alan_Bean | "quoted" | "x"y"',
        ],
        "entity [ Sao Paulo ] , height_ [ 12.5 ] , entity [ AEro ] , ethnicgroup [ A in B ] , was_a_crew_member_of [ X ] , "
        'entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ] , quoted [ x"y ]',
        "entity [ sao paulo ] , height_ [ 12.5 ] , entity [ aero ] , ethnicgroup [ a in b ] , was_a_crew_member_of [ x ] , "
        'entity [ alan bean ] , birthPlace [ wheeler , texas ] , quoted [ x"y ]',
    ),
]


@pytest.mark.parametrize("triples,expected,expected_lower", QUESTEVAL_WEBNLG, ids=range(len(QUESTEVAL_WEBNLG)))
def test_questeval_webnlg_matches_reference(triples, expected, expected_lower):
    assert linearize(triples) == expected
    assert linearize(triples, lowercase=True) == expected_lower
    # The same table in any other form linearizes the same.
    assert linearize("<br>".join(triples)) == expected
    assert linearize([t.split(" | ") for t in triples]) == expected


@pytest.mark.parametrize(
    "mr,expected",
    [
        ("name[The Eagle], eatType[coffee shop], food[Japanese]", "name [ The Eagle ] , eatType [ coffee shop ] , food [ Japanese ]"),
        (
            "name[Blue Spice], priceRange[£20-25], customer rating[3 out of 5], familyFriendly[yes], near[Burger King]",
            "name [ Blue Spice ] , priceRange [ £20-25 ] , customer rating [ 3 out of 5 ] , familyFriendly [ yes ] , near [ Burger King ]",
        ),
        # The reference builds a dict: a repeated slot keeps its first place and its last value.
        ("name[The Eagle], eatType[coffee shop], name[Other]", "name [ Other ] , eatType [ coffee shop ]"),
    ],
)
def test_questeval_e2e_matches_reference(mr, expected):
    assert linearize(mr) == expected


def test_attribute_value_tables_keep_repeats():
    table = [["name", "Jane Doe"], ["occupation", "actor"], ["occupation", "singer"]]
    assert linearize(table) == "name [ Jane Doe ] , occupation [ actor ] , occupation [ singer ]"
    assert linearize_slots_questeval([("a", "1"), ("a", "2")]) == "a [ 2 ]"


def test_tokenization_options():
    triples = [Triple("Alan_Bean", "birthPlace", "Wheeler,_Texas")]
    assert linearize_triples_questeval(triples, tokenize=None) == "entity [ Alan Bean ] , birthPlace [ Wheeler, Texas ]"
    assert linearize_triples_questeval(triples, tokenize=lambda s: list(s.replace(" ", ""))[:3]) == "entity [ A l a ] , birthPlace [ W h e ]"
    assert spacy_tokenize("(29075) 1950 DA") == ["(", "29075", ")", "1950", "DA"]
    with pytest.raises(ValueError, match="tokenize must be"):
        linearize_triples_questeval(triples, tokenize="nltk")


def test_predicate_cleaning():
    assert questeval_clean_predicate("elevationAboveTheSeaLevel_(in_metres)") == "elevationAboveTheSeaLevel_"
    assert questeval_clean_predicate("ReferenceNumber in the National Register of Historic Places") == (
        "ReferenceNumber_in_the_National_Register_of_Historic_Places"
    )


def test_other_styles():
    table = parse_table("Alan_Bean | birthPlace | Wheeler,_Texas<br>Alan_Bean | occupation | Test_pilot")
    assert linearize(table, style="tags") == "<H> Alan Bean <R> birth place <T> Wheeler, Texas <H> Alan Bean <R> occupation <T> Test pilot"
    assert linearize(table, style="plain") == "Alan_Bean | birthPlace | Wheeler,_Texas<br>Alan_Bean | occupation | Test_pilot"
    assert linearize("name[The Eagle], area[riverside]", style="tags") == "<H> The Eagle <R> area <T> riverside"
    with pytest.raises(ValueError, match="unknown linearization style 'json'"):
        linearize(table, style="json")


def test_bad_tables_name_their_index():
    with pytest.raises(ValueError, match=r"^example 1: malformed triple 'A \| p'"):
        linearize_all(["A | p | B", "A | p"])
    with pytest.raises(ValueError, match="^example 0: table is None"):
        linearize_all([None])


def test_doctests():
    result = doctest.testmod(linearize_module)
    assert result.attempted >= 5 and result.failed == 0
