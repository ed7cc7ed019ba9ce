"""One LLM summary per document, kept on the corpus row for later prompts (FineWeb-PosQ)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import polars as pl
from pydantic import Field

from builder.backends.llm import ChatRequest
from builder.stages.base import Estimate, Flow, Stage, StageParams, register_stage
from builder.stages.contracts import DOCUMENTS, SUMMARIES
from builder.stages.refs import ModelRef, PromptRef

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class SummarizeParams(StageParams):
    llm: ModelRef = Field(description="the model that writes the summaries")
    prompt: PromptRef = Field(default="summarize", description="the summary prompt")
    max_words: int = Field(default=400, ge=10, description="longest summary the prompt allows (FineWeb-PosQ: 400)")


@register_stage
class Summarize(Stage):
    """Write a concise global summary of every document with an LLM (column `summary`)."""

    name = "summarize"
    needs = frozenset({DOCUMENTS})
    provides = frozenset({SUMMARIES})
    Params = SummarizeParams
    params: SummarizeParams

    prompt_variables = frozenset({"title", "text", "max_words"})

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        corpus = bench.corpus
        requests = [
            ChatRequest.of(
                ctx.render(p.prompt, title=row["title"], text=row["text"], max_words=p.max_words), item_id=row["doc_id"]
            )
            for row in corpus.select("doc_id", "title", "text").iter_rows(named=True)
        ]
        with ctx.progress.task("summarizing", len(requests)) as bar:
            answers = ctx.llm(p.llm).chat_many(requests, on_done=bar.advance)
        summaries = [_without_lead_in(a.text) if a.text else None for a in answers]
        ctx.stats["summary_lead_in_cut"] = sum(1 for s, a in zip(summaries, answers) if a.text and s != a.text.strip())
        reasons = [None if s else (a.reason or "empty_summary") for s, a in zip(summaries, answers)]
        bench = bench.replace(corpus=corpus.with_columns(pl.Series("summary", summaries, pl.Utf8)))
        return bench.keep_docs(pl.Series(reasons, dtype=pl.Utf8), ctx.label)

    def plan(self, flow: Flow) -> tuple[Flow, Estimate]:
        est = Estimate(
            calls=flow.docs,
            prompt_tokens=int(flow.docs * (flow.doc_tokens + 120)),
            completion_tokens=int(flow.docs * self.params.max_words * 1.4),
        )
        return flow, est


# "Sure! Here is a concise summary of the document:" and the like: chatter that would be fed
# into every chunk prompt. It is cut; an answer that is nothing else is an empty summary.
_LEAD_IN = re.compile(
    r"^\s*(?:(?:sure|certainly|of course|okay|ok)[!.,]?\s*)?"
    r"(?:(?:here is|here's|below is|the following is)[^\n]{0,120}?(?:summary|paraphrase)[^\n]{0,80}?"
    r"|(?:concise\s+)?(?:summary|paraphrase))\s*(?:[:：]\s*|\n\s*|$)",
    re.IGNORECASE,
)


def _without_lead_in(text: str) -> str:
    return _LEAD_IN.sub("", text.strip(), count=1).strip()
