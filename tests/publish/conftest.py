"""Fixtures for the publishing tests: a hand-made two-language bench and a real
quickstart build (run once per session through the runner)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from builder.bench import Bench
from builder.publish.beir import write_beir
from tests.publish.fake_hub import hub_fixture

LLM = {"calls": 4, "cache_hits": 1, "retries": 0, "failures": 1, "prompt_tokens": 100, "completion_tokens": 20}
NO_LLM = dict.fromkeys(LLM, 0)
PROMPT_SHA = "ab" * 32
TOKEN = "hf_fakeTestToken0123456789abcdef"


def mini_bench(positions: bool = True) -> Bench:
    """Four documents (en/zh, web/law) and five queries whose figures are easy to count."""
    corpus = pl.DataFrame(
        {
            "doc_id": ["d1", "d2", "d3", "d4"],
            "title": ["one", "two", "三", "四"],
            "text": ["a" * 1000, "b" * 1000, "丙" * 1000, "丁" * 1000],
            "lang": ["en", "en", "zh", "zh"],
            "domain": ["web", "law", "web", "web"],
            "n_tokens": [300, 600, 1200, 2000],
        }
    )
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4", "q5"],
            "text": ["What is X?", "how does Y work", "Aspirin lowers risk.", "为什么天空是蓝色的？", "北京在哪里"],
            "doc_id": ["d1", "d2", "d1", "d3", "d4"],
            "lang": ["en", "en", "en", "zh", "zh"],
        }
    )
    if positions:
        queries = queries.with_columns(pl.Series("rel_pos", [0.0, 0.5, 0.99, 0.26, 0.7]))
    qrels = pl.DataFrame({"query_id": queries["query_id"], "doc_id": queries["doc_id"], "score": [1] * 5})
    drops = pl.DataFrame(
        {
            "stage": ["01_sample_by_length", "01_sample_by_length", "02_generate_queries"],
            "kind": ["doc", "doc", "query"],
            "id": ["d8", "d9", "q9"],
            "reason": ["not_sampled", "not_sampled", "llm_failed"],
        }
    )
    return Bench.of(corpus=corpus, queries=queries, qrels=qrels, drops=drops)


def mini_run_stats() -> dict[str, Any]:
    base = {"queries_in": 0, "queries_out": 0}
    return {
        "recipe": "mini",
        "stages": [
            {"stage": "00_load", "docs_in": 6, "docs_out": 6, **base, "dropped": {}, "tokenizer": "words"},
            {
                "stage": "01_sample_by_length",
                "docs_in": 6,
                "docs_out": 4,
                **base,
                "dropped": {"not_sampled": 2},
                "llm": NO_LLM,
                "prompts": {},
            },
            {
                "stage": "02_generate_queries",
                "docs_in": 4,
                "docs_out": 4,
                "queries_in": 0,
                "queries_out": 5,
                "dropped": {"llm_failed": 1},
                "llm": LLM,
                "prompts": {"posir_generate": PROMPT_SHA},
            },
        ],
    }


@pytest.fixture
def mini_folder(tmp_path: Path) -> Path:
    """The mini bench written as a build writes it (BEIR files + parquet + stats.json)."""
    return write_beir(mini_bench(), tmp_path / "mini", stats=mini_run_stats())


hub = hub_fixture(TOKEN)


@pytest.fixture(scope="session")
def quickstart_build(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The shipped quickstart recipe built through the runner, then published."""
    from builder.publish.outputs import publish_outputs
    from builder.recipe.model import parse_recipe
    from builder.run.runner import Runner, RunOptions
    from builder.util.resources import find_recipe

    root = tmp_path_factory.mktemp("quickstart")
    loaded = parse_recipe(find_recipe("quickstart"))
    result = Runner(loaded, RunOptions(run_root=root / "runs", out_dir=root / "out")).run()
    run_stats = {"recipe": loaded.recipe.name, "stages": result.stage_stats}
    published = publish_outputs(result.bench, result.out_dir, run_stats, loaded)
    return {"folder": result.out_dir, "bench": result.bench, "loaded": loaded, "published": published}
