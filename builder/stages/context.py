"""What a stage may use while it runs: models, tokenizer, prompts, seeded RNGs, progress."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from builder.backends.llm.prompt_templates import Message, PromptLibrary
from builder.util.stable import rng_for

if TYPE_CHECKING:
    from builder.backends.llm import LLMBackend
    from builder.backends.rerankers import Reranker
    from builder.backends.tokenizers import TokenCounter
    from builder.executors import Executor


class ProgressTask(Protocol):
    def advance(self, n: int = 1) -> None: ...


class Progress(Protocol):
    def task(self, description: str, total: int) -> AbstractContextManager[ProgressTask]: ...


@dataclass
class StageContext:
    seed: int  # the recipe's seed
    label: str  # e.g. "02_generate_queries": the stage column of the drops table
    index: int
    tokenizer: TokenCounter
    work_dir: Path
    prompts: PromptLibrary
    progress: Progress
    llm_factory: Callable[[str], LLMBackend]
    reranker_factory: Callable[[str], Reranker]
    executor_factory: Callable[[], Executor] | None = None  # none: everything runs in this process
    stats: dict[str, Any] = field(default_factory=dict)  # extra figures a stage reports
    warnings: list[str] = field(default_factory=list)  # shown in the run summary, stats.json and the card
    base_dir: Path | None = None  # the recipe's folder, for relative input paths
    # (texts, stage name, failure kind): mark the cached LLM answers of that stage holding
    # those texts as unusable, so `--reask-failed` asks them again (LLMCache.mark_failed_containing)
    flag_answers: Callable[[Iterable[str], str, str], None] | None = None

    @property
    def rng(self) -> random.Random:
        """A fresh RNG for this stage, the same on every run of the same recipe."""
        return rng_for(self.seed, self.index, self.label)

    def item_rng(self, item_id: str) -> random.Random:
        """Randomness for one item, independent of order and concurrency."""
        return rng_for(self.seed, self.label, item_id)

    @property
    def executor(self) -> Executor:
        """Where the row-parallel part of the stage runs (the recipe's `executor:`)."""
        if self.executor_factory is None:
            from builder.executors import LocalExecutor

            return LocalExecutor()
        return self.executor_factory()

    def llm(self, name: str) -> LLMBackend:
        return self.llm_factory(name)

    def reranker(self, name: str) -> Reranker:
        """A `rerankers:` entry (or the built-in `bm25`), shared across stages by the runner."""
        return self.reranker_factory(name)

    def render(self, prompt: str, **variables: object) -> tuple[Message, ...]:
        return self.prompts.get(prompt).render(**variables)
