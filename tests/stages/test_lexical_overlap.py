"""lexical_overlap: questions that share most of their content words with their evidence go."""

from __future__ import annotations

from builder.stages.qc.lexical_overlap import LexicalOverlap, LexicalOverlapParams
from tests.helpers import make_ctx
from tests.stages.qc_factories import bench_of, span

DOC = ("Chadwick discovered the neutron in Cambridge in 1932. Rutherford scattered alpha particles "
       "from gold foil. Moseley ordered the elements by nuclear charge.")
EVIDENCE = {"beginning": "Chadwick discovered the neutron in Cambridge in 1932.",
            "middle": "Rutherford scattered alpha particles from gold foil.",
            "end": "Moseley ordered the elements by nuclear charge."}
# BM25's tokens without stopwords (no stemming; "where", "did" count) and the share found
# in the evidence:
QUERIES = [
    ("copy", "beginning", "Where did Chadwick discover the neutron?"),  # chadwick, neutron: 2 of 5
    ("reworded", "beginning", "Which physicist found the uncharged particle?"),  # 0 of 5
    ("some", "middle", "What did Rutherford fire at thin metal?"),  # rutherford: 1 of 6
    ("all", "end", "Who ordered elements by nuclear charge?"),  # 4 of 5
]


def _bench():
    return bench_of({"d": DOC}, [{"query_id": q, "text": t, "doc_id": "d", "position_tag": tag,
                                  "spans": span(EVIDENCE[tag], DOC)} for q, tag, t in QUERIES])


def test_questions_above_the_share_go_and_the_overlap_by_third_is_reported(tmp_path):
    ctx = make_ctx(tmp_path)
    out = LexicalOverlap(LexicalOverlapParams(max_overlap=0.3)).run(_bench(), ctx)
    assert sorted(out.drops.select("id", "reason").rows()) == [("all", "lexical_overlap"), ("copy", "lexical_overlap")]
    assert sorted(out.queries["query_id"].to_list()) == ["reworded", "some"]
    figures = ctx.stats["lexical_overlap"]
    assert (figures["dropped"], figures["not_judged"], figures["column"]) == (2, 0, "position_tag")
    assert figures["mean_before"] == {"beginning": 0.2, "middle": 0.1667, "end": 0.8}
    assert figures["mean_after"] == {"beginning": 0.0, "middle": 0.1667, "end": None}


def test_a_share_of_one_keeps_everything(tmp_path):
    ctx = make_ctx(tmp_path)
    out = LexicalOverlap(LexicalOverlapParams(max_overlap=1.0)).run(_bench(), ctx)
    assert out.drops.is_empty() and ctx.stats["lexical_overlap"]["dropped"] == 0
