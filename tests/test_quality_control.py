"""Quality-control stages end to end on shared data, with BM25 and an LLM judge served by
the local OpenAI-compatible server; plus recipe validation of reranker entries."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import polars as pl
import pytest

from builder.recipe.model import RecipeBase, parse_recipe
from builder.recipe.yaml_text import RecipeError
from builder.run.runner import Runner, RunOptions
from tests.fixtures.scripted_grader import with_grades
from tests.fixtures.scripted_llm import scripted_llm

pytestmark = pytest.mark.skipif(
    "rerankers" not in RecipeBase.model_fields,
    reason="needs the recipe's rerankers: section (wired in builder/recipe.py)",
)

SCIFACT = """
name: qc_scifact
seed: 5
sources: [{type: jsonl, path: "CORPUS", fields: {id: _id, text: text, title: title}}]
models:
  judge: {model: grader, base_url: "BASE", max_concurrency: 4}
rerankers:
  grader: {backend: llm_judge, llm: judge, questions_per_call: 6}
stages:
  - generate_queries: {mode: extractive, questions_per_call: 1}
  - localize_spans: {}
  - span_contrast: {rerankers: [bm25]}
  - llm_relevance: {llm: judge, contrast: true}
  - false_negatives: {rerankers: [bm25, grader], top_k: 20}
  - balance: {column: position_tag}
"""

FINEWEB = """
name: qc_fineweb
seed: 3
sources: [{type: jsonl, path: "CORPUS"}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 4}
  j1: {model: grader, base_url: "BASE", seed: 1}
  j2: {model: grader, base_url: "BASE", seed: 2}
  j3: {model: grader-never, base_url: "BASE", seed: 3}
rerankers:
  lexical: {backend: bm25, normalize: true}
  grader: {backend: llm_judge, llm: j1}
stages:
  - summarize: {llm: gen}
  - generate_queries: {mode: chunked, llm: gen, chunk_size: 120, questions_per_call: 1}
  - localize_spans: {llm: gen}
  - segment_agreement: {rerankers: [lexical], label_column: chunk_tag}
  - balance: {column: chunk_tag}
  - segment_agreement: {rerankers: [], llm: j1, label_column: chunk_tag}
  - false_negatives: {mode: fineweb_posq, rerankers: [lexical, grader], top_k: 20, judges: [j1, j2, j3]}
"""


def _plant(rows: list[dict], text_field: str, out: Path) -> str:
    """Write rows plus a near-duplicate of the first: its text less the last sentence,
    which BM25 ranks above the (longer) original for any query about the rest."""
    twin = {**rows[0], text_field: rows[0][text_field].rstrip().rsplit(". ", 1)[0] + "."}
    twin["_id" if "_id" in twin else "id"] = "planted"
    out.write_text("".join(json.dumps(r) + "\n" for r in [*rows, twin]), encoding="utf-8")
    return str(out)


def _first(path: Path, n: int) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(next(f)) for _ in range(n)]


def _never(body: dict) -> str:
    if body.get("model") == "grader-never":
        return json.dumps([{"id": i, "grade": 0} for i in range(1, 40)][: body["messages"][-1]["content"].count("?")])
    return with_grades(scripted_llm)(body)


def _run(text: str, tmp_path: Path):
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    return Runner(parse_recipe(path), RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()


def test_posir_style_checks_on_scifact(shared_data, fake_openai, tmp_path):
    srv = fake_openai(responder=with_grades())
    corpus = _plant(_first(shared_data / "scifact_beir/corpus.jsonl", 40), "text", tmp_path / "c.jsonl")
    result = _run(SCIFACT.replace("CORPUS", corpus).replace("BASE", srv.base_url), tmp_path)
    drops = result.bench.drops.select("stage", "kind", "id", "reason").rows()
    assert ("05_false_negatives", "doc", "planted", "false_negative") in drops
    assert any(
        stage == "05_false_negatives"
        and kind == "query"
        and qid.startswith("planted-q")
        and reason == "doc_removed:false_negative"
        for stage, kind, qid, reason in drops
    )
    stats = {s.stage.split("_", 1)[1]: s for s in result.stage_stats}
    contrast = stats["span_contrast"].figures["span_contrast"]["bm25"]
    assert contrast["higher"] == stats["span_contrast"].queries_in > 30  # cloze questions quote their span
    assert set(stats["llm_relevance"].figures["llm_grades_with_span"]) <= {"3", "4"}
    q = result.bench.queries
    assert q.height > 5 and q["position_tag"].value_counts()["count"].n_unique() == 1  # balanced
    assert (result.out_dir / "queries.jsonl").exists() and srv.request_count > 10


def test_fineweb_posq_style_checks_on_fineweb(shared_data, fake_openai, tmp_path):
    srv = fake_openai(responder=_never)
    rows = [
        r
        for r in _first(shared_data / "fineweb_sample/fineweb_10bt_docs_1000.jsonl", 60)
        if 300 < len(r["text"].split()) < 700
    ][:8]
    corpus = _plant(rows, "text", tmp_path / "c.jsonl")
    result = _run(FINEWEB.replace("CORPUS", corpus).replace("BASE", srv.base_url), tmp_path)
    drops = result.bench.drops
    reasons = set(drops["reason"])
    assert {"segment_disagreement:lexical", "false_negative_confirmed"} <= reasons
    confirmed = drops.filter(pl.col("reason") == "false_negative_confirmed")["id"].to_list()
    doc_of = dict(
        pl.read_parquet(result.run_dir / "03_localize_spans/queries.parquet").select("query_id", "doc_id").iter_rows()
    )
    # The original and its planted twin answer each other's queries; two of three judges agree.
    assert {doc_of[q] for q in confirmed} == {rows[0]["id"], "planted"}
    votes = pl.read_parquet(next(result.run_dir.glob("work/07_false_negatives/false_negatives.parquet")))
    assert set(votes["judge_votes"]) == {2}
    assert result.bench.corpus.height == len(rows) + 1  # FineWeb-PosQ drops queries, not passages


def test_neural_reranker_without_the_extra_fails_validation(write_recipe, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "sentence_transformers" else real(name, *a)
    )
    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\n"
        "rerankers:\n  ce: {backend: cross_encoder, model: cross-encoder/ms-marco-MiniLM-L6-v2}\n"
        "stages:\n  - span_contrast: {rerankers: [ce, bm52]}\n"
    )
    with pytest.raises(RecipeError) as err:
        parse_recipe(path)
    text = err.value.render()
    from builder.util.install_hint import install_command

    assert install_command("rerank") in text and "'bm52' is not declared" in text
    assert ":6:" in text  # the stage's line


def test_unknown_reranker_key_names_the_line(write_recipe):
    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\n"
        "rerankers:\n  lex: {backend: bm25, normalise: true}\nstages: [{span_contrast: {rerankers: [lex]}}]\n"
    )
    with pytest.raises(RecipeError) as err:
        parse_recipe(path)
    assert "lex.normalise: unknown key 'normalise' (did you mean 'normalize'?)" in err.value.render()


WINDOW_RECIPE = """
name: windows
sources: [{type: jsonl, path: docs.jsonl}]
rerankers:
  mini: {backend: bi_encoder, max_length: 64, BACKEND_MODEL}
stages:
  - generate_queries: {mode: extractive}
  - localize_spans: {}
  - span_contrast: {rerankers: [bm25, mini]}
"""


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_validate_and_plan_warn_when_a_scorer_reads_less_than_the_documents(command, tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from builder.cli import app

    lines = [{"id": f"d{i}", "text": " ".join(f"w{i}x{k}" for k in range(30 if i % 4 else 120))} for i in range(8)]
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    # A hub id is not on disk: tokens are approximated from words (marked ~).
    (tmp_path / "r.yaml").write_text(WINDOW_RECIPE.replace("BACKEND_MODEL", "model: org/remote-model"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("builder.recipe.checks.missing_extra", lambda config: None)
    monkeypatch.setattr("builder.recipe.preflight.model_problem", lambda *a, **k: None)  # no such model
    result = CliRunner().invoke(app, [command, "r.yaml"])
    assert result.exit_code == 0, result.output
    assert (
        "03_span_contrast: reranker 'mini' reads 64 tokens; 25% of 8 sampled documents are longer "
        "(longest ~156 tokens): scored in overlapping windows"
    ) in " ".join(result.output.split())
