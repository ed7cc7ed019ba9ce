"""A built folder describes itself: the build records its kind and tables in the manifest,
`BuiltFolder.open` reads them back (and infers them for a folder written before the
manifest held them), and no module outside builder/io names a table file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from builder.bench import Bench
from builder.io.built_folder import BENCHMARK, GRID, MANIFEST_FILE, PROBES, BuiltFolder
from builder.publish.beir import write_beir
from builder.records.marker import write_marker

BUILDER = Path(__file__).resolve().parents[2] / "builder"
# A table file's name written out: every one of them is spelled once, in builder/io.
TABLE_FILE = re.compile(
    r"""(["'])(queries|corpus|qrels|drops|stats|manifest|spans|documents|positions|pairs)\.(jsonl|parquet|json|tsv)\1"""
)


def _bench(**query_columns: list) -> Bench:
    corpus = pl.DataFrame({"doc_id": ["d1", "d2"], "title": ["", ""], "text": ["one text", "two text"]})
    queries = pl.DataFrame(
        {"query_id": ["q1", "q2"], "text": ["one?", "two?"], "doc_id": ["d1", "d2"], **query_columns}
    )
    qrels = pl.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d1", "d2"], "score": [1, 1]})
    return Bench.of(corpus, queries, qrels)


def _grid_bench() -> Bench:
    return _bench(setting=["depth0_len64", "depth50_len64"], grid_depth=[0.0, 0.5], grid_length=[64, 64])


def _built(tmp_path: Path, bench: Bench) -> Path:
    folder = write_beir(bench, tmp_path / "out")
    write_marker(folder, "tiny", "fingerprint")
    return folder


def test_the_manifest_records_a_grids_kind_and_tables(tmp_path):
    folder = _built(tmp_path, _grid_bench())
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert manifest["kind"] == GRID
    assert manifest["tables"] == {
        "corpus": "corpus.parquet",
        "queries": "queries.parquet",
        "qrels": "qrels.parquet",
        "drops": "drops.parquet",
        "stats": "stats.json",
    }
    built = BuiltFolder.open(folder)
    assert (built.kind, built.recorded) == (GRID, True)
    assert built.grid_cells().rows() == [("depth0_len64", 0.0, 64), ("depth50_len64", 0.5, 64)]
    assert built.settings() == ["depth0_len64", "depth50_len64"]
    assert built.setting("depth50_len64").read("queries")["query_id"].to_list() == ["q2"]


def test_a_folder_written_before_the_manifest_held_its_kind_still_reads(tmp_path):
    folder = _built(tmp_path, _grid_bench())
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    old = {k: v for k, v in manifest.items() if k not in ("kind", "tables")}
    (folder / MANIFEST_FILE).write_text(json.dumps(old) + "\n")
    built = BuiltFolder.open(folder)
    assert (built.kind, built.recorded) == (GRID, False)
    assert built.read_bench().queries["query_id"].to_list() == ["q1", "q2"]
    (folder / MANIFEST_FILE).unlink()  # a folder copied without its marker
    assert BuiltFolder.open(folder).kind == GRID


def test_the_recorded_kind_wins_over_what_the_files_suggest(tmp_path):
    folder = _built(tmp_path, _bench())
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert manifest["kind"] == BENCHMARK
    (folder / MANIFEST_FILE).write_text(json.dumps({**manifest, "kind": PROBES}))
    assert BuiltFolder.open(folder).kind == PROBES


@pytest.mark.parametrize(
    ("columns", "kind"),
    [
        ({}, BENCHMARK),
        (
            {"setting": ["near", "far"], "pairs": [[{"doc_a": "d1", "doc_b": "d2"}], [{"doc_a": "d2", "doc_b": "d1"}]]},
            PROBES,
        ),
    ],
)
def test_each_kind_is_told_apart(tmp_path, columns, kind):
    built = BuiltFolder.open(_built(tmp_path, _bench(**columns)))
    assert built.kind == kind


def test_no_module_outside_builder_io_names_a_table_file():
    found = [
        f"{path.relative_to(BUILDER.parent)}:{n}: {line.strip()}"
        for path in sorted(BUILDER.rglob("*.py"))
        if path.parent.name != "io" or path.parent.parent != BUILDER
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TABLE_FILE.search(line)
    ]
    assert not found, "ask builder.io.built_folder for these:\n" + "\n".join(found)
