"""`build-bench diff OLD NEW` on hand-made versions whose differences are known."""

from __future__ import annotations

import json

import polars as pl
import typer
from typer.testing import CliRunner

from builder.bench import SPAN_DTYPE, Bench
from builder.publish.beir import write_beir
from builder.publish.cli import diff_command
from builder.publish.diff import diff_versions, read_version
from builder.publish.layout import write_hub_layout

app = typer.Typer()
app.command()(diff_command)


def _span(start: int, end: int) -> list[dict]:
    return [{"start": start, "end": end, "method": "exact", "score": 100.0}]


def _bench(
    docs: dict[str, tuple[str, str]],
    queries: list[tuple[str, str, str, int, int, str]],
    qrels: list[tuple[str, str, int]],
) -> Bench:
    """docs: id -> (text, lang); queries: (id, text, doc, span start, position bin, tag)."""
    corpus = pl.DataFrame(
        {
            "doc_id": list(docs),
            "title": [""] * len(docs),
            "text": [t for t, _ in docs.values()],
            "lang": [lang for _, lang in docs.values()],
            "domain": ["web"] * len(docs),
            "n_tokens": [10] * len(docs),
        }
    )
    q = pl.DataFrame(
        {
            "query_id": [r[0] for r in queries],
            "text": [r[1] for r in queries],
            "doc_id": [r[2] for r in queries],
            "lang": [docs[r[2]][1] for r in queries],
            "spans": pl.Series("spans", [_span(r[3], r[3] + 4) for r in queries], dtype=SPAN_DTYPE),
            "position_bin": [r[4] for r in queries],
            "position_tag": [r[5] for r in queries],
        }
    )
    rels = pl.DataFrame(qrels, schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "score": pl.Int64}, orient="row")
    return Bench.of(corpus=corpus, queries=q, qrels=rels)


OLD = _bench(
    {"a": ("alpha text", "en"), "b": ("beta text", "en"), "c": ("gamma text", "de")},
    [
        ("a-q1", "what is alpha?", "a", 0, 0, "beginning"),
        ("a-q2", "where is alpha?", "a", 6, 12, "end"),
        ("b-q1", "what is beta?", "b", 0, 0, "beginning"),
        ("c-q1", "was ist gamma?", "c", 3, 6, "middle"),
    ],
    [("a-q1", "a", 1), ("a-q2", "a", 1), ("b-q1", "b", 1), ("c-q1", "c", 1)],
)
NEW = _bench(
    {"a": ("alpha text", "en"), "b": ("beta text, longer", "en"), "d": ("delta text", "fr")},
    [
        ("a-q1", "what is alpha?", "a", 0, 0, "beginning"),
        ("a-q2", "where is the alpha?", "a", 5, 10, "middle"),
        ("b-q1", "what is beta?", "b", 0, 0, "beginning"),
        ("d-q1", "qu'est-ce que delta ?", "d", 0, 0, "beginning"),
    ],
    [("a-q1", "a", 1), ("a-q2", "a", 1), ("a-q2", "b", 1), ("b-q1", "b", 1), ("d-q1", "d", 1)],
)


def test_diff_counts_every_kind_of_change_per_language_and_position_group(tmp_path):
    result = diff_versions(
        read_version(write_beir(OLD, tmp_path / "v1")), read_version(write_beir(NEW, tmp_path / "v2"))
    )
    docs, queries = result["documents"], result["queries"]
    assert (docs["old"], docs["new"], docs["unchanged"]) == (3, 3, 1)
    assert docs["added"] == {"count": 1, "by_language": {"fr": 1}, "examples": ["d"]}
    assert docs["removed"] == {"count": 1, "by_language": {"de": 1}, "examples": ["c"]}
    assert docs["changed"] == {"count": 1, "by_language": {"en": 1}, "examples": ["b"]}
    assert queries["added"] == {
        "count": 1,
        "by_language_and_position": {"fr/beginning": 1},
        "examples": [{"id": "d-q1", "text": "qu'est-ce que delta ?"}],
    }
    assert queries["removed"]["by_language_and_position"] == {"de/middle": 1}
    assert queries["unchanged"] == 2
    assert queries["changed"]["count"] == 1
    assert queries["changed"]["by_language_and_position"] == {"en/middle": 1}
    fields = queries["changed"]["by_field"]
    assert {f: v["count"] for f, v in fields.items()} == {"text": 1, "span": 1, "label": 1, "position_bin": 1}
    assert fields["text"]["examples"] == [{"id": "a-q2", "old": "where is alpha?", "new": "where is the alpha?"}]
    assert fields["span"]["examples"] == [{"id": "a-q2", "old": "6-10", "new": "5-9"}]
    assert fields["label"]["examples"] == [{"id": "a-q2", "old": "a=1", "new": "a=1,b=1"}]
    assert fields["position_bin"]["examples"] == [{"id": "a-q2", "old": "12", "new": "10"}]


def test_a_published_folder_reads_as_its_build(tmp_path):
    built = write_beir(NEW, tmp_path / "built")
    published = tmp_path / "published"
    write_hub_layout(NEW, published)
    assert not (published / "corpus.parquet").exists()
    same = diff_versions(read_version(built), read_version(published))
    assert same["documents"]["unchanged"] == 3 and same["queries"]["unchanged"] == 4
    assert all(same[w][k]["count"] == 0 for w in ("documents", "queries") for k in ("added", "removed", "changed"))


def test_cli_prints_tables_or_json_and_exits_0(tmp_path):
    old, new = write_beir(OLD, tmp_path / "v1"), write_beir(NEW, tmp_path / "v2")
    shown = CliRunner().invoke(app, [str(old), str(new)], terminal_width=160)
    assert shown.exit_code == 0, shown.output
    assert "queries by language / position group" in shown.output
    assert "changed text of a-q2: 'where is alpha?' → 'where is the alpha?'" in shown.output
    as_json = CliRunner().invoke(app, [str(old), str(new), "--json"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)["queries"]["added"]["count"] == 1


def test_cli_on_a_folder_that_is_not_a_build_exits_2(tmp_path):
    result = CliRunner().invoke(app, [str(tmp_path), str(tmp_path)])
    assert result.exit_code == 2 and "not a built benchmark folder" in " ".join(result.output.split())


def test_diff_compares_pinned_inputs_and_reference_figures_when_both_have_them(tmp_path):
    old, new = write_beir(OLD, tmp_path / "v1"), write_beir(NEW, tmp_path / "v2")
    for folder, model, ndcg in ((old, "m-small", 0.25), (new, "m-large", 0.5)):
        stats = json.loads((folder / "stats.json").read_text()) if (folder / "stats.json").exists() else {}
        stats["inputs"] = {"build_bench": "0.1.0", "models": {"gen": model}, "prompts": {}}
        (folder / "stats.json").write_text(json.dumps(stats))
        (folder / "eval").mkdir()
        (folder / "eval" / "eval.json").write_text(
            json.dumps({"retrievers": {"bm25": {"overall": {"ndcg@10": ndcg}, "groupings": {}}}})
        )
    result = diff_versions(read_version(old), read_version(new))
    assert result["inputs"] == [{"input": "models.gen", "old": "m-small", "new": "m-large"}]
    assert result["evaluation"] == {"old": {"bm25": {"nDCG@10": 0.25}}, "new": {"bm25": {"nDCG@10": 0.5}}}
    shown = CliRunner().invoke(app, [str(old), str(new)], terminal_width=160)
    assert "input models.gen: 'm-small' → 'm-large'" in shown.output
    assert "bm25 nDCG@10: 0.2500 → 0.5000" in shown.output


def _grown() -> Bench:
    """v1 grown with document n: a-q2 loses to n (a false negative), b-q1 goes for a reason
    of its own, c's query was not made again, and n brings n-q1."""
    docs = {"a": ("alpha text", "en"), "b": ("beta text", "en"), "c": ("gamma text", "de"), "n": ("new alpha", "en")}
    bench = _bench(
        docs,
        [
            ("a-q1", "what is alpha?", "a", 0, 0, "beginning"),
            ("a-q2", "where is alpha?", "a", 6, 12, "end"),
            ("b-q1", "what is beta?", "b", 0, 0, "beginning"),
            ("n-q1", "what is new alpha?", "n", 0, 0, "beginning"),
        ],
        [("a-q1", "a", 1), ("a-q2", "a", 1), ("b-q1", "b", 1), ("n-q1", "n", 1)],
    )
    rivals = pl.DataFrame({"id": ["a-q2"], "reason": ["false_negative_confirmed"], "rivals": [["n", "b"]]})
    return bench.drop_queries(rivals, "false_negatives").drop_queries({"b-q1": "span_not_found"}, "localize")


def test_diff_says_which_removed_queries_the_new_documents_caused(tmp_path):
    old, new = write_beir(OLD, tmp_path / "v1"), write_beir(_grown(), tmp_path / "v2")
    removed = diff_versions(read_version(old), read_version(new))["queries"]["removed"]
    assert removed["count"] == 3
    assert removed["because_of_new_documents"] == {"count": 1, "by_reason": {"false_negative_confirmed": 1}}
    assert removed["other"] == {"count": 2, "by_reason": {"not made again": 1, "span_not_found": 1}}
    assert removed["why"] == [
        {
            "id": "a-q2",
            "stage": "false_negatives",
            "reason": "false_negative_confirmed",
            "cause": "because_of_new_documents",
            "new_documents": ["n"],
        },
        {"id": "b-q1", "stage": "localize", "reason": "span_not_found", "cause": "other", "new_documents": []},
        {"id": "c-q1", "stage": None, "reason": "not made again", "cause": "other", "new_documents": []},
    ]
    shown = CliRunner().invoke(app, [str(old), str(new)], terminal_width=160)
    said = " ".join(shown.output.split())
    assert (
        "removed queries: 1 because of new documents (false_negative_confirmed 1), "
        "2 for other reasons (not made again 1, span_not_found 1)"
    ) in said
    assert "removed query a-q2: where is alpha? [false_negative_confirmed; new document n]" in said


def test_without_a_drop_log_removals_are_not_explained_away(tmp_path):
    old, new = write_beir(OLD, tmp_path / "v1"), write_beir(_grown(), tmp_path / "v2")
    (new / "drops.parquet").unlink()
    removed = diff_versions(read_version(old), read_version(new))["queries"]["removed"]
    assert removed["because_of_new_documents"]["count"] == 0
    assert removed["other"]["by_reason"] == {"no drop log in the new version": 3}


def test_the_changelog_names_removals_caused_by_new_documents(tmp_path):
    from builder.publish.release_notes import data_lines

    result = diff_versions(
        read_version(write_beir(OLD, tmp_path / "v1")), read_version(write_beir(_grown(), tmp_path / "v2"))
    )
    lines = data_lines(result)
    assert (
        "Removed queries of the previous release: 1 because of the new documents (false_negative_confirmed 1: "
        "a-q2), 2 for other reasons (not made again 1, span_not_found 1)."
    ) in lines


def test_diff_json_examples_are_whole(tmp_path):
    long_text = "why " + "very " * 40 + "long?"
    old = _bench({"a": ("alpha text", "en")}, [("a-q1", "short?", "a", 0, 0, "beginning")], [("a-q1", "a", 1)])
    new = _bench({"a": ("alpha text", "en")}, [("a-q1", long_text, "a", 0, 0, "beginning")], [("a-q1", "a", 1)])
    old_dir, new_dir = write_beir(old, tmp_path / "v1"), write_beir(new, tmp_path / "v2")
    as_json = json.loads(CliRunner().invoke(app, [str(old_dir), str(new_dir), "--json"]).stdout)
    assert as_json["queries"]["changed"]["by_field"]["text"]["examples"][0]["new"] == long_text
    shown = CliRunner().invoke(app, [str(old_dir), str(new_dir)], terminal_width=160)
    assert long_text not in shown.output and "…" in shown.output


def test_a_document_that_lost_its_length_bucket_to_new_ones_counts_as_caused_by_them():
    from builder.publish.removals import removal_reasons

    drops = pl.DataFrame(
        {"stage": ["sample"], "kind": ["query"], "id": ["a-q1"], "reason": ["doc_removed:not_sampled"]}
    )
    grown = removal_reasons(["a-q1"], drops, {"a"}, docs_added=2)
    assert grown["because_of_new_documents"] == {"count": 1, "by_reason": {"doc_removed:not_sampled": 1}}
    same_size = removal_reasons(["a-q1"], drops, {"a"}, docs_added=0)
    assert same_size["other"]["count"] == 1 and same_size["why"][0]["cause"] == "other"
