"""shuffle_debias: split at word boundaries, shuffle, and move every span with its piece."""

from __future__ import annotations

import random
from collections import Counter

import polars as pl
import pytest

from builder.bench import SPAN_DTYPE, Bench
from builder.run.invariants import check_invariants
from builder.stages.far_relevant.segments import shuffle_segments, word_gaps
from builder.stages.far_relevant.shuffle_debias import ShuffleDebias
from tests.helpers import make_ctx

TEXT = "one two three four five six seven eight nine ten eleven twelve"


def test_word_gaps_skip_edges():
    assert word_gaps("  a b\n\nc ") == [(3, 4), (5, 7)]


def test_shuffle_segments_moves_spans_and_keeps_words():
    span = (TEXT.index("four five"), TEXT.index("four five") + len("four five"))
    for seed in range(50):
        out = shuffle_segments(TEXT, 4, random.Random(seed), protected=[span])
        assert Counter(out.text.split()) == Counter(TEXT.split())
        assert len(out.pieces) == 4
        start, end = out.move(*span)
        assert out.text[start:end] == "four five"
        for p in out.pieces:
            assert out.text[p.new_start : p.new_start + p.end - p.start] == TEXT[p.start : p.end]


def test_shuffle_segments_with_fewer_gaps_than_pieces():
    out = shuffle_segments("  solo  ", 4, random.Random(0))
    assert out.text == "solo"
    assert out.move(2, 6) == (0, 4)


def _at(text: str, part: str, method: str = "exact", score: float = 100.0) -> dict:
    return {"start": text.index(part), "end": text.index(part) + len(part), "method": method, "score": score}


def _bench() -> Bench:
    texts = [TEXT, "alpha beta gamma delta", "x y"]
    corpus = pl.DataFrame({"doc_id": ["d1", "d2", "d3"], "text": texts, "lang": "en", "domain": "t"})
    spans = [
        [_at(TEXT, "two three"), _at(TEXT, "eleven", "fuzzy", 91.0)],
        [_at(TEXT, "four five")],
        [_at(texts[1], "beta gamma")],
        None,
    ]
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4"],
            "text": "?",
            "doc_id": ["d1", "d1", "d2", "d3"],
            "lang": "en",
            "spans": pl.Series(spans, dtype=SPAN_DTYPE),
            "rel_pos": [0.1, 0.2, 0.3, None],
        }
    )
    return Bench.of(
        corpus=corpus, queries=queries, qrels=queries.select("query_id", "doc_id", pl.lit(1).alias("score"))
    )


def _run(tmp_path, **params):
    stage = ShuffleDebias(ShuffleDebias.Params(**params))
    ctx = make_ctx(tmp_path, label="03_shuffle_debias")
    before = _bench()
    after = stage.run(before, ctx)
    check_invariants(before, after, stage, ctx.label)
    return before, after, ctx


def _span_texts(bench: Bench) -> dict[str, list[str]]:
    texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
    return {
        q: [texts[d][s["start"] : s["end"]] for s in spans]
        for q, d, spans in bench.queries.select("query_id", "doc_id", "spans").iter_rows()
        if spans
    }


def test_keep_intact_updates_every_query_on_a_shared_document(tmp_path):
    before, after, ctx = _run(tmp_path, segments=4)
    assert after.queries.height == 4 and after.drops.height == 0
    assert after.corpus["text"].to_list() != before.corpus["text"].to_list()
    assert sorted(map(sorted, _span_texts(after).values())) == sorted(map(sorted, _span_texts(before).values()))
    for old, new in zip(before.corpus["text"], after.corpus["text"]):
        assert Counter(old.split()) == Counter(new.split())
    for spans in after.queries["spans"].to_list():
        assert spans is None or [s["start"] for s in spans] == sorted(s["start"] for s in spans)
    q1 = after.queries.row(0, named=True)["spans"]
    assert {s["method"] for s in q1} == {"exact", "fuzzy"}  # span metadata travels along
    assert after.queries["rel_pos"].null_count() == 4  # stale: cleared for position_metadata
    assert ctx.stats["cleared_columns"] == ["rel_pos"]
    again = _run(tmp_path, segments=4)[1]
    assert again.corpus.equals(after.corpus)


def test_drop_mode_drops_queries_whose_span_is_cut(tmp_path):
    # d2 has three gaps and segments=4 cuts them all, so "beta gamma" is always cut.
    _, after, _ = _run(tmp_path, segments=4, on_cut="drop")
    assert dict(zip(after.drops["id"], after.drops["reason"]))["q3"] == "span_cut_by_shuffle"
    assert set(after.drops["reason"]) == {"span_cut_by_shuffle"}
    original = _span_texts(_bench())
    for q, texts in _span_texts(after).items():
        assert texts == original[q]
    assert original["q1"] == ["two three", "eleven"]


def test_segments_must_be_at_least_two():
    with pytest.raises(ValueError):
        ShuffleDebias.Params(segments=1)
