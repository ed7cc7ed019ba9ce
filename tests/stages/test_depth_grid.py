"""The depth x length grid on tiny inputs: exact evidence, depths, lengths and exclusions."""

from __future__ import annotations

import polars as pl
import pytest

from builder.bench import SPAN_DTYPE, Bench
from builder.stages.base import StageParamError
from builder.stages.grid.cells import cell_name
from builder.stages.grid.depth_grid import DepthGrid, GridParams
from builder.stages.grid.evidence import Evidence, widen
from builder.stages.grid.padding import Piece, passages_of
from builder.stages.grid.placement import place
from tests.helpers import make_ctx

OWN = (
    "Intro line here. The zebra sleeps under the moon at noon. Closing words.\n\n"
    "Second paragraph has one long sentence with many words in it to be far too long."
)
EVIDENCE = "The zebra sleeps under the moon at noon."  # 8 words
DOCS = {
    "own": OWN,
    # Each padding document opens with what must be left out, so the walk meets it.
    "a": "Zebra sleeps. Zebra sleeps moon.\n\nRed apples grow fast. Green pears fall slowly.",
    "b": "Yesterday the zebra sleeps under the moon at noon, said Tom.\n\nBlue skies look calm.",
    "c": "Cold rivers run deep. Tall hills stand still.",
}
GOOD = {
    "Red apples grow fast.",
    "Green pears fall slowly.",
    "Blue skies look calm.",
    "Cold rivers run deep.",
    "Tall hills stand still.",
}


def _span(text: str, piece: str) -> list[dict]:
    start = OWN.index(piece)
    return [{"start": start, "end": start + len(piece), "method": "exact", "score": 100.0}]


def tiny_bench() -> Bench:
    corpus = pl.DataFrame({"doc_id": list(DOCS), "text": list(DOCS.values()), "lang": "en", "domain": "zoo"})
    spans = [
        _span(OWN, "zebra sleeps under the moon"),
        _span(OWN, "noon. Closing words.\n\nSecond"),
        _span(OWN, "many words"),
    ]
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3"],
            "text": ["zebra sleeps moon?"] * 3,
            "doc_id": ["own"] * 3,
            "lang": ["en"] * 3,
            "spans": pl.Series(spans, dtype=SPAN_DTYPE),
        }
    )
    qrels = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "doc_id": ["own"] * 3, "score": [1] * 3})
    return Bench.of(corpus=corpus, queries=queries, qrels=qrels)


def test_a_span_widens_to_its_sentences_and_never_past_its_paragraph():
    start = OWN.index("zebra")
    assert widen(OWN, start, start + 5) == Evidence(EVIDENCE, 4, 9)
    crossing = OWN.index("noon")
    assert widen(OWN, crossing, OWN.index("Second") + 3) == "evidence_spans_paragraphs"
    assert widen(OWN, 5, 5) == "span_outside_document"


def test_passages_are_paragraphs_of_whole_sentences():
    (first, second) = passages_of("a", DOCS["a"])
    assert first.sentences == ("Zebra sleeps.", "Zebra sleeps moon.")
    assert second.text == "Red apples grow fast. Green pears fall slowly."


def test_the_evidence_goes_between_sentences_nearest_the_depth():
    pieces = [Piece(0, "One two.", 2), Piece(0, "Three four.", 2), Piece(1, "Five six.", 2)]
    first = place(pieces, "EVIDENCE here.", 0.0)
    assert (first.text, first.evidence_start, first.depth) == (
        "EVIDENCE here.\n\nOne two. Three four.\n\nFive six.",
        0,
        0.0,
    )
    middle = place(pieces, "EVIDENCE here.", 0.5)  # 2 or 4 of 6 tokens before: the earlier wins
    assert middle.text == "One two.\n\nEVIDENCE here.\n\nThree four.\n\nFive six."
    assert (middle.evidence_start, middle.depth) == (10, 1 / 3)
    last = place(pieces, "EVIDENCE here.", 1.0)
    assert last.text.endswith("\n\nEVIDENCE here.") and last.depth == 1.0


def test_grid_places_the_evidence_exactly_at_each_depth_and_length(tmp_path):
    ctx = make_ctx(tmp_path, label="02_depth_grid")
    stage = DepthGrid(GridParams(distractors=0, depths=[0, 0.5, 1], lengths=[12, 24], max_depth_error=0.5))
    out = stage.run(tiny_bench(), ctx)
    assert sorted(out.queries["setting"].unique().to_list()) == sorted(
        cell_name(d, n) for d in (0, 0.5, 1) for n in (12, 24)
    )
    assert out.queries.height == out.corpus.height == out.qrels.height == 6  # q1 in six cells
    docs = {r["doc_id"]: r for r in out.corpus.iter_rows(named=True)}
    padding: dict[int, set[str]] = {}
    for q in out.queries.iter_rows(named=True):
        doc = docs[q["doc_id"]]
        text = doc["text"]
        span = q["spans"][0]
        assert text[span["start"] : span["end"]] == "zebra sleeps under the moon"
        assert text[q["evidence_start"] : q["evidence_end"]] == EVIDENCE
        assert text.count(EVIDENCE) == 1
        assert doc["n_tokens"] == q["grid_length"]  # four-word sentences fill it exactly
        assert doc["domain"] == q["setting"] and doc["source_domain"] == "zoo"
        rest = text.replace(EVIDENCE, "").split()
        sentences = " ".join(rest)
        assert all(s in GOOD for s in _sentences(sentences))
        padding.setdefault(q["grid_length"], set()).add(sentences)
        # At 12 tokens one 4-token sentence pads: half-way ties between before and after it,
        # and the earlier place wins; at 24, two of four sentences come first.
        expected_depth = {(12, 0.5): 0.0, (24, 0.5): 0.5}.get((q["grid_length"], q["grid_depth"]), q["grid_depth"])
        assert doc["grid_depth_actual"] == expected_depth
    starts = {(q["grid_length"], q["grid_depth"]): q["evidence_start"] for q in out.queries.iter_rows(named=True)}
    assert starts[(12, 0.0)] == starts[(24, 0.0)] == 0
    assert all(len(p) == 1 for p in padding.values())  # the same padding at every depth of a length
    grid = ctx.stats["grid"]
    assert grid["padding_excluded"] == {"answers_query:bm25_score": 1, "near_duplicate_of_evidence": 1}
    assert grid["largest_length_gap_tokens"] == 0 and grid["largest_depth_gap"] == 0.5
    reasons = dict(out.drops.select("id", "reason").iter_rows())
    assert reasons == {"q2": "evidence_spans_paragraphs", "q3": "evidence_longer_than_length"}


def _sentences(text: str) -> list[str]:
    import re

    return re.split(r"(?<=\.)\s+", text)


def test_padding_that_runs_out_drops_the_query(tmp_path):
    bench = tiny_bench()
    small = Bench.of(
        corpus=bench.corpus.filter(pl.col("doc_id").is_in(["own", "c"])),
        queries=bench.queries.head(1),
        qrels=bench.qrels.head(1),
    )
    out = DepthGrid(GridParams(distractors=0, depths=[0, 1], lengths=[12, 24])).run(
        small, make_ctx(tmp_path, label="02_depth_grid")
    )
    assert out.queries.is_empty()
    assert out.drops.select("id", "reason").rows() == [("q1", "padding_exhausted")]


def test_a_length_below_every_evidence_is_a_parameter_error(tmp_path):
    with pytest.raises(StageParamError) as caught:
        DepthGrid(GridParams(distractors=0, depths=[0], lengths=[4, 24])).run(
            tiny_bench(), make_ctx(tmp_path, label="02_depth_grid")
        )
    assert caught.value.param == "lengths"
    assert str(caught.value).startswith("length 4 is below the evidence of every query (the shortest holds 8 tokens)")


@pytest.mark.parametrize(
    "params, message",
    [
        ({"depths": [0, 1.5]}, "depths are shares of the document from 0 to 1; got 1.5"),
        ({"depths": [0.5, 0.5]}, "each depth may be listed once"),
        ({"lengths": [0, 512]}, "lengths are token counts of at least 1; got 0"),
    ],
)
def test_bad_depths_and_lengths_are_refused(params, message):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        GridParams(**params)


def test_plan_counts_one_document_per_query_and_cell():
    from builder.stages.base import Flow

    stage = DepthGrid(GridParams(distractors=0, depths=[0, 0.5, 1], lengths=[512, 1024], max_queries=40))
    out, estimate = stage.plan(Flow(docs=36, queries=108, doc_tokens=800.0))
    assert (out.docs, out.queries, out.doc_tokens) == (240, 240, 768.0)
    assert estimate.notes == ["6 cells (3 depths x 2 lengths): at most 240 queries and 240 documents"]
    _, estimate = DepthGrid(GridParams(depths=[0, 0.5, 1], lengths=[512, 1024], max_queries=40)).plan(
        Flow(docs=36, queries=108, doc_tokens=800.0)
    )
    assert estimate.notes == ["6 cells (3 depths x 2 lengths): at most 240 queries and 840 documents"]
