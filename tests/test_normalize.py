

def test_symmetric_predicates_and_values_that_name_an_entity():
    from d2t_metrics.normalize import names_an_entity, symmetric_predicate

    assert symmetric_predicate("spouse") and symmetric_predicate("relatedMeanOfTransportation")
    assert not symmetric_predicate("manager") and not symmetric_predicate("birthPlace")
    assert names_an_entity("Levan_Khomeriki") and names_an_entity("São_Paulo")
    for literal in ("1988", "2006-12-31", '"solo_singer"', "441092000.0 (kilometres)", ""):
        assert not names_an_entity(literal), literal
