"""The load spread over an executor's workers gives the local load's tables exactly: the
same corpus (texts only for the sampled documents), the same drops with the same line
numbers, on files cut into many shards, with bad rows, duplicates across sources and caps."""

from __future__ import annotations

import io
import json

import polars as pl
import pytest
from rich.console import Console

from builder.backends.tokenizers import TokenizerConfig, WordCounter
from builder.executors import ExecutorConfig, LocalExecutor, make_executor
from builder.io import shards
from builder.io.corpus_loader import iter_documents
from builder.io.sources import JsonlSource, ParquetSource, PythonDocsSource, SourceError
from builder.run import load
from builder.run.load_meter import LoadMeter
from builder.run.load_spread import stream_spread
from builder.stages.sample_by_length import SampleParams
from builder.stages.sample_picker import StreamingPicker

PARAMS = SampleParams(buckets=[0, 5, 20, 10_000], weights=[1, 1, 1], n_docs=12)


def _rows(n: int) -> list[dict]:
    return [
        {"id": f"d{i}", "text": " ".join(f"w{i}x{k}" for k in range(1 + (i * 7) % 30)), "lang": "en" if i % 3 else "fr"}
        for i in range(n)
    ]


def _write(tmp_path) -> list:
    rows = _rows(60)
    lines = [json.dumps(r) for r in rows[:30]]
    lines[0] = "\ufeff" + lines[0]  # a byte-order mark on line 1
    lines[5:5] = [
        "",
        "{broken",
        "[1, 2]",
        json.dumps({"id": "d2", "text": "again"}),
        json.dumps({"id": "d4", "text": "new words"}),
        json.dumps({"id": "copy", "text": rows[3]["text"]}),
        json.dumps({"text": "no id"}),
        json.dumps({"id": "blank", "text": "  "}),
        json.dumps({"id": "s", "text": "bad \ud800"}),
        json.dumps({"id": "t\tab", "text": "tab in id"}),
    ]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    data = data.replace(b'"again"', b'"ag\xffain"', 1) + b'{"id": "u", "text": "\xff"}\n{"id": "last", "text": "end"}'
    (tmp_path / "a.jsonl").write_bytes(data)
    pl.DataFrame(rows[28:]).write_parquet(tmp_path / "b.parquet", row_group_size=7)
    (tmp_path / "c.jsonl").write_text(
        "\n".join(json.dumps({"text": [r["text"], "x y"]}) for r in rows[50:56]), encoding="utf-8"
    )
    fields = {"id": "id", "text": "text", "lang": "lang"}
    return [
        JsonlSource(type="jsonl", path="a.jsonl", fields=fields),
        ParquetSource(type="parquet", path="b.parquet", fields=fields, limit=20),
        JsonlSource(type="jsonl", path="c.jsonl", fields={"id": None}, explode_text=True, id_prefix="c"),
        PythonDocsSource(type="python_docs", limit=15),
    ]


def _local(specs, tmp_path, limit=None):
    picker = StreamingPicker(PARAMS, 3)
    return load.stream_corpus(
        iter_documents(specs, tmp_path, limit), picker, WordCounter(), Console(file=io.StringIO())
    )


def _spread(specs, tmp_path, executor, limit=None, console=None):
    picker = StreamingPicker(PARAMS, 3)
    with LoadMeter(console or Console(file=io.StringIO())) as meter:
        corpus, drops = stream_spread(specs, tmp_path, limit, picker, executor, TokenizerConfig(kind="words"), meter)
    return corpus, pl.DataFrame(drops, schema={"id": pl.Utf8, "reason": pl.Utf8}, orient="row")


@pytest.mark.parametrize("limit", [None, 9])
def test_spread_load_equals_the_local_load(tmp_path, monkeypatch, limit):
    monkeypatch.setattr(shards, "SHARD_BYTES", 300)  # many shards, cut mid-file
    specs = _write(tmp_path)
    want_corpus, want_drops = _local(specs, tmp_path, limit)
    out = io.StringIO()
    corpus, drops = _spread(specs, tmp_path, LocalExecutor(), limit, Console(file=out, width=200))
    assert drops.equals(want_drops)
    assert corpus.equals(want_corpus)
    # Only the sampled documents' texts were read back.
    assert 0 < corpus.filter(pl.col("text") != "").height <= PARAMS.n_docs
    if limit is None:
        assert {"line:7", "line:8", "line:9"} <= set(drops["id"])  # the blank line 6 counts
        assert set(drops["reason"]) >= {
            "malformed_json",
            "row_not_object",
            "invalid_utf8",
            "duplicate_text",
            "missing_id",
            "empty_text",
            "invalid_unicode",
            "bad_id",
            "duplicate_id",
        }
    (line,) = out.getvalue().splitlines()
    assert line.startswith(f"00_load: read {want_corpus.height + want_drops.height:,}, kept {want_corpus.height},")


def test_a_mapped_field_no_row_has_is_the_same_error(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"id": "1", "text": "a b"}\n', encoding="utf-8")
    specs = [JsonlSource(type="jsonl", path="a.jsonl", fields={"text": "body"})]
    with pytest.raises(SourceError) as local_err:
        _local(specs, tmp_path)
    with pytest.raises(SourceError) as spread_err:
        _spread(specs, tmp_path, LocalExecutor())
    assert str(spread_err.value) == str(local_err.value)


def test_a_whole_corpus_load_counts_through_the_executor(tmp_path, monkeypatch):
    from builder.recipe.model import parse_recipe

    _write(tmp_path)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "name: r\nsources:\n  - {type: jsonl, path: a.jsonl}\n  - {type: python_docs}\n"
        "stages:\n  - generate_queries: {mode: extractive}\n",
        encoding="utf-8",
    )
    parsed = parse_recipe(recipe).recipe

    class Counting(LocalExecutor):
        kind = "counting"
        blocks = 0

        def imap(self, fn, blocks):
            for out in super().imap(fn, blocks):
                Counting.blocks += 1
                yield out

    console = Console(file=io.StringIO())
    want = load.load_corpus(parsed, tmp_path, None, WordCounter(), console)
    got = load.load_corpus(parsed, tmp_path, None, WordCounter(), console, Counting())
    assert Counting.blocks > 0
    assert got[0].equals(want[0]) and got[1].equals(want[1])


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is None, reason="Ray is not installed: pip install -e '.[ray]'"
)
def test_spread_load_on_ray_equals_the_local_load(ray_local, tmp_path, monkeypatch):
    monkeypatch.setattr(shards, "SHARD_BYTES", 300)
    specs = _write(tmp_path)
    want_corpus, want_drops = _local(specs, tmp_path)
    corpus, drops = _spread(specs, tmp_path, make_executor(ExecutorConfig(kind="ray")))
    assert drops.equals(want_drops)
    assert corpus.equals(want_corpus)
