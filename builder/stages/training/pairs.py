"""`training_pairs`: for every train query, its positive passage and k hard negatives, and
the train sets drawn to chosen position shares.

The train documents are cut into passages (langchain-text-splitters, with offsets); a
query's positive passage is the one holding the start of its first span. A named retriever
(bm25 by default, or a bi_encoder entry) searches the train passages; candidates from the
query's judged documents are never negatives, and candidates the false-negative judges
consider relevant are excluded and counted: the `rerankers`' majority above `threshold`
flags a candidate (every candidate when none are named), and where `judges` are named a
flagged candidate is excluded only with `min_votes` grades of `min_grade` or more, as the
false_negatives stage confirms them. Negatives come from distinct documents, best first.

Queries the stage cannot use (no span, no position third, too few negatives) stay in the
bench but in no train set, counted by reason under `left_out`. Each set under `sets` is
drawn from the usable queries (builder.stages.training.draws); all sets have `size`
queries (none: the largest size every set reaches), so controls compare like with like.
"""

from __future__ import annotations

from collections import Counter
from contextlib import closing
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import Field

from builder.backends.rerankers import is_missing
from builder.backends.rerankers.config import GRADE_VARIABLES
from builder.backends.rerankers.windows import score_windowed
from builder.stages.base import Stage, StageParamError, StageParams, register_stage
from builder.stages.contracts import POSITIONS, SPANS, SPLITS, TRAINING_PAIRS
from builder.stages.grading import grade
from builder.stages.refs import ModelRef, PromptRef, RerankerRef, RetrieverRef
from builder.stages.training.draws import Candidate, TrainSetParams, achieved, draw_set, reachable, target_shares

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

NEGATIVE_DTYPE = pl.List(pl.Struct({"doc_id": pl.Utf8, "passage": pl.Utf8}))
TRAINING_COLUMNS = ("positive_passage", "negatives", "train_sets")


class TrainingPairParams(StageParams):
    negatives: int = Field(default=3, ge=1, description="hard negatives per query (k)")
    retriever: RetrieverRef = Field(default="bm25", description="a bm25 or bi_encoder entry that mines negatives")
    top_k: int = Field(default=20, ge=1, description="candidates recalled per query before exclusions")
    passage_chars: int | None = Field(
        default=1000,
        ge=50,
        description="passage size in characters (the splitter's chunk_size); none: whole documents are the passages",
    )
    rerankers: list[RerankerRef] = Field(
        default=[],
        description="false-negative judges by score: a candidate "
        "most of them score above threshold is flagged (normalized scores)",
    )
    threshold: float = Field(default=0.5, description="a normalized score above this is a yes")
    judges: list[ModelRef] = Field(
        default=[],
        description="LLM judges that confirm flagged candidates as "
        "false negatives; none: the rerankers' majority decides alone",
    )
    min_votes: int = Field(default=2, ge=1, description="judges that must grade at least min_grade")
    min_grade: int = Field(default=3, ge=0, le=4, description="the grade that counts as relevant")
    prompt: PromptRef = Field(default="relevance_grade", description="the judges' grading prompt")
    questions_per_call: int = Field(default=8, ge=1, description="questions a judge grades per call")
    sets: dict[str, TrainSetParams] = Field(
        default={"balanced": TrainSetParams()},
        min_length=1,
        description="train sets by name, each with its position shares",
    )
    size: int | None = Field(
        default=None, ge=1, description="queries in every train set (none: the largest size every set reaches)"
    )


@register_stage
class TrainingPairs(Stage):
    """Mine k hard negatives per train query (minus judged false negatives) and draw train
    sets to chosen position shares."""

    name = "training_pairs"
    needs = frozenset({SPLITS, SPANS, POSITIONS})
    provides = frozenset({TRAINING_PAIRS})
    Params = TrainingPairParams
    params: TrainingPairParams
    prompt_variables = GRADE_VARIABLES

    def problems(self, recipe: Any) -> list[tuple[str, str]]:
        p = self.params
        if p.judges and p.min_votes > len(p.judges):
            return [("min_votes", f"min_votes {p.min_votes} is more than the {len(p.judges)} judges")]
        return []

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        from langchain_text_splitters import RecursiveCharacterTextSplitter  # slow to import; needed only here

        from builder.textutil.positions import split_with_offsets

        size = self.params.passage_chars
        splitter = (
            RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=0, add_start_index=True) if size else None
        )
        train_docs = bench.corpus.filter(pl.col("split") == "train").select("doc_id", "text")
        passages: list[tuple[str, int, int, str]] = []  # (doc_id, start, end, text)
        of_doc: dict[str, list[tuple[int, int, str]]] = {}
        for doc_id, text in train_docs.iter_rows():
            of_doc[doc_id] = split_with_offsets(splitter, text) if splitter else [(0, len(text), text)]
            passages += [(doc_id, s, e, t) for s, e, t in of_doc[doc_id]]
        judged: dict[str, set[str]] = {}
        for q, d in bench.qrels.select("query_id", "doc_id").iter_rows():
            judged.setdefault(q, set()).add(d)
        left_out: Counter[str] = Counter()
        rows: list[tuple[str, str, str]] = []  # (query_id, query, positive passage)
        train = bench.queries.filter(pl.col("split") == "train")
        for qid, query, doc_id, spans in train.select("query_id", "text", "doc_id", "spans").iter_rows():
            positive = _holding(of_doc.get(doc_id, []), spans)
            if positive is None:
                left_out["no_span"] += 1
            else:
                rows.append((qid, query, positive))
        negatives = self._mine(rows, passages, judged, ctx, left_out)
        usable = [r for r in rows if len(negatives.get(r[0], ())) == self.params.negatives]
        sets = self._draw(train.filter(pl.col("query_id").is_in([r[0] for r in usable])), ctx, left_out)
        ctx.stats["train_queries"] = train.height
        ctx.stats["train_passages"] = len(passages)
        ctx.stats["left_out"] = dict(sorted(left_out.items()))
        positive_of = {qid: p for qid, _, p in usable}
        in_sets: dict[str, list[str]] = {}
        for name, chosen in sets.items():
            for qid in chosen:
                in_sets.setdefault(qid, []).append(name)
        ids = bench.queries["query_id"].to_list()
        queries = bench.queries.with_columns(
            pl.Series("positive_passage", [positive_of.get(q) for q in ids], dtype=pl.Utf8),
            pl.Series("negatives", [negatives.get(q) if q in positive_of else None for q in ids], dtype=NEGATIVE_DTYPE),
            pl.Series("train_sets", [in_sets.get(q) for q in ids], dtype=pl.List(pl.Utf8)),
        )
        return bench.replace(queries=queries)

    def _mine(
        self,
        rows: list[tuple[str, str, str]],
        passages: list[tuple[str, int, int, str]],
        judged: dict[str, set[str]],
        ctx: StageContext,
        left_out: Counter[str],
    ) -> dict[str, list[dict]]:
        """k negatives per query, best first, one per document: the retriever's candidates
        less the query's judged documents and the candidates judged relevant."""
        from builder.backends.retrievers import make_retriever  # numpy and scipy: imported when this runs

        p = self.params
        texts = [t for *_, t in passages]
        scorer = ctx.reranker(p.retriever)
        scorer.fit(texts)
        counts: Counter[str] = Counter()
        candidates: list[list[int]] = []
        with closing(make_retriever(scorer, texts, ctx.work_dir)) as retriever:
            hits = retriever.search([q for _, q, _ in rows], p.top_k) if rows else []
        for (qid, _, _), (found, _) in zip(rows, hits):
            keep, seen = [], set()
            for r in map(int, found):
                doc = passages[r][0]
                if doc in judged.get(qid, ()):
                    counts["excluded_judged_document"] += 1
                elif doc in seen:
                    counts["excluded_same_document"] += 1
                else:
                    seen.add(doc)
                    keep.append(r)
            candidates.append(keep)
        relevant = self._judged_relevant(rows, candidates, texts, ctx)
        out: dict[str, list[dict]] = {}
        for (qid, _, _), keep, flags in zip(rows, candidates, relevant):
            counts["excluded_false_negative"] += sum(flags)
            chosen = [r for r, flagged in zip(keep, flags) if not flagged][: p.negatives]
            if len(chosen) < p.negatives:
                left_out["too_few_negatives"] += 1
            out[qid] = [{"doc_id": passages[r][0], "passage": texts[r]} for r in chosen]
        counts["mined"] = sum(len(v) for v in out.values() if len(v) == p.negatives)
        ctx.stats["negatives"] = dict(sorted(counts.items()))
        return out

    def _judged_relevant(
        self, rows: list[tuple[str, str, str]], candidates: list[list[int]], texts: list[str], ctx: StageContext
    ) -> list[list[bool]]:
        """Per query and candidate: whether the false-negative judges count it relevant."""
        p = self.params
        flat = [(k, j) for k, keep in enumerate(candidates) for j in range(len(keep))]
        pairs = [(rows[k][1], texts[candidates[k][j]]) for k, j in flat]
        flagged = [bool(p.judges)] * len(flat)  # with judges alone, every candidate is sent to them
        if p.rerankers:
            scores = [score_windowed(ctx.reranker(name), pairs) for name in p.rerankers]
            flagged = [
                sum(not is_missing(s[i]) and s[i] > p.threshold for s in scores) > len(p.rerankers) / 2
                for i in range(len(flat))
            ]
        if p.judges:
            votes = [0] * len(flat)
            for judge in p.judges:
                sent = [i for i, f in enumerate(flagged) if f]
                grades = (
                    grade(
                        ctx,
                        judge,
                        p.prompt,
                        [pairs[i] for i in sent],
                        p.questions_per_call,
                        f"judging negatives with {judge}",
                    )
                    if sent
                    else []
                )
                for i, g in zip(sent, grades):
                    votes[i] += g.value is not None and g.value >= p.min_grade
            flagged = [f and v >= p.min_votes for f, v in zip(flagged, votes)]
        out = [[False] * len(keep) for keep in candidates]
        for (k, j), f in zip(flat, flagged):
            out[k][j] = f
        return out

    def _draw(self, usable: pl.DataFrame, ctx: StageContext, left_out: Counter[str]) -> dict[str, list[str]]:
        p = self.params
        length = "length_bucket" if "length_bucket" in usable.columns else None
        pool = []
        for qid, third, bucket in usable.select(
            "query_id", "position_tag", pl.col(length) if length else pl.lit(None)
        ).iter_rows():
            if third is None:
                left_out["no_position"] += 1
            else:
                pool.append(Candidate(qid, third, bucket, ctx.item_rng(qid).random()))
        reach = {name: reachable(target_shares(s, pool), pool) for name, s in p.sets.items()}
        size = p.size if p.size is not None else min(reach.values())
        short = {name: n for name, n in reach.items() if n < size}
        if short:
            raise StageParamError(
                "size",
                f"{size} train queries per set is more than the shares allow: "
                + ", ".join(f"{n} reach {r}" for n, r in short.items()),
            )
        if size == 0:
            raise StageParamError(
                "sets",
                "no train set can hold a query: the train split has no usable "
                f"query in a third its shares ask for (left out: {dict(left_out)})",
            )
        sets = {}
        ctx.stats["sets"] = {}
        for name, s in p.sets.items():
            chosen = draw_set(s, pool, size)
            sets[name] = [c.query_id for c in chosen]
            ctx.stats["sets"][name] = {
                "size": len(chosen),
                "reachable": reach[name],
                "target": {r: round(v, 4) for r, v in target_shares(s, pool).items()},
                "achieved": achieved(chosen, s.by_length),
            }
        return sets


def _holding(passages: list[tuple[int, int, str]], spans: list[dict] | None) -> str | None:
    """The passage (of the query's document) holding the start of its first span."""
    if not spans:
        return None
    start = min(s["start"] for s in spans)
    return next((text for s, e, text in passages if s <= start < e), None)
