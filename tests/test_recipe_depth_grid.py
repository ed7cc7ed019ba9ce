"""recipes/depth_grid.yaml end to end, offline on a CPU: every cell a BEIR set that BEIR's
file layout and MTEB's configs load, `eval` prints the grid and draws its heatmap, and
bad input exits 2 at the recipe line at fault."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.stages.grid.cells import cell_name
from builder.util.resources import find_recipe

runner = CliRunner()
QUERIES = 6  # of the recipe's 40, to keep the suite quick; everything else as shipped
DISTRACTORS = 4  # per cell, of the recipe's 100, for the same reason


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("grid")
    result = runner.invoke(
        app,
        [
            "build",
            str(find_recipe("depth_grid")),
            "--out",
            str(root / "out"),
            "--run-dir",
            str(root / "runs"),
            "--set",
            f"stages.depth_grid.max_queries={QUERIES}",
            "--set",
            f"stages.depth_grid.distractors={DISTRACTORS}",
        ],
    )
    assert result.exit_code == 0, result.output
    return root / "out"


def _recipe_grid() -> tuple[list[float], list[int]]:
    from builder.recipe.model import parse_recipe

    (stage,) = [s for s in parse_recipe(find_recipe("depth_grid")).recipe.stage_objects() if s.name == "depth_grid"]
    return stage.params.depths, stage.params.lengths


def test_the_shipped_grid_has_seven_depths_and_four_lengths_up_to_8k():
    depths, lengths = _recipe_grid()
    assert len(depths) >= 7 and len(lengths) >= 4 and max(lengths) >= 8192


def test_every_cell_holds_each_query_once_at_its_depth_and_length(grid):
    depths, lengths = _recipe_grid()
    corpus = pl.read_parquet(grid / "corpus.parquet")
    queries = pl.read_parquet(grid / "queries.parquet")
    assert queries.height == QUERIES * len(depths) * len(lengths)
    assert corpus.height == (QUERIES + DISTRACTORS) * len(depths) * len(lengths)
    stats = json.loads((grid / "stats.json").read_text())
    (stage,) = [s for s in stats["stages"] if s["stage"] == "04_depth_grid"]
    assert stage["grid"]["queries"] == QUERIES and stage["grid"]["cells"] == len(depths) * len(lengths)
    joined = queries.join(
        corpus.select("doc_id", pl.col("text").alias("doc"), "n_tokens", "grid_depth_actual"), on="doc_id"
    )
    assert stage["grid"]["largest_depth_gap"] <= 0.05  # the stage's max_depth_error
    for row in joined.iter_rows(named=True):
        span = row["spans"][0]
        evidence = row["doc"][row["evidence_start"] : row["evidence_end"]]
        assert row["doc"].count(evidence) == 1
        assert row["evidence_start"] <= span["start"] < span["end"] <= row["evidence_end"]
        assert abs(row["n_tokens"] - row["grid_length"]) <= stage["grid"]["largest_length_gap_tokens"]
        assert row["n_tokens"] <= row["grid_length"]
    # The same evidence, character for character, in every cell of a query.
    texts = joined.with_columns(
        pl.struct("doc", "evidence_start", "evidence_end")
        .map_elements(lambda r: r["doc"][r["evidence_start"] : r["evidence_end"]], return_dtype=pl.Utf8)
        .alias("evidence")
    )
    assert texts.group_by("source_query_id").agg(pl.col("evidence").n_unique())["evidence"].to_list() == [1] * QUERIES
    at_zero = joined.filter(pl.col("grid_depth") == 0)
    assert (at_zero["evidence_start"] == 0).all()


def test_no_document_of_a_cell_holds_or_answers_another_querys_evidence(grid):
    """Across each whole cell of the shipped recipe: no document but a query's own holds its
    evidence or span, exactly or as a near copy, and no paragraph of one answers it by the
    recipe's judge (BM25, fitted as the stage fits it: on the padding corpus's paragraphs)."""
    from builder.io.corpus_loader import load_sources
    from builder.recipe.model import parse_recipe
    from builder.stages.grid.judges import BM25Judge
    from builder.stages.grid.padding import passages_of
    from tests.grid_cells import leaks

    (stage,) = [s for s in parse_recipe(find_recipe("depth_grid")).recipe.stage_objects() if s.name == "depth_grid"]
    p = stage.params
    assert p.padding is not None
    padding, _ = load_sources([p.padding], None)
    judge = BM25Judge(
        [x.text for d, t in padding.select("doc_id", "text").iter_rows() for x in passages_of(d, t)],
        p.max_score_ratio,
        p.rank_margin,
    )
    corpus = pl.read_parquet(grid / "corpus.parquet")
    queries = pl.read_parquet(grid / "queries.parquet")
    assert leaks(corpus, queries, judge, p.near_duplicate_ratio) == []


def test_the_card_says_where_the_padding_comes_from_and_what_chance_scores(grid):
    stats = json.loads((grid / "stats.json").read_text())
    (stage,) = [s for s in stats["stages"] if s["stage"] == "04_depth_grid"]
    figures = stage["grid"]
    assert figures["padding_pool"]["from"] == "python_docs source (domain python-reference)"
    assert figures["padding_share"] == {"python-reference": 1.0}
    assert figures["distractors"]["per_length"] == {str(n): DISTRACTORS for n in _recipe_grid()[1]}
    card = " ".join((grid / "README.md").read_text().split())
    assert "`04_depth_grid`'s cells: padding from python_docs source (domain python-reference)" in card
    assert f"512: {QUERIES + DISTRACTORS} documents, nDCG@10 " in card


def _cell_rows(grid: Path, cell: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The cell's documents (id -> text), queries (id -> text) and qrels (query -> document), as built."""
    corpus = pl.read_parquet(grid / "corpus.parquet").filter(pl.col("setting") == cell)
    queries = pl.read_parquet(grid / "queries.parquet").filter(pl.col("setting") == cell)
    return (
        dict(corpus.select("doc_id", "text").iter_rows()),
        dict(queries.select("query_id", "text").iter_rows()),
        dict(queries.select("query_id", "doc_id").iter_rows()),
    )


def test_each_cell_loads_in_beirs_own_loader(grid):
    loader = pytest.importorskip(
        "beir.datasets.data_loader",
        reason=("needs BEIR's GenericDataLoader: pip install --no-deps beir (as .ci/run's second pass does)"),
    )
    cell = cell_name(0.5, 2048)
    corpus, queries, qrels = loader.GenericDataLoader(data_folder=str(grid / "settings" / cell)).load(split="test")
    docs, texts, relevant = _cell_rows(grid, cell)
    assert len(queries) == len(qrels) == QUERIES and len(corpus) == QUERIES + DISTRACTORS
    assert {d: v["text"] for d, v in corpus.items()} == docs
    assert queries == texts
    assert qrels == {q: {d: 1} for q, d in relevant.items()}


def test_each_cell_loads_in_mtebs_retrieval_loader(grid, tmp_path, monkeypatch):
    pytest.importorskip("mteb", reason="needs the mteb extra")
    import datasets
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    cell = cell_name(0.5, 2048)
    # MTEB reads a subset's `<subset>-corpus`, `<subset>-queries` and `<subset>-qrels` configs.
    split = RetrievalDatasetLoader(hf_repo=str(grid), revision=None, config=cell).load()
    docs, texts, relevant = _cell_rows(grid, cell)
    assert len(split["queries"]) == len(split["relevant_docs"]) == QUERIES
    assert len(split["corpus"]) == QUERIES + DISTRACTORS
    assert dict(zip(split["corpus"]["id"], split["corpus"]["text"])) == docs
    assert dict(zip(split["queries"]["id"], split["queries"]["text"])) == texts
    assert split["relevant_docs"] == {q: {d: 1} for q, d in relevant.items()}


def test_each_cell_is_a_hub_config_in_mtebs_columns(grid, tmp_path):
    import datasets

    cell = cell_name(0.5, 2048)
    cache = str(tmp_path / "cache")
    loaded = {
        t: datasets.load_dataset(str(grid), f"{cell}-{t}", split="test", cache_dir=cache)
        for t in ("corpus", "queries", "qrels")
    }
    assert loaded["corpus"].column_names == ["_id", "title", "text"]
    assert loaded["queries"].column_names == ["_id", "text"]
    assert loaded["qrels"].column_names == ["query-id", "corpus-id", "score"]
    assert set(loaded["corpus"]["_id"]) == set(_cell_rows(grid, cell)[0]) and loaded["qrels"].num_rows == QUERIES


def test_the_card_counts_the_padding_left_out_by_reason(grid):
    stats = json.loads((grid / "stats.json").read_text())
    (stage,) = [s for s in stats["stages"] if s["stage"] == "04_depth_grid"]
    excluded = stage["grid"]["padding_excluded"]
    assert set(excluded) == {"answers_query:bm25_score", "near_duplicate_of_evidence"}
    cell = ", ".join(f"{r} {n}" for r, n in sorted(excluded.items(), key=lambda kv: (-kv[1], kv[0])))
    card = (grid / "README.md").read_text()
    assert "### Padding left out of the grid" in card
    assert f"| `04_depth_grid` | bm25 | {cell} |" in card


def test_eval_prints_the_grid_with_intervals_and_writes_the_heatmap(grid):
    result = runner.invoke(app, ["eval", str(grid), "-r", "bm25", "--resamples", "50"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"bm25: ndcg@10 by depth x length ({QUERIES} queries per cell, 95% interval)" in text
    assert "PSI over depth per length: 512:" in text
    assert "depth 100% vs 0%" in text and "Holm p" in text
    report = json.loads((grid / "eval" / "eval.json").read_text())
    section = report["retrievers"]["bm25"]
    depths, lengths = _recipe_grid()
    assert len(section["cells"]) == len(depths) * len(lengths)
    assert all(c["n"] == QUERIES and c["ndcg@10"]["ci_low"] is not None for c in section["cells"])
    assert len(section["paired"]) == (len(depths) - 1) * len(lengths)
    assert (grid / "eval" / "grid_heatmap.png").stat().st_size > 0
    card = (grid / "README.md").read_text()
    assert "## Evaluation on the depth x length grid" in card and "(eval/grid_heatmap.png)" in card


def test_bm25_cannot_tell_depths_apart(grid):
    """The same words in the same documents, only in another order: BM25 scores each query's
    document alike at every depth of a length (a bag of words has no position)."""
    runner.invoke(app, ["eval", str(grid), "-r", "bm25", "--resamples", "50"])
    report = json.loads((grid / "eval" / "eval.json").read_text())
    for test in report["retrievers"]["bm25"]["paired"]:
        assert test["mean_difference"] == pytest.approx(0.0, abs=1e-9)


def test_from_built_grids_a_built_folder(write_recipe, tmp_path):
    from builder.publish.beir import write_beir
    from tests.stages.test_depth_grid import EVIDENCE, tiny_bench

    write_beir(tiny_bench(), tmp_path / "built")
    recipe = write_recipe(
        f"name: regrid\nsources: []\ntokenizer: {{kind: words}}\nstages:\n"
        f"  - from_built: {{path: {tmp_path / 'built'}}}\n"
        "  - depth_grid: {depths: [0, 1], lengths: [12, 24], distractors: 0}\n"
    )
    result = runner.invoke(
        app, ["build", str(recipe), "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 0, result.output
    corpus = pl.read_parquet(tmp_path / "out" / "corpus.parquet").sort("grid_length", "grid_depth")
    assert corpus["n_tokens"].to_list() == [12, 12, 24, 24]
    assert [t.startswith(EVIDENCE) for t in corpus["text"]] == [True, False, True, False]
    assert [t.endswith(EVIDENCE) for t in corpus["text"]] == [False, True, False, True]
    assert sorted(p.name for p in (tmp_path / "out" / "settings").iterdir()) == [
        "depth0_len12",
        "depth0_len24",
        "depth100_len12",
        "depth100_len24",
    ]
    (stage,) = [
        s for s in json.loads((tmp_path / "out" / "stats.json").read_text())["stages"] if s["stage"] == "02_depth_grid"
    ]
    assert stage["grid"]["padding_pool"] == {"from": f"built folder {tmp_path / 'built'}", "documents": 3}
    assert stage["grid"]["padding_share"] == {"zoo": 1.0}


def test_from_built_pads_from_the_corpus_the_recipe_names(write_recipe, tmp_path):
    from builder.publish.beir import write_beir
    from tests.stages.test_depth_grid import EVIDENCE, tiny_bench

    write_beir(tiny_bench(), tmp_path / "built")
    lines = [f"Plain word{k} sits here. Plain word{k} stays put." for k in range(20)]
    (tmp_path / "pad.jsonl").write_text(
        "".join(json.dumps({"id": f"p{k}", "text": t}) + "\n" for k, t in enumerate(lines))
    )
    recipe = write_recipe(
        f"name: regrid\nsources: []\ntokenizer: {{kind: words}}\nstages:\n"
        f"  - from_built: {{path: {tmp_path / 'built'}}}\n"
        "  - depth_grid:\n      depths: [0, 1]\n      lengths: [12, 24]\n      distractors: 2\n"
        f"      padding: {{type: jsonl, path: {tmp_path / 'pad.jsonl'}, domain: plain}}\n"
    )
    result = runner.invoke(
        app, ["build", str(recipe), "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 0, result.output
    corpus = pl.read_parquet(tmp_path / "out" / "corpus.parquet")
    padding = [t.replace(EVIDENCE, "") for t in corpus["text"]]
    assert all("Plain word" in t and "apples" not in t and "rivers" not in t for t in padding)
    (stage,) = [
        s for s in json.loads((tmp_path / "out" / "stats.json").read_text())["stages"] if s["stage"] == "02_depth_grid"
    ]
    assert stage["grid"]["padding_pool"] == {
        "from": f"jsonl source {tmp_path / 'pad.jsonl'} (domain plain)",
        "documents": 20,
    }
    assert stage["grid"]["padding_share"] == {"plain": 1.0}
    assert corpus.height == 4 + 2 * 4  # a query and two distractors in each of four cells


def test_from_built_beside_the_recipes_sources_exits_2_at_its_line(write_recipe, tmp_path):
    recipe = write_recipe(
        f"name: regrid\nsources: [{{type: python_docs}}]\ntokenizer: {{kind: words}}\nstages:\n"
        f"  - from_built: {{path: {tmp_path / 'built'}}}\n  - depth_grid: {{}}\n"
    )
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert f"{recipe}:5: stages.0.from_built.path: from_built reads its documents from the built folder" in text
    assert "set `sources: []`" in text


def test_a_folder_without_spans_exits_2_at_the_path_line(write_recipe, tmp_path):
    from builder.bench import Bench
    from builder.publish.beir import write_beir

    plain = Bench.of(
        corpus=pl.DataFrame({"doc_id": ["d"], "text": ["Some text."], "n_tokens": [2]}),
        queries=pl.DataFrame({"query_id": ["q"], "text": ["text?"], "doc_id": ["d"]}),
        qrels=pl.DataFrame({"query_id": ["q"], "doc_id": ["d"], "score": [1]}),
    )
    write_beir(plain, tmp_path / "plain")
    recipe = write_recipe(
        f"name: nospans\nsources: []\ntokenizer: {{kind: words}}\nstages:\n"
        f"  - from_built:\n      path: {tmp_path / 'plain'}\n  - depth_grid: {{}}\n"
    )
    result = runner.invoke(
        app, ["build", str(recipe), "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{recipe}:6: stages.0.from_built.path: {tmp_path / 'plain' / 'queries.parquet'} has no spans" in " ".join(
        result.output.split()
    )


def test_depths_outside_0_to_1_exit_2_at_their_line(write_recipe):
    recipe = write_recipe(
        "name: bad\nsources: [{type: python_docs}]\ntokenizer: {kind: words}\nstages:\n"
        "  - localize_spans: {}\n  - depth_grid:\n      depths: [0, 1.5]\n"
    )
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{recipe}:7: stages.1.depth_grid.depths: " in result.output
    assert "depths are shares of the document from 0 to 1; got 1.5" in result.output


def test_lengths_below_the_evidence_exit_2_at_their_line(write_recipe, tmp_path):
    recipe = write_recipe(
        "name: short\nseed: 13\nsources: [{type: python_docs}]\ntokenizer: {kind: words}\nstages:\n"
        "  - sample_by_length: {buckets: [0, 512], weights: [1], n_docs: 3}\n"
        "  - generate_queries: {mode: extractive, questions_per_call: 1}\n"
        "  - localize_spans: {}\n"
        "  - depth_grid:\n      depths: [0, 1]\n      lengths: [3, 512]\n"
    )
    result = runner.invoke(
        app, ["build", str(recipe), "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{recipe}:11: stages.3.depth_grid.lengths: length 3 is below the evidence of every query" in " ".join(
        result.output.split()
    )


def test_the_llm_judge_runs_from_a_recipe_with_the_mock_llm(write_recipe, tmp_path):
    from builder.publish.beir import write_beir
    from tests.stages.test_depth_grid import tiny_bench

    write_beir(tiny_bench(), tmp_path / "built")
    recipe = write_recipe(
        f"name: regrid\nsources: []\ntokenizer: {{kind: words}}\n"
        "models:\n  judge: {model: m, base_url: 'http://127.0.0.1:9/v1'}\nstages:\n"
        f"  - from_built: {{path: {tmp_path / 'built'}}}\n"
        "  - depth_grid: {depths: [0, 1], lengths: [12, 24], judge: llm, llm: judge, distractors: 0}\n"
    )
    result = runner.invoke(
        app, ["build", str(recipe), "--mock-llm", "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 0, result.output
    (stage,) = [
        s for s in json.loads((tmp_path / "out" / "stats.json").read_text())["stages"] if s["stage"] == "02_depth_grid"
    ]
    # The pool's five passages but the near-duplicate, each graded once, and the paragraph
    # cut short at 12 tokens graded as it stands.
    assert stage["grid"]["judge"] == "llm" and stage["llm"]["calls"] == 5
    assert stage["grid"]["padding_excluded"]["near_duplicate_of_evidence"] == 1


def test_a_judge_without_its_model_exits_2_at_its_line(write_recipe):
    recipe = write_recipe(
        "name: bad\nsources: [{type: python_docs}]\ntokenizer: {kind: words}\nstages:\n"
        "  - localize_spans: {}\n  - depth_grid:\n      judge: reranker\n"
    )
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{recipe}:6: stages.1.depth_grid: " in result.output
    assert "judge reranker needs `reranker:` naming a rerankers: entry" in " ".join(result.output.split())
