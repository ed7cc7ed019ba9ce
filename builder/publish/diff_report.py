"""`build-bench diff` in a terminal: counts first, then per-group tables, then examples."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from builder.publish.removals import removal_summary


def _counts_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"{result['old']} → {result['new']}", title_justify="left")
    for name in ("", "old", "new", "added", "removed", "changed", "unchanged"):
        table.add_column(name, justify="left" if not name else "right")
    for what in ("documents", "queries"):
        part = result[what]
        table.add_row(
            what,
            str(part["old"]),
            str(part["new"]),
            *(str(part[k]["count"]) for k in ("added", "removed", "changed")),
            str(part["unchanged"]),
        )
    return table


def _groups_table(title: str, part: dict[str, Any], key: str) -> Table | None:
    groups = sorted({g for kind in ("added", "removed", "changed") for g in part[kind][key]})
    if not groups:
        return None
    table = Table(title=title, title_justify="left")
    for name in ("group", "added", "removed", "changed"):
        table.add_column(name, justify="left" if name == "group" else "right")
    for g in groups:
        table.add_row(g, *(str(part[kind][key].get(g, 0)) for kind in ("added", "removed", "changed")))
    return table


def _short(value: Any, width: int = 80) -> Any:
    """Long texts shortened for the terminal; `--json` keeps them whole."""
    if isinstance(value, str) and len(value) > width:
        return value[: width - 1] + "…"
    return value


def print_diff(console: Console, result: dict[str, Any]) -> None:
    console.print(_counts_table(result))
    for table in (
        _groups_table("documents by language", result["documents"], "by_language"),
        _groups_table("queries by language / position group", result["queries"], "by_language_and_position"),
    ):
        if table is not None:
            console.print(table)
    queries = result["queries"]
    fields = {f: v["count"] for f, v in queries["changed"]["by_field"].items()}
    console.print(
        "changed query fields: " + ", ".join(f"{f} {n}" for f, n in fields.items()), markup=False, highlight=False
    )
    summary = removal_summary(queries["removed"])
    if summary:
        console.print(f"removed queries: {summary}", markup=False, highlight=False, soft_wrap=True)
    why = {w["id"]: w for w in queries["removed"].get("why", [])}
    lines = []
    for kind in ("added", "removed"):
        lines += [f"  {kind} document {d}" for d in result["documents"][kind]["examples"]]
        lines += [
            f"  {kind} query {q['id']}: {_short(q['text'])}{_why(why.get(q['id']))}" for q in queries[kind]["examples"]
        ]
    lines += [f"  changed document {d}" for d in result["documents"]["changed"]["examples"]]
    for f, v in queries["changed"]["by_field"].items():
        lines += [f"  changed {f} of {e['id']}: {_short(e['old'])!r} → {_short(e['new'])!r}" for e in v["examples"]]
    for change in result["inputs"]:
        lines.append(f"  input {change['input']}: {_short(change['old'])!r} → {_short(change['new'])!r}")
    figures = result["evaluation"]
    for name, new in figures["new"].items():
        old = figures["old"].get(name, {})
        lines += [f"  {name} {f}: {_num(old.get(f))} → {_num(v)}" for f, v in new.items() if name in figures["old"]]
    if lines:
        console.print("details:", markup=False)
        for line in lines:
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def _why(row: dict[str, Any] | None) -> str:
    if row is None:
        return ""
    new = row["new_documents"]
    named = f"; new document{'s' if len(new) > 1 else ''} {', '.join(new)}" if new else ""
    return f" [{row['reason']}{named}]"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
