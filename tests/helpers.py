"""Small factories for stage unit tests."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any

from builder.backends.llm.prompt_templates import PromptLibrary
from builder.backends.rerankers import make_reranker, reranker_configs
from builder.backends.tokenizers import TokenCounter, WordCounter
from builder.recipe.model import recipe_model
from builder.stages.context import StageContext


class _NoTask:
    def advance(self, n: int = 1) -> None:
        pass


class SilentProgress:
    @contextmanager
    def task(self, description: str, total: int):
        yield _NoTask()


def make_ctx(
    tmp_path: Path,
    *,
    seed: int = 0,
    label: str = "01_test",
    tokenizer: TokenCounter | None = None,
    models: dict[str, Any] | None = None,
    llms: dict[str, Any] | None = None,
) -> StageContext:
    """A StageContext without a runner; `llms` maps model names to ready backends, and
    `reranker(name)` builds the recipe's entry (or the built-in bm25) with those backends."""
    recipe = recipe_model().model_validate(
        {
            "name": "test",
            "seed": seed,
            "sources": [{"type": "python_docs"}],
            "models": models or {},
            "stages": [{"sample_by_length": {"n_docs": 1}}],
        }
    )
    backends = llms or {}
    prompts = PromptLibrary(tmp_path)

    def llm(name: str) -> Any:
        return backends[name]

    def reranker(name: str) -> Any:
        return make_reranker(name, reranker_configs(recipe)[name], llm, prompts)

    return StageContext(
        seed=seed,
        label=label,
        index=int(label.split("_")[0]),
        tokenizer=tokenizer or WordCounter(),
        work_dir=tmp_path,
        prompts=prompts,
        progress=SilentProgress(),
        llm_factory=llm,
        reranker_factory=reranker,
    )
