"""Terminal tables: the end-of-run summary and the stage catalogue."""

from __future__ import annotations

import json
import types
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from builder.io.built_folder import BuiltFolder
from builder.util.consoles import fit_columns

if TYPE_CHECKING:
    from builder.records.stage_record import StageRecord
    from builder.run.runner import RunResult


def _flow(got: int | None, out: int | None, added: int | None) -> str:
    """`in→out`, with the rows the stage made when it made any: in + new = out + dropped."""
    return f"{got}→{out}" + (f" (+{added} new)" if added else "")


def _dropped(record: StageRecord) -> str:
    """One reason a line: a cell then wraps between reasons, never inside one."""
    items = sorted(record.dropped.items(), key=lambda kv: -kv[1])
    return "\n".join(f"{reason} {n}" for reason, n in items) or "-"


_NUMBERS = ("LLM calls", "cache hits", "retries", "seconds")


def _warnings(result: RunResult) -> list[str]:
    """The build's warnings as its stats.json lists them: after a run the output folder holds
    this build's stats.json (written, or found current), so its confounds are not worked out
    a second time; a result without one has them computed here."""
    written = BuiltFolder.open(result.out_dir).stats_path
    if written.is_file():
        return list(json.loads(written.read_text(encoding="utf-8")).get("warnings", []))
    from builder.publish.stats import compute_stats

    return list(compute_stats(result.bench, result.stage_stats)["warnings"])


def print_run_summary(console: Console, result: RunResult) -> None:
    from builder.records.stage_record import format_kept_by_third

    # One reason and one third a line: cells wrap between them, and fit_columns keeps words whole.
    table = Table(
        title=f"build finished: {result.out_dir}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )
    for col in (
        "stage",
        "docs in→out",
        "queries in→out",
        "dropped by reason",
        "kept by third",
        "LLM calls",
        "cache hits",
        "retries",
        "seconds",
    ):
        table.add_column(col, overflow="fold", justify="right" if col in _NUMBERS else "left")
    for st in result.stage_stats:
        llm = st.llm or {}
        table.add_row(
            st.stage + ("\n(resumed)" if st.resumed else ""),
            _flow(st.docs_in, st.docs_out, st.docs_added),
            _flow(st.queries_in, st.queries_out, st.queries_added),
            _dropped(st),
            (format_kept_by_third(st.kept_by_third) or "-").replace(" · ", "\n"),
            str(llm.get("calls", 0)),
            str(llm.get("cache_hits", 0)),
            str(llm.get("retries", 0)),
            f"{st.seconds or 0:.1f}",
        )
    fit_columns(table, console.width)
    console.print(table)
    for text in _warnings(result):
        console.print(f"[yellow]warning: {escape(text)}[/]", highlight=False)
    counts = result.counts()
    console.print(
        f"{counts['docs']} documents, {counts['queries']} queries, "
        f"{counts['qrels']} qrels " + ("written to" if result.written else "already in") + f" {result.out_dir}"
    )


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
