"""The streamed load + sample path against the in-memory one, on corpora that fit."""

from __future__ import annotations

import io
import json
import random

import polars as pl
import pytest
from rich.console import Console

from builder.backends.tokenizers import WordCounter
from builder.bench import Bench
from builder.io.corpus_loader import load_sources
from builder.io.sources import JsonlSource, ParquetSource
from builder.recipe.model import parse_recipe
from builder.run import load
from builder.run.runner import Runner, RunOptions
from builder.stages.sample_by_length import SampleByLength, SampleParams
from tests.golden import manifest
from tests.helpers import make_ctx

LABEL = "01_sample_by_length"


def _corpus(tmp_path, n: int = 1400) -> list:
    """Documents of 1-400 words in two languages and two domains, spread over a JSON-lines
    file (with bad and repeated rows) and a parquet file."""
    rng = random.Random(7)
    vocab = [f"{a}{b}" for a in ("ka", "lo", "mire", "nu", "sat", "vel") for b in ("ta", "rin", "os", "el", "bu")]

    def text() -> str:
        words = rng.choices(vocab, k=rng.randint(1, 400))
        return " ".join(w + ("." if k % 9 == 8 else "") for k, w in enumerate(words)) + "."

    rows = [
        {"id": f"d{i}", "text": text(), "lang": rng.choice(["en", "zh"]), "topic": rng.choice(["web", "law"])}
        for i in range(n)
    ]
    lines = [json.dumps(r) for r in rows[: n // 2]]
    lines[10:10] = [
        "{broken",
        json.dumps({"id": "d3", "text": "again"}),
        json.dumps(rows[4] | {"id": "x"}),
        json.dumps({"id": "blank", "text": "  "}),
    ]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    pl.DataFrame(rows[n // 2 :]).write_parquet(tmp_path / "b.parquet", row_group_size=300)
    fields = {"id": "id", "text": "text", "lang": "lang", "domain": "topic"}
    return [
        JsonlSource(type="jsonl", path=str(tmp_path / "a.jsonl"), fields=fields),
        ParquetSource(type="parquet", path=str(tmp_path / "b.parquet"), fields=fields),
    ]


def _in_memory(specs, params: SampleParams, tmp_path, seed: int) -> Bench:
    corpus, bad = load_sources(specs, None)
    corpus = corpus.with_columns(pl.Series("n_tokens", WordCounter().count_many(corpus["text"].to_list())))
    return _sample(corpus, bad, params, tmp_path, seed)


def _streamed(specs, params: SampleParams, tmp_path, seed: int, console: Console | None = None) -> Bench:
    from builder.io.corpus_loader import iter_documents
    from builder.stages.sample_picker import StreamingPicker
    from builder.util.stable import derive_seed

    picker = StreamingPicker(params, derive_seed(seed, LABEL))
    corpus, bad = load.stream_corpus(
        iter_documents(specs, None), picker, WordCounter(), console or Console(file=io.StringIO())
    )
    # Memory follows the sample: the only texts held are those the stage keeps.
    assert corpus.filter(pl.col("text") != "").height <= params.n_docs * 4
    return _sample(corpus, bad, params, tmp_path, seed)


def _sample(corpus, bad, params, tmp_path, seed) -> Bench:
    drops = bad.select(pl.lit("00_load").alias("stage"), pl.lit("doc").alias("kind"), "id", "reason")
    bench = Bench.of(corpus=corpus, drops=drops)
    return SampleByLength(params).run(bench, make_ctx(tmp_path, seed=seed, label=LABEL))


@pytest.mark.parametrize(
    "params",
    [
        SampleParams(buckets=[0, 50, 100, 200, 400], weights=[1, 2, 2, 1], n_docs=300),
        SampleParams(buckets=[0, 100, 400], weights=[3, 1], n_docs=40, per=["lang", "domain"]),
        SampleParams(buckets=[0, 1000], weights=[1], n_docs=5000, min_words=30, max_words=350),
    ],
    ids=["plain", "stratified", "word_window_short"],
)
def test_streamed_sample_equals_in_memory_sample(tmp_path, params):
    specs = _corpus(tmp_path)
    expected = _in_memory(specs, params, tmp_path, seed=11)
    got = _streamed(specs, params, tmp_path, seed=11)
    assert got.corpus.columns == expected.corpus.columns
    assert got.corpus.equals(expected.corpus)
    assert got.drops.equals(expected.drops)
    assert got.corpus["text"].str.len_chars().min() > 0


def test_the_counting_pass_reports_read_kept_dropped_and_rate(tmp_path):
    out = io.StringIO()
    _streamed(_corpus(tmp_path, n=40), SampleParams(n_docs=5), tmp_path, seed=1, console=Console(file=out, width=200))
    (line,) = out.getvalue().splitlines()
    assert line.startswith("00_load: read 44, kept 40, dropped 4 (") and line.endswith(" docs/s)")


RECIPE = """name: stream
seed: 5
sources:
  - {type: jsonl, path: a.jsonl, fields: {id: id, text: text, lang: lang, domain: topic}}
  - {type: parquet, path: b.parquet, fields: {id: id, text: text, lang: lang, domain: topic}}
tokenizer: {kind: words}
stages:
  - sample_by_length: {buckets: [0, 100, 200, 400], weights: [1, 1, 1], n_docs: N, per: [lang]}
  - generate_queries: {mode: extractive, questions_per_call: 3}
  - localize_spans: {positions: {length_edges: [100, 200]}}
"""


def _build(tmp_path, n_docs: int, run_root: str, out: str):
    recipe = tmp_path / f"recipe_{n_docs}.yaml"
    recipe.write_text(RECIPE.replace("N", str(n_docs)), encoding="utf-8")
    Runner(parse_recipe(recipe), RunOptions(run_root=tmp_path / run_root, out_dir=tmp_path / out)).run()
    return manifest(tmp_path / out)


def test_a_streamed_build_writes_what_an_in_memory_build_writes(tmp_path, monkeypatch):
    _corpus(tmp_path)
    streamed = _build(tmp_path, 30, "runs_s", "out_s")
    monkeypatch.setattr(load, "streamed_sample", lambda recipe: None)
    assert _build(tmp_path, 30, "runs_m", "out_m") == streamed


def test_changing_the_sample_loads_again_instead_of_reusing_held_texts(tmp_path):
    _corpus(tmp_path)
    _build(tmp_path, 30, "runs", "out_a")
    again = _build(tmp_path, 45, "runs", "out_b")  # same run folder, another sample
    assert again == _build(tmp_path, 45, "runs_fresh", "out_c")


def test_a_streamed_hub_dataset_samples_like_a_loaded_one(tmp_path):
    from builder.io.sources import HFSource

    _corpus(tmp_path)
    fields = {"id": "id", "text": "text", "lang": "lang", "domain": "topic"}
    spec = HFSource(type="hf", path="parquet", data_files=str(tmp_path / "b.parquet"), streaming=True, fields=fields)
    params = SampleParams(buckets=[0, 100, 400], weights=[1, 1], n_docs=25, per=["domain"])
    expected = _in_memory([spec.model_copy(update={"streaming": False})], params, tmp_path, seed=3)
    got = _streamed([spec], params, tmp_path, seed=3)
    assert got.corpus.equals(expected.corpus) and got.drops.equals(expected.drops)
    assert got.corpus.height == 50
