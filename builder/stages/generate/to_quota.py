"""`generate_to_quota`: generation in rounds, steered to the groups still short.

The stage wraps generation and the stages after it whose losses differ by position
(localization, reranker agreement...): each round generates only for the groups (third x
length bucket x language/domain) still short of their quota, runs the wrapped stages on
the new questions, and counts what survives. It stops when every quota is met, a short
group's candidates run out, or the rounds do; `balance` after it then removes little.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import Field, model_validator

from builder.stages.base import STAGES, Estimate, Flow, Stage, StageParams, register_stage
from builder.stages.categories import CategoryColumn
from builder.stages.generate.checks import repeated_questions
from builder.stages.generate.generate_queries import GenerateQueries
from builder.stages.generate.steering import (
    Group,
    Tally,
    candidate_calls,
    plan_round,
    stop_reason,
    strata,
    third_of_value,
)
from builder.stages.refs import ModelRef, refs_of

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class ToQuotaParams(StageParams):
    stages: list[dict[str, dict[str, Any]]] = Field(
        min_length=1,
        description=(
            "the stages each round runs, as recipe entries: generate_queries first, then those whose "
            "losses should count toward the quota (e.g. localize_spans, segment_agreement)"
        ),
    )
    column: CategoryColumn = Field(default="chunk_tag", description="the position column balance evens out")
    quota: int | None = Field(
        default=None,
        ge=1,
        description=("queries per group; default: what the group's stratum's scarcest third can reach"),
    )
    rounds: int = Field(default=4, ge=1, description="the most rounds of generation")
    first_share: float = Field(
        default=0.34,
        gt=0,
        le=1,
        description=("without a quota: the share of each group's candidates the first round asks, to learn its yield"),
    )
    per: list[Literal["lang", "domain"]] = Field(default=[], description="strata: quotas per language / domain")
    buckets: list[int] | None = Field(default=None, description="strata: token-length bucket edges")

    @model_validator(mode="after")
    def _stages_known(self) -> ToQuotaParams:
        for k, entry in enumerate(self.stages):
            if len(entry) != 1 or next(iter(entry)) not in STAGES:
                raise ValueError(f"stages[{k}]: one registered stage name per entry, got {sorted(entry)}")
            name, params = next(iter(entry.items()))
            STAGES[name].Params.model_validate(params or {})
        first = next(iter(self.stages[0]))
        if first != "generate_queries" or (self.stages[0][first] or {}).get("mode") == "extractive":
            raise ValueError("stages[0] must be generate_queries with an LLM mode (whole_document or chunked)")
        return self


@register_stage
class GenerateToQuota(Stage):
    """Generate in rounds, asking only for the position groups still short of their quota."""

    name = "generate_to_quota"
    needs = frozenset()  # what the wrapped stages need: see `needed`
    Params = ToQuotaParams
    params: ToQuotaParams

    def __init__(self, params: ToQuotaParams) -> None:
        super().__init__(params)
        self.children: list[Stage] = [
            STAGES[name](STAGES[name].Params.model_validate(p or {}))
            for entry in params.stages
            for name, p in entry.items()
        ]

    def needed(self) -> frozenset[str]:
        provided: set[str] = set()
        out: set[str] = set()
        for child in self.children:
            out |= child.needed() - provided
            provided |= child.provided()
        return frozenset(out)

    def provided(self) -> frozenset[str]:
        return frozenset().union(*(child.provided() for child in self.children))

    def models_used(self) -> list[str]:
        return list(dict.fromkeys(m for child in self.children for m in child.models_used()))

    def rerankers_used(self) -> list[str]:
        return list(dict.fromkeys(r for child in self.children for r in child.rerankers_used()))

    def prompts_used(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for child in self.children:
            for name, variables in child.prompts_used().items():
                out.setdefault(name, set()).update(variables)
        return out

    def problems(self, recipe: Any) -> list[tuple[str, str]]:
        out = [
            (f"stages.{k}.{field}", message)
            for k, child in enumerate(self.children)
            for field, message in child.problems(recipe)
        ]
        for k, child in enumerate(self.children):
            declared = getattr(recipe, "models", {}) or {}
            out += [
                (f"stages.{k}.{field}", f"model {name!r} is not declared under models:")
                for field, kind, name in refs_of(child.params)
                if issubclass(kind, ModelRef) and name not in declared
            ]
        return out

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        """At most what one-shot generation and the wrapped stages spend."""
        total = Estimate()
        for child in self.children:
            flow, est = child.plan(flow)
            total.calls += est.calls
            total.prompt_tokens += est.prompt_tokens
            total.completion_tokens += est.completion_tokens
            total.notes += est.notes
        return flow, total

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        generate = self.children[0]
        assert isinstance(generate, GenerateQueries)
        stratum_of = strata(bench.corpus, p.per, p.buckets)
        tallies: dict[Group, Tally] = {}
        for doc_id, call_id, third in candidate_calls(bench.corpus, ctx, generate.params):
            tallies.setdefault((third, stratum_of[doc_id]), Tally()).left.append(call_id)
        prior = float(generate.params.questions_per_call)
        rounds: list[dict[str, Any]] = []
        stopped = "max_rounds"
        for number in range(1, p.rounds + 1):
            asks = plan_round(tallies, p.quota, prior, p.first_share)
            if not asks:
                stopped = stop_reason(tallies, p.quota, prior)
                break
            only: set[str] = set()
            for group, n in asks.items():
                t = tallies[group]
                only.update(t.left[:n])
                t.left, t.asked = t.left[n:], t.asked + n
            before = set(bench.queries["query_id"].to_list())
            bench = self._round(bench, ctx, only, number)
            kept = self._survivors(bench, before, stratum_of)
            for group, n in kept.items():
                tallies.setdefault(group, Tally()).kept += n
            rounds.append(
                {
                    "round": number,
                    "calls": len(only),
                    "kept": sum(kept.values()),
                    "yield": round(sum(kept.values()) / len(only), 4),
                }
            )
        else:
            if not plan_round(tallies, p.quota, prior, p.first_share):
                stopped = stop_reason(tallies, p.quota, prior)
        ctx.stats["round_count"] = len(rounds)
        ctx.stats["rounds"] = rounds
        ctx.stats["stopped"] = stopped
        ctx.stats["groups"] = {
            "/".join((third, *stratum)): {"asked": t.asked, "kept": t.kept, "left": len(t.left)}
            for (third, stratum), t in sorted(tallies.items())
        }
        return bench

    def _round(self, bench: Bench, ctx: StageContext, only: set[str], number: int) -> Bench:
        """Generate the calls in `only`, then run the wrapped stages on the new questions alone."""
        earlier = bench
        fresh = bench.replace(queries=bench.queries.clear(), qrels=bench.qrels.clear(), drops=bench.drops.clear())
        figures: dict[str, Any] = {}
        for k, child in enumerate(self.children):
            child_ctx = dataclasses.replace(ctx, stats={})
            if isinstance(child, GenerateQueries):
                fresh = child.run_calls(fresh, child_ctx, only)
                # Generation sees only this round's questions: a repeat of an earlier round's is dropped here.
                asked = pl.concat(
                    [
                        earlier.queries.select("query_id", "text", "doc_id"),
                        fresh.queries.select("query_id", "text", "doc_id"),
                    ]
                )
                fresh = fresh.drop_queries(
                    repeated_questions(asked, fresh.queries["query_id"].to_list()), child_ctx.label
                )
            else:
                fresh = child.run(fresh, child_ctx)
            figures[f"{k}_{child.name}"] = child_ctx.stats
        ctx.stats.setdefault("round_figures", {})[str(number)] = figures
        is_doc = pl.col("kind") == "doc"
        merged = earlier.replace(
            queries=pl.concat([earlier.queries, fresh.queries], how="diagonal_relaxed"),
            qrels=pl.concat([earlier.qrels, fresh.qrels]),
            drops=pl.concat([earlier.drops, fresh.drops.filter(~is_doc)]),
        )
        # A document a round found unusable takes the earlier rounds' questions about it along.
        gone = fresh.drops.filter(is_doc).select("id", "reason")
        return merged.drop_docs(dict(gone.iter_rows()), ctx.label)

    def _survivors(self, bench: Bench, before: set[str], stratum_of: dict[str, tuple[str, ...]]) -> Counter[Group]:
        column = self.params.column
        if column not in bench.queries.columns:
            return Counter()
        new = bench.queries.filter(~pl.col("query_id").is_in(list(before)))
        return Counter(
            (third, stratum_of[doc_id])
            for doc_id, value in new.select("doc_id", column).iter_rows()
            if (third := third_of_value(value)) is not None
        )
