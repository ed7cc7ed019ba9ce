"""The parts of a CHANGELOG entry that say what changed in terms a user reads: the data
(documents and queries added, removed and changed), the inputs (recipe, prompts, models,
sources) and a reference retriever's figures on both versions."""

from __future__ import annotations

import json
from typing import Any

from builder.publish.inputs import input_changes
from builder.publish.removals import changelog_line

_MAX_ROWS = 40


def data_lines(result: dict[str, Any] | None) -> list[str]:
    if result is None:
        return ["Data: the previous release's tables could not be read, so no per-row comparison."]
    lines = [
        "Data:",
        "",
        "| | before | after | added | removed | changed |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for what in ("documents", "queries"):
        part = result[what]
        lines.append(
            f"| {what} | {part['old']} | {part['new']} | {part['added']['count']} | "
            f"{part['removed']['count']} | {part['changed']['count']} |"
        )
    removals = changelog_line(result["queries"]["removed"])
    if removals:
        lines += ["", removals]
    fields = result["queries"]["changed"]["by_field"]
    moved = ", ".join(f"{f} {v['count']}" for f, v in fields.items() if v["count"])
    if moved:
        lines += ["", f"Changed queries by field: {moved}."]
    groups = {g for k in ("added", "removed", "changed") for g in result["queries"][k]["by_language_and_position"]}
    if groups:
        lines += ["", "| queries by language/position | added | removed | changed |", "| --- | ---: | ---: | ---: |"]
        for g in sorted(groups):
            cells = [
                str(result["queries"][k]["by_language_and_position"].get(g, 0)) for k in ("added", "removed", "changed")
            ]
            lines.append(f"| {g} | " + " | ".join(cells) + " |")
    return lines


def _value(value: Any) -> str:
    text = "-" if value is None else (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    text = text.replace("|", "\\|").replace("\n", " ")
    return f"`{text[:77] + '…' if len(text) > 78 else text}`"


def input_lines(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    if not old or not new:
        return [
            "Inputs: "
            + (
                "the previous release does not pin its inputs, so they cannot be compared."
                if new
                else "this release does not pin its inputs."
            )
        ]
    changes = input_changes(old, new)
    if not changes:
        return ["Inputs: the same recipe, prompts, models and sources."]
    lines = [
        "Inputs that changed (recipe keys dotted, prompts by hash):",
        "",
        "| input | before | after |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {key} | {_value(a)} | {_value(b)} |" for key, a, b in changes[:_MAX_ROWS]]
    if len(changes) > _MAX_ROWS:
        lines.append(f"| … and {len(changes) - _MAX_ROWS} more | | |")
    return lines


def eval_figures(report: dict[str, Any] | None) -> dict[str, dict[str, float | None]]:
    """retriever -> nDCG@10 and the PSI of each grouping, from an eval.json."""
    out: dict[str, dict[str, float | None]] = {}
    for name, run in ((report or {}).get("retrievers") or {}).items():
        figures = {"nDCG@10": (run.get("overall") or {}).get("ndcg@10")}
        figures.update({f"PSI {g}": v.get("psi") for g, v in (run.get("groupings") or {}).items()})
        out[name] = figures
    return out


def eval_lines(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    before, after = eval_figures(old), eval_figures(new)
    shared = [r for r in after if r in before]
    if not shared:
        return []
    lines = [
        "Reference retrievers (`build-bench eval` on each release):",
        "",
        "| retriever | figure | before | after |",
        "| --- | --- | ---: | ---: |",
    ]
    for name in shared:
        for figure, value in after[name].items():
            lines.append(f"| {name} | {figure} | {_num(before[name].get(figure))} | {_num(value)} |")
    return lines


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def release_sections(
    diff: dict[str, Any] | None,
    old_inputs: dict[str, Any] | None,
    new_inputs: dict[str, Any] | None,
    old_eval: dict[str, Any] | None,
    new_eval: dict[str, Any] | None,
) -> list[str]:
    """Markdown lines for the changelog entry, each part followed by a blank line."""
    out: list[str] = []
    for part in (data_lines(diff), input_lines(old_inputs, new_inputs), eval_lines(old_eval, new_eval)):
        if part:
            out += [*part, ""]
    return out
