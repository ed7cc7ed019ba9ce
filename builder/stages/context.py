"""What a stage may use while it runs: models, tokenizer, prompts, seeded RNGs, progress."""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from builder.prompt_templates import Message, PromptLibrary
from builder.stages.seeding import rng_for

if TYPE_CHECKING:
    from builder.backends.llm import LLMBackend
    from builder.backends.rerankers import Reranker
    from builder.backends.tokenizers import TokenCounter
    from builder.recipe.model import RecipeBase


class ProgressTask(Protocol):
    def advance(self, n: int = 1) -> None: ...


class Progress(Protocol):
    def task(self, description: str, total: int) -> AbstractContextManager[ProgressTask]: ...


@dataclass
class StageContext:
    recipe: RecipeBase
    label: str  # e.g. "02_generate_queries": the stage column of the drops table
    index: int
    tokenizer: TokenCounter
    work_dir: Path
    prompts: PromptLibrary
    progress: Progress
    llm_factory: Callable[[str], LLMBackend]
    stats: dict[str, Any] = field(default_factory=dict)  # extra figures a stage reports
    reranker_factory: Callable[[str], Reranker] | None = None
    base_dir: Path | None = None  # the recipe's folder, for relative input paths

    @property
    def seed(self) -> int:
        return self.recipe.seed

    @property
    def rng(self) -> random.Random:
        """A fresh RNG for this stage, the same on every run of the same recipe."""
        return rng_for(self.seed, self.index, self.label)

    def item_rng(self, item_id: str) -> random.Random:
        """Randomness for one item, independent of order and concurrency."""
        return rng_for(self.seed, self.label, item_id)

    def llm(self, name: str) -> LLMBackend:
        return self.llm_factory(name)

    def reranker(self, name: str) -> Reranker:
        """A `rerankers:` entry (or the built-in `bm25`), shared across stages by the runner."""
        if self.reranker_factory is not None:
            return self.reranker_factory(name)
        from builder.backends.rerankers import make_reranker, reranker_configs

        return make_reranker(name, reranker_configs(self.recipe)[name], self.llm, self.prompts)

    def render(self, prompt: str, **variables: object) -> tuple[Message, ...]:
        return self.prompts.get(prompt).render(**variables)
