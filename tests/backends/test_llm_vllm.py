"""VLLMBackend against a stand-in `vllm` module (the real one needs a GPU)."""

from __future__ import annotations

import re
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from builder.backends.llm import BackendUnavailable, ChatRequest, LLMCache, VLLMModelConfig, make_llm
from builder.util.install_hint import install_command


class FakeLLM:
    def __init__(self, model: str, **engine_kwargs: Any) -> None:
        self.model = model
        self.engine_kwargs = engine_kwargs
        self.calls: list[tuple[list[Any], list[Any]]] = []

    def chat(self, conversations: list[Any], sampling_params: list[Any], use_tqdm: bool) -> list[Any]:
        self.calls.append((conversations, sampling_params))
        if any("explode" in c[-1]["content"] for c in conversations):
            raise ValueError("prompt is longer than the context")
        return [
            SimpleNamespace(
                prompt_token_ids=[0] * len(c[-1]["content"].split()),
                outputs=[
                    SimpleNamespace(
                        text=f"gen: {c[-1]['content']}",
                        token_ids=[0, 0],
                        finish_reason=_finish(c[-1]["content"], p.kwargs["max_tokens"]),
                    )
                ],
            )
            for c, p in zip(conversations, sampling_params)
        ]


def _finish(prompt: str, max_tokens: int) -> str:
    """A prompt saying "needs N" is cut off under a budget of N tokens."""
    words = prompt.split()
    needs = int(words[words.index("needs") + 1]) if "needs" in words else 0
    return "length" if max_tokens < needs else "stop"


class Params:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


def install_fake_vllm(monkeypatch: pytest.MonkeyPatch, new_api: bool = True) -> None:
    vllm = ModuleType("vllm")
    sampling = ModuleType("vllm.sampling_params")
    vllm.LLM = FakeLLM  # type: ignore[attr-defined]
    vllm.SamplingParams = Params  # type: ignore[attr-defined]
    name = "StructuredOutputsParams" if new_api else "GuidedDecodingParams"
    setattr(sampling, name, type(name, (Params,), {}))
    vllm.sampling_params = sampling  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)


def ask(text: str, **kwargs: Any) -> ChatRequest:
    return ChatRequest.of([{"role": "user", "content": text}], **kwargs)


def test_missing_vllm_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(BackendUnavailable, match=re.escape(install_command("gpu"))):
        make_llm("local", VLLMModelConfig(backend="vllm", model="m"), LLMCache.memory())


def test_misses_go_out_in_one_batch_and_hits_stay_home(monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_vllm(monkeypatch)
    config = VLLMModelConfig(backend="vllm", model="m", engine_kwargs={"max_model_len": 4096})
    backend = make_llm("local", config, LLMCache.memory())
    llm = backend._llm  # type: ignore[attr-defined]
    assert llm.engine_kwargs == {"max_model_len": 4096}

    backend.chat_many([ask("a"), ask("b")])
    progress: list[int] = []
    answers = backend.chat_many([ask("a"), ask("c"), ask("b"), ask("d"), ask("c")], on_done=progress.append)
    assert [a.text for a in answers] == ["gen: a", "gen: c", "gen: b", "gen: d", "gen: c"]
    assert len(llm.calls) == 2
    assert [c[-1]["content"] for c in llm.calls[1][0]] == ["c", "d"]
    assert sum(progress) == 5
    assert (backend.usage.calls, backend.usage.cache_hits) == (4, 3)


@pytest.mark.parametrize("new_api", [True, False])
def test_schemas_become_structured_output_params(monkeypatch: pytest.MonkeyPatch, new_api: bool) -> None:
    install_fake_vllm(monkeypatch, new_api=new_api)
    backend = make_llm("local", VLLMModelConfig(backend="vllm", model="m", seed=3), LLMCache.memory())
    schema = {"type": "object"}
    backend.chat_many([ask("free"), ask("shaped", json_schema=schema, max_tokens=5)])
    free, shaped = backend._llm.calls[0][1]  # type: ignore[attr-defined]
    field = "structured_outputs" if new_api else "guided_decoding"
    assert field not in free.kwargs and free.kwargs["seed"] == 3
    assert shaped.kwargs[field].kwargs == {"json": schema} and shaped.kwargs["max_tokens"] == 5


def test_one_bad_prompt_does_not_sink_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_vllm(monkeypatch)
    cache = LLMCache.memory()
    backend = make_llm("local", VLLMModelConfig(backend="vllm", model="m"), cache)
    answers = backend.chat_many([ask("fine"), ask("explode now"), ask("also fine")])
    assert [a.text for a in answers] == ["gen: fine", None, "gen: also fine"]
    assert answers[1].error is not None and "longer than the context" in answers[1].error
    assert len(cache) == 2 and backend.usage.failures == 1


def test_truncated_answers_get_one_larger_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_vllm(monkeypatch)
    cache = LLMCache.memory()
    backend = make_llm("local", VLLMModelConfig(backend="vllm", model="m", max_tokens=100), cache)
    answers = backend.chat_many([ask("needs 50"), ask("needs 150"), ask("needs 300")])
    assert [a.text for a in answers] == ["gen: needs 50", "gen: needs 150", None]
    assert (answers[1].retries, answers[2].reason) == (1, "llm_truncated")
    assert answers[2].error == "llm_truncated: answer cut off at max_tokens 200"
    budgets = [[p.kwargs["max_tokens"] for p in params] for _, params in backend._llm.calls]  # type: ignore[attr-defined]
    assert budgets == [[100, 100, 100], [200, 200]]
    assert len(cache) == 2
