"""`split_documents`: train / dev / test splits with no leakage between them.

Documents are grouped before they are dealt: near-duplicates (MinHash LSH) stay together,
documents sharing a `group_by` value (an article, a site) stay together, and the documents
a query judges stay together. Whole groups, in a seeded random order, go to the split
furthest below its share (of queries, or of documents). A query follows its document.

The stage removes nothing; it adds a `split` column to the corpus and the queries. The
writer puts the test split where the benchmark always was and the others in `train/` and
`dev/`. Afterwards the split is checked as a whole: documents of the same text, near-
duplicate pairs and queries whose judged documents sit in more than one split are counted
again from scratch (all zero when the grouping held) and reported as `leakage`.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import TYPE_CHECKING, Literal

import polars as pl
from pydantic import Field, model_validator

from builder.stages.base import Stage, StageParamError, StageParams, register_stage
from builder.stages.contracts import DOCUMENTS, QUERIES, SPLITS
from builder.stages.training.near_duplicates import NearDuplicateParams, near_duplicate_pairs

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

SPLIT_NAMES = ("train", "dev", "test")


class SplitParams(StageParams):
    train: float = Field(gt=0, lt=1, description="share of the queries (or documents) for training")
    dev: float = Field(default=0.0, ge=0, lt=1, description="share for development (0: no dev split)")
    test: float = Field(gt=0, lt=1, description="share for the test split: the benchmark")
    weigh_by: Literal["queries", "documents"] = Field(
        default="queries", description="what the shares count; groups without queries are dealt by documents"
    )
    group_by: str | None = Field(
        default=None,
        description="a corpus column whose equal values stay in one "
        "split (e.g. article); none: only near-duplicates and shared judgements group",
    )
    near_duplicates: NearDuplicateParams | None = Field(
        default=NearDuplicateParams(),
        description="MinHash LSH settings for near-duplicates that stay together; "
        "null turns the grouping off (the leakage check still counts them with the default settings)",
    )
    seed: int | None = Field(default=None, description="seed of the deal (none: the recipe's seed)")

    @model_validator(mode="after")
    def _shares_add_up(self) -> SplitParams:
        if abs(self.train + self.dev + self.test - 1.0) > 1e-6:
            raise ValueError(f"train + dev + test must be 1, got {self.train + self.dev + self.test:g}")
        return self


class _Groups:
    """Union-find over document rows."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


@register_stage
class SplitDocuments(Stage):
    """Deal whole groups of documents (near-duplicates, group_by, shared judgements) to
    train / dev / test; queries follow their document."""

    name = "split_documents"
    needs = frozenset({DOCUMENTS, QUERIES})
    provides = frozenset({SPLITS})
    Params = SplitParams
    params: SplitParams

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        seed = ctx.seed if p.seed is None else p.seed
        doc_ids = bench.corpus["doc_id"].to_list()
        row_of = {d: i for i, d in enumerate(doc_ids)}
        groups = _Groups(len(doc_ids))
        texts = bench.corpus["text"].to_list()
        near = near_duplicate_pairs(texts, p.near_duplicates, seed) if p.near_duplicates else []
        for i, j in near:
            groups.join(i, j)
        if p.group_by is not None:
            if p.group_by not in bench.corpus.columns:
                raise StageParamError("group_by", f"the corpus has no column {p.group_by!r}")
            first: dict[object, int] = {}
            for i, key in enumerate(bench.corpus[p.group_by].to_list()):
                if key is not None:
                    groups.join(i, first.setdefault(key, i))
        for _, docs in bench.qrels.group_by("query_id", maintain_order=True).agg("doc_id").iter_rows():
            rows = [row_of[d] for d in docs if d in row_of]
            for r in rows[1:]:
                groups.join(rows[0], r)
        split_of_row = self._deal(bench, groups, row_of, seed)
        corpus = bench.corpus.with_columns(pl.Series("split", split_of_row, dtype=pl.Utf8))
        split_of_doc = dict(zip(doc_ids, split_of_row))
        queries = bench.queries.with_columns(
            pl.Series("split", [split_of_doc.get(d) for d in bench.queries["doc_id"]], dtype=pl.Utf8)
        )
        out = bench.replace(corpus=corpus, queries=queries)
        ctx.stats["near_duplicate_pairs"] = len(near)
        ctx.stats["groups"] = len({groups.find(i) for i in range(len(doc_ids))})
        ctx.stats["split_sizes"] = _sizes(out)
        ctx.stats["leakage"] = leakage(out, p.near_duplicates or NearDuplicateParams(), seed)
        if any(ctx.stats["leakage"].values()):
            ctx.warnings.append(f"splits share documents or near-duplicates: {ctx.stats['leakage']}")
        return out

    def _deal(self, bench: Bench, groups: _Groups, row_of: dict[str, int], seed: int) -> list[str]:
        p = self.params
        shares = {name: getattr(p, name) for name in SPLIT_NAMES if getattr(p, name) > 0}
        members: dict[int, list[int]] = {}
        for i in range(len(row_of)):
            members.setdefault(groups.find(i), []).append(i)
        queries_per_row = Counter(row_of[d] for d in bench.queries["doc_id"] if d in row_of)
        order = sorted(members)  # by the group's first row: the same for the same corpus
        random.Random(seed).shuffle(order)
        total_docs = len(row_of)
        total_weight = sum(queries_per_row.values()) if p.weigh_by == "queries" else total_docs
        weight_in = dict.fromkeys(shares, 0)
        docs_in = dict.fromkeys(shares, 0)
        split_of_row = [""] * len(row_of)
        for root in order:
            rows = members[root]
            weight = sum(queries_per_row[r] for r in rows) if p.weigh_by == "queries" else len(rows)
            if weight:
                pick = max(shares, key=lambda s: shares[s] * total_weight - weight_in[s])
            else:
                pick = max(shares, key=lambda s: shares[s] * total_docs - docs_in[s])
            weight_in[pick] += weight
            docs_in[pick] += len(rows)
            for r in rows:
                split_of_row[r] = pick
        return split_of_row


def _sizes(bench: Bench) -> dict[str, dict[str, int]]:
    docs = Counter(bench.corpus["split"].to_list())
    queries = Counter(bench.queries["split"].to_list())
    return {s: {"documents": docs.get(s, 0), "queries": queries.get(s, 0)} for s in SPLIT_NAMES if docs.get(s)}


def leakage(bench: Bench, params: NearDuplicateParams, seed: int) -> dict[str, int]:
    """Counted from scratch over the whole split bench: documents of the same text in two
    splits, near-duplicate pairs across splits, and queries judging a document of another split."""
    splits = bench.corpus["split"].to_list()
    texts = bench.corpus["text"].to_list()
    by_text: dict[str, set[str]] = {}
    for text, split in zip(texts, splits):
        by_text.setdefault(" ".join(text.split()).lower(), set()).add(split)
    near = near_duplicate_pairs(texts, params, seed)
    split_of_doc = dict(zip(bench.corpus["doc_id"], splits))
    query_split = dict(bench.queries.select("query_id", "split").iter_rows())
    crossing = {
        q
        for q, d in bench.qrels.select("query_id", "doc_id").iter_rows()
        if d in split_of_doc and split_of_doc[d] != query_split.get(q)
    }
    return {
        "same_text_across_splits": sum(len(s) > 1 for s in by_text.values()),
        "near_duplicate_pairs_across_splits": sum(splits[i] != splits[j] for i, j in near),
        "queries_judging_another_split": len(crossing),
    }
