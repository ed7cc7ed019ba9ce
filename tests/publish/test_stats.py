"""compute_stats on a hand-made bench: exact figures, and graceful gaps."""

from __future__ import annotations

import polars as pl
import pytest

from builder.bench import Bench
from builder.publish.qtypes import query_type
from builder.publish.stats import compute_stats
from tests.publish.conftest import LLM, mini_bench, mini_run_stats


@pytest.mark.parametrize(
    ("text", "lang", "expected"),
    [
        ("What is a closure?", "en", "what"),
        ("what's new", "en", "what"),
        ("How do I install it", "en", "how"),
        ("Why is the sky blue?", "en", "why"),
        ("Which word is missing?", "en", "which"),
        ("When did it start?", "en", "when"),
        ("Where is Paris?", "en", "where"),
        ("Whose idea was it?", "en", "who"),
        ("Aspirin lowers the risk of stroke.", "en", "claim"),
        ("Is it safe?", "en", "other"),
        ("", "en", "other"),
        ("天空为什么是蓝色的？", "zh", "why"),
        ("什么时候开始下雨", "zh", "when"),
        ("这是什么", "zh", "what"),
        ("如何安装软件", "zh", "how"),
        ("北京在哪里", "zh", "where"),
        ("哪个更好？", "zh", "which"),
        ("谁写了这本书", "zh", "who"),
        ("他明天来吗", "zh", "other"),
        ("吸烟有害健康。", "zh", "claim"),
        ("为什么", None, "why"),
    ],
)
def test_query_type(text, lang, expected):
    assert query_type(text, lang) == expected


def test_figures_of_the_mini_bench():
    stats = compute_stats(mini_bench(), mini_run_stats())
    assert stats["counts"] == {"docs": 4, "queries": 5, "qrels": 5, "drops": 3, "languages": 2, "domains": 2}
    lengths = stats["doc_lengths"]
    assert [b["docs"] for b in lengths["buckets"]] == [0, 1, 1, 0, 1, 0, 0, 1]
    assert lengths["buckets"][1]["range"] == "256-511"
    assert (lengths["min"], lengths["max"], lengths["tokenizer"]) == (300, 2000, "words")
    pos = stats["positions"]
    assert pos["available"] and pos["n_queries"] == 5
    assert {k: n for k, n in enumerate(pos["bins"]) if n} == {0: 1, 5: 1, 10: 1, 14: 1, 19: 1}
    assert pos["tags"] == {"beginning": 2, "middle": 1, "end": 2}
    assert stats["length_buckets"] == {"Q1": 2, "Q2": 1, "Q3": 1, "Q4": 1}
    grid = stats["position_by_length"]["matrix"]
    assert grid[0][0] == 1 and grid[0][19] == 1 and grid[1][10] == 1 and sum(map(sum, grid)) == 5
    assert stats["query_types"]["by_interrogative"] == {
        "what": 1,
        "how": 1,
        "why": 1,
        "which": 0,
        "when": 0,
        "where": 1,
        "who": 0,
        "claim": 1,
        "other": 0,
    }


def test_groups_drops_and_llm_usage():
    stats = compute_stats(mini_bench(), mini_run_stats())
    langs = {r["lang"]: r for r in stats["languages"]}
    assert (langs["en"]["docs"], langs["en"]["queries"], langs["en"]["qrels"]) == (2, 3, 3)
    assert (langs["zh"]["docs"], langs["zh"]["queries"], langs["zh"]["mean_doc_tokens"]) == (2, 2, 1600.0)
    domains = {r["domain"]: (r["docs"], r["queries"], r["qrels"]) for r in stats["domains"]}
    assert domains == {"law": (1, 1, 1), "web": (3, 4, 4)}
    assert stats["drop_table"] == [
        {"stage": "01_sample_by_length", "kind": "doc", "reason": "not_sampled", "count": 2},
        {"stage": "02_generate_queries", "kind": "query", "reason": "llm_failed", "count": 1},
    ]
    assert [r["dropped"] for r in stats["stage_table"]] == [0, 2, 1]
    # A record written before cached tokens were counted reads as none cached.
    # No price in the record: its money is unknown; a stage that starts with no queries has no yield.
    assert stats["llm"]["stages"] == [
        {"stage": "02_generate_queries", **LLM, "cached_tokens": 0, "usd": None, "yield": None}
    ]
    assert stats["llm"]["total"]["calls"] == 4 and stats["llm"]["total"]["cache_hits"] == 1
    assert stats["llm"]["kept_queries"] == 5
    assert stats["llm"]["per_kept_query"] == {
        "calls": 0.8,
        "prompt_tokens": 20.0,
        "completion_tokens": 4.0,
        "cached_tokens": 0.0,
        "usd": None,
    }


def test_positions_come_from_spans_when_there_is_no_rel_pos():
    bench = mini_bench(positions=False)
    spans = [[{"start": s, "end": s + 5, "method": "exact", "score": 100.0}] for s in (0, 500, 990, 260, 700)]
    bench = bench.replace(queries=bench.queries.with_columns(pl.Series("spans", spans)))
    stats = compute_stats(bench, mini_run_stats())
    assert {k: n for k, n in enumerate(stats["positions"]["bins"]) if n} == {0: 1, 5: 1, 10: 1, 14: 1, 19: 1}
    assert "relative positions computed from span starts" in stats["notes"]


def test_no_positions_yet_is_a_note_not_an_error():
    stats = compute_stats(mini_bench(positions=False), None)
    assert not stats["positions"]["available"]
    assert stats["position_by_length"] is None
    assert any("no spans" in n for n in stats["notes"])
    assert stats["llm"] == {"stages": [], "total": dict.fromkeys([*LLM, "cached_tokens"], 0)}


def test_an_empty_bench_has_stats_too():
    stats = compute_stats(Bench.of(), {"stages": []})
    assert stats["counts"]["docs"] == 0
    assert stats["doc_lengths"]["buckets"] == []
    assert stats["languages"] == [] and stats["drop_table"] == []
    assert stats["query_types"]["by_interrogative"]["other"] == 0
