"""`build-bench eval`'s report as the data card shows it: the `evaluation` context of the
card template (figures as text, with n and intervals) and the warnings it lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builder.evaluation.comparison import markdown
from builder.evaluation.confounds import tertile_label, tertile_psi_text
from builder.evaluation.multiple import significance_mark
from builder.evaluation.psi_null import psi_null_text
from builder.evaluation.report import (
    GROUPING_NAMES,
    definitions_line,
    figure_text,
    interval_text,
    n_text,
    p_text,
    psi_cell,
    signed_text,
)
from builder.families import families
from builder.io.built_folder import EVAL_DIR, EVAL_FILE

EVAL_REPORT = Path(EVAL_DIR) / EVAL_FILE
_NDCG, _RECALL = "ndcg@10", "recall@100"


def read_eval_report(folder: Path) -> dict[str, Any] | None:
    """The report of the folder's last eval, if it has one that parses."""
    try:
        report = json.loads((Path(folder) / EVAL_REPORT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and isinstance(report.get("retrievers"), dict) else None


def _grouping_name(grouping: str) -> str:
    return GROUPING_NAMES.get(grouping, grouping.replace("_", " "))


def _psi_sources(run: dict[str, Any], groupings: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(name, grouping) for every grouping a PSI is computed over."""
    out = [(_grouping_name(g), run["groupings"][g]) for g in groupings]
    if run.get("relative_bins") and "position_bin" not in groupings:
        out.append(("relative position (20 bins)", run["relative_bins"]))
    return out


def _group_n(grouping: dict[str, Any], label: object) -> int:
    return next((int(g["n"]) for g in grouping["groups"] if g["group"] == label), 0)


def _queries(n: int) -> str:
    return f"{n} query" if n == 1 else f"{n} queries"


def eval_warnings(report: dict[str, Any]) -> list[str]:
    """What the card warns about the evaluation: circular QC, and PSIs resting on small groups."""
    groupings = report["dataset"]["groupings"]
    min_group = report["definitions"]["intervals"]["min_group"]
    out: list[str] = [
        f"confound: {line}" for found in (report.get("confounds") or {}).values() for line in found["warnings"]
    ]
    for label, run in report["retrievers"].items():
        out += [f"`{label}`: {note}" for note in run.get("circular_qc", [])]
        for name, grouping in _psi_sources(run, groupings):
            psi = grouping["psi"]
            if psi.get("small"):
                ends = dict.fromkeys((psi["min_group"], psi["max_group"]))  # the same group when all score alike
                groups = " and ".join(f"{g} ({_queries(_group_n(grouping, g))})" for g in ends)
                out.append(
                    f"`{label}`: PSI by {name} ({figure_text(psi)}) rests on its lowest and highest "
                    f"group, {groups}, fewer than the {min_group} a group needs not to be small"
                )
        small_buckets = [
            b for b, entry in (run.get("length_buckets") or {}).items() if (entry.get("psi_bins") or {}).get("small")
        ]
        if small_buckets:
            out.append(
                f"`{label}`: the PSI over position bins within length bucket(s) {', '.join(small_buckets)} "
                f"rests on bins of fewer than {min_group} queries"
            )
    return out


def _rows(run: dict[str, Any], groupings: list[str], min_group: int) -> list[dict[str, Any]]:
    """The retriever's table: overall, each position group, each PSI, the PSI within each
    overlap tertile, each length bucket."""
    overall = run["overall"]
    rows = [
        {
            "grouping": "overall",
            "group": "all",
            "n": overall["n"],
            "ndcg": figure_text(overall[_NDCG]),
            "recall": figure_text(overall[_RECALL]),
        }
    ]
    for name, grouping in _psi_sources(run, groupings):
        rows += [
            {
                "grouping": name,
                "group": g["group"],
                "n": n_text(g),
                "ndcg": figure_text(g[_NDCG]),
                "recall": figure_text(g[_RECALL]),
            }
            for g in grouping["groups"]
            if g["n"]
        ]
        psi = grouping["psi"]
        rows.append(
            {
                "grouping": name,
                "group": "PSI (nDCG@10)",
                "n": psi["n"],
                "ndcg": psi_null_text(psi["null"]) if psi.get("null") else figure_text(psi),
                "recall": "-",
            }
        )
    for grouping, strata in (run.get("psi_by_overlap") or {}).items():
        rows += [
            {
                "grouping": f"{_grouping_name(grouping)} within {tertile_label(t)}",
                "group": "PSI (nDCG@10)",
                "n": t["n"],
                "ndcg": tertile_psi_text(t, min_group),
                "recall": "-",
            }
            for t in strata
        ]
    for bucket, entry in (run.get("length_buckets") or {}).items():
        if entry["n"]:
            rows.append(
                {
                    "grouping": "length bucket",
                    "group": bucket,
                    "n": n_text(entry),
                    "ndcg": figure_text(entry[_NDCG]),
                    "recall": figure_text(entry[_RECALL]),
                }
            )
    return rows


def _test_row(grouping: str, group: object, row: dict[str, Any]) -> dict[str, Any]:
    at_floor = row.get("at_floor", False)
    return {
        "grouping": grouping,
        "group": group,
        "n": n_text(row),
        "difference": signed_text(row["mean_difference"]),
        "interval": interval_text(row.get("difference_ci")),
        "effect": "-" if row.get("effect_size") is None else f"{row['effect_size']:.2f}",
        "p": p_text(row["p"], at_floor),
        "p_holm": p_text(row.get("p_holm"), at_floor) + significance_mark(row.get("p_holm")),
        "tests": row.get("family_size", "-"),
    }


def _comparison(c: dict[str, Any]) -> dict[str, Any]:
    rows = [_test_row("overall", "all", c["overall"])]
    rows += [
        _test_row(_grouping_name(grouping), row["group"], row)
        for grouping, found in c["groupings"].items()
        for row in found
        if row["n"]
    ]
    return {"a": c["a"], "b": c["b"], "test": c["test"], "rows": rows}


def evaluation_context(report: dict[str, Any]) -> dict[str, Any]:
    """What the card template's `evaluation` parts show, as text ready for the page."""
    groupings = report["dataset"]["groupings"]
    runs = report["retrievers"]
    first = next(iter(runs.values()), None)
    psi_names = [name for name, _ in _psi_sources(first, groupings)] if first else []
    intervals = report["definitions"]["intervals"]
    return {
        "queries": report["dataset"]["queries"],
        "confidence": f"{intervals['confidence']:.0%}",
        "min_group": intervals["min_group"],
        "definitions": definitions_line(report),
        "psi_columns": psi_names,
        "retrievers": [
            {
                "label": label,
                "n": run["overall"]["n"],
                "ndcg": figure_text(run["overall"][_NDCG]),
                "recall": figure_text(run["overall"][_RECALL]),
                "psi": [psi_cell(g["psi"]) for _, g in _psi_sources(run, groupings)],
                "judged": "-" if (run.get("run") or {}).get("judged@10") is None else f"{run['run']['judged@10']:.3f}",
                "missing": (run.get("run") or {}).get("queries_missing", "-"),
                "notes": run.get("circular_qc", []),
                "rows": _rows(run, groupings, intervals["min_group"]),
            }
            for label, run in runs.items()
        ],
        "comparisons": [_comparison(c) for c in report.get("comparisons", [])],
        **{k: v for f in families() if f.card_eval is not None for k, v in f.card_eval(report).items()},
        "comparison_table": markdown(report["comparison_table"]) if report.get("comparison_table") else None,
        "warnings": eval_warnings(report),
    }


def folder_evaluation(folder: Path) -> dict[str, Any] | None:
    """The card's `evaluation` context from the folder's eval/eval.json; None when there is
    none, or when it lacks the figures the card shows (an eval.json from a build-bench
    before intervals): the card is then written without an Evaluation section."""
    report = read_eval_report(folder)
    if report is None:
        return None
    try:
        return evaluation_context(report)
    except (KeyError, TypeError, AttributeError, IndexError):
        return None
