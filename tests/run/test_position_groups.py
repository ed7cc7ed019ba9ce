"""An empty or nearly empty position third is a warning: in the terminal summary, in
stats.json and in the card, whatever the stages' keep rates were."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from builder.bench import Bench
from builder.publish.outputs import publish_outputs
from builder.publish.stats import compute_stats
from builder.run.report import print_run_summary
from builder.run.runner import RunResult


def _bench(rel_pos: list[float]) -> Bench:
    n = len(rel_pos)
    corpus = pl.DataFrame(
        {"doc_id": ["d1"], "title": ["t"], "text": ["x " * 500], "lang": ["en"], "domain": ["web"], "n_tokens": [500]}
    )
    queries = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "text": [f"question {i}" for i in range(n)],
            "doc_id": ["d1"] * n,
            "lang": ["en"] * n,
            "rel_pos": rel_pos,
        }
    )
    qrels = pl.DataFrame({"query_id": queries["query_id"], "doc_id": ["d1"] * n, "score": [1] * n})
    return Bench.of(corpus=corpus, queries=queries, qrels=qrels)


NO_END = [0.1] * 10 + [0.5] * 10  # 20 queries, none in the last third
ONE_END = [0.1] * 12 + [0.5] * 12 + [0.9]  # 1 of 25 (4 %) in the last third


@pytest.mark.parametrize(
    ("rel_pos", "expected"),
    [
        (NO_END, "0 of its 20 queries (0%) locate their evidence in the end third"),
        (ONE_END, "1 of its 25 queries (4%) locate their evidence in the end third"),
    ],
)
def test_a_thin_third_is_a_warning_in_stats(rel_pos, expected):
    warnings = compute_stats(_bench(rel_pos), {"stages": []})["warnings"]
    assert [w for w in warnings if "third" in w] == [
        f"the benchmark is lopsided: {expected} (under 5%); position-group figures on it "
        "say little, so check the generation stage's thirds and the filters that removed queries"
    ]


def test_even_thirds_and_a_bench_without_queries_warn_of_nothing():
    assert compute_stats(_bench([0.1] * 2 + [0.5] * 2 + [0.9] * 2), {"stages": []})["warnings"] == []
    assert compute_stats(Bench.of(), {"stages": []})["warnings"] == []


def test_the_terminal_and_the_card_say_it_too(tmp_path: Path):
    bench = _bench(NO_END)
    console = Console(record=True, width=200)
    print_run_summary(console, RunResult(bench=bench, out_dir=tmp_path / "out", run_dir=tmp_path))
    said = " ".join(console.export_text().split())
    assert "warning: the benchmark is lopsided: 0 of its 20 queries (0%) locate their evidence in the end third" in said

    out = tmp_path / "out"
    out.mkdir()
    publish_outputs(bench, out, {"recipe": "thin", "stages": []}, None)
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert any("0 of its 20 queries" in w for w in stats["warnings"])
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "## Warnings" in card and "0 of its 20 queries (0%) locate their evidence in the end third" in card
