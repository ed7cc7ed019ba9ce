"""A language, domain or setting value never escapes the output folder or clobbers its files."""

from __future__ import annotations

import polars as pl
import pytest

from builder.bench import Bench
from builder.publish.beir import write_beir
from builder.publish.multilingual import write_multilingual
from builder.publish.paths import safe_component
from builder.recipe.sections import MultilingualOutput

HOSTILE = ["/abs/path", "../..", ".", "", "a/b", "x\x00y", "..\\up", "qrels", "CORPUS.JSONL"]


def test_plain_names_are_kept_and_others_mapped():
    assert safe_component("eng-Latn") == "eng-Latn"
    assert safe_component("python_docs.v2") == "python_docs.v2"
    mapped = {v: safe_component(v, "und", reserved={"qrels", "corpus.jsonl"}) for v in HOSTILE}
    for value, name in mapped.items():
        assert name != value and "/" not in name and "\\" not in name and "\x00" not in name
        assert name not in {"", ".", ".."} and not name.startswith(".")
    assert mapped["/abs/path"].startswith("abs_path-")
    assert mapped["."].startswith("und-")
    assert len(set(mapped.values())) == len(HOSTILE)  # distinct values keep distinct folders
    assert safe_component(None, "und").startswith("und-")


def _bench(langs: list[str], column: str = "lang") -> Bench:
    n = len(langs)
    corpus = pl.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(n)],
            "text": [f"text {i}" for i in range(n)],
            column: langs,
            "domain": langs,
            "title": [""] * n,
        }
    )
    queries = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "text": ["?"] * n,
            "doc_id": [f"d{i}" for i in range(n)],
            column: langs,
        }
    )
    qrels = queries.select("query_id", "doc_id", pl.lit(1).alias("score"))
    return Bench.of(corpus, queries, qrels)


def _files(root) -> set:
    return {p for p in root.rglob("*")}


@pytest.mark.parametrize("hostile", ["/abs/path", "../..", ".", "corpus.jsonl"])
def test_hostile_language_stays_inside_and_leaves_top_files_alone(tmp_path, hostile):
    victim = tmp_path / "abs" / "path"
    victim.mkdir(parents=True)
    (victim / "keep.txt").write_text("mine")
    out = tmp_path / "deep" / "er" / "out"
    bench = _bench(["eng-Latn", hostile])
    write_beir(bench, out)
    top = (out / "corpus.jsonl").read_bytes()
    before_outside = _files(tmp_path) - _files(out)
    opts = MultilingualOutput(per_language=True, posir_layout=True, cross_lingual=True)
    written = write_multilingual(bench, out, opts)
    assert all(out in w.resolve().parents for w in written)
    assert (out / "corpus.jsonl").read_bytes() == top  # `.` did not overwrite the top level
    assert (victim / "keep.txt").read_text() == "mine"
    assert _files(tmp_path) - _files(out) == before_outside  # nothing new outside the out dir
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert "eng-Latn" in folders and hostile not in folders


def test_setting_names_are_made_safe(tmp_path):
    bench = _bench(["../../escape", "pos"], column="setting")
    write_beir(bench, tmp_path / "out")
    settings = sorted(p.name for p in (tmp_path / "out" / "settings").iterdir())
    assert settings[0].startswith("escape-") and settings[1] == "pos"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
