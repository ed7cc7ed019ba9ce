"""Rich terminal tables of the statistics (`build-bench stats DIR`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right")
    return table


def _row_table(title: str, values: dict[str, Any]) -> Table:
    table = _table(title, *values)
    table.add_row(*(str(v) for v in values.values()))
    return table


def print_stats(console: Console, stats: dict[str, Any]) -> None:
    console.print(_row_table("counts", stats["counts"]))
    _doc_lengths(console, stats["doc_lengths"])
    positions = stats["positions"]
    if positions["available"]:
        _positions(console, positions)
        console.print(_row_table("position tags", positions["tags"]))
    console.print(_row_table("queries per length bucket", stats["length_buckets"]))
    console.print(_row_table("query types", stats["query_types"]["by_interrogative"]))
    _groups(console, stats)
    _drops(console, stats["drop_table"])
    _llm(console, stats["llm"])
    for note in stats["notes"]:
        console.print(f"[dim]note: {note}[/]")


def _doc_lengths(console: Console, lengths: dict[str, Any]) -> None:
    if not lengths["buckets"]:
        console.print("[dim]document lengths: the corpus is empty[/]")
        return
    table = _table(
        f"document length, {lengths['bucket_size']}-token buckets ({lengths.get('tokenizer') or 'unknown tokenizer'})",
        "tokens",
        "documents",
    )
    for bucket in lengths["buckets"]:
        table.add_row(bucket["range"], str(bucket["docs"]))
    console.print(table)


def _positions(console: Console, positions: dict[str, Any]) -> None:
    bins, n = positions["bins"], positions["n_bins"]
    table = _table(f"evidence position (mean {positions['mean_rel_pos']})", "relative position", "queries", "")
    top = max(bins) or 1
    for k, count in enumerate(bins):
        table.add_row(f"{k / n:.2f}-{(k + 1) / n:.2f}", str(count), "█" * round(30 * count / top))
    table.columns[2].justify = "left"
    console.print(table)


def _groups(console: Console, stats: dict[str, Any]) -> None:
    for key, title in (("languages", "lang"), ("domains", "domain")):
        table = _table(key, title, "docs", "queries", "qrels", "mean doc tokens", "mean query chars")
        for row in stats[key]:
            table.add_row(
                str(row[title]),
                str(row["docs"]),
                str(row["queries"]),
                str(row["qrels"]),
                _num(row["mean_doc_tokens"]),
                _num(row["mean_query_chars"]),
            )
        console.print(table)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _drops(console: Console, rows: list[dict[str, Any]]) -> None:
    if not rows:
        console.print("[dim]no rows were removed[/]")
        return
    table = _table("removed rows by stage and reason", "stage", "kind", "reason", "count")
    for row in rows:
        table.add_row(row["stage"], row["kind"], row["reason"], str(row["count"]))
    console.print(table)


def _llm(console: Console, usage: dict[str, Any]) -> None:
    if not usage["stages"]:
        return
    fields = [*usage["total"], "yield"]
    table = _table("LLM usage", "stage", *fields)
    for row in usage["stages"]:
        table.add_row(row["stage"], *(_cell(row.get(f)) for f in fields))
    table.add_row("total", *(_cell(usage["total"].get(f)) for f in fields), style="bold")
    per_kept = usage.get("per_kept_query") or {}
    if per_kept.get("calls") is not None:
        table.add_row("per kept query", *(_cell(per_kept.get(f)) for f in fields), style="italic")
    for group, row in (usage.get("by_group") or {}).items():
        if row["per_kept_query"] is not None:
            table.add_row(
                f"per kept {group} query ({row['kept']})",
                *(_cell(row["per_kept_query"].get(f)) for f in fields),
                style="italic",
            )
    console.print(table)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
