"""`plan` counts length eligibility before estimating, so its numbers are the run's."""

from __future__ import annotations

import json

import polars as pl
from typer.testing import CliRunner

from builder.cli import app
from builder.recipe.model import parse_recipe
from builder.run.plan import make_plan
from builder.stages.base import Flow
from builder.stages.sample_by_length import SampleByLength, SampleParams

# CPython's reference topics have 28 to 8,571 words: narrow buckets leave far fewer
# eligible documents than the 40 asked for.
SAMPLE = (
    "sources: [{type: python_docs}]\ntokenizer: {kind: words}\nstages:\n"
    "  - sample_by_length: {buckets: [100, 200, 400], weights: [1, 1], n_docs: 40, max_words: 350}\n"
)
LLM = "models: {gen: {model: tiny-model, base_url: 'http://127.0.0.1:9/v1'}}\n"


def test_plan_document_count_is_what_the_run_samples(write_recipe, tmp_path):
    recipe = write_recipe("name: sampled\n" + SAMPLE)
    result = CliRunner().invoke(
        app,
        ["build", str(recipe), "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs"), "--allow-empty"],
    )
    assert result.exit_code == 0, result.output
    (stats,) = (tmp_path / "runs").rglob("01_sample_by_length/stats.json")
    sampled = json.loads(stats.read_text())["docs_out"]
    assert 0 < sampled < 40

    planned = write_recipe("name: planned\n" + LLM + SAMPLE + "  - summarize: {llm: gen}\n", "plan.yaml")
    rows = make_plan(parse_recipe(planned), None)
    assert rows[1].flow_out.docs == sampled
    assert rows[2].flow_in.docs == sampled and rows[2].estimate.calls == sampled  # one summary each


def test_a_sampled_corpus_is_scaled_up():
    # Ten documents stand for thirty: 3 eligible in [0, 10) -> 9, 4 in [10, 20) -> 12, 3 too long.
    sample = pl.DataFrame(
        {"doc_id": [f"d{i}" for i in range(10)], "text": ["w"] * 10, "n_tokens": [1, 2, 3, 11, 12, 13, 14, 50, 60, 70]}
    )
    flow = Flow(docs=30, queries=0, doc_tokens=23.6, sample=sample, scale=3.0)
    stage = SampleByLength(SampleParams(buckets=[0, 10, 20], weights=[1, 1], n_docs=24))
    out, estimate = stage.plan(flow)
    assert out.docs == 9 + 12  # targets 12 and 12; the first bucket has only 9
    assert out.doc_tokens == (2 * 9 + 12.5 * 12) / 21
    assert estimate.notes == [
        "eligible documents counted on a sample of 10 of 30: 21 of 24 wanted",
        "bucket [0, 10): takes 9 of 9 eligible (wants 12)",
        "bucket [10, 20): takes 12 of 12 eligible (wants 12)",
        "falls outside: 9 documents (outside_length_buckets 9); widen `buckets` "
        "(and weights) or the word limits to keep them",
    ]


def test_plan_with_per_counts_each_stratum_and_what_falls_outside():
    # Two languages; per stratum 2 documents wanted in [0, 100) and 2 in [100, 200).
    # en: 3 short, 1 medium, 2 too long; de: 1 short, 2 medium, 1 too long.
    sample = pl.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(10)],
            "text": ["w"] * 10,
            "lang": ["en"] * 6 + ["de"] * 4,
            "domain": ["general"] * 10,
            "n_tokens": [10, 20, 30, 150, 900, 4000, 40, 120, 130, 2500],
        }
    )
    flow = Flow(docs=10, queries=0, doc_tokens=0.0, sample=sample, scale=1.0)
    stage = SampleByLength(SampleParams(buckets=[0, 100, 200], weights=[1, 1], n_docs=4, per=["lang"]))
    out, estimate = stage.plan(flow)
    # en takes 2 short + 1 medium, de 1 short + 2 medium: 6 of the 8 wanted.
    assert out.docs == 6
    assert out.doc_tokens == (10 + 20 + 150 + 40 + 120 + 130) / 6
    assert estimate.notes == [
        "only 6 of the 8 documents wanted are eligible",
        "2 strata (de, en), n_docs=4 each",
        "bucket [0, 100): takes 3 of 4 eligible (wants 4)",
        "bucket [100, 200): takes 3 of 3 eligible (wants 4)",
        "falls outside: 3 documents (outside_length_buckets 3); widen `buckets` (and weights) or the "
        "word limits to keep them",
    ]


def test_a_large_corpus_is_counted_on_a_seeded_sample(write_recipe, monkeypatch):
    from builder.run import plan

    path = write_recipe("name: big\n" + SAMPLE)
    exact = make_plan(parse_recipe(path), None)[1].flow_out.docs
    monkeypatch.setattr(plan, "SAMPLE_DOCS", 39)  # half of the 78 reference topics
    first, again = (make_plan(parse_recipe(path), None)[1] for _ in range(2))
    assert first.flow_in.docs == 78 and first.flow_out.docs == again.flow_out.docs
    assert abs(first.flow_out.docs - exact) <= 8
    assert first.estimate.notes[0].startswith("eligible documents counted on a sample of 39 of 78")


def test_plan_reads_its_sources_in_a_stream_and_samples_the_rows_a_whole_read_would(write_recipe, monkeypatch):
    from builder.io.corpus_loader import load_sources
    from builder.run import plan

    loaded = parse_recipe(write_recipe("name: big\n" + SAMPLE))
    whole, _ = load_sources(loaded.recipe.sources, loaded.base_dir, None)
    monkeypatch.setattr(plan, "SAMPLE_DOCS", 39)

    def no_whole_read(*args, **kwargs):
        raise AssertionError("plan loaded its sources whole")

    monkeypatch.setattr("builder.io.corpus_loader.load_sources", no_whole_read)
    monkeypatch.setattr(plan, "load_sources", no_whole_read, raising=False)  # as plan once imported it
    first = make_plan(loaded, None)[0]
    assert first.flow_in.docs == whole.height == 78
    sampled = first.flow_in.sample
    assert sampled is not None
    assert sampled["doc_id"].to_list() == whole.sample(39, seed=0)["doc_id"].to_list()
    assert first.texts == whole.sample(39, seed=0)["text"].to_list()


def test_plan_states_how_long_a_request_to_a_dead_server_can_take(write_recipe):
    recipe = write_recipe(
        "name: bounded\n"
        + LLM.replace("base_url", "timeout_s: 30, max_retries: 2, base_url")
        + SAMPLE
        + "  - summarize: {llm: gen}\n",
        "plan.yaml",
    )
    result = CliRunner().invoke(app, ["plan", str(recipe)])
    assert result.exit_code == 0, result.output
    assert (
        "model gen: a request gives up after at most 93 s (3 attempts of at most timeout_s 30 s, "
        "3 s of backoff); replies over 4,194,304 bytes are refused"
    ) in " ".join(result.output.split())


def test_plan_of_my_domain_counts_long_documents_as_falling_outside(tmp_path, monkeypatch):
    """The issue's case: long documents through my_domain. plan takes only those inside the
    buckets, so its generation calls are the run's, and names what falls outside."""
    from builder.util.resources import find_recipe
    from tests.conftest import require_recipe_extras

    require_recipe_extras(find_recipe("my_domain"))
    docs = [{"id": f"long{i}", "text": f"page {i} " + " ".join(["word"] * 3000), "title": "t"} for i in range(6)]
    docs += [{"id": f"short{i}", "text": f"note {i} " + " ".join(["word"] * 100), "title": "t"} for i in range(4)]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    monkeypatch.setenv("MY_DOCS", str(path))
    rows = make_plan(parse_recipe(find_recipe("my_domain"), ["stages.sample_by_length.n_docs=30"]), None)
    assert rows[1].flow_out.docs == 4
    assert rows[2].estimate.calls == 4  # one generation call per document taken
    assert (
        "falls outside: 6 documents (outside_length_buckets 6); widen `buckets` (and weights) or the "
        "word limits to keep them"
    ) in rows[1].estimate.notes
