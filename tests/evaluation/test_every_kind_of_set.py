"""`eval` shows what each kind of set carries: ColDeR's settings and evidence-position
variants, and a 20-bin position table for sets without bins of their own (FarRelevant,
ColDeR)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from builder.bench import Bench
from builder.publish.beir import write_beir
from tests.evaluation.test_eval_cli import app
from tests.evaluation.tiny_bench import tiny_bench

OWN_GROUPS = ["char_bucket", "position_tag", "position_bin", "length_bucket", "rel_pos"]


def probe_like(root: Path) -> Path:
    """The tiny bench as a controlled-probe build: a setting per query, a variant per
    document, spans but no position fields of its own."""
    bench = tiny_bench()
    n = bench.queries.height
    queries = bench.queries.drop(OWN_GROUPS, strict=False).with_columns(
        pl.Series("setting", ["position_i", "first_vs_last"] * (n // 2))
    )
    corpus = bench.corpus.with_columns(pl.Series("variant", [f"pos{i % 3 + 1:02d}" for i in range(n)]))
    return write_beir(Bench.of(corpus, queries, bench.qrels, bench.drops), root / "probe")


def test_probe_set_gets_settings_variants_and_a_bins_table(tmp_path):
    folder = probe_like(tmp_path)
    result = CliRunner().invoke(app, ["eval", str(folder), "-r", "bm25", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "o" / "eval.json").read_text())
    assert report["dataset"]["groupings"] == ["setting", "variant"]
    bm25 = report["retrievers"]["bm25"]
    assert [g["group"] for g in bm25["groupings"]["setting"]["groups"]] == ["first_vs_last", "position_i"]
    assert [g["n"] for g in bm25["groupings"]["setting"]["groups"]] == [8, 8]
    variants = {g["group"]: g["n"] for g in bm25["groupings"]["variant"]["groups"]}
    assert variants["position_i/pos01"] == 3 and sum(variants.values()) == 16
    shown = " ".join(result.stdout.split())  # table titles wrap at the terminal's width
    assert "nDCG@10 by setting" in shown
    assert "nDCG@10 by evidence position" in shown
    assert "nDCG@10 by relative position (20 bins)" in shown
