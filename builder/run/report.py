"""Terminal tables: the end-of-run summary and the stage catalogue."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from builder.run.runner import RunResult
    from builder.run.stage_record import StageRecord


SKEW_POINTS = 10  # kept shares of two thirds further apart than this get a warning


def _skew(kept: dict | None) -> float | None:
    """Largest gap, in percentage points, between the kept shares of the position thirds."""
    shares = [row["share"] for row in (kept or {}).values() if row.get("share") is not None]
    return 100 * (max(shares) - min(shares)) if len(shares) > 1 else None


def _dropped(record: StageRecord) -> str:
    items = sorted(record.dropped.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{reason} {n}" for reason, n in items) or "-"


def print_run_summary(console: Console, result: RunResult) -> None:
    from builder.stages.qc.windowing import format_kept_by_third

    table = Table(title=f"build finished: {result.out_dir}", title_justify="left")
    for col in ("stage", "docs in→out", "queries in→out", "dropped by reason", "kept by third",
                "LLM calls", "cache hits", "retries", "seconds"):
        table.add_column(col, overflow="fold")
    for st in result.stage_stats:
        llm = st.llm or {}
        table.add_row(
            st.stage + (" (resumed)" if st.resumed else ""),
            f"{st.docs_in}→{st.docs_out}",
            f"{st.queries_in}→{st.queries_out}",
            _dropped(st),
            format_kept_by_third(st.kept_by_third) or "-",
            str(llm.get("calls", 0)), str(llm.get("cache_hits", 0)), str(llm.get("retries", 0)),
            f"{st.seconds or 0:.1f}",
        )
    console.print(table)
    for st in result.stage_stats:
        gap = _skew(st.kept_by_third)
        if gap is not None and gap > SKEW_POINTS:
            console.print(f"[yellow]{st.stage} kept position thirds unevenly ({gap:.0f} points apart): "
                          f"check the scorers' max_length and beyond_window[/]")
    counts = result.bench.counts()
    console.print(f"{counts['docs']} documents, {counts['queries']} queries, "
                  f"{counts['qrels']} qrels " + ("written to" if result.written else "already in") + f" {result.out_dir}")


def print_stages(console: Console) -> None:
    from builder.stages import STAGES

    for name in sorted(STAGES):
        cls = STAGES[name]
        table = Table(title=f"[bold]{name}[/] — {cls.summary()}", title_justify="left")
        table.add_column("param")
        table.add_column("type")
        table.add_column("default")
        table.add_column("meaning", overflow="fold")
        for field, info in cls.Params.model_fields.items():
            default = "required" if info.is_required() else repr(info.get_default(call_default_factory=True))
            # Type names and defaults hold brackets that rich would read as markup.
            table.add_row(field, escape(type_name(info.annotation)), escape(default), escape(info.description or ""))
        console.print(table)


def type_name(annotation: Any) -> str:
    """A parameter's type as a recipe author reads it: `a | b` for a Literal's values,
    short class names, generics with their arguments (`list[int]`)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " | ".join(str(value) for value in args)
    if origin is Annotated:
        return type_name(args[0])
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(arg) for arg in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(arg) for arg in args)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))
