"""False-negative removal: no other document may answer a query as well as its positive.

For each query a retriever recalls the top-k documents (default 1,000; BM25 by default,
or a bi_encoder entry for dense recall), and the rerankers score them with the positive.

- `mode: posir` (PosIR §2.3): a candidate scoring above the positive under any reranker
  is removed from the corpus (`false_negative`); queries whose positive it was go with it.
  Flags count only from queries that survive: the removals are decided to a fixpoint
  (removal_fixpoint.py), so a document flagged only by queries that lose their own
  positive stays.
- `mode: fineweb_posq` (FineWeb-PosQ A.2, stage 2): a candidate that more than half of
  the rerankers score above `threshold` (normalized scores) is sent to the LLM judges;
  with at least `min_votes` grades of `min_grade` or more, the query is dropped
  (`false_negative_confirmed`). Judges are asked in order, each only about the pairs
  whose vote is still open: with two of three needed, the third is asked only where the
  first two split (`judge_pairs_not_sent` counts the rest; `judge_votes` is the count when
  the vote closed). To ask one model several times, declare it under several names with
  different seeds.

Every flagged (query, document) pair is written to `false_negatives.parquet` in the
stage's work folder. The stage reports the share of the corpus and of the queries it
removed, and warns when either is above `warn_above`.
"""

from __future__ import annotations

import math
from contextlib import closing
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import Field, model_validator

from builder.backends.rerankers import is_missing, reranker_configs
from builder.backends.rerankers.config import GRADE_VARIABLES
from builder.backends.rerankers.windows import score_windowed
from builder.stages.base import Estimate, Flow, QueryFilter, StageParams, Verdicts, register_stage
from builder.stages.contracts import QUERIES
from builder.stages.grading import grade
from builder.stages.qc.removal_fixpoint import removed_documents
from builder.stages.qc.windowing import BeyondWindow, beyond_window, beyond_window_field, span_ends
from builder.stages.refs import ModelRef, PromptRef, RerankerRef, RetrieverRef

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

_BLOCK = 64  # queries scored together: bounds the pairs held at once
# Candidate pairs the rerankers' majority sends to the judges, per query: FineWeb-PosQ
# (paper 000, appendix A.2, stage 2) pre-labels 854 potential false negatives for its
# 26,356 questions. `plan` uses a previous run's own rate when the run folder has one.
PAPER_JUDGED_PER_QUERY = 854 / 26_356


class FalseNegativeParams(StageParams):
    mode: Literal["posir", "fineweb_posq"] = Field(
        default="posir",
        description=(
            "posir: remove documents that outscore the positive; fineweb_posq: drop the query when "
            "LLM judges confirm a candidate"
        ),
    )
    retriever: RetrieverRef = Field(default="bm25", description="a bm25 or bi_encoder entry under rerankers:")
    top_k: int = Field(default=1000, ge=1, description="candidates recalled per query")
    rerankers: list[RerankerRef] = Field(default=["bm25"], min_length=1, description="names under rerankers:")
    threshold: float = Field(default=0.5, description="fineweb_posq: a normalized score above this is a yes")
    judges: list[ModelRef] = Field(
        default=[],
        description="fineweb_posq: models that confirm candidates; none = the rerankers' majority decides alone",
    )
    min_votes: int = Field(default=2, ge=1, description="judges that must grade at least min_grade")
    min_grade: int = Field(
        default=3, ge=0, le=4, description="fineweb_posq: a judge's grade (0-4) that counts as a yes"
    )
    prompt: PromptRef = Field(default="relevance_grade", description="fineweb_posq: the judges' grading prompt")
    questions_per_call: int = Field(
        default=8,
        ge=1,
        description=("fineweb_posq: pairs about one document graded per request; 1 asks for a bare grade"),
    )
    beyond_window: BeyondWindow = beyond_window_field()
    warn_above: float = Field(
        default=0.3, ge=0, le=1, description="warn when the share of documents or queries removed is above this"
    )

    @model_validator(mode="after")
    def _judges_fit_mode(self) -> FalseNegativeParams:
        if self.mode == "posir" and self.judges:
            raise ValueError("judges confirm candidates in mode fineweb_posq only")
        if self.judges and self.min_votes > len(self.judges):
            raise ValueError(f"min_votes {self.min_votes} is more than the {len(self.judges)} judges")
        return self


@register_stage
class FalseNegatives(QueryFilter):
    """Find documents that answer a query as well as its positive; remove them (PosIR)
    or the query (FineWeb-PosQ)."""

    name = "false_negatives"
    needs = frozenset({QUERIES})
    Params = FalseNegativeParams
    params: FalseNegativeParams

    prompt_variables = GRADE_VARIABLES
    warns_on_removals = True  # above warn_above

    def problems(self, recipe: Any) -> list[tuple[str, str]]:
        p = self.params
        out: list[tuple[str, str]] = []
        if p.mode == "fineweb_posq":
            configs = reranker_configs(recipe)
            for name in p.rerankers:
                if name in configs and not configs[name].normalize:
                    message = (
                        f"reranker {name!r} gives raw scores, but fineweb_posq compares them "
                        f"with {p.threshold}: set normalize: true"
                    )
                    out.append(("rerankers", message))
        return out

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        out = super().run(bench, ctx)
        for kind, table in (("documents", "corpus"), ("queries", "queries")):
            got = getattr(bench, table).height
            share = (got - getattr(out, table).height) / got if got else 0.0
            ctx.stats[f"false_negative_removed_share_{kind}"] = round(share, 4)
            if share > self.params.warn_above:
                ctx.warnings.append(
                    f"false-negative removal took {share:.0%} of the {kind} "
                    f"({got - getattr(out, table).height} of {got}; warn_above "
                    f"{self.params.warn_above:.0%})"
                )
        return out

    def judge(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None:
        if self.params.beyond_window == "drop":
            self._drop_unread(bench, ctx, verdicts)
        live = verdicts.apply(bench, ctx.label)
        flagged = self._flag(live, ctx)
        if self.params.mode == "posir":
            self._remove_documents(live, flagged, ctx, verdicts)
        else:
            self._drop_queries(live, flagged, ctx, verdicts)

    def _drop_unread(self, bench: Bench, ctx: StageContext, verdicts: Verdicts) -> None:
        """Queries whose span ends past what a reranker reads of their positive."""
        texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
        ends = span_ends(bench)
        items = [
            (qid, q, texts[d], ends[qid])
            for qid, q, d in bench.queries.select("query_id", "text", "doc_id").iter_rows()
            if qid in ends
        ]
        for name in self.params.rerankers:
            unread = beyond_window(ctx.reranker(name), verdicts.undecided(items))
            verdicts.drop_all(unread, f"span_beyond_window:{name}")

    def _flag(self, bench: Bench, ctx: StageContext) -> list[dict[str, Any]]:
        """Recall, then score: one record per (query, candidate) the rerankers single out."""
        from builder.backends.retrievers import make_retriever  # numpy and scipy: imported when this runs

        p = self.params
        texts = bench.corpus["text"].to_list()
        doc_ids = bench.corpus["doc_id"].to_list()
        row_of = {d: i for i, d in enumerate(doc_ids)}
        queries = bench.queries.select("query_id", "text", "doc_id").rows()
        first = ctx.reranker(p.retriever)
        rerankers = [first if name == p.retriever else ctx.reranker(name) for name in p.rerankers]
        for reranker in rerankers:
            reranker.fit(texts)
        # Built after the rerankers are fitted, so a bm25 fitted on these texts lends its counts.
        retriever = make_retriever(first, texts, ctx.work_dir)
        records: list[dict[str, Any]] = []
        n_candidates = 0
        with ctx.progress.task("false negatives", len(queries)) as bar, closing(retriever):
            for at in range(0, len(queries), _BLOCK):
                block = queries[at : at + _BLOCK]
                hits = retriever.search([q for _, q, _ in block], p.top_k)
                cands = [[int(r) for r in rows if r != row_of[d]] for (_, _, d), (rows, _) in zip(block, hits)]
                n_candidates += sum(map(len, cands))
                scores = [_block_scores(r, block, cands, texts, row_of, p.mode == "posir") for r in rerankers]
                records += self._judge_block(block, cands, scores, doc_ids)
                bar.advance(len(block))
        ctx.stats["false_negative_candidates_scored"] = n_candidates
        return records

    def _judge_block(
        self, block: list[tuple], cands: list[list[int]], scores: list[list[list[float]]], doc_ids: list[str]
    ) -> list[dict[str, Any]]:
        p = self.params
        out = []
        posir = p.mode == "posir"
        for k, (qid, query, positive) in enumerate(block):
            for j, row in enumerate(cands[k]):
                per = [s[k][j + posir] for s in scores]  # in posir mode index 0 holds the positive
                if posir:
                    above = [
                        name
                        for name, s, mine in zip(p.rerankers, per, (s[k][0] for s in scores))
                        if not is_missing(s) and not is_missing(mine) and s > mine
                    ]
                    hit = bool(above)
                else:
                    above = [name for name, s in zip(p.rerankers, per) if not is_missing(s) and s > p.threshold]
                    hit = len(above) > len(p.rerankers) / 2
                if hit:
                    out.append(
                        {
                            "query_id": qid,
                            "query": query,
                            "positive": positive,
                            "doc_id": doc_ids[row],
                            "row": row,
                            "rerankers": above,
                        }
                    )
        return out

    def _remove_documents(
        self, bench: Bench, flagged: list[dict[str, Any]], ctx: StageContext, verdicts: Verdicts
    ) -> None:
        _save(flagged, ctx, votes=None)
        positives = bench.queries["doc_id"].to_list()
        docs = removed_documents(
            ((r["positive"], r["doc_id"]) for r in flagged), positives, bench.corpus["doc_id"].to_list()
        )
        ctx.stats["false_negative_flagged_docs"] = len({r["doc_id"] for r in flagged})
        ctx.stats["false_negative_docs"] = len(docs)
        # A document goes for a flag it shares with another: it beats that document's positive,
        # or (an odd cycle) its own queries' positive is beaten by it.
        shares: dict[str, list[str]] = {}
        for r in flagged:
            shares.setdefault(r["doc_id"], []).append(r["positive"])
            shares.setdefault(r["positive"], []).append(r["doc_id"])
        for doc_id in docs:
            verdicts.drop_doc(doc_id, "false_negative", shares.get(doc_id, ()))

    def _drop_queries(self, bench: Bench, flagged: list[dict[str, Any]], ctx: StageContext, verdicts: Verdicts) -> None:
        p = self.params
        ctx.stats["false_negative_candidates"] = len(flagged)
        texts = bench.corpus["text"].to_list()
        pairs = [(r["query"], texts[r["row"]]) for r in flagged]
        votes = [0] * len(flagged)
        need = p.min_votes if p.judges else 0
        skipped = 0
        for k, judge in enumerate(p.judges):
            # A pair whose vote is settled (confirmed, or out of reach with the judges left) is
            # not sent on: the outcome is the same, the calls are not.
            left = len(p.judges) - k
            open_ = [i for i, v in enumerate(votes) if v < need <= v + left]
            skipped += len(flagged) - len(open_)
            grades = (
                grade(ctx, judge, p.prompt, [pairs[i] for i in open_], p.questions_per_call, f"judging with {judge}")
                if open_
                else []
            )
            for i, g in zip(open_, grades):
                votes[i] += g.value is not None and g.value >= p.min_grade
        if p.judges:
            ctx.stats["judge_pairs_not_sent"] = skipped
        confirmed = [r for r, v in zip(flagged, votes) if v >= need]
        _save(flagged, ctx, votes=votes if p.judges else None)
        ctx.stats["false_negatives_confirmed"] = len(confirmed)
        rivals: dict[str, list[str]] = {}
        for r in confirmed:  # a query may have several confirmed competitors: all are its rivals
            rivals.setdefault(r["query_id"], []).append(r["doc_id"])
        for query_id, docs in rivals.items():
            verdicts.drop(query_id, "false_negative_confirmed", docs)

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        return flow, self.estimate(flow, PAPER_JUDGED_PER_QUERY)

    def estimate(self, flow: Flow, judged_per_query: float) -> Estimate:
        """Reranker pairs, and the judges' requests when `judged_per_query` candidate pairs
        per query reach them: each judge asked about every pair (the last ones are asked
        only where the vote is still open, so this is an upper bound), one pair per
        request (candidates are mostly different documents)."""
        p = self.params
        est = Estimate(notes=[f"up to {flow.queries * p.top_k * len(p.rerankers)} reranker pairs"])
        if p.mode == "fineweb_posq" and p.judges and flow.queries:
            pairs = math.ceil(flow.queries * judged_per_query)
            est.calls = pairs * len(p.judges)
            est.prompt_tokens = int(est.calls * (flow.doc_tokens + 300))
            est.completion_tokens = est.calls * 12
            est.notes.append(
                f"judges: ~{pairs} candidate pairs ({judged_per_query:.4f} per query), each judge at most once a pair"
            )
        return est


def _block_scores(
    reranker: Any,
    block: list[tuple],
    cands: list[list[int]],
    texts: list[str],
    row_of: dict[str, int],
    with_positive: bool,
) -> list[list[float]]:
    """Per query of the block: the score of each candidate, after the positive's if asked."""
    pairs, sizes = [], []
    for (_, query, positive), rows in zip(block, cands):
        head = [(query, texts[row_of[positive]])] if with_positive else []
        pairs += head + [(query, texts[r]) for r in rows]
        sizes.append(len(head) + len(rows))
    flat = score_windowed(reranker, pairs)
    out, at = [], 0
    for n in sizes:
        out.append(flat[at : at + n])
        at += n
    return out


def _save(flagged: list[dict[str, Any]], ctx: StageContext, votes: list[int] | None) -> None:
    table = pl.DataFrame(
        {
            "query_id": [r["query_id"] for r in flagged],
            "doc_id": [r["doc_id"] for r in flagged],
            "rerankers": [r["rerankers"] for r in flagged],
        },
        schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "rerankers": pl.List(pl.Utf8)},
    )
    if votes is not None:
        table = table.with_columns(pl.Series("judge_votes", votes, dtype=pl.Int64))
    table.write_parquet(ctx.work_dir / "false_negatives.parquet")
