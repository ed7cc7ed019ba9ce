"""Backend that runs a model in-process with vLLM (the optional ``gpu`` extra)."""

from __future__ import annotations

import gc
import importlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import ModuleType
from typing import Any, cast

from builder.backends.llm.base import BackendUnavailable, ChatRequest, ChatResponse, LLMUsage
from builder.backends.llm.cache import LLMCache, Origin, fill, key_for, split_cached
from builder.backends.llm.config import VLLMModelConfig
from builder.util.install_hint import missing_modules_message

# vLLM schedules its own batches; chunking only bounds what a crash can lose and
# lets progress and the cache move during long runs.
_CHUNK = 1024


def _import_vllm() -> ModuleType:
    try:
        return importlib.import_module("vllm")
    except ImportError as error:
        raise BackendUnavailable(missing_modules_message("the vllm backend", ["vllm"], "gpu")) from error


def _structured_kwargs(schema: dict[str, Any]) -> dict[str, Any]:
    """SamplingParams arguments that force JSON following `schema`, for old and new vLLM."""
    params = importlib.import_module("vllm.sampling_params")
    if hasattr(params, "StructuredOutputsParams"):
        return {"structured_outputs": params.StructuredOutputsParams(json=schema)}
    if hasattr(params, "GuidedDecodingParams"):
        return {"guided_decoding": params.GuidedDecodingParams(json=schema)}
    raise BackendUnavailable("this vLLM version has no structured-output sampling parameters")


def _answer(output: Any, max_tokens: int) -> ChatResponse:
    completion = output.outputs[0]
    if getattr(completion, "finish_reason", None) == "length":
        return ChatResponse.truncated(f"answer cut off at max_tokens {max_tokens}")
    if not completion.text:
        return ChatResponse.failed("empty answer")
    prompt = len(output.prompt_token_ids or ())
    return ChatResponse(completion.text, None, False, prompt, len(completion.token_ids or ()), 0)


def wants_schema(config: VLLMModelConfig, request: ChatRequest) -> bool:
    return config.structured_output and request.json_schema is not None


def vllm_cache_key(config: VLLMModelConfig, request: ChatRequest) -> str:
    """One key wherever the engine runs (in-process or on Ray): the place does not change the answer."""
    schema = {"json_schema": request.json_schema} if wants_schema(config, request) else None
    return key_for("vllm", config.model, config.sampling(request.max_tokens), request.messages, schema)


class VLLMBackend:
    """Answers cache misses with batched `LLM.chat` calls on the local GPU(s)."""

    def __init__(self, name: str, config: VLLMModelConfig, cache: LLMCache) -> None:
        self._vllm = _import_vllm()
        self.name = name
        self.config = config
        self.cache = cache
        self.usage = LLMUsage()
        self._llm: Any = self._vllm.LLM(model=config.model, **config.engine_kwargs)

    def chat_many(
        self,
        requests: Sequence[ChatRequest],
        on_done: Callable[[int], None] | None = None,
    ) -> list[ChatResponse]:
        keys = [self._key(r) for r in requests]
        responses, missing = split_cached(self.cache, keys)
        hits = len(requests) - sum(len(p) for p in missing.values())
        if on_done is not None and hits:
            on_done(hits)
        pending = list(missing.items())
        for start in range(0, len(pending), _CHUNK):
            chunk = pending[start : start + _CHUNK]
            answers = self._generate_whole([requests[positions[0]] for _, positions in chunk])
            for (_, positions), answer in zip(chunk, answers, strict=True):
                fill(responses, positions, answer)
            origin = Origin(self.config.model, self.cache.stage)
            self.cache.put_many(
                (key, cast(str, a.text), a.prompt_tokens, a.completion_tokens, a.reasoning, origin)
                for (key, _), a in zip(chunk, answers, strict=True)
                if a.ok
            )
            if on_done is not None:
                on_done(sum(len(positions) for _, positions in chunk))
        done = cast(list[ChatResponse], responses)
        self.usage.record(done)
        return done

    def mark_failed(self, requests: Sequence[ChatRequest], kind: str) -> None:
        """Mark the cached answers to `requests` as unusable (`kind` is the drop reason)."""
        self.cache.mark_failed((self._key(r) for r in requests), kind)

    def close(self) -> None:
        # vLLM frees GPU memory once the engine is garbage collected.
        self._llm = None
        gc.collect()

    def _structured(self, request: ChatRequest) -> bool:
        return wants_schema(self.config, request)

    def _key(self, request: ChatRequest) -> str:
        return vllm_cache_key(self.config, request)

    def _sampling(self, request: ChatRequest) -> Any:
        cfg = self.config
        kwargs: dict[str, Any] = {
            "temperature": cfg.temperature,
            "max_tokens": self._budget(request),
            "seed": cfg.seed,
        }
        if cfg.top_p is not None:
            kwargs["top_p"] = cfg.top_p
        if self._structured(request):
            kwargs.update(_structured_kwargs(cast(dict[str, Any], request.json_schema)))
        return self._vllm.SamplingParams(**kwargs)

    def _budget(self, request: ChatRequest) -> int:
        return request.max_tokens or self.config.max_tokens

    def _generate_whole(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Answers; those cut off at max_tokens are generated once more with twice the budget."""
        answers = self._generate(requests)
        cut = [i for i, a in enumerate(answers) if a.reason == "llm_truncated"]
        longer = [replace(requests[i], max_tokens=2 * self._budget(requests[i])) for i in cut]
        for i, again in zip(cut, self._generate(longer) if longer else [], strict=True):
            answers[i] = replace(again, retries=1)
        return answers

    def _generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        conversations = [list(r.messages) for r in requests]
        params = [self._sampling(r) for r in requests]
        try:
            outputs = self._llm.chat(conversations, sampling_params=params, use_tqdm=False)
        except Exception as error:  # turned into per-request failures below
            if len(requests) == 1:
                return [ChatResponse.failed(f"{type(error).__name__}: {error}"[:200])]
            # One bad prompt (say, longer than the context) fails the whole batch: isolate it.
            return [self._generate([r])[0] for r in requests]
        return [_answer(o, self._budget(r)) for o, r in zip(outputs, requests, strict=True)]
