"""Length-bucket sampling of the corpus (PosIR §2.1; FineWeb-PosQ's word window).

With `per`, the corpus is split into strata (PosIR samples each language and domain on its
own) and every stratum gets `n_docs`, divided among the buckets by the weights.

A corpus loaded by streaming (builder/run/load.py) arrives with texts only for the
documents this stage will keep and a `_n_words` column counted from the full texts; the
choice below reads words from that column, so it is the same either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from builder.stages.base import Estimate, Flow, Stage, StageParams, register_stage
from builder.stages.contracts import DOCUMENTS
from builder.util.lazy import lazy_import
from builder.util.stable import derive_seed

if TYPE_CHECKING:
    import polars as pl

    from builder.bench import Bench
    from builder.stages.context import StageContext
else:
    pl = lazy_import("polars")

WORDS = "_n_words"


class SampleParams(StageParams):
    buckets: list[int] = Field(
        default=[0, 256, 512, 768, 1024, 1280, 1536, 1792, 2048],
        description="bucket edges in tokens; bucket k is [edge k, edge k+1)",
    )
    weights: list[float] = Field(
        default=[3, 3, 3, 3, 2, 2, 2, 2],
        description=("share of n_docs per bucket, one weight per bucket (PosIR's 3:3:3:3:2:2:2:2)"),
    )
    n_docs: int = Field(ge=1, description="documents to keep in all, or in each stratum with `per`")
    per: list[Literal["lang", "domain"]] = Field(
        default=[], description="sample each (lang, domain) stratum separately, n_docs each"
    )
    min_words: int | None = Field(default=None, ge=0, description="drop documents of fewer words (too_few_words)")
    max_words: int | None = Field(default=None, ge=1, description="drop documents of more words (too_many_words)")

    @model_validator(mode="after")
    def _shape(self) -> SampleParams:
        if len(self.buckets) < 2 or any(b >= a for a, b in zip(self.buckets[1:], self.buckets)):
            raise ValueError("buckets must be at least two strictly increasing edges")
        if len(self.weights) != len(self.buckets) - 1:
            raise ValueError(f"{len(self.buckets) - 1} buckets need as many weights, got {len(self.weights)}")
        if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
            raise ValueError("weights must be non-negative and not all zero")
        if len(set(self.per)) != len(self.per):
            raise ValueError("per names a column twice")
        return self


def bucket_targets(n_docs: int, weights: list[float]) -> list[int]:
    """Split n_docs by weight, rounding by largest remainder so the sum is exact."""
    total = sum(weights)
    raw = [n_docs * w / total for w in weights]
    base = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - base[i], reverse=True)
    for i in order[: n_docs - sum(base)]:
        base[i] += 1
    return base


@register_stage
class SampleByLength(Stage):
    """Sample documents per token-length bucket with fixed weights (uniform within a bucket)."""

    name = "sample_by_length"
    needs = frozenset({DOCUMENTS})
    removes_by_design = True
    chosen_reasons = frozenset({"not_sampled"})  # documents outside the buckets are a loss, and warned of
    Params = SampleParams
    params: SampleParams

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        corpus = classify(bench.corpus, p)
        eligible = corpus.filter(pl.col("_reason").is_null())
        ranked = eligible.with_columns(rank_expr(derive_seed(ctx.seed, ctx.label)).alias("_rank")).with_columns(
            pl.col("_rank").rank("ordinal").over("_stratum", "_bucket").alias("_order")
        )
        targets = bucket_targets(p.n_docs, p.weights)
        chosen = ranked.filter(
            pl.col("_order")
            <= pl.col("_bucket").replace_strict(list(range(len(targets))), targets, return_dtype=pl.UInt32)
        )
        self._report(ctx, corpus, eligible, chosen, targets)
        keep = set(chosen["doc_id"].to_list())
        reasons = corpus.select(
            pl.coalesce(
                "_reason",
                pl.when(~pl.col("doc_id").is_in(list(keep))).then(pl.lit("not_sampled")),
            )
        ).to_series()
        out = bench.keep_docs(reasons, ctx.label)
        return out.replace(corpus=out.corpus.drop(WORDS)) if WORDS in out.corpus.columns else out

    def _report(
        self, ctx: StageContext, corpus: pl.DataFrame, eligible: pl.DataFrame, chosen: pl.DataFrame, targets: list[int]
    ) -> None:
        had = eligible.group_by("_bucket").len()
        got = chosen.group_by("_bucket").len()
        strata = sorted(corpus["_stratum"].unique().to_list())
        edges = self.params.buckets
        ctx.stats["buckets"] = [
            {
                "bucket": f"[{edges[k]}, {edges[k + 1]})",
                "had": _count(had, k),
                "target": targets[k] * len(strata),
                "got": _count(got, k),
            }
            for k in range(len(targets))
        ]
        if self.params.per:
            per_stratum = dict(chosen.group_by("_stratum").len().iter_rows())
            ctx.stats["strata"] = {s: {"target": self.params.n_docs, "got": per_stratum.get(s, 0)} for s in strata}
        short = self.params.n_docs * len(strata) - chosen.height
        if short:
            ctx.stats["shortfall"] = short

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        """The run's bucket arithmetic on the flow's documents (scaled up from a sample), per
        stratum where `per` is set, with what each bucket takes and what falls outside."""
        p = self.params
        if flow.sample is None or (p.per and not set(p.per) <= set(flow.sample.columns)):
            n = flow.docs if p.per else min(flow.docs, p.n_docs)
            notes = [f"n_docs={p.n_docs} per stratum: later estimates are upper bounds"] if p.per else []
            return Flow(docs=n, queries=flow.queries, doc_tokens=flow.doc_tokens), Estimate(notes=notes)
        classified = classify(flow.sample, p)
        eligible = classified.filter(pl.col("_reason").is_null())
        targets = bucket_targets(p.n_docs, p.weights)
        strata = sorted(classified["_stratum"].unique().to_list())
        kept: list[tuple[int, pl.DataFrame]] = []  # documents taken, and sample rows that stand for them
        lines = []
        for k, target in enumerate(targets):
            rows = eligible.filter(pl.col("_bucket") == k)
            taken = 0
            for stratum in strata:
                part = rows.filter(pl.col("_stratum") == stratum)
                takes = min(target, round(part.height * flow.scale))
                if takes:
                    kept.append((takes, part.head(max(1, round(takes / flow.scale)))))
                taken += takes
            lines.append(
                f"bucket [{p.buckets[k]}, {p.buckets[k + 1]}): takes {taken} of "
                f"{round(rows.height * flow.scale)} eligible (wants {target * len(strata)})"
            )
        n = sum(takes for takes, _ in kept)
        tokens = sum(takes * part["n_tokens"].mean() for takes, part in kept) / n if n else 0.0
        chosen = pl.concat([part for _, part in kept]).select("doc_id", "text", "n_tokens") if kept else None
        wanted = p.n_docs * len(strata)
        notes = []
        if flow.scale > 1:
            notes.append(
                f"eligible documents counted on a sample of {flow.sample.height} of {flow.docs}: {n} of {wanted} wanted"
            )
        elif n < wanted:
            notes.append(f"only {n} of the {wanted} documents wanted are eligible")
        if p.per:
            notes.append(f"{len(strata)} strata ({', '.join(strata)}), n_docs={p.n_docs} each")
        notes += lines
        outside = (
            classified.filter(pl.col("_reason").is_not_null())
            .group_by("_reason")
            .len()
            .sort("len", "_reason", descending=[True, False])
        )
        if outside.height:
            counts = ", ".join(f"{r} {round(c * flow.scale)}" for r, c in outside.iter_rows())
            notes.append(
                f"falls outside: {round(outside['len'].sum() * flow.scale)} documents ({counts}); "
                f"widen `buckets` (and weights) or the word limits to keep them"
            )
        out = Flow(docs=n, queries=flow.queries, doc_tokens=tokens, sample=chosen, scale=flow.scale)
        return out, Estimate(notes=notes)


def word_count(text: pl.Expr) -> pl.Expr:
    return text.str.count_matches(r"\S+")


def rank_expr(seed: int) -> pl.Expr:
    """Order within a bucket: a seeded hash of the id (ties, if any, by corpus order)."""
    return pl.col("doc_id").hash(seed)


def classify(corpus: pl.DataFrame, p: SampleParams) -> pl.DataFrame:
    """Add each document's length bucket (`_bucket`), stratum (`_stratum`) and why it is
    ineligible (`_reason`, null if not)."""
    words = pl.col(WORDS) if WORDS in corpus.columns else word_count(pl.col("text"))
    corpus = corpus.with_columns(
        _bucket_expr(p.buckets).alias("_bucket"),
        words.alias("_words"),
        _stratum_expr(p.per).alias("_stratum"),
    )
    return corpus.with_columns(_reason_expr(p).alias("_reason"))


def _reason_expr(p: SampleParams) -> pl.Expr:
    reason = pl.when(pl.col("_bucket").is_null()).then(pl.lit("outside_length_buckets"))
    if p.max_words is not None:
        reason = pl.when(pl.col("_words") > p.max_words).then(pl.lit("too_many_words")).otherwise(reason)
    if p.min_words is not None:
        reason = pl.when(pl.col("_words") < p.min_words).then(pl.lit("too_few_words")).otherwise(reason)
    return reason


def _stratum_expr(per: list[str]) -> pl.Expr:
    """One label per stratum, e.g. "en/general"; a missing value reads "-"."""
    if not per:
        return pl.lit("all")
    return pl.concat_str([pl.col(c).cast(pl.Utf8).fill_null("-") for c in per], separator="/")


def _bucket_expr(edges: list[int]) -> pl.Expr:
    expr = pl.lit(None, dtype=pl.Int64)
    for k in reversed(range(len(edges) - 1)):
        inside = (pl.col("n_tokens") >= edges[k]) & (pl.col("n_tokens") < edges[k + 1])
        expr = pl.when(inside).then(pl.lit(k, dtype=pl.Int64)).otherwise(expr)
    return expr


def _count(table: pl.DataFrame, k: int) -> int:
    row = table.filter(pl.col("_bucket") == k)
    return int(row["len"][0]) if row.height else 0
