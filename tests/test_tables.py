"""Table parsers, normalization and data loaders."""

import csv
import json
import os
import sys
import time

import pytest

from d2t_metrics import (
    AttributeValue,
    Table,
    Triple,
    check_references,
    check_texts,
    normalize_entity,
    normalize_predicate,
    parse_mr,
    parse_table,
    parse_tables,
    parse_triple,
    split_camel_case,
)
from d2t_metrics.datasets import iter_tsv, load_e2e_csv, load_webnlg_xml
from d2t_metrics.tables import ATTRIBUTE_VALUE, E2E_MR, TRIPLES

# ---------------------------------------------------------------------------
# Parsing each form


def test_triple_string():
    t = parse_triple("Alan_Bean | birthPlace | Wheeler,_Texas")
    assert t == Triple("Alan_Bean", "birthPlace", "Wheeler,_Texas")
    assert str(t) == "Alan_Bean | birthPlace | Wheeler,_Texas"


def test_br_joined_string_as_in_human_eval():
    text = 'Alan_Bean | almaMater | "UT Austin, B.S. 1955"<br>Alan_Bean | birthPlace | Wheeler,_Texas'
    table = parse_table(text)
    assert table.kind == TRIPLES
    # Raw strings are kept exactly, quotes included.
    assert table.entries == (
        Triple("Alan_Bean", "almaMater", '"UT Austin, B.S. 1955"'),
        Triple("Alan_Bean", "birthPlace", "Wheeler,_Texas"),
    )
    assert parse_table("A | p | B<br/>A | q | C\nA | r | D").to_strings() == ["A | p | B", "A | q | C", "A | r | D"]


def test_lists_of_triples_in_every_shape():
    expected = Table([Triple("A", "p", "B"), Triple("A", "q", "C")])
    assert parse_table(["A | p | B", "A | q | C"]) == expected
    assert parse_table([["A", "p", "B"], ("A", "q", "C")]) == expected
    assert parse_table([Triple("A", "p", "B"), Triple("A", "q", "C")]) == expected
    assert parse_table([{"subject": "A", "predicate": "p", "object": "B"}, {"subject": "A", "predicate": "q", "object": "C"}]) == expected
    assert parse_table({"triples": ["A | p | B", "A | q | C"]}) == expected
    assert parse_table({"subject": "A", "predicate": "p", "object": "B"}) == Table([Triple("A", "p", "B")])


def test_e2e_mr_name_is_subject():
    table = parse_table("name[The Eagle], eatType[coffee shop], customer rating[5 out of 5]")
    assert table.kind == E2E_MR
    assert table.entries == (
        AttributeValue("name", "The Eagle"),
        AttributeValue("eatType", "coffee shop"),
        AttributeValue("customer rating", "5 out of 5"),
    )
    assert table.subject() == "The Eagle"
    assert table.to_triples() == [
        Triple("The Eagle", "eatType", "coffee shop"),
        Triple("The Eagle", "customer rating", "5 out of 5"),
    ]
    assert table.to_triples(keep_name=True)[0] == Triple("The Eagle", "name", "The Eagle")


def test_e2e_mr_quoted_as_in_tnt_outputs_and_values_with_commas():
    assert parse_mr("'name[Blue Spice], area[riverside]'") == parse_mr("name[Blue Spice], area[riverside]")
    assert parse_mr("name[Café, Bar], near[X]").entries[0] == AttributeValue("name", "Café, Bar")


def test_attribute_value_lists_and_dicts():
    pairs = [["Born", "December 22, 1965"], ["Occupation", "actor"]]
    table = parse_table(pairs)
    assert table.kind == ATTRIBUTE_VALUE
    assert table.entries == (AttributeValue("Born", "December 22, 1965"), AttributeValue("Occupation", "actor"))
    assert parse_table({"Born": "December 22, 1965", "Occupation": "actor"}) == table
    assert parse_table([{"attribute": "Born", "value": "December 22, 1965"}, {"attribute": "Occupation", "value": "actor"}]) == table
    # A list value gives one record per item; numbers become strings.
    multi = parse_table({"name": "Jane Doe", "occupation": ["actor", "singer"], "years": 12})
    assert multi.entries == (
        AttributeValue("name", "Jane Doe"),
        AttributeValue("occupation", "actor"),
        AttributeValue("occupation", "singer"),
        AttributeValue("years", "12"),
    )
    assert multi.to_triples()[0] == Triple("Jane Doe", "occupation", "actor")
    # Without a name slot the subject is given, or "it".
    assert table.to_triples()[0].subject == "it"
    assert table.to_triples(subject="Ralph Fiennes")[1] == Triple("Ralph Fiennes", "Occupation", "actor")


def test_table_passthrough_and_name_only_table():
    table = parse_table("A | p | B")
    assert parse_table(table) is table
    only_name = parse_table("name[The Eagle]")
    assert only_name.to_triples() == [Triple("The Eagle", "name", "The Eagle")]


# ---------------------------------------------------------------------------
# Round trips: parse -> string/plain form -> parse gives an equal table

ROUND_TRIP_INPUTS = [
    "Alan_Bean | birthPlace | Wheeler,_Texas",
    'Alan_Bean | almaMater | "UT Austin, B.S. 1955"<br>Alan_Bean | birthPlace | Wheeler,_Texas',
    ["São_Paulo | country | Brazil", "São_Paulo | leaderName | \"João Doria\""],
    [["A", "p", "B"], ["A", "q", "C"]],
    [{"subject": "A", "predicate": "p", "object": "B"}],
    "name[The Eagle], eatType[coffee shop], customer rating[5 out of 5], near[Burger King]",
    "'name[Blue Spice], priceRange[less than £20]'",
    [["Born", "December 22, 1965"], ["Occupation", "actor"]],
    {"name": "Jane Doe", "occupation": ["actor", "singer"]},
    [{"attribute": "Born", "value": "1965"}],
]


@pytest.mark.parametrize("raw", ROUND_TRIP_INPUTS, ids=range(len(ROUND_TRIP_INPUTS)))
def test_round_trip_to_obj(raw):
    table = parse_table(raw)
    again = parse_table(table.to_obj())
    assert again == table
    # The plain form survives JSON, as in a JSONL input file.
    assert parse_table(json.loads(json.dumps(table.to_obj()))) == table


@pytest.mark.parametrize("raw", [r for r in ROUND_TRIP_INPUTS if parse_table(r).kind != ATTRIBUTE_VALUE])
def test_round_trip_str(raw):
    table = parse_table(raw)
    assert parse_table(str(table)) == table
    if table.kind == TRIPLES:
        assert parse_table(table.to_strings()) == table


def test_round_trip_triple_with_pipe_in_a_member():
    table = parse_table([["A", "p", "x | y"]])
    assert table.to_obj() == [["A", "p", "x | y"]]
    assert parse_table(table.to_obj()) == table


def test_round_trip_every_human_eval_mr(shared):
    with open(os.path.join(shared, "data", "webnlg2017", "human_eval.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2230
    n_triples = 0
    for i, row in enumerate(rows):
        table = parse_table(row["mr"], i)
        assert parse_table(str(table)) == table
        assert parse_table(table.to_obj()) == table
        assert len(table) == row["mr"].count("<br>") + 1
        n_triples += len(table)
    assert n_triples == sum(int(r["triplesize"][0]) for r in rows)


# ---------------------------------------------------------------------------
# Bad input: a ValueError that names the example index and the offending string

GOOD = "A | p | B"
BAD_TABLES = [
    # (bad table, a fragment the message must contain)
    ("A | p", "'A | p'"),  # one separator
    ("A | p | B | C", "found 3"),  # three separators
    (" | p | B", "non-empty"),  # empty subject
    ("A | p | B<br>A | q", "'A | q'"),  # one bad triple among good ones
    ("Alan Bean was born in Texas", "malformed triple"),  # free text
    ("name[The Eagle", "malformed E2E"),  # unclosed bracket
    ("name[The Eagle], eatType[]", "empty value"),  # empty slot value
    ("name[The Eagle] eatType[pub]", "expected ',' after 'name[The Eagle]', found 'eatType[pub]'"),  # missing comma
    ("name[The Eagle], ", "trailing ','"),
    ("name[The Eagle], [pub]", "near '[pub]'"),  # slot without a name
    (None, "table is None"),
    ("", "empty table"),
    ("   ", "empty table"),
    ([], "empty table"),
    ({}, "empty table"),
    ([None], "entry is None"),
    ([["A", "p", "B", "C"]], "4 members"),
    ([("A", "p", "B"), ("Born", "1965")], "mixes triples and attribute-value pairs"),
    ([(1, 2, 3)], "three strings"),
    ([("A", "", "B")], "empty member"),
    ([("", "1965")], "empty attribute"),
    ([("Born", None)], "must be (str, str)"),
    (42, "cannot read a table from int"),
    ([3.5], "cannot read table entry 3.5"),
    ([{"subj": "A"}], "cannot read table entry"),
]


@pytest.mark.parametrize("bad,fragment", BAD_TABLES, ids=[repr(b)[:30] for b, _ in BAD_TABLES])
def test_bad_table_names_index_and_string(bad, fragment):
    with pytest.raises(ValueError) as info:
        parse_tables([GOOD, GOOD, GOOD, bad], n=4)
    message = str(info.value)
    assert message.startswith("example 3: "), message
    assert fragment in message, message


def test_bad_table_count():
    with pytest.raises(ValueError, match="got 3 predictions but 2 tables"):
        parse_tables([GOOD, GOOD], n=3)
    with pytest.raises(ValueError, match="tables is None"):
        parse_tables(None, n=1)


@pytest.mark.parametrize(
    "texts,fragment",
    [
        (None, "predictions is None"),
        ("a single string", "got a single string"),
        (["ok", None], "example 1: prediction is None"),
        (["ok", "ok", 7], "example 2: prediction must be a str, got int: 7"),
        (["ok", ["nested"]], "example 1: prediction must be a str, got list"),
    ],
)
def test_bad_texts(texts, fragment):
    with pytest.raises(ValueError) as info:
        check_texts(texts)
    assert fragment in str(info.value)


def test_empty_texts_rejected_only_when_asked():
    assert check_texts(["", "x"]) == ["", "x"]
    with pytest.raises(ValueError, match="example 0: prediction is empty"):
        check_texts(["  ", "x"], allow_empty=False)


@pytest.mark.parametrize(
    "refs,n,fragment",
    [
        (None, 1, "references is None"),
        (["a"], 2, "got 2 predictions but 1 references"),
        (["a", None], 2, "example 1: reference is None"),
        (["a", []], 2, "example 1: no reference given"),
        ([["a"], ["b", 3]], 2, "example 1: reference must be a str, got int: 3"),
    ],
)
def test_bad_references(refs, n, fragment):
    with pytest.raises(ValueError) as info:
        check_references(refs, n)
    assert fragment in str(info.value)


def test_references_normalized_to_lists():
    assert check_references(["a", ["b", "c"]], 2) == [["a"], ["b", "c"]]


# ---------------------------------------------------------------------------
# Normalization


@pytest.mark.parametrize(
    "normalize,raw,expected",
    [
        (normalize_entity, "Carl_A._Wirtanen", "Carl A. Wirtanen"),
        (normalize_entity, '"1923 OAA907 XC"', "1923 OAA907 XC"),
        (normalize_entity, "São_Paulo", "São Paulo"),  # unicode intact
        (normalize_entity, "Ícolo_e_Bengo", "Ícolo e Bengo"),
        (normalize_entity, '"18L/36R \'Aalsmeerbaan\'"', "18L/36R 'Aalsmeerbaan'"),
        (normalize_entity, "  Wheeler,_Texas ", "Wheeler, Texas"),
        (normalize_entity, "“quoted”", "quoted"),
        (normalize_predicate, "birthPlace", "birth place"),
        (normalize_predicate, "eatType", "eat type"),
        (normalize_predicate, "customer rating", "customer rating"),
        (normalize_predicate, "ICAO_Location_Identifier", "ICAO location identifier"),
        (normalize_predicate, "elevationAboveTheSeaLevel_(in_metres)", "elevation above the sea level (in metres)"),
        (normalize_predicate, "1st_runway_LengthFeet", "1st runway length feet"),
    ],
)
def test_normalize_entities_and_predicates(normalize, raw, expected):
    assert normalize(raw) == expected


@pytest.mark.parametrize("text, expected", [
    ("alan bean was born in wheeler .", "alan bean was born in wheeler ."),
    ("Alan bean was born in wheeler .", "alan bean was born in wheeler ."),  # the rest is lower case
    ("alan Bean was born in Wheeler.", "Alan Bean was born in Wheeler."),
    ("Alan Bean was born in Wheeler.", "Alan Bean was born in Wheeler."),
    ("  (29075) 1950 da was found .", "  (29075) 1950 da was found ."),  # the first *cased* letter
    ("  (29075) 1950 DA was found .", "  (29075) 1950 DA was found ."),
    ("ßtraße in Berlin", "ßtraße in Berlin"),  # "ß".upper() is two letters: left as it is
    ("12 345 !", "12 345 !"), ("", ""),
])
def test_settle_first_letter_follows_the_rest_of_the_text(text, expected):
    from d2t_metrics.normalize import settle_first_letter

    assert settle_first_letter(text) == expected
    assert len(settle_first_letter(text)) == len(text)
    swapped = next((text[:i] + c.swapcase() + text[i + 1:] for i, c in enumerate(text) if c.swapcase() != c), text)
    if len(swapped) == len(text):
        assert settle_first_letter(swapped) == settle_first_letter(text)


def test_split_camel_case_keeps_acronyms():
    assert split_camel_case("birthPlace") == "birth Place"
    assert split_camel_case("IATALocationIdentifier") == "IATA Location Identifier"


# ---------------------------------------------------------------------------
# Loaders


def test_webnlg_xml_loader(shared):
    entries = load_webnlg_xml(os.path.join(shared, "data", "webnlg2017", "xml", "train", "1triples", "Airport.xml"))
    first = entries[0]
    assert first.table.entries == (Triple("Aarhus_Airport", "cityServed", '"Aarhus, Denmark"'),)
    assert first.lexicalizations[1] == "Aarhus Airport serves the city of Aarhus, Denmark."
    assert first.templates[1] == "AGENT-1 serves the city of PATIENT-1 ."
    assert first.references[1] == {"AGENT-1": "Aarhus_Airport", "PATIENT-1": '"Aarhus, Denmark"'}
    assert all(e.size == len(e.table) == 1 for e in entries)


def test_webnlg_xml_loader_whole_split(shared):
    entries = load_webnlg_xml(os.path.join(shared, "data", "webnlg2017", "xml", "dev"))
    # The data README: 872 entries, 2,268 lexicalisations, 6 of which have an empty <text/> and are skipped.
    assert len(entries) == 872
    assert sum(len(e.lexicalizations) for e in entries) == 2268 - 6
    assert all(len(e.lexicalizations) == len(e.templates) == len(e.references) for e in entries)
    assert all(e.size == len(e.table) for e in entries)


def test_webnlg_xml_loader_missing_path(tmp_path):
    with pytest.raises(ValueError, match="no WebNLG XML files"):
        load_webnlg_xml(str(tmp_path))


def test_e2e_csv_loader(shared):
    examples = load_e2e_csv(os.path.join(shared, "data", "e2e", "testset_w_refs.csv"))
    # The data README: 4,693 rows, 630 MRs.
    assert len(examples) == 630
    assert sum(len(e.references) for e in examples) == 4693
    assert examples[0].table == parse_mr("name[Blue Spice], eatType[coffee shop], area[city centre]")
    assert examples[0].references[0] == "A coffee shop in the city centre area called Blue Spice."


def test_e2e_tsv_loader_and_rows(shared):
    path = os.path.join(shared, "data", "e2e", "primary_system_outputs.tsv")
    rows = list(iter_tsv(path))
    assert len(rows) == 13230
    for i, row in enumerate(rows):
        parse_table(row["mr"], i)
    grouped = load_e2e_csv(path)
    # tnt1/tnt2 keep quotes around their MRs, so those are separate keys of the same tables.
    assert {str(e.table) for e in grouped} == {str(e.table) for e in load_e2e_csv(os.path.join(shared, "data", "e2e", "testset_w_refs.csv"))}
    assert sum(len(e.references) for e in grouped) == 13230


def test_e2e_csv_loader_small_file(tmp_path):
    path = tmp_path / "small.csv"
    path.write_text('mr,ref\n"name[A], food[French]",A serves French food.\n"name[A], food[French]",French food at A.\n', encoding="utf-8")
    examples = load_e2e_csv(str(path))
    assert len(examples) == 1
    assert examples[0].references == ["A serves French food.", "French food at A."]


# ---------------------------------------------------------------------------
# Hostile input: only ValueError escapes, in linear time, whatever the nesting


def test_empty_tables_are_refused():
    for empty in ("<br>", " <br/> ", [""], ["<br>", "\n"], {"name": None}, [("born", "")]):
        with pytest.raises(ValueError, match="example 0: (empty table|table .* has no values)"):
            parse_tables([empty], n=1)


def test_an_attribute_named_like_a_wrapper_is_an_attribute():
    table = parse_table({"name": "X", "table": "round", "mr": "yes"})
    assert table.kind == ATTRIBUTE_VALUE and [tuple(e) for e in table] == [("name", "X"), ("table", "round"), ("mr", "yes")]
    # A dict whose only key is "table"/"triples"/"mr" is a wrapper.
    assert parse_table({"triples": {"table": "A | p | B"}}) == parse_table("A | p | B")


def test_members_are_typed_and_numbers_must_be_finite():
    with pytest.raises(ValueError, match="subject must be a str, got int"):
        Triple(1, 2, 3)
    with pytest.raises(ValueError, match="value must be a str, got NoneType"):
        AttributeValue("born", None)
    assert [tuple(e) for e in parse_table({"name": "X", "rating": 5, "price": 2.5})] == [("name", "X"), ("rating", "5"), ("price", "2.5")]
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="not a usable number"):
            parse_table({"name": "X", "rating": bad})
    with pytest.raises(ValueError, match="must be a list with one table per prediction, got int"):
        parse_tables(-82)
    with pytest.raises(ValueError, match="got str"):
        parse_tables("A | p | B")


def _nested(depth, leaf, key="table"):
    for _ in range(depth):
        leaf = {key: leaf}
    return leaf


def test_deep_and_self_referencing_nesting_is_a_value_error():
    with pytest.raises(ValueError, match="nested"):
        parse_table(_nested(3000, "A | p | B"))
    looping = {}
    looping["table"] = looping
    with pytest.raises(ValueError, match="contains itself"):
        parse_table(looping)
    deep_list = "x"
    for _ in range(100_000):
        deep_list = [deep_list]
    with pytest.raises(ValueError) as info:
        parse_table(deep_list)
    assert len(str(info.value)) < 400  # the message quotes a bounded repr
    self_list = []
    self_list.append(self_list)
    with pytest.raises(ValueError):
        parse_table([self_list])
    # A shallow wrapper still works.
    assert parse_table(_nested(8, "A | p | B")) == parse_table("A | p | B")


# Linearity is checked without a clock that a busy machine can stretch: the
# work is counted (every Python and C function the parser calls, as a
# profiler sees them) at two sizes, and, for what no counter sees (one C call
# such as a regular expression's split can itself be quadratic), the CPU time
# of this process is compared at the two sizes, best of a few runs, with a
# margin four times the linear ratio. A quadratic parser grows 256x at 16x the
# input; a linear one 16x.
SMALL, LARGE = 15_625, 250_000  # characters; LARGE = 16 * SMALL
GROWTH = LARGE // SMALL
ADVERSARIAL = {
    "spaces inside a triple": lambda n: "Alan" + " " * n + "Bean | p | o",
    "spaces before a bracket": lambda n: "name" + " " * n + "[x]",
    "spaces after an open bracket": lambda n: "name[" + " " * n,
    "spaces then a bracket": lambda n: " " * n + "[",
    "an unclosed br then spaces": lambda n: "<br" + " " * n,
    "unclosed brs": lambda n: "<br " * (n // 4),
    "open brackets": lambda n: "[" * n,
    "close brackets": lambda n: "]" * n,
    "bars": lambda n: "|" * n,
    "many slots": lambda n: "a[b]," * (n // 5) + "c[d]",
    "slots without commas": lambda n: "a[b] " * (n // 5),
    "triples joined by br": lambda n: "A | p | B<br>" * (n // 12),
    "triples joined by newlines": lambda n: "A | p | B\n" * (n // 10),
    "commas": lambda n: ", " * (n // 2),
    "a quoted MR": lambda n: "'" + "a[b], " * (n // 6) + "'",
}


def _parse_or_refuse(parse, text):
    """Run the parser; a refusal is an answer too, with a bounded message."""
    try:
        parse(text)
    except ValueError as e:
        assert len(str(e)) < 400


def _calls_made(parse, text):
    """How many functions, Python or C, parsing ``text`` calls."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event in ("call", "c_call")

    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        _parse_or_refuse(parse, text)
    finally:
        sys.setprofile(previous)
    return calls


def _cpu_seconds(parse, text, repeats=3):
    """The best of a few runs, in CPU time of this process (not wall-clock time)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        _parse_or_refuse(parse, text)
        best = min(best, time.process_time() - start)
    return best


def assert_linear(parse, build):
    """``parse(build(n))`` does work linear in ``n``: counted calls grow at most
    in proportion, CPU time at most 4x the proportion (plus 50 ms for noise)."""
    small, large = build(SMALL), build(LARGE)
    assert _calls_made(parse, large) <= GROWTH * _calls_made(parse, small) + 1000
    assert _cpu_seconds(parse, large) < 4 * GROWTH * _cpu_seconds(parse, small) + 0.05


@pytest.mark.parametrize("build", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_input_parses_in_linear_work(build):
    from d2t_metrics.inputs import encode_table

    assert_linear(encode_table, build)


hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

_KEYS = st.sampled_from(["table", "triples", "mr", "subject", "predicate", "object", "attribute", "value", "name", "born"]) | st.text(max_size=5)
_LEAVES = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.lists(st.sampled_from(list("ab |[]<>/r,\n'\" _") + ["<br>", "name[", "\u00fc", "\ud800"]), max_size=12).map("".join)
)
_TABLES = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner, inner) | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=30)


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(_TABLES)
def test_fuzz_only_value_errors_and_lossless_encoding(raw):
    from d2t_metrics.inputs import decode_table, encode_table

    try:
        table = parse_table(raw)
    except ValueError:
        return
    assert len(table) > 0
    assert decode_table(encode_table(table)) == table


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(st.text(alphabet=st.sampled_from(list(" a|[],<br/>\n'")), min_size=1, max_size=8))
def test_fuzz_a_repeated_pattern_parses_in_linear_work(pattern):
    assert_linear(parse_table, lambda n: pattern * (n // len(pattern)))


@pytest.mark.parametrize("text", [
    "Alan Bean was born in Wheeler, Texas. He died in İzmir.",
    "alan bean was born in wheeler , texas . he died in i\u0307zmir .",
    "ALAN BEAN WAS BORN IN WHEELER, TEXAS. HE DIED IN İZMIR.",
    " \talan  bean was born in wheeler,\n texas .  he died in izmir .\n",  # spacing states no fact either
])
def test_read_case_free_gives_one_reading_whatever_the_casing(text):
    from d2t_metrics.normalize import read_case_free

    values = ["Alan_Bean", "Wheeler,_Texas", "İzmir", "test_pilot"]
    assert read_case_free(text, values) == "Alan Bean was born in Wheeler, Texas. He died in İzmir."
    assert read_case_free(text.lower(), values) == read_case_free(text.upper(), values) == read_case_free(text, values)


def test_read_case_free_takes_hostile_text():
    from d2t_metrics.normalize import lower_case, read_case_free

    assert read_case_free("", []) == "" and read_case_free("???", ["A"]) == "???"
    assert lower_case("İ\u0307") == "i"  # the dot Python adds and a written one: neither is seen on an i
    assert read_case_free("a\ud800b [SEP] <|im_start|>", ["A\ud800B"]) == "A\ud800B [sep] <|im_start|>"
    # values that are regular expressions are read as text; a huge table's values are capped
    assert read_case_free("x (y) z", ["(Y)", ".*", "X" * 3]) == "X (Y) z"
    many = [f"Value{i}" for i in range(500)]
    text = " ".join(v.lower() for v in many)
    out = read_case_free(text, many)
    assert sum(w != w.lower() for w in out.split()) <= 64 + 1
    long = "alan bean was born in wheeler, texas. " * 30000  # about a megabyte
    assert read_case_free(long, ["Alan_Bean"]).count("Alan Bean") == 30000


def test_values_are_what_a_text_names_of_the_table():
    from d2t_metrics import parse_table

    assert parse_table(["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | occupation | Test_pilot"]).values() == \
        ["Alan_Bean", "Wheeler,_Texas", "Alan_Bean", "Test_pilot"]
    assert parse_table("name[The Eagle], eatType[coffee shop]").values() == ["The Eagle", "coffee shop"]
    assert parse_table({"name": "Alan Bean", "born": "1932"}).values() == ["Alan Bean", "1932"]
