"""`push` carries the whole output of a multilingual, controlled-probe build, and the card
has a config for every table in it (checked with `push --dry-run` on the fake Hub)."""

from __future__ import annotations

from pathlib import Path

import datasets
import huggingface_hub.constants
import polars as pl
import pytest
import yaml
from rich.console import Console

from builder.bench import Bench
from builder.publish.beir import write_beir
from builder.publish.hub import push
from builder.publish.multilingual import write_multilingual
from builder.publish.outputs import publish_outputs
from builder.recipe.sections import MultilingualOutput
from tests.io.test_multilingual import _bench
from tests.publish.conftest import mini_run_stats
from tests.publish.fake_hub import FakeHub

# BEIR files that repeat, in another format, the parquet a config points at.
REPEATS = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")


def probe_bench() -> Bench:
    """The three-language bench of the multilingual tests, its queries split over two
    controlled-probe settings, each with one document pair."""
    bench = _bench()
    n = bench.queries.height
    queries = bench.queries.with_columns(
        pl.Series("setting", ["near", "far"] * (n // 2)),
        pl.Series("pairs", [[{"left": "d1", "right": "d2"}]] * n),
    )
    return Bench.of(bench.corpus, queries, bench.qrels, bench.drops)


@pytest.fixture
def built(tmp_path: Path) -> Path:
    bench = probe_bench()
    folder = write_beir(bench, tmp_path / "out", stats=mini_run_stats())
    write_multilingual(bench, folder, MultilingualOutput(per_language=True, posir_layout=True, cross_lingual=True))
    publish_outputs(bench, folder, mini_run_stats(), None)
    (folder / ".eval_cache").mkdir()
    (folder / ".eval_cache" / "run.json").write_text("{}")
    return folder


def _card_configs(folder: Path) -> dict[str, list[str]]:
    card = (folder / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(card[4:].partition("\n---\n")[0])
    out = {}
    for config in meta["configs"]:
        paths = config["data_files"][0]["path"]
        out[config["config_name"]] = [paths] if isinstance(paths, str) else paths
    return out


def test_dry_run_lists_every_output_file(built, monkeypatch, tmp_path):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    log = tmp_path / "plan.txt"
    with FakeHub() as hub, log.open("w") as handle:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        result = push(built, "org/bench", dry_run=True, console=Console(file=handle, width=300))
        assert hub.repos == {}
    files = set(result.files)
    for expected in (
        "pairs.parquet",
        "settings/near/corpus.jsonl",
        "settings/far/qrels/test.tsv",
        "fra-Latn/corpus.jsonl",
        "fra-Latn/queries.parquet",
        "deu-Latn/stats.json",
        "cross/fra-Latn-eng-Latn/qrels/test.tsv",
        "posir/fra-Latn/law/queries.parquet",
        "posir/eng-Latn/web/qrels/test.parquet",
        "positions/fra-Latn/law.parquet",
    ):
        assert expected in files, expected
    on_disk = {p.relative_to(built).as_posix() for p in built.rglob("*") if p.is_file()}
    local = {"corpus.parquet", "queries.parquet", "qrels.parquet", ".eval_cache/run.json"}
    assert files == (on_disk - local) | {"CHANGELOG.md"}
    plan = log.read_text()
    assert all(f"add     {f}" in plan for f in files)


def test_every_uploaded_table_has_a_config_that_loads(built, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    configs = _card_configs(built)
    covered = {p for paths in configs.values() for p in paths}
    tables = {
        p.relative_to(built).as_posix()
        for p in built.rglob("*")
        if p.suffix in (".parquet", ".jsonl", ".tsv") and not p.name.startswith(".")
    }
    local = {"corpus.parquet", "queries.parquet", "qrels.parquet"}
    repeats = {
        t
        for t in tables
        if t.endswith(REPEATS)
        and (built / t).parent.joinpath("corpus.parquet" if t.endswith(".jsonl") else "../qrels.parquet").exists()
    }
    empty = {t for t in tables if t.endswith(".parquet") and pl.read_parquet(built / t).is_empty()}
    assert tables - covered - local - repeats - empty == set()
    cache = str(tmp_path / "cache")
    for name, rows in (
        ("pairs", 6),
        ("drops", 3),
        ("beir_fra-Latn-queries", 2),
        ("beir_fra-Latn-qrels", 2),
        ("cross_fra-Latn-eng-Latn-corpus", 2),
        ("setting_near-queries", 3),
        ("beir_fra-Latn_setting_far-corpus", 1),
        ("posir_fra-Latn_law-queries", 1),
        ("posir_fra-Latn_law-qrels", 1),
    ):
        assert datasets.load_dataset(str(built), name, split="test", cache_dir=cache).num_rows == rows, name


def test_card_says_which_span_pos_char_span_holds_in_the_posir_layout(built):
    card = (built / "README.md").read_text(encoding="utf-8")
    assert "`pos_char_span` is one `[start, end]` pair" in card
    assert "the first of\nthe query's spans" in card
    assert "`posir_<lang>_<domain>-*`" in card
