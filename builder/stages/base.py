"""What a stage is, and the registry that lets a recipe name one."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from builder.stages.refs import ModelRef, PromptRef, RerankerRef, refs_of
from builder.textutil.positions import REGIONS

if TYPE_CHECKING:
    import polars as pl

    from builder.bench import Bench
    from builder.stages.context import StageContext


class StageParamError(ValueError):
    """A stage's parameter that its input shows to be unusable (found only while it runs);
    reported, like a recipe error, at the parameter's line of the recipe."""

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(message)


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


def grouped_calls(queries: int, docs: int, per_call: int) -> int:
    """Requests for `queries` asked `per_call` at a time, each request about one document:
    a document's last request is on average half empty, so about (per_call - 1) / (2 per_call)
    of a request more per document than queries / per_call; never fewer than the documents
    asked about, never more than the queries."""
    if not queries:
        return 0
    asked_docs = min(docs, queries) or 1
    calls = queries / per_call + asked_docs * (per_call - 1) / (2 * per_call)
    return min(queries, max(asked_docs, round(calls)))


class Stage(ABC):
    """One step of a recipe: `run(bench, ctx) -> Bench`.

    Subclasses set `name`, a nested `Params` model, and implement `run`.
    """

    name: ClassVar[str]
    Params: ClassVar[type[StageParams]] = StageParams
    # Tables whose rows this stage rebuilds under new ids (e.g. assembled documents);
    # ids that vanish from them need no drop record.
    rebuilds: ClassVar[frozenset[str]] = frozenset()
    # Stages that select a sample: removing most of their input is their job, not a warning;
    # and stages that warn about their own removals, with a threshold of their own.
    removes_by_design: ClassVar[bool] = False
    # For a sampling stage: the drop reasons that are its choice. Its other reasons (a document
    # it could not take at all) are checked like any stage's removals; None exempts it wholly.
    chosen_reasons: ClassVar[frozenset[str] | None] = None
    warns_on_removals: ClassVar[bool] = False
    # Its contract, in the words of builder.stages.contracts: what earlier stages (or the
    # recipe's sources, for documents) must have provided, and everything it can provide.
    # `needed()` and `provided()` narrow these to the stage's params.
    needs: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset()

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

    def needed(self) -> frozenset[str]:
        """What this stage, with its params, needs from the stages before it."""
        return self.needs

    def provided(self) -> frozenset[str]:
        """What this stage, with its params, provides to the stages after it."""
        return self.provides

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


Row = TypeVar("Row", bound=Sequence[Any])


@dataclass
class Verdicts:
    """Why each query (or document) a filter rejects goes: the first reason found wins,
    and the drops are recorded in the order they were found. `rivals` names, per dropped
    id, the other documents that caused the drop, where there are such."""

    queries: dict[str, str] = field(default_factory=dict)
    docs: dict[str, str] = field(default_factory=dict)
    query_rivals: dict[str, list[str]] = field(default_factory=dict)
    doc_rivals: dict[str, list[str]] = field(default_factory=dict)

    def drop(self, query_id: str, reason: str | None, rivals: Iterable[str] = ()) -> None:
        """Drop a query with `reason`; None keeps it."""
        if reason is not None and query_id not in self.queries:
            self.queries[query_id] = reason
            named = sorted(set(rivals))
            if named:
                self.query_rivals[query_id] = named

    def drop_all(self, query_ids: Iterable[str], reason: str) -> None:
        for query_id in query_ids:
            self.drop(query_id, reason)

    def update(self, reasons: Mapping[str, str | None]) -> None:
        """Per query: None to keep, else why it goes."""
        for query_id, reason in reasons.items():
            self.drop(query_id, reason)

    def drop_doc(self, doc_id: str, reason: str, rivals: Iterable[str] = ()) -> None:
        """Drop a document; its queries go with it as `doc_removed:<reason>`."""
        if doc_id not in self.docs:
            self.docs[doc_id] = reason
            named = sorted(set(rivals))
            if named:
                self.doc_rivals[doc_id] = named

    def undecided(self, rows: Iterable[Row]) -> list[Row]:
        """The rows (query id first) of queries not dropped yet."""
        return [row for row in rows if row[0] not in self.queries]

    def apply(self, bench: Bench, stage: str) -> Bench:
        return bench.drop_queries(_with_rivals(self.queries, self.query_rivals), stage).drop_docs(
            _with_rivals(self.docs, self.doc_rivals), stage
        )


def _with_rivals(reasons: dict[str, str], rivals: dict[str, list[str]]) -> Mapping[str, str] | pl.DataFrame:
    """The reasons as they are, or with a `rivals` column when any drop has rivals."""
    if not rivals:
        return reasons
    import polars as pl

    return pl.DataFrame(
        {"id": list(reasons), "reason": list(reasons.values()), "rivals": [rivals.get(i) for i in reasons]},
        schema={"id": pl.Utf8, "reason": pl.Utf8, "rivals": pl.List(pl.Utf8)},
    )


def kept_by_third(before: Bench, after: Bench) -> dict[str, dict[str, Any]]:
    """Per position third (position_tag, else chunk_tag): queries in, kept, kept share; so a
    QC stage that favours one part of the document shows in the run summary and the card."""
    import polars as pl

    q = before.queries
    column = next((c for c in ("position_tag", "chunk_tag") if c in q.columns), None)
    if column is None:
        return {}
    kept = set(after.queries["query_id"].to_list())
    out: dict[str, dict[str, Any]] = {}
    for third in REGIONS:
        ids = q.filter(pl.col(column) == third)["query_id"].to_list()
        n_kept = sum(i in kept for i in ids)
        out[third] = {"in": len(ids), "kept": n_kept, "share": round(n_kept / len(ids), 3) if ids else None}
    return out


class QueryFilter(Stage):
    """A quality-control stage: it only says, per query, keep or drop with this reason
    (`judge`); the base records the drops and the kept share by position third."""

    # Stages that even out categories by design: their kept share per third says nothing.
    reports_thirds: ClassVar[bool] = True

    @abstractmethod
    def judge(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None: ...

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        verdicts = Verdicts()
        self.judge(bench, ctx, verdicts)
        out = verdicts.apply(bench, ctx.label)
        if self.reports_thirds:
            ctx.stats["kept_by_third"] = kept_by_third(bench, out)
        return out


class StageRegistry(Mapping[str, type[Stage]]):
    """Stage name -> stage class. The names come from a table of the module each stage lives
    in, so listing or checking them imports nothing; a stage's module (with its polars, scipy,
    ...) is imported the first time its class is asked for. A class registered without a table
    entry (a test's own stage) is known from its registration on."""

    def __init__(self) -> None:
        self._modules: dict[str, str] = {}
        self._classes: dict[str, type[Stage]] = {}

    def declare(self, modules: Mapping[str, str]) -> None:
        """Record where each named stage is defined (its module registers it on import)."""
        self._modules.update(modules)

    def declared(self) -> dict[str, str]:
        """The table: stage name -> the module that defines it."""
        return dict(self._modules)

    def register(self, cls: type[Stage]) -> None:
        home = self._modules.get(cls.name, cls.__module__)
        if cls.name in self._classes or home != cls.__module__:
            raise ValueError(f"stage name {cls.name!r} is registered twice")
        self._classes[cls.name] = cls

    def __getitem__(self, name: str) -> type[Stage]:
        if name not in self._classes and name in self._modules:
            importlib.import_module(self._modules[name])
            if name not in self._classes:
                raise LookupError(f"module {self._modules[name]} does not register the stage {name!r} it is listed for")
        return self._classes[name]

    def __contains__(self, name: object) -> bool:
        return name in self._modules or name in self._classes

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._modules, *self._classes]))

    def __len__(self) -> int:
        return len(self._modules.keys() | self._classes.keys())


STAGES = StageRegistry()


def register_stage(cls: type[Stage]) -> type[Stage]:
    STAGES.register(cls)
    return cls
