"""vLLM on a Ray cluster: `ray.data.llm`'s vLLM processor, data parallel over GPUs.

Chosen for `backend: vllm` when the recipe's executor is Ray. The driver keeps the
cache: only uncached requests become rows of a Ray Data dataset, `engines` vLLM engines
(one per GPU with the default engine_kwargs) answer them, and each answer is committed
to the cache as it streams back, so a run killed mid-stage repays nothing.

Rows carry the conversation and the JSON schema as JSON text, so every row has the same
flat Arrow schema whatever the conversation or schema looks like. Ray Data starts the
engines for each `chat_many` call, so the backend pays off on large batches; a stage
that re-asks runs one call per round (see `jobs`).
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, cast

from builder.backends.llm.base import BackendUnavailable, ChatRequest, ChatResponse, LLMUsage
from builder.backends.llm.cache import CacheWriter, LLMCache, Origin, fill, split_cached
from builder.backends.llm.config import VLLMModelConfig
from builder.backends.llm.vllm_backend import vllm_cache_key, wants_schema
from builder.util.install_hint import install_command


def _ray_llm_hint() -> str:
    return f"{install_command('ray')} on the driver, and {install_command('gpu')} on the GPU workers"


def sampling_base(config: VLLMModelConfig) -> dict[str, Any]:
    """The vLLM sampling parameters every request shares (max_tokens is per row)."""
    base: dict[str, Any] = {"temperature": config.temperature, "top_p": config.top_p, "seed": config.seed}
    return {k: v for k, v in base.items() if v is not None}


def request_row(index: int, request: ChatRequest, max_tokens: int, structured: bool) -> dict[str, Any]:
    """The dataset row for one request; `index` brings its answer back to its place."""
    schema = json.dumps(request.json_schema) if structured and request.json_schema is not None else ""
    return {
        "i": index,
        "messages": json.dumps(list(request.messages), ensure_ascii=False),
        "schema": schema,
        "max_tokens": max_tokens,
    }


def preprocess(sampling: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """Row → what the processor's chat-template and engine stages read."""
    params = {**sampling, "max_tokens": int(row["max_tokens"])}
    if row["schema"]:
        # vLLM reads a JSON schema given as text; the Arrow column stays a plain string.
        params["structured_outputs"] = {"json": row["schema"]}
    return {"messages": json.loads(row["messages"]), "sampling_params": params}


def postprocess(row: dict[str, Any]) -> dict[str, Any]:
    """Engine output → the few columns the driver reads (failed rows skip this)."""
    return {
        "i": row["i"],
        "text": row["generated_text"],
        "prompt_tokens": row["num_input_tokens"],
        "completion_tokens": row["num_generated_tokens"],
        "max_tokens": row["max_tokens"],
    }


def answer_of(row: dict[str, Any]) -> tuple[int, ChatResponse]:
    """The request index and its answer, from a postprocessed row or a failed one."""
    index = int(row["i"])
    error = row.get("__inference_error__") or ""
    if error:
        return index, ChatResponse.failed(str(error)[:200])
    budget, completion = int(row["max_tokens"]), int(row["completion_tokens"])
    # The processor reports no finish reason: an answer that used its whole budget was cut off.
    if completion >= budget:
        return index, ChatResponse.truncated(f"answer cut off at max_tokens {budget}")
    text = row["text"]
    if not text:
        return index, ChatResponse.failed("empty answer")
    return index, ChatResponse(str(text), None, False, int(row["prompt_tokens"]), completion, 0)


def processor_config(config: VLLMModelConfig) -> Any:
    """The `vLLMEngineProcessorConfig`: a fixed pool of `engines` engines, and failed rows
    reported as rows (a prompt longer than the context must not sink the batch)."""
    llm = _import_ray_llm()
    return llm.vLLMEngineProcessorConfig(
        model_source=config.model,
        engine_kwargs=dict(config.engine_kwargs),
        concurrency=(config.engines, config.engines),
        batch_size=config.batch_size,
        should_continue_on_error=True,
    )


def _import_ray_llm() -> Any:
    try:
        return importlib.import_module("ray.data.llm")
    except ImportError as error:
        raise BackendUnavailable(f"vLLM on the Ray executor needs Ray Data LLM: {_ray_llm_hint()}") from error


class RayVLLMBackend:
    """Answers cache misses on the cluster's GPUs; the `LLMBackend` protocol."""

    def __init__(self, name: str, config: VLLMModelConfig, cache: LLMCache) -> None:
        self._ray_llm = _import_ray_llm()
        self.name = name
        self.config = config
        self.cache = cache
        self.usage = LLMUsage()
        self._writer = CacheWriter(cache)
        # Built on the first cache miss: a fully cached rerun needs no cluster and no model files.
        self._processor: Any = None

    def chat_many(
        self, requests: Sequence[ChatRequest], on_done: Callable[[int], None] | None = None
    ) -> list[ChatResponse]:
        keys = [self._key(r) for r in requests]
        responses, missing = split_cached(self.cache, keys)
        hits = len(requests) - sum(len(p) for p in missing.values())
        if on_done is not None and hits:
            on_done(hits)
        pending = list(missing.items())
        if pending:
            try:
                answers = self._answer_all(
                    [k for k, _ in pending], [requests[p[0]] for _, p in pending], [len(p) for _, p in pending], on_done
                )
            finally:
                self._writer.flush()
            for (_, positions), answer in zip(pending, answers, strict=True):
                fill(responses, positions, answer)
        done = cast(list[ChatResponse], responses)
        self.usage.record(done)
        return done

    def mark_failed(self, requests: Sequence[ChatRequest], kind: str) -> None:
        """Mark the cached answers to `requests` as unusable (`kind` is the drop reason)."""
        self._writer.flush()
        self.cache.mark_failed((self._key(r) for r in requests), kind)

    def close(self) -> None:
        self._processor = None
        self._writer.close()

    def _structured(self, request: ChatRequest) -> bool:
        return wants_schema(self.config, request)

    def _key(self, request: ChatRequest) -> str:
        return vllm_cache_key(self.config, request)

    def _budget(self, request: ChatRequest) -> int:
        return request.max_tokens or self.config.max_tokens

    def _answer_all(
        self, keys: list[str], requests: list[ChatRequest], copies: list[int], on_done: Callable[[int], None] | None
    ) -> list[ChatResponse]:
        """Answers; those cut off at max_tokens are generated once more with twice the budget."""
        budgets = [self._budget(r) for r in requests]
        answers = self._generate(keys, requests, budgets, lambda i: on_done(copies[i]) if on_done is not None else None)
        cut = [i for i, a in enumerate(answers) if a.reason == "llm_truncated"]
        if cut:
            again = self._generate(
                [keys[i] for i in cut], [requests[i] for i in cut], [2 * budgets[i] for i in cut], lambda i: None
            )
            for i, answer in zip(cut, again, strict=True):
                answers[i] = replace(answer, retries=1)
        return answers

    def _generate(
        self, keys: list[str], requests: list[ChatRequest], budgets: list[int], arrived: Callable[[int], None]
    ) -> list[ChatResponse]:
        rows = [request_row(i, r, b, self._structured(r)) for i, (r, b) in enumerate(zip(requests, budgets))]
        answers: list[ChatResponse | None] = [None] * len(rows)
        for index, answer in map(answer_of, self._run(rows)):
            answers[index] = answer
            if answer.ok:
                self._writer.put(
                    keys[index],
                    cast(str, answer.text),
                    answer.prompt_tokens,
                    answer.completion_tokens,
                    answer.reasoning,
                    Origin(self.config.model, self.cache.stage),
                )
            arrived(index)
        return [a if a is not None else ChatResponse.failed("no answer came back from the engines") for a in answers]

    def _run(self, rows: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
        """Rows through the processor, streamed back in whatever order they finish."""
        import ray.data

        if self._processor is None:
            self._processor = self._ray_llm.build_processor(
                processor_config(self.config),
                preprocess=functools.partial(preprocess, sampling_base(self.config)),
                postprocess=postprocess,
            )
        ray.data.DataContext.get_current().enable_progress_bars = False
        return cast(Iterable[dict[str, Any]], self._processor(ray.data.from_items(rows)).iter_rows())
