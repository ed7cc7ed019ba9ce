"""What a running stage has spent on LLMs against what `plan` would estimate for it, for
the progress line. The estimate is the stage's own (`Stage.plan`) on the input it really
got, so it is as good as the plan's and needs no second pass over the sources."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import polars as pl

from builder.bench import Bench
from builder.run.backends import Backends
from builder.run.plan import SAMPLE_DOCS
from builder.stages.base import Estimate, Flow, Stage


def spend_text(calls: int, tokens: int, estimate: Estimate | None) -> str:
    if estimate is None or not estimate.calls:
        return f"LLM spent {calls:,} calls, {tokens:,} tokens"
    planned = estimate.prompt_tokens + estimate.completion_tokens
    return f"LLM spent {calls:,} of ~{estimate.calls:,} calls, {tokens:,} of ~{planned:,} tokens"


def stage_estimate(stage: Stage, bench: Bench) -> Estimate | None:
    """The stage's estimate on `bench`; None when it cannot make one on these tables."""
    corpus = bench.corpus
    wanted = [c for c in ("doc_id", "text", "lang", "domain", "n_tokens") if c in corpus.columns]
    sample = corpus.select(wanted)
    if sample.height > SAMPLE_DOCS:
        sample = sample.sample(SAMPLE_DOCS, seed=0)
    tokens = corpus["n_tokens"].drop_nulls() if "n_tokens" in corpus.columns else pl.Series([], dtype=pl.Int64)
    flow = Flow(
        docs=corpus.height,
        queries=bench.queries.height,
        doc_tokens=float(cast(float, tokens.mean()) or 0.0) if tokens.len() else 0.0,
        sample=sample,
        scale=corpus.height / max(sample.height, 1),
    )
    try:
        return stage.plan(flow)[1]
    except Exception:  # an estimate only informs the progress line: it must never stop a build
        return None


def spend_meter(stage: Stage, bench: Bench, backends: Backends) -> Callable[[], str] | None:
    """A callable giving the progress line's spend text, for stages that ask an LLM."""
    if not stage.models_used():
        return None
    estimate = stage_estimate(stage, bench)
    gate = backends.gate
    late_before = backends.timeouts()[0]

    def timeouts() -> str:
        # A server slower than timeout_s loses every answer: say so while it happens.
        count, line = backends.timeouts()
        return f"; {line}" if count > late_before else ""

    if gate is not None:  # counts each answer as it arrives
        start = (gate.spent.calls, gate.spent.tokens)
        return lambda: spend_text(gate.spent.calls - start[0], gate.spent.tokens - start[1], estimate) + timeouts()
    before = backends.usage()  # the in-process models count a batch when it ends

    def text() -> str:
        used = backends.usage() - before
        return spend_text(used.calls, used.prompt_tokens + used.completion_tokens, estimate) + timeouts()

    return text
