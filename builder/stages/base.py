"""What a stage is, and the registry that lets a recipe name one."""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

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

    def models_used(self) -> list[str]:
        """Names under the recipe's `models:` this stage calls."""
        llm = getattr(self.params, "llm", None)
        return [llm] if isinstance(llm, str) else []

    def rerankers_used(self) -> list[str]:
        """Names under the recipe's `rerankers:` (or the built-in `bm25`) this stage scores with."""
        names = getattr(self.params, "rerankers", None)
        return list(names) if isinstance(names, list) else []

    def prompts_used(self) -> dict[str, set[str]]:
        """Prompt names this stage renders, with the template variables it provides."""
        return {}

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


def did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
