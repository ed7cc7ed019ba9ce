"""vLLM on the Ray executor: the rows sent to `ray.data.llm`'s processor, the answers read
back, the processor's config, and the driver's cache handling.

The engine itself needs vLLM and a GPU; here a stand-in processor (the same row in, the
same row shape out, run through Ray Data on the test instance) takes its place.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from typing import Any

import pytest

from builder.backends.llm import ChatRequest, LLMCache, VLLMModelConfig, key_for, make_llm
from builder.backends.llm.ray_vllm import (
    RayVLLMBackend,
    answer_of,
    postprocess,
    preprocess,
    processor_config,
    request_row,
    sampling_base,
)

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install -e '.[ray]'")
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def ask(text: str, **kwargs: Any) -> ChatRequest:
    return ChatRequest.of([{"role": "system", "content": "be brief"}, {"role": "user", "content": text}], **kwargs)


def _config(**kwargs: Any) -> VLLMModelConfig:
    return VLLMModelConfig(backend="vllm", model="org/model", **kwargs)


def test_a_request_becomes_a_row_with_messages_and_sampling_params() -> None:
    config = _config(temperature=0.7, seed=5, max_tokens=64)
    row = request_row(3, ask("why?", json_schema=SCHEMA), 64, structured=True)
    assert row == {
        "i": 3,
        "messages": json.dumps(list(ask("why?").messages)),
        "schema": json.dumps(SCHEMA),
        "max_tokens": 64,
    }
    assert preprocess(sampling_base(config), row) == {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "why?"}],
        "sampling_params": {
            "temperature": 0.7,
            "seed": 5,
            "max_tokens": 64,
            "structured_outputs": {"json": json.dumps(SCHEMA)},
        },
    }


def test_unstructured_requests_and_unset_knobs_send_nothing_extra() -> None:
    row = request_row(0, ask("hi", json_schema=SCHEMA), 9, structured=False)
    assert row["schema"] == ""
    assert preprocess(sampling_base(_config(top_p=0.5)), row)["sampling_params"] == {
        "temperature": 0.0,
        "top_p": 0.5,
        "max_tokens": 9,
    }


def _engine_row(text: str, completion: int, budget: int = 16) -> dict[str, Any]:
    return {
        "i": 4,
        "messages": [],
        "max_tokens": budget,
        "generated_text": text,
        "num_input_tokens": 7,
        "num_generated_tokens": completion,
        "batch_uuid": "x",
    }


def test_engine_rows_become_answers_failures_and_truncations() -> None:
    index, answer = answer_of(postprocess(_engine_row("fine", 3)))
    assert index == 4 and (answer.text, answer.prompt_tokens, answer.completion_tokens) == ("fine", 7, 3)
    assert answer_of(postprocess(_engine_row("cut", 16)))[1].error == "llm_truncated: answer cut off at max_tokens 16"
    assert answer_of(postprocess(_engine_row("", 0)))[1].error == "llm_failed: empty answer"
    # Failed rows skip postprocess and carry the processor's error column.
    failed = {"i": 2, "prompt": "p", "__inference_error__": "ValueError: prompt longer than the context"}
    index, answer = answer_of(failed)
    assert index == 2 and answer.error == "llm_failed: ValueError: prompt longer than the context"


@needs_ray
def test_processor_config_runs_one_engine_per_gpu() -> None:
    config = processor_config(_config(engines=4, batch_size=32, engine_kwargs={"max_model_len": 4096}))
    assert config.model_source == "org/model"
    assert config.concurrency == (4, 4) and config.batch_size == 32
    assert config.engine_kwargs["max_model_len"] == 4096
    assert config.should_continue_on_error is True


@needs_ray
def test_the_ray_executor_picks_it_and_a_cached_rerun_starts_no_engine() -> None:
    cache = LLMCache.memory()
    # The key the in-process vLLM backend gives the same request: its answers count here.
    cache.put(key_for("vllm", "org/model", _config().sampling(), ask("hi").messages, None), "cached answer", 3, 2)
    backend = make_llm("gen", _config(), cache, on_ray=True)
    assert isinstance(backend, RayVLLMBackend)
    assert [a.text for a in backend.chat_many([ask("hi")])] == ["cached answer"]
    assert backend._processor is None  # type: ignore[attr-defined]
    backend.close()


# -- the driver's side, with a stand-in for the vLLM engine -------------------------------


def _fake_engine(preprocess_fn: Any, postprocess_fn: Any, row: dict[str, Any]) -> dict[str, Any]:
    """What the processor does to one row: wrap, preprocess, generate, postprocess.
    A prompt saying "needs N" takes N tokens; one saying "explode" fails."""
    data = {**row, **preprocess_fn(row)}
    prompt = data["messages"][-1]["content"]
    if "explode" in prompt:
        return {**data, "__inference_error__": "ValueError: prompt longer than the context"}
    words = prompt.split()
    needs = int(words[words.index("needs") + 1]) if "needs" in words else 2
    budget = data["sampling_params"]["max_tokens"]
    return postprocess_fn(
        {
            **data,
            "generated_text": f"gen: {prompt}",
            "num_input_tokens": len(words),
            "num_generated_tokens": min(needs, budget),
        }
    )


class _FakeProcessor:
    def __init__(self, preprocess_fn: Any, postprocess_fn: Any) -> None:
        self.fn = functools.partial(_fake_engine, preprocess_fn, postprocess_fn)

    def __call__(self, dataset: Any) -> Any:
        return dataset.map(self.fn)


def _fake_build_processor(config: Any, preprocess: Any = None, postprocess: Any = None) -> _FakeProcessor:
    assert config.concurrency == (1, 1)
    return _FakeProcessor(preprocess, postprocess)


@needs_ray
def test_misses_go_through_ray_data_in_order_and_are_cached(ray_local, monkeypatch, tmp_path) -> None:
    import ray.data.llm

    monkeypatch.setattr(ray.data.llm, "build_processor", _fake_build_processor)
    cache = LLMCache(tmp_path / "cache.sqlite")
    backend = make_llm("gen", _config(max_tokens=8), cache, on_ray=True)
    backend.chat_many([ask("b")])
    progress: list[int] = []
    questions = ["a", "b", "needs 12 tokens", "explode", "a", *(f"q{i}" for i in range(20))]
    answers = backend.chat_many([ask(q) for q in questions], on_done=progress.append)
    assert [a.text for a in answers[:5]] == ["gen: a", "gen: b", "gen: needs 12 tokens", None, "gen: a"]
    assert [a.text for a in answers[5:]] == [f"gen: q{i}" for i in range(20)]
    assert answers[1].cached and answers[4].cached and answers[2].retries == 1
    assert answers[3].error == "llm_failed: ValueError: prompt longer than the context"
    assert sum(progress) == len(questions)
    assert len(cache) == 23  # every answer but the failure
    backend.close()


@needs_ray
def test_a_recipe_on_the_ray_executor_runs_its_vllm_model_there(ray_local, write_recipe, tmp_path) -> None:
    from builder.recipe.model import parse_recipe
    from builder.run.backends import Backends

    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\nexecutor: {kind: ray}\n"
        "models: {gen: {backend: vllm, model: m, engines: 2}}\nstages: [{summarize: {llm: gen}}]\n"
    )
    backends = Backends(parse_recipe(path).recipe, None, tmp_path / "cache.sqlite")
    try:
        assert isinstance(backends.llm("gen"), RayVLLMBackend)
        assert backends.executor.kind == "ray"
    finally:
        backends.close()


@needs_ray
def test_real_engines_answer_on_gpus(ray_local, tmp_path) -> None:
    pytest.importorskip("vllm", reason="real engines need vLLM and a GPU (the gpu extra); untested on this machine")
    model = os.environ.get("BUILD_BENCH_VLLM_MODEL")
    if not model:
        pytest.skip("set BUILD_BENCH_VLLM_MODEL to a local model folder to run real vLLM engines on the GPUs")
    backend = make_llm(
        "gen", VLLMModelConfig(backend="vllm", model=model, max_tokens=64), LLMCache.memory(), on_ray=True
    )
    answers = backend.chat_many([ask("Say hello."), ask("Name a colour.", json_schema=SCHEMA)])
    assert all(a.ok for a in answers) and "answer" in json.loads(answers[1].text or "{}")
    backend.close()
