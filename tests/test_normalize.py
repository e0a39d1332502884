

def test_symmetric_predicates_and_values_that_name_an_entity():
    from d2t_metrics.normalize import names_an_entity, symmetric_predicate

    assert symmetric_predicate("spouse") and symmetric_predicate("relatedMeanOfTransportation")
    assert not symmetric_predicate("manager") and not symmetric_predicate("birthPlace")
    assert names_an_entity("Levan_Khomeriki") and names_an_entity("São_Paulo")
    for literal in ("1988", "2006-12-31", '"solo_singer"', "441092000.0 (kilometres)", ""):
        assert not names_an_entity(literal), literal


def test_exchange_spans_moves_two_pieces_and_says_where_they_are():
    from d2t_metrics.normalize import exchange_spans

    text = "The manager of FC Dinamo Batumi is Levan Khomeriki."
    a, b = (15, 31), (35, 50)
    out, first, second = exchange_spans(text, b, a)  # in either order
    assert out == "The manager of Levan Khomeriki is FC Dinamo Batumi."
    assert (out[first[0]:first[1]], out[second[0]:second[1]]) == ("Levan Khomeriki", "FC Dinamo Batumi")
    shouted = exchange_spans(text, a, b, say=lambda piece, replaced: piece.upper())[0]
    assert shouted == "The manager of LEVAN KHOMERIKI is FC DINAMO BATUMI."
    assert exchange_spans(text, (15, 31), (20, 40)) is None  # overlapping spans
