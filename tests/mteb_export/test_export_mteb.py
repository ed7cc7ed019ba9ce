"""`build-bench export-mteb`: the task module, MTEB's statistics shape, the PR text, and
MTEB's dataset checks run first, each failure one line naming its rows, exit 2."""

from __future__ import annotations

import ast
import json

import polars as pl
from typer.testing import CliRunner

from builder.cli import app
from builder.mteb_export.folder_facts import annotations_creators
from tests.mteb_export.conftest import FLAGS

runner = CliRunner()


def export(folder, *extra):
    return runner.invoke(app, ["export-mteb", str(folder), *FLAGS, *extra])


def test_export_writes_a_filled_task_module_statistics_and_a_short_pr(quickstart):
    result = export(quickstart, "--name", "QuickstartPosRetrieval")
    assert result.exit_code == 0, result.output
    module = (quickstart / "mteb" / "quickstart_pos_retrieval.py").read_text()
    tree = ast.parse(module)
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert cls.name == "QuickstartPosRetrieval"
    call = cls.body[0].value
    fields = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    assert fields["dataset"] == {"path": "org/quickstart-posq", "revision": "v1.0.0"}
    assert fields["eval_langs"] == ["eng-Latn"]
    assert fields["license"] == "https://docs.python.org/3/license.html"
    assert fields["reference"] == "https://huggingface.co/datasets/org/quickstart-posq"
    assert fields["date"] == ("2001-01-01", "2025-10-01")
    assert fields["annotations_creators"] == "algorithmic"  # the quickstart's questions come from templates
    assert fields["bibtex_citation"].strip().startswith("@misc{zeng2026posir,")
    assert all(value is not None for value in fields.values())
    stats = json.loads((quickstart / "mteb" / "QuickstartPosRetrieval.json").read_text())["test"]
    assert (stats["num_documents"], stats["num_queries"], stats["num_samples"]) == (36, 104, 140)
    assert stats["relevant_docs_statistics"]["num_relevant_docs"] == 104
    assert stats["relevant_docs_statistics"]["num_missing_corpus_ids"] == 0
    assert stats["queries_text_statistics"]["unique_texts"] <= 104
    pr = (quickstart / "mteb" / "PR.md").read_text()
    assert len(pr) < 2000 and "36 documents, 104 queries" in pr


def test_fields_the_folder_cannot_know_are_asked_for_by_flag(quickstart):
    result = runner.invoke(app, ["export-mteb", str(quickstart), "--repo", "org/x"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [
        "export-mteb: the folder cannot tell --revision, --domain, --date, --subtype, "
        "--sample-creation: give them on the command line (see build-bench export-mteb --help)"
    ]
    assert not (quickstart / "mteb").exists()


def test_a_duplicate_text_fails_the_gate_with_one_line_naming_the_rows(quickstart):
    corpus = pl.read_parquet(quickstart / "corpus.parquet")
    first = corpus.row(0, named=True)
    copied = pl.col("doc_id") == corpus["doc_id"][1]
    corpus.with_columns(
        pl.when(copied).then(pl.lit(first["text"])).otherwise("text").alias("text"),
        pl.when(copied).then(pl.lit(first["title"])).otherwise("title").alias("title"),
    ).write_parquet(quickstart / "corpus.parquet")
    result = export(quickstart)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"export-mteb: corpus: 1 duplicate texts (2.8%, MTEB allows under 1 %): "
        f"{', '.join(sorted([first['doc_id'], corpus['doc_id'][1]]))}"
    ]


def test_an_orphan_qrel_fails_the_gate_with_one_line_naming_it(quickstart):
    qrels = pl.read_parquet(quickstart / "qrels.parquet")
    orphan = pl.DataFrame({"query_id": [qrels["query_id"][0]], "doc_id": ["no-such-doc"], "score": [1]})
    pl.concat([qrels, orphan.cast(qrels.schema)]).write_parquet(quickstart / "qrels.parquet")
    result = export(quickstart)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"export-mteb: qrels: 1 qrels name documents not in the corpus: {qrels['query_id'][0]}->no-such-doc"
    ]


def test_short_texts_and_queries_without_relevant_documents_are_named(quickstart):
    queries = pl.read_parquet(quickstart / "queries.parquet")
    first, second = queries["query_id"][:2]
    queries.with_columns(
        pl.when(pl.col("query_id") == first).then(pl.lit("why")).otherwise("text").alias("text")
    ).write_parquet(quickstart / "queries.parquet")
    qrels = pl.read_parquet(quickstart / "qrels.parquet")
    qrels.filter(pl.col("query_id") != second).write_parquet(quickstart / "qrels.parquet")
    result = export(quickstart)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"export-mteb: queries: 1 texts of 3 characters or fewer: {first}",
        f"export-mteb: queries: 1 queries without a relevant document: {second}",
    ]


def test_bad_language_codes_and_dates_are_refused(quickstart):
    stats = json.loads((quickstart / "stats.json").read_text())
    stats["languages"][0]["lang"] = "english"
    (quickstart / "stats.json").write_text(json.dumps(stats))
    result = export(quickstart)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "export-mteb: metadata: language codes not ISO 639-3 + script (like eng-Latn): english"
    ]


def test_labels_are_lm_generated_and_reviewed_once_people_checked_them():
    lm = {"llm": {"total": {"calls": 12, "cache_hits": 0}}}
    assert annotations_creators(lm) == "LM-generated"
    assert annotations_creators({**lm, "review": {"n_judgments": 40}}) == "LM-generated and reviewed"
    assert annotations_creators({"llm": {"total": {"calls": 0}}}) == "algorithmic"
    assert annotations_creators({"review": {"n_judgments": 3}}) == "automatic-and-reviewed"
