"""`build-bench plan`: what a recipe will do and cost, before anything is spent."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from rich.console import Console
from rich.table import Table

from builder.backends.llm.config import OpenAIModelConfig
from builder.backends.tokenizers import make_counter
from builder.executors.config import ExecutorConfig
from builder.io.corpus_sample import sample_documents
from builder.io.files.read import files_plan_lines
from builder.run.ledger import estimate_usd
from builder.run.run_folder import run_folder
from builder.run.yields import Expected, expected_yields
from builder.stages.base import Estimate, Flow
from builder.stages.qc.false_negatives import FalseNegatives
from builder.stages.refs import DataPath, refs_of

if TYPE_CHECKING:
    from builder.recipe.model import LoadedRecipe

# Prompt tokens of a call that no earlier call shares (its questions, region, excerpt):
# a rough allowance, since prompts put the document first and these last.
PER_CALL_TAIL_TOKENS = 150
# Above this many documents, token counts (length eligibility included) come from a sample.
SAMPLE_DOCS = 20_000


@dataclass
class PlanRow:
    label: str
    models: list[str]
    flow_in: Flow
    flow_out: Flow
    estimate: Estimate
    texts: list[str] = field(default_factory=list)  # 00_load only: the sampled documents
    reads_inputs: bool = False  # the stage loads files of its own, which plan does not read
    cacheable_tokens: int = 0  # prompt tokens a prefix cache could serve (an estimate)
    usd: float | None = None  # None: a model it calls has no price
    usd_batch: float | None = None  # the same requests through a provider batch, at its batch prices
    expected: Expected | None = None  # the share of queries it is assumed to keep, and why


def ledger(rows: list[PlanRow], models: Mapping[str, Any]) -> None:
    """Fill in each row's cacheable tokens and money. A document's tokens are new once, in
    the first stage that sends it; every later request about it opens with the same text."""
    seen_docs = False
    for r in rows:
        est = r.estimate
        if not est.calls:
            continue
        fresh: float = est.calls * PER_CALL_TAIL_TOKENS
        if not seen_docs:
            fresh += r.flow_in.docs * r.flow_in.doc_tokens
            seen_docs = True
        r.cacheable_tokens = int(max(0.0, est.prompt_tokens - fresh))
        llms = [m for m in r.models if m in models]
        r.usd = estimate_usd(models, llms, est.prompt_tokens, r.cacheable_tokens, est.completion_tokens)
        r.usd_batch = estimate_usd(models, llms, est.prompt_tokens, r.cacheable_tokens, est.completion_tokens, True)


def make_plan(loaded: LoadedRecipe, limit: int | None, run_root: Path | None = None) -> list[PlanRow]:
    """Reads the sources as a stream (no model is called), counts tokens on them (on a seeded
    sample of SAMPLE_DOCS when there are more) and walks the stages' own estimates, each
    stage passing on the queries it is expected to keep (see run/yields.py; a previous
    run of the recipe under `run_root` gives its measured yields)."""
    recipe = loaded.recipe
    n_docs, sample = sample_documents(recipe.sources, loaded.base_dir, limit, SAMPLE_DOCS, seed=0)
    counts = make_counter(recipe.tokenizer).count_many(sample["text"].to_list())
    # lang and domain stay: sampling per stratum counts each on its own.
    sample = sample.select("doc_id", "text", "lang", "domain").with_columns(
        pl.Series("n_tokens", counts, dtype=pl.Int64)
    )
    flow = Flow(
        docs=n_docs,
        queries=0,
        doc_tokens=sum(counts) / max(len(counts), 1),
        sample=sample,
        scale=n_docs / max(sample.height, 1),
    )
    rows = [PlanRow("00_load", [], flow, flow, Estimate(), sample["text"].to_list())]
    labelled = [(f"{i:02d}_{stage.name}", stage) for i, stage in enumerate(recipe.stage_objects(), start=1)]
    expected = expected_yields(labelled, None if run_root is None else run_folder(recipe, run_root, limit))
    for label, stage in labelled:
        nxt, est = stage.plan(flow)
        assumed = expected.get(label)
        if assumed is not None and assumed.judged_per_query is not None and isinstance(stage, FalseNegatives):
            est = stage.estimate(flow, assumed.judged_per_query)
        if assumed is not None and assumed.yield_ is not None:
            nxt = replace(nxt, queries=round(nxt.queries * assumed.yield_))
        reads = any(issubclass(kind, DataPath) for _, kind, _ in refs_of(stage.params))
        rows.append(PlanRow(label, stage.models_used(), flow, nxt, est, reads_inputs=reads, expected=assumed))
        flow = nxt
    ledger(rows, recipe.models)
    return rows


def print_plan(console: Console, loaded: LoadedRecipe, rows: list[PlanRow]) -> None:
    recipe = loaded.recipe
    table = Table(title=f"plan for {recipe.name} ({loaded.path})", title_justify="left")
    for col in (
        "stage",
        "models",
        "docs in",
        "queries in",
        "LLM calls",
        "prompt tokens",
        "cacheable",
        "completion tokens",
        "USD",
        "USD batch",
    ):
        table.add_column(col, justify="left" if col in ("stage", "models") else "right")
    for r in rows:
        table.add_row(
            r.label,
            ", ".join(f"{m} ({recipe.models[m].model})" for m in r.models) or "-",
            str(r.flow_in.docs),
            str(r.flow_in.queries),
            f"{r.estimate.calls:,}",
            f"{r.estimate.prompt_tokens:,}",
            f"{r.cacheable_tokens:,}",
            f"{r.estimate.completion_tokens:,}",
            _usd(r.usd) if r.estimate.calls else "-",
            _usd(r.usd_batch) if r.estimate.calls else "-",
        )
    total = sum(r.estimate.calls for r in rows)
    ptok = sum(r.estimate.prompt_tokens for r in rows)
    ctok = sum(r.estimate.completion_tokens for r in rows)
    cached = sum(r.cacheable_tokens for r in rows)
    asking = [r for r in rows if r.estimate.calls]
    usd = _total([r.usd for r in asking])
    usd_batch = _total([r.usd_batch for r in asking])
    table.add_row(
        "total",
        "",
        "",
        "",
        f"{total:,}",
        f"{ptok:,}",
        f"{cached:,}",
        f"{ctok:,}",
        _usd(usd) if asking else "-",
        _usd(usd_batch) if asking else "-",
        style="bold",
    )
    console.print(table)
    for line in files_plan_lines(recipe.sources):
        console.print(line, highlight=False)
    if ptok:
        console.print(
            f"cacheable share of prompt tokens: {cached / ptok:.2f} (documents open every prompt; "
            "a server with prefix caching serves them again)",
            highlight=False,
        )
    if asking and usd is None:
        console.print(
            "USD: set `price: {input, cached_input, output}` (USD per million tokens) on each model "
            "to see what the build costs",
            highlight=False,
        )
    if asking and usd is not None:
        console.print(
            _batch_line(recipe.models, {m for r in asking for m in r.models if m in recipe.models}), highlight=False
        )
    kept = [f"{r.label} {r.expected.yield_:.2f} ({r.expected.source})" for r in rows if r.expected]
    if kept:
        console.print(f"queries kept per stage, as assumed: {'; '.join(kept)}", highlight=False)
    for r in rows:
        for note in r.estimate.notes:
            console.print(f"{r.label}: {note}", highlight=False)
    console.print(
        "Estimates assume no answers already cached and no re-asks (answers already cached cost "
        "nothing) and no losses in stages not listed as assumed; USD prices the cacheable tokens at "
        "each model's cached_input."
    )
    for line in empty_flow_warnings(rows):
        console.print(f"[bold yellow]warning:[/] {line}", highlight=False)
    console.print(_executor_line(recipe.executor), highlight=False)
    used = {m for r in rows for m in r.models}
    for line in request_bounds(recipe.models, used):
        console.print(line, highlight=False)


def _total(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)


def _batch_line(models: Mapping[str, Any], used: set[str]) -> str:
    """What the batch column assumes: each model's batch prices, or its synchronous ones."""
    unpriced = sorted(n for n in used if not models[n].price.has_batch)
    line = (
        "USD batch: the same requests sent through the provider's batch API (answered within a day) "
        "at each model's batch_* prices"
    )
    if unpriced:
        line += f"; {', '.join(unpriced)} name(s) no batch price, so batch is priced at the synchronous rates there"
    return line


def _usd(value: float | None) -> str:
    if value is None:
        return "?"
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def request_bounds(models: Mapping[str, Any], used: Iterable[str]) -> list[str]:
    """For each HTTP model the stages use: the longest a request can take against a server
    that never answers, and the reply size cap."""
    out = []
    for name in sorted(used):
        config = models[name]
        if not isinstance(config, OpenAIModelConfig):
            continue
        backoff = config.worst_case_s() - (config.max_retries + 1) * config.timeout_s
        out.append(
            f"model {name}: a request gives up after at most {config.worst_case_s():,.0f} s "
            f"({config.max_retries + 1} attempts of at most timeout_s {config.timeout_s:g} s, "
            f"{backoff:,.0f} s of backoff); replies over {config.max_reply_bytes:,} bytes are refused"
        )
    return out


def empty_flow_warnings(rows: list[PlanRow]) -> list[str]:
    """What a user must know about stages that get or leave no documents. After a stage that
    reads its own files the counts are unknown here, and that is said instead."""
    for r in rows:
        if r.reads_inputs:
            return [
                f"{r.label} reads its own input files, which plan does not open: the documents, "
                "queries and LLM calls shown from it on are not what the build will see"
            ]
    for r in rows:
        if r.flow_in.docs == 0:
            return [f"{r.label} gets 0 documents: check the sources (paths, field names, limit)"]
        if r.flow_out.docs == 0:
            return [f"{r.label} leaves 0 documents out of {r.flow_in.docs:,}: check its settings"]
    return []


def _executor_line(executor: ExecutorConfig) -> str:
    if executor.kind == "local":
        return "executor: local (this process)"
    where = executor.address or "a private local Ray instance"
    return f"executor: ray on {where}, {executor.block_size} rows per task"
