"""What a stage is, and the registry that lets a recipe name one."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from builder.stages.refs import ModelRef, PromptRef, RerankerRef, refs_of

if TYPE_CHECKING:
    import polars as pl

    from builder.bench import Bench
    from builder.stages.context import StageContext


class StageParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass
class Flow:
    """Rough sizes flowing between stages, for `build-bench plan`."""

    docs: int
    queries: int
    doc_tokens: float  # mean tokens per document
    # The documents (doc_id, text, n_tokens), or a sample of them where each row stands for
    # `scale` documents; None once a stage no longer knows which documents flow on.
    sample: pl.DataFrame | None = None
    scale: float = 1.0


@dataclass
class Estimate:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notes: list[str] = field(default_factory=list)


class Stage(ABC):
    """One step of a recipe: `run(bench, ctx) -> Bench`.

    Subclasses set `name`, a nested `Params` model, and implement `run`.
    """

    name: ClassVar[str]
    Params: ClassVar[type[StageParams]] = StageParams
    # Tables whose rows this stage rebuilds under new ids (e.g. assembled documents);
    # ids that vanish from them need no drop record.
    rebuilds: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, params: StageParams) -> None:
        self.params = params

    @abstractmethod
    def run(self, bench: Bench, ctx: StageContext) -> Bench: ...

    # Variables the stage passes to the prompts it renders (its PromptRef parameters).
    prompt_variables: ClassVar[frozenset[str]] = frozenset()

    def _refs(self, kind: type) -> list[str]:
        return list(dict.fromkeys(name for _, k, name in refs_of(self.params) if issubclass(k, kind)))

    def models_used(self) -> list[str]:
        """Names under the recipe's `models:` this stage calls: its ModelRef parameters."""
        return self._refs(ModelRef)

    def rerankers_used(self) -> list[str]:
        """Names under `rerankers:` (or the built-in `bm25`) it scores with: its RerankerRef parameters."""
        return self._refs(RerankerRef)

    def prompts_used(self) -> dict[str, set[str]]:
        """Prompt names this stage renders, with the template variables it provides. A stage
        renders its PromptRef parameters only when it calls a model."""
        if not self.models_used():
            return {}
        return {name: set(self.prompt_variables) for name in self._refs(PromptRef)}

    def problems(self, recipe: Any) -> list[tuple[str, str]]:
        """Recipe-level checks beyond the params model: (param name, message) pairs."""
        return []

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        """Estimated output sizes and LLM spend, before anything runs."""
        return flow, Estimate()

    @classmethod
    def summary(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


STAGES: dict[str, type[Stage]] = {}


def register_stage(cls: type[Stage]) -> type[Stage]:
    if cls.name in STAGES:
        raise ValueError(f"stage name {cls.name!r} is registered twice")
    STAGES[cls.name] = cls
    return cls

