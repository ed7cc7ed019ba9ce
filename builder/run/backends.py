"""The models a run uses, built once and shared by every stage: LLM backends (with their
shared answer cache), rerankers, the tokenizer and the executor."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.backends.llm import LLMBackend, LLMCache, LLMUsage, make_llm
from builder.backends.llm.batch_book import BatchBook
from builder.backends.llm.factory import start_warm_up
from builder.backends.llm.prompt_templates import PromptLibrary
from builder.backends.rerankers import AnyRerankerConfig, Reranker, make_reranker, reranker_configs
from builder.backends.tokenizers import TokenCounter, make_counter
from builder.executors import Executor, make_executor
from builder.run.budget import make_gate

if TYPE_CHECKING:
    import polars as pl

    from builder.backends.rerankers.pooled import ModelPool


class Backends:
    """Builds each backend on first use, so a run that needs no LLM opens no cache."""

    def __init__(
        self,
        recipe: Any,
        prompts: PromptLibrary,
        cache_path: Path,
        reask_failed: bool = False,
        mock_llm: bool = False,
        batch_book: Path | None = None,
        batch: bool = False,
        build: str | None = None,
    ) -> None:
        self.recipe = recipe
        # The build's name in the answer cache (its run folder under the run root), so a
        # resumed run tells the answers this build paid for from those it got for free.
        self.build = build
        self.prompts = prompts
        self.cache_path = cache_path
        self.reask_failed = reask_failed
        # Every model answered by the in-process mock, from its own cache at `cache_path`.
        self.mock_llm = mock_llm
        # The run folder's record of provider batches, and whether --batch sends every
        # HTTP model's requests through them (a model's own `batch: true` does it for one).
        self._batch_book_path = batch_book
        self._batch_book: BatchBook | None = None
        self.batch = batch
        self._stage: str | None = None
        self._llms: dict[str, LLMBackend] = {}
        self._rerankers: dict[str, Reranker] = {}
        self._tokenizer: TokenCounter | None = None
        self._cache: LLMCache | None = None
        self._executor: Executor | None = None
        self._warming: threading.Thread | None = None
        # The recipe's budget, shared by every HTTP model and the mock (so a budget can be
        # tried offline); in-process vLLM is not metered.
        self.gate = make_gate(getattr(recipe, "budget", None))

    @property
    def tokenizer(self) -> TokenCounter:
        if self._tokenizer is None:
            self._tokenizer = make_counter(self.recipe.tokenizer)
        return self._tokenizer

    @property
    def executor(self) -> Executor:
        """Started on first use: a recipe whose stages never ask for one starts no cluster."""
        if self._executor is None:
            self._executor = make_executor(self.recipe.executor)
        return self._executor

    def warm(self, names: Iterable[str]) -> None:
        """Start loading the client libraries these models need, on a thread, so the stage
        that first asks for one does not wait for the import; at most once per run."""
        if self._warming is None and not self.mock_llm:
            self._warming = start_warm_up(self.recipe.models[n] for n in set(names))

    def enter_stage(self, label: str) -> None:
        """Name the stage now running: its answers are recorded in the cache with it."""
        self._stage = label
        if self.gate is not None:
            self.gate.stage = label
        if self._cache is not None:
            self._cache.stage = label

    def _open_cache(self) -> LLMCache:
        if self._cache is None:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            self._cache = LLMCache(self.cache_path, reask_failed=self.reask_failed)
            self._cache.stage = self._stage
            self._cache.build = self.build
        return self._cache

    def flag_answers(self, texts: Iterable[str], stage: str, kind: str) -> None:
        """Mark cached answers of a stage as unusable by their text (see StageContext)."""
        if self.mock_llm:
            return
        if self._cache is not None or self.cache_path.is_file():
            self._open_cache().mark_failed_containing(texts, stage, kind)

    def used_keys(self, label: str) -> set[str]:
        """Keys of the cached answers the stage `label` was served or stored in this process."""
        return set(self._cache.used.get(label, ())) if self._cache is not None else set()

    def paid_earlier(self, label: str, models: list[str]) -> dict[str, LLMUsage]:
        """Per model of the stage: the answers it was served from the cache in this process
        that an earlier run of this build paid for (see `LLMCache.paid_by_build`), as usage
        to add to the stage's: each a paid call rather than a cache hit. An answer goes to
        the stage's model with its served name (the first such; the first model when none
        has it, as with the mock's answers)."""
        if self._cache is None or not models:
            return {}
        out: dict[str, LLMUsage] = {}
        for paid in self._cache.paid_by_build(label):
            name = next((m for m in models if self.recipe.models[m].model == paid.model), models[0])
            used = out.setdefault(name, LLMUsage())
            used.calls += 1
            used.cache_hits -= 1
            used.prompt_tokens += paid.prompt_tokens
            used.completion_tokens += paid.completion_tokens
            used.cached_tokens += paid.cached_tokens
            if paid.batch:
                used.batch_calls += 1
                used.batch_prompt_tokens += paid.prompt_tokens
                used.batch_completion_tokens += paid.completion_tokens
                used.batch_cached_tokens += paid.cached_tokens
        return out

    def export_answers(self, keys: set[str]) -> pl.DataFrame | None:
        from builder.backends.llm.cache_transfer import export_answers

        return export_answers(self._open_cache(), keys) if keys else None

    def seed_answers(self, answers: pl.DataFrame, where: str) -> int:
        from builder.backends.llm.cache_transfer import seed_answers

        return seed_answers(self._open_cache(), answers, f"from:{where}")

    def failed_stages(self) -> set[str | None]:
        """Labels of the stages whose cached answers are marked unusable (see LLMCache)."""
        if self.mock_llm or (self._cache is None and not self.cache_path.is_file()):
            return set()
        return self._open_cache().failed_stages()

    def llm(self, name: str) -> LLMBackend:
        if name not in self._llms and self.mock_llm:
            from builder.backends.llm.mock_backend import MockLLMBackend

            self._llms[name] = MockLLMBackend(
                name, self.recipe.models[name], self.recipe.seed, self._open_cache(), self.gate
            )
        if name not in self._llms:
            if self._warming is not None:
                self._warming.join()
            cache = self._open_cache()
            config = self.recipe.models[name]
            on_ray = self.recipe.executor.kind == "ray"
            if on_ray and config.backend == "vllm":
                self.executor  # noqa: B018 -- the engines run on the executor's cluster: join it first
            if self.batch and config.backend == "openai":
                config = config.model_copy(update={"batch": True})
            self._llms[name] = make_llm(name, config, cache, on_ray=on_ray, gate=self.gate, batches=self._batches())
        return self._llms[name]

    def _batches(self) -> BatchBook | None:
        if self._batch_book is None and self._batch_book_path is not None:
            self._batch_book = BatchBook(self._batch_book_path)
        return self._batch_book

    def settle_batches(self) -> None:
        """A stage finished and was counted: the batch answers it used are plain cache hits now."""
        for backend in self._llms.values():
            settle = getattr(backend, "settle_batches", None)
            if settle is not None:
                settle()

    def reranker(self, name: str) -> Reranker:
        if name not in self._rerankers:
            config = reranker_configs(self.recipe)[name]
            self._rerankers[name] = make_reranker(name, config, self.llm, self.prompts, self._pool(name, config))
        return self._rerankers[name]

    def _pool(self, name: str, config: AnyRerankerConfig) -> ModelPool | None:
        """On Ray, neural models score on GPU / CPU workers; bm25 and LLM judges stay here."""
        if self.recipe.executor.kind != "ray":
            return None
        from builder.backends.rerankers.pooled import model_pool

        return model_pool(name, config, lambda: self.executor)

    def schema_refusals(self) -> dict[str, str]:
        """Model name -> why its server refused a JSON schema, for the models that fell
        back to asking for JSON by the prompt alone."""
        return {
            name: reason for name, backend in self._llms.items() if (reason := getattr(backend, "schema_refused", None))
        }

    def usage_by_model(self) -> dict[str, LLMUsage]:
        """A snapshot of each started model's counters (they keep counting after)."""
        return {name: backend.usage + LLMUsage() for name, backend in self._llms.items()}

    def new_schema_refusals(self, before: dict[str, str]) -> list[str]:
        """A warning for each model that fell back since `before` (a `schema_refusals()`)."""
        return [
            f"model {name!r} refused structured output ({reason}): from then on its JSON answers "
            "were asked for by the prompt alone"
            for name, reason in self.schema_refusals().items()
            if name not in before
        ]

    def timeouts(self) -> tuple[int, str]:
        """Requests that ran out of their model's timeout_s so far, and a line saying so."""
        # Only backends that count timeouts (OpenAIBackend) pass the filter; the protocol lacks them.
        late: list[tuple[str, Any]] = [(name, b) for name, b in self._llms.items() if getattr(b, "timed_out", 0)]
        count = sum(b.timed_out for _, b in late)
        return count, "; ".join(
            f"{b.timed_out} {name!r} attempts timed out (timeout_s={b.config.timeout_s:g} s, "
            f"the last waited {b.last_wait_s:.1f} s)"
            for name, b in late
        )

    def usage(self) -> LLMUsage:
        total = LLMUsage()
        for backend in self._llms.values():
            total = total + backend.usage
        return total

    def close(self) -> None:
        if self._warming is not None:
            self._warming.join()
        for reranker in self._rerankers.values():
            reranker.close()
        for backend in self._llms.values():
            backend.close()
        if self._executor is not None:
            self._executor.close()
