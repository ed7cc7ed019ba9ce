"""Confounds of position in the build's stats.json, terminal warnings and card: per
position third, query–span overlap, BM25 of the query against its span, span and document
length, question-type mix; an SMD above 0.2 is a warning that names the confound."""

from __future__ import annotations

import math
import re
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from builder.bench import SPAN_DTYPE, Bench
from builder.publish.outputs import publish_folder
from builder.publish.stats import compute_stats
from builder.run.report import print_run_summary
from builder.run.runner import RunResult

DOCS = {
    "d1": "alpha beta gamma delta",
    "d2": "kappa mu nu xi omicron pi",
    "d3": "rho psi tau upsilon phi chi omega eta",
    "d4": "theta sigma zeta one two three four five six seven",
}
# (query, doc, span end, third): every span starts the document and holds its first two words.
QUERIES = [
    ("alpha beta", "d1", 10, "beginning"),
    ("kappa lambda", "d2", 8, "beginning"),
    ("rho chord", "d3", 7, "end"),
    ("iota omega", "d4", 11, "end"),
]


def _bench() -> Bench:
    corpus = pl.DataFrame(
        {
            "doc_id": list(DOCS),
            "title": [""] * 4,
            "text": list(DOCS.values()),
            "lang": ["en"] * 4,
            "domain": ["web"] * 4,
            "n_tokens": [len(t.split()) for t in DOCS.values()],
        }
    )
    queries = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(1, 5)],
            "text": [q[0] for q in QUERIES],
            "doc_id": [q[1] for q in QUERIES],
            "lang": ["en"] * 4,
            "position_tag": [q[3] for q in QUERIES],
            "spans": [[{"start": 0, "end": q[2], "method": "exact", "score": 1.0}] for q in QUERIES],
        },
        schema_overrides={"spans": SPAN_DTYPE},
    )
    qrels = pl.DataFrame({"query_id": queries["query_id"], "doc_id": queries["doc_id"], "score": [1] * 4})
    return Bench.of(corpus=corpus, queries=queries, qrels=qrels)


def test_confounds_per_third_by_hand():
    found = compute_stats(_bench(), {"stages": []}, confound_min_group=2)["confounds"]
    assert (found["grouping"], found["min_group"], found["compared_groups"]) == (
        "position_tag",
        2,
        ["beginning", "end"],
    )
    begin, end = found["groups"]
    # Overlap: beginning 2/2 and 1/2, end 1/2 and 0/2; both variances 0.125.
    assert (begin["n"], begin["overlap"], end["overlap"]) == (
        2,
        {"mean": 0.75, "sd": 0.3536},
        {"mean": 0.25, "sd": 0.3536},
    )
    # BM25 with the four 2-word spans as the corpus: each matched word scores idf / (1 + k1),
    # idf = ln(1 + 3.5 / 1.5); the beginning's spans hold 2 and 1 query words, the end's 1 and 0.
    word = math.log(1 + 3.5 / 1.5) / 2.5
    assert begin["span_bm25"]["mean"] == pytest.approx(1.5 * word, abs=1e-4)
    assert end["span_bm25"]["mean"] == pytest.approx(0.5 * word, abs=1e-4)
    assert (begin["span_words"], begin["doc_words"]) == ({"mean": 2.0, "sd": 0.0}, {"mean": 5.0, "sd": 1.4142})
    assert end["doc_words"] == {"mean": 9.0, "sd": 1.4142}
    assert begin["question_types"] == {"other": 1.0}
    # SMDs: overlap 0.5 / 0.3536, BM25 likewise, documents (5 - 9) / 1.4142; spans and types do not vary.
    assert found["warnings"] == [
        "confound: position_tag beginning and end differ in overlap (standardized mean difference +1.41): "
        "PSI over position_tag measures it too",
        "confound: position_tag beginning and end differ in span_bm25 (standardized mean difference +1.41): "
        "PSI over position_tag measures it too",
        "confound: position_tag beginning and end differ in doc_words (standardized mean difference -2.83): "
        "PSI over position_tag measures it too",
    ]


def test_confound_warnings_join_the_builds_warnings_and_need_large_groups():
    stats = compute_stats(_bench(), {"stages": []}, confound_min_group=2)
    assert [w for w in stats["warnings"] if w.startswith("confound:")] == stats["confounds"]["warnings"]
    default = compute_stats(_bench(), {"stages": []})  # groups under 30 queries are described, not compared
    assert default["confounds"]["min_group"] == 30 and default["confounds"]["warnings"] == []
    assert [g["n"] for g in default["confounds"]["groups"]] == [2, 2]


def test_a_build_without_spans_has_no_confounds():
    bench = _bench()
    stats = compute_stats(bench.replace(queries=bench.queries.drop("spans")), {"stages": []})
    assert stats["confounds"] is None


def _quickstart_warnings(folder: Path) -> list[str]:
    import json

    return [w for w in json.loads((folder / "stats.json").read_text())["warnings"] if w.startswith("confound:")]


def test_the_quickstart_names_its_confounds_in_stats_card_and_terminal(quickstart_build, tmp_path: Path):
    folder = quickstart_build["folder"]
    warnings = _quickstart_warnings(folder)
    # The same six eval reports on the quickstart (its thirds hold 34, 38 and 32 queries).
    assert (
        "confound: position_tag middle and end differ in overlap (standardized mean difference -0.28): "
        "PSI over position_tag measures it too"
        in warnings
        and len(warnings) == 6
    )
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert all(f"- {w}" in card for w in warnings)
    assert "### Confounds of position" in card
    assert re.search(r"^\| beginning \| 34 \| \d\.\d{3} \(\d\.\d{3}\) \|", card, re.MULTILINE)
    console = Console(record=True, width=400)
    print_run_summary(console, RunResult(quickstart_build["bench"], folder, tmp_path))
    said = console.export_text()
    assert all(f"warning: {w}" in said for w in warnings)


def test_an_eval_does_not_repeat_the_builds_confound_warnings_in_the_card(quickstart_build, tmp_path: Path):
    import shutil

    from tests.evaluation.test_eval_cli import _eval

    folder = Path(shutil.copytree(quickstart_build["folder"], tmp_path / "qs"))
    _eval(str(folder), "-r", "bm25", "--resamples", "20", "--permutations", "99")
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert all(card.count(f"- {w}\n") == 1 for w in _quickstart_warnings(folder))
    publish_folder(folder)  # the card written whole again, with the eval's report
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "## Evaluation" in card and all(card.count(f"- {w}\n") == 1 for w in _quickstart_warnings(folder))
