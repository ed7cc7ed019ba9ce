"""Present an evaluation: eval.json, rich tables, and a plot of nDCG@10 against position."""

# cohesive: eval.json, its tables and its plot present the same figures and must agree.

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from builder.evaluation.comparison import write_comparison
from builder.evaluation.confounds import overlap_psi_text
from builder.evaluation.metrics import N_BINS, NDCG, RECALL
from builder.evaluation.multiple import p_text, significance_mark
from builder.evaluation.psi_null import psi_null_text
from builder.families import families
from builder.io.built_folder import EVAL_FILE
from builder.util.atomic import write_text_atomic

GROUPING_NAMES = {
    "setting": "setting",
    "variant": "evidence position (setting/variant)",
    "char_bucket": "character bucket",
    "position_tag": "position tag",
    "position_bin": "position bin",
}
PLOT_NAME = "ndcg_by_position.png"


def write_json(report: dict, out_dir: Path) -> Path:
    """eval.json, and the comparison table beside it as Markdown and LaTeX."""
    path = out_dir / EVAL_FILE
    write_text_atomic(path, json.dumps(report, indent=2))
    if report.get("comparison_table"):
        write_comparison(report["comparison_table"], out_dir)
    return path


def _f(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def figure_text(figure: dict | None, digits: int = 3) -> str:
    """A figure with its interval: `0.812 [0.700, 0.901]`; `0.875 (n 4: no interval)` for a
    small group; `1.000 (no spread)` where every resample gave the same value (a zero-width
    interval is not certainty); a PSI on a small group gets `*`."""
    if not figure or figure.get("value") is None:
        return "-"
    text = f"{figure['value']:.{digits}f}"
    if figure.get("no_interval"):
        text += f" (n {figure['n']}: no interval)"
    elif figure.get("ci_low") is not None and figure["ci_low"] == figure["ci_high"]:
        text += " (no spread)"
    elif figure.get("ci_low") is not None:
        text += f" [{figure['ci_low']:.{digits}f}, {figure['ci_high']:.{digits}f}]"
    return text + ("*" if figure.get("small") else "")


def trend_text(trend: dict, name: str, digits: int = 3) -> str:
    """The trend's slope or Spearman with its interval and the resamples it left undefined
    (`-0.512 [-0.700, -0.300] (12 of 1000 resamples undefined)`), or why there is none."""
    value = trend.get(name)
    if value is None:
        why = (trend.get("why_none") or {}).get(name)
        return f"n/a: {why}" if why else "-"
    refused = (trend.get("refused_interval") or {}).get(name)
    if refused:
        return f"{value:.{digits}f} (no interval: {refused})"
    ci = trend.get(f"{name}_ci") or [None, None]
    text = figure_text(
        {
            "value": value,
            "ci_low": ci[0],
            "ci_high": ci[1],
            "n": trend.get("n"),
            "no_interval": trend.get("no_interval", False),
        },
        digits,
    )
    undefined = trend.get(f"{name}_undefined")
    return text + (f" ({undefined} of {trend['resamples']} resamples undefined)" if undefined else "")


def psi_cell(psi: dict | None, digits: int = 3) -> str:
    """A PSI as a table cell: the PSI over the groups large enough, its null median and
    permutation p (`0.069 (null 0.071, p 0.420)`), or why there is none."""
    null = (psi or {}).get("null")
    if not null:
        return figure_text(psi, digits)
    if null["value"] is None:
        return "n/a (groups too small)" if null["small_groups"] else "-"
    mark = "*" if null["small_groups_included"] else ""
    if null["null_median"] is None:
        return f"{null['value']:.{digits}f}{mark} (no null)"
    return (
        f"{null['value']:.{digits}f}{mark} (null {null['null_median']:.{digits}f}, "
        f"p {p_text(null['p'], null['at_floor'])})"
    )


def n_text(group: dict) -> str:
    return f"{group['n']}*" if group.get("small") and group["n"] else str(group["n"])


def definitions_line(report: dict) -> str:
    """The definitions every figure follows, printed under the tables."""
    d = report["definitions"]
    i = d["intervals"]
    averaging = "mean of position-bin means (PosIR)" if d["length_averaging"] == "bins" else "mean over queries"
    return (
        f"positions: {d['positions']} (anchor: span {d['anchor']}, {N_BINS} bins {d['bins']}); "
        f"length buckets: {averaging}; [ ] {i['confidence']:.0%} {i['method']} ({i['resamples']} resamples, "
        f"seed {i['seed']}); * fewer than {i['min_group']} queries (small: no interval), or a PSI "
        "whose min or max group is small; PSI over groups of at least that size, with the median of "
        "its null (labels shuffled within length buckets), one-sided permutation p"
        + ("" if "tests" not in d else f" ({d['tests']['permutations']} shuffles; ≤: the least p they can give)")
        + " and PSI above the null median with a 95% interval from the null's spread"
    )


def print_report(console: Console, report: dict) -> None:
    runs = report["retrievers"]
    groupings = report["dataset"]["groupings"]
    console.print(_summary(runs, groupings))
    for label, r in runs.items():
        for note in r.get("notes", []):
            console.print(f"[yellow]warning: {escape(label)}: {escape(note)}[/]", highlight=False)
    for found in (report.get("confounds") or {}).values():
        for line in found["warnings"]:
            console.print(f"[yellow]warning: confound: {escape(line)}[/]", highlight=False)
    for grouping in groupings:
        console.print(_grouping_table(runs, grouping))
        for label, r in runs.items():
            strata = (r.get("psi_by_overlap") or {}).get(grouping) or []
            if strata:
                min_group = report["definitions"]["intervals"]["min_group"]
                console.print(
                    f"{escape(label)}: PSI by {GROUPING_NAMES.get(grouping, grouping)} within overlap "
                    "tertiles: " + "; ".join(escape(overlap_psi_text(t, min_group)) for t in strata),
                    highlight=False,
                )
    if "position_bin" not in groupings and all(r["relative_bins"] for r in runs.values()):
        console.print(_bins_table(runs))
    if any(r["length_buckets"] for r in runs.values()):
        console.print(_length_table(runs))
    console.print(_window_table(runs, groupings[0] if groupings else None))
    for comparison in report.get("comparisons", []):
        console.print(_comparison_table(comparison))
    for family in families():  # e.g. ColDeR's probe tests
        if family.print_eval is not None:
            family.print_eval(console, report)
    if report.get("comparison_table"):
        console.print(_paper_table(report["comparison_table"]))
    console.print(definitions_line(report), highlight=False)


def _summary(runs: dict, groupings: list[str]) -> Table:
    table = Table(title="retrievers", title_justify="left")
    for col in (
        "retriever",
        "queries",
        "nDCG@10",
        "R@100",
        *(f"PSI {GROUPING_NAMES[g]}" for g in groupings),
        "slope",
        "Spearman",
        "Judged@10",
        "missing",
        "run",
    ):
        table.add_column(col, justify="left" if col == "retriever" else "right")
    for label, r in runs.items():
        psis = [psi_cell(r["groupings"][g]["psi"]) + _empties(r["groupings"][g]) for g in groupings]
        table.add_row(
            label,
            str(r["overall"]["n"]),
            figure_text(r["overall"][NDCG]),
            figure_text(r["overall"][RECALL]),
            *psis,
            trend_text(r["trend"], "slope"),
            trend_text(r["trend"], "spearman"),
            _f(r.get("run", {}).get("judged@10"), 3),
            str(r.get("run", {}).get("queries_missing", "-")),
            "cached" if r["cached"] else f"{r['seconds']:.1f}s",
        )
    return table


def _empties(group: dict) -> str:
    return f" ({group['empty_groups']} empty)" if group["empty_groups"] else ""


def _grouping_table(runs: dict, grouping: str) -> Table:
    table = Table(title=f"nDCG@10 by {GROUPING_NAMES[grouping]}", title_justify="left")
    table.add_column(GROUPING_NAMES[grouping])
    table.add_column("queries", justify="right")
    for label in runs:
        table.add_column(label, justify="right")
    first = next(iter(runs.values()))["groupings"][grouping]["groups"]
    for i, group in enumerate(first):
        cells = [figure_text(r["groupings"][grouping]["groups"][i][NDCG]) for r in runs.values()]
        table.add_row(str(group["group"]), n_text(group), *cells)
    table.add_row("PSI", "", *[psi_cell(r["groupings"][grouping]["psi"]) for r in runs.values()], style="bold")
    table.caption = _psi_caption(runs, lambda r: r["groupings"][grouping]["psi"])
    table.caption_justify = "left"
    return table


def _bins_table(runs: dict) -> Table:
    """nDCG@10 over the 20 relative-position bins, for sets whose queries carry no bin of
    their own (FarRelevant and ColDeR builds: the bins come from rel_pos or the spans)."""
    table = Table(title=f"nDCG@10 by relative position ({N_BINS} bins)", title_justify="left")
    table.add_column("bin")
    table.add_column("queries", justify="right")
    for label in runs:
        table.add_column(label, justify="right")
    first = next(iter(runs.values()))["relative_bins"]["groups"]
    for i, group in enumerate(first):
        k = group["group"]
        cells = [figure_text(r["relative_bins"]["groups"][i][NDCG]) for r in runs.values()]
        table.add_row(f"{k / N_BINS:.2f}-{(k + 1) / N_BINS:.2f}", n_text(group), *cells)
    table.add_row("PSI", "", *[psi_cell(r["relative_bins"]["psi"]) for r in runs.values()], style="bold")
    table.caption = _psi_caption(runs, lambda r: r["relative_bins"]["psi"])
    table.caption_justify = "left"
    return table


def _psi_caption(runs: dict, psi_of: Callable[[dict], dict]) -> str:
    """Each retriever's PSI in full: null median and 95th percentile, p, PSI above the null
    median with its interval, the groups left out; the PSI over all groups with queries."""
    lines = []
    for label, r in runs.items():
        psi = psi_of(r)
        lines.append(f"{label}: PSI {psi_null_text(psi.get('null'))}; over all groups with queries {figure_text(psi)}")
    return "\n".join(lines)


def _length_table(runs: dict) -> Table:
    table = Table(title=f"length buckets: nDCG@10 / PSI over {N_BINS} position bins", title_justify="left")
    table.add_column("bucket")
    table.add_column("queries", justify="right")
    for label in runs:
        table.add_column(label, justify="right")
    buckets = next(iter(runs.values()))["length_buckets"]
    for bucket, stats in buckets.items():
        cells = [
            f"{figure_text(r['length_buckets'][bucket][NDCG])} / {psi_cell(r['length_buckets'][bucket]['psi_bins'])}"
            for r in runs.values()
        ]
        table.add_row(f"{bucket} ({stats['empty_bins']} empty bins)", n_text(stats), *cells)
    return table


def _window_table(runs: dict, grouping: str | None) -> Table:
    """'Never saw the evidence' (beyond) apart from 'saw it' (visible, with its own PSI)."""
    table = Table(title="model window: evidence visible vs beyond the last token read", title_justify="left")
    psi_col = [f"visible PSI {GROUPING_NAMES[grouping]}"] if grouping else []
    for col in (
        "retriever",
        "max tokens",
        "positives over",
        "visible n",
        "visible nDCG",
        *psi_col,
        "beyond n",
        "beyond nDCG",
        "unknown n",
    ):
        table.add_column(col, justify="left" if col == "retriever" else "right")
    for label, r in runs.items():
        t = r["truncation"]
        q = t["queries"]
        visible_psi = [psi_cell(t.get("visible_only", r["groupings"])[grouping]["psi"])] if grouping else []
        table.add_row(
            label,
            str(t["max_length"] or "none"),
            f"{t['positive_docs_over_limit']}/{t['positive_docs']}",
            str(q["visible"]["n"]),
            figure_text(q["visible"].get(NDCG)),
            *visible_psi,
            str(q["beyond"]["n"]),
            figure_text(q["beyond"].get(NDCG)),
            str(q["unknown"]["n"]),
        )
    return table


def signed_text(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def interval_text(pair: list[float] | None, digits: int = 3) -> str:
    return "-" if not pair else f"[{pair[0]:+.{digits}f}, {pair[1]:+.{digits}f}]"


def paired_test_cells(row: dict) -> list[str]:
    """n, A - B with its interval, d_z, raw p, Holm p with its mark, and the family's size."""
    return [
        n_text(row),
        signed_text(row["mean_difference"]),
        interval_text(row.get("difference_ci")),
        _f(row.get("effect_size"), 2),
        p_text(row["p"], row.get("at_floor", False)),
        p_text(row.get("p_holm"), row.get("at_floor", False)) + significance_mark(row.get("p_holm")),
        str(row.get("family_size", "-")),
    ]


TEST_COLUMNS = ("queries", "A - B", "95% interval", "d_z", "p", "p Holm", "tests in family")


def _comparison_table(comparison: dict) -> Table:
    """A paired test of two retrievers' nDCG@10, overall and in every position group."""
    title = f"paired test: {comparison['a']} vs {comparison['b']}, nDCG@10 difference (A - B)"
    caption = (
        f"{comparison['test']}; p Holm: Holm-corrected within the family (overall: every pair's overall "
        "test; each grouping: its groups), testable tests only (one query, or no differences: p 1 by "
        "construction, no Holm p, not in the family); ** < 0.01, * < 0.05 after correction; ≤: the least "
        "p the shuffles can give"
    )
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for col in ("grouping", "group", *TEST_COLUMNS):
        table.add_column(col, justify="left" if col in ("grouping", "group") else "right")
    table.add_row("overall", "", *paired_test_cells(comparison["overall"]))
    for grouping, rows in comparison["groupings"].items():
        for row in rows:
            table.add_row(GROUPING_NAMES.get(grouping, grouping), str(row["group"]), *paired_test_cells(row))
    return table


def _paper_table(table: dict) -> Table:
    """The comparison table (also comparison.md and comparison.tex beside eval.json)."""
    shown = Table(
        title="comparison (nDCG@10; comparison.md, comparison.tex)",
        title_justify="left",
        caption=table["note"],
        caption_justify="left",
    )
    shown.add_column("retriever")
    for column in table["columns"]:
        shown.add_column(column, justify="right")
    for row in table["rows"]:
        shown.add_row(
            row["retriever"], *("-" if c["value"] is None else f"{c['value']:.3f}{c['mark']}" for c in row["cells"])
        )
    return shown


def plot(report: dict, out_dir: Path) -> Path | None:
    """nDCG@10 per retriever over the 20 relative-position bins, or over the first grouping
    the dataset carries when it has no relative positions; None when it has neither."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = report["retrievers"]
    groupings = report["dataset"]["groupings"]
    use_bins = all(r["relative_bins"] for r in runs.values())
    if not runs or not (use_bins or groupings):
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    min_group = report["definitions"]["intervals"]["min_group"]
    for shift, (label, r) in enumerate(runs.items()):
        groups = r["relative_bins"]["groups"] if use_bins else r["groupings"][groupings[0]]["groups"]
        # Retrievers side by side within a group, so their intervals do not hide each other.
        offset = (shift - (len(runs) - 1) / 2) * (0.006 if use_bins else 0.06)
        xs = [((g["group"] + 0.5) / N_BINS if use_bins else i) + offset for i, g in enumerate(groups)]
        ys, low, high = (_series(groups, key) for key in ("value", "ci_low", "ci_high"))
        errors = [[max(y - lo, 0.0) for y, lo in zip(ys, low)], [max(hi - y, 0.0) for y, hi in zip(ys, high)]]
        line = ax.errorbar(xs, ys, yerr=errors, capsize=2, label=label)
        color = line[0].get_color()
        for small, face in ((False, color), (True, "white")):
            # Hollow markers: groups with fewer queries than the minimum group size.
            points = [(x, y) for x, y, g in zip(xs, ys, groups) if g["n"] and g["small"] == small]
            if points:
                ax.plot(
                    *zip(*points), linestyle="none", marker="o", markerfacecolor=face, markeredgecolor=color, zorder=3
                )
    ax.set_title(
        f"nDCG@10, {report['definitions']['intervals']['confidence']:.0%} bootstrap intervals; "
        f"hollow: fewer than {min_group} queries",
        fontsize="small",
    )
    if use_bins:
        ax.set_xlabel(f"relative position of the evidence ({N_BINS} bins)")
        ax.set_xlim(0, 1)
    else:
        ax.set_xticks(range(len(groups)), [str(g["group"]) for g in groups])
        ax.set_xlabel(GROUPING_NAMES[groupings[0]])
    ax.set_ylabel("nDCG@10")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / PLOT_NAME
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _series(groups: list[dict], key: str) -> list[float]:
    values = [g[NDCG][key] for g in groups]
    return [float("nan") if v is None else v for v in values]
