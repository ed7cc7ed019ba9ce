from builder.stages.qc.removal_fixpoint import removed_documents


def test_a_chain_removes_only_what_a_surviving_query_flags():
    # q(a) flags b, q(b) flags c, q(c) flags d: a stays, so b goes; c, flagged only by b's
    # query, stays, so d goes. Removing every flagged document at once would take b, c and d.
    flags = [("a", "b"), ("b", "c"), ("c", "d")]
    assert removed_documents(flags, ["a", "b", "c", "d"], ["a", "b", "c", "d"]) == ["b", "d"]


def test_a_document_stays_when_every_query_flagging_it_loses_its_positive():
    flags = [("a", "b"), ("a", "c"), ("b", "e"), ("c", "e")]
    assert removed_documents(flags, ["a", "b", "c"], ["a", "b", "c", "e"]) == ["b", "c"]


def test_a_mutual_pair_keeps_the_positive_of_more_queries_then_the_earlier():
    assert removed_documents([("x", "y"), ("y", "x")], ["x", "y", "y"], ["x", "y"]) == ["x"]
    assert removed_documents([("x", "y"), ("y", "x")], ["x", "y"], ["x", "y"]) == ["y"]


def test_an_odd_cycle_never_leaves_a_kept_query_beaten():
    # x -> y -> z -> x: keeping x removes y; z's queries flag x, so z cannot stay beside x.
    removed = removed_documents([("x", "y"), ("y", "z"), ("z", "x")], ["x", "y", "z"], ["x", "y", "z"])
    assert removed == ["y", "z"]


def test_nothing_flagged_removes_nothing():
    assert removed_documents([], ["a"], ["a", "b"]) == []
