"""The table a paper can use: retrievers x (overall, each position third, PSI), nDCG@10.

Each cell is the figure; beside a retriever's overall and group figures, a mark says the
paired test against the first retriever (the reference row) survives Holm's correction
within its family (** p < 0.01, * p < 0.05); PSI carries its permutation p over its
null (* p < 0.05, ** p < 0.01; one test per retriever). Written as Markdown and LaTeX.
"""

from __future__ import annotations

from pathlib import Path

from builder.evaluation.metrics import NDCG
from builder.evaluation.multiple import significance_mark
from builder.util.atomic import write_text_atomic

MARKDOWN_FILE, LATEX_FILE = "comparison.md", "comparison.tex"


def _position_grouping(report: dict) -> str | None:
    """The grouping the table's columns come from: the thirds where the set has them."""
    groupings = report["dataset"]["groupings"]
    return "position_tag" if "position_tag" in groupings else (groupings[0] if groupings else None)


def _test_against(report: dict, reference: str, label: str) -> dict | None:
    for c in report.get("comparisons", []):
        if {c["a"], c["b"]} == {reference, label}:
            return c
    return None


def comparison_table(report: dict) -> dict:
    """`{"columns", "rows", "reference", "grouping"}`: each row a retriever, each cell
    `{"value", "mark"}`, marks from Holm-adjusted paired tests against the reference."""
    runs = report["retrievers"]
    grouping = _position_grouping(report)
    reference = next(iter(runs), None)
    labels = (
        []
        if grouping is None
        else [g["group"] for g in next(iter(runs.values()))["groupings"][grouping]["groups"] if g["n"]]
    )
    columns = ["overall", *map(str, labels), "PSI"]
    rows = []
    for label, run in runs.items():
        test = None if label == reference else _test_against(report, reference, label)
        cells = [
            {
                "value": run["overall"][NDCG]["value"],
                "mark": significance_mark((test or {}).get("overall", {}).get("p_holm")),
            }
        ]
        if grouping is not None:
            found = run["groupings"][grouping]
            tested = {row["group"]: row for row in (test or {}).get("groupings", {}).get(grouping, [])}
            for group in labels:
                figure = next(g for g in found["groups"] if g["group"] == group)[NDCG]
                cells.append({"value": figure["value"], "mark": significance_mark(tested.get(group, {}).get("p_holm"))})
            null = found["psi"].get("null") or {}
            cells.append(
                {
                    "value": null.get("value"),
                    "mark": significance_mark(null.get("p")),
                    "above_null_median": null.get("above_null_median"),
                }
            )
        rows.append({"retriever": label, "cells": cells})
    return {
        "grouping": grouping,
        "reference": reference,
        "columns": columns,
        "rows": rows,
        "note": (
            f"nDCG@10; marks on a retriever's figures: paired randomization test against {reference}, "
            "Holm-corrected within its family (** < 0.01, * < 0.05); PSI over groups of at least "
            "--min-group queries, marked by its permutation p against the null of shuffled positions"
        ),
    }


def _cell(cell: dict) -> str:
    return "-" if cell["value"] is None else f"{cell['value']:.3f}{cell['mark']}"


def markdown(table: dict) -> str:
    head = "| retriever | " + " | ".join(table["columns"]) + " |"
    rule = "| --- |" + " ---: |" * len(table["columns"])
    body = [f"| {row['retriever']} | " + " | ".join(_cell(c) for c in row["cells"]) + " |" for row in table["rows"]]
    return "\n".join([head, rule, *body, "", table["note"], ""])


def _tex(text: str) -> str:
    return "".join("\\" + ch if ch in "&%$#_{}" else ch for ch in text)


def latex(table: dict) -> str:
    def cell(c: dict) -> str:
        if c["value"] is None:
            return "--"
        return f"{c['value']:.3f}" + (f"$^{{{c['mark']}}}$" if c["mark"] else "")

    lines = [
        "\\begin{tabular}{l" + "r" * len(table["columns"]) + "}",
        "\\toprule",
        "retriever & " + " & ".join(_tex(c) for c in table["columns"]) + " \\\\",
        "\\midrule",
    ]
    lines += [
        _tex(row["retriever"]) + " & " + " & ".join(cell(c) for c in row["cells"]) + " \\\\" for row in table["rows"]
    ]
    lines += ["\\bottomrule", "\\end{tabular}", f"% {table['note']}", ""]
    return "\n".join(lines)


def write_comparison(table: dict, out_dir: Path) -> list[Path]:
    paths = [Path(out_dir) / MARKDOWN_FILE, Path(out_dir) / LATEX_FILE]
    write_text_atomic(paths[0], markdown(table))
    write_text_atomic(paths[1], latex(table))
    return paths
