"""Present an evaluation: eval.json, rich tables, and a plot of nDCG@10 against position."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from builder.evaluation.metrics import N_BINS, NDCG, RECALL

_NAMES = {"setting": "setting", "variant": "evidence position (setting/variant)", "char_bucket": "character bucket",
          "position_tag": "position tag", "position_bin": "position bin"}
PLOT_NAME = "ndcg_by_position.png"


def write_json(report: dict, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "eval.json"
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return path


def _f(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_report(console: Console, report: dict) -> None:
    runs = report["retrievers"]
    groupings = report["dataset"]["groupings"]
    console.print(_summary(runs, groupings))
    for grouping in groupings:
        console.print(_grouping_table(runs, grouping))
    if "position_bin" not in groupings and all(r["relative_bins"] for r in runs.values()):
        console.print(_bins_table(runs))
    if any(r["length_buckets"] for r in runs.values()):
        console.print(_length_table(runs))
    console.print(_window_table(runs, groupings[0] if groupings else None))


def _summary(runs: dict, groupings: list[str]) -> Table:
    table = Table(title="retrievers", title_justify="left")
    for col in ("retriever", "queries", "nDCG@10", "R@100", *(f"PSI {_NAMES[g]}" for g in groupings),
                "slope", "Spearman", "run"):
        table.add_column(col, justify="left" if col == "retriever" else "right")
    for label, r in runs.items():
        psis = [f"{_f(r['groupings'][g]['psi'], 3)}" + _empties(r["groupings"][g]) for g in groupings]
        table.add_row(label, str(r["overall"]["n"]), _f(r["overall"][NDCG]), _f(r["overall"][RECALL]), *psis,
                      _f(r["trend"]["slope"], 3), _f(r["trend"]["spearman"], 3),
                      "cached" if r["cached"] else f"{r['seconds']:.1f}s")
    return table


def _empties(group: dict) -> str:
    return f" ({group['empty_groups']} empty)" if group["empty_groups"] else ""


def _grouping_table(runs: dict, grouping: str) -> Table:
    table = Table(title=f"nDCG@10 by {_NAMES[grouping]}", title_justify="left")
    table.add_column(_NAMES[grouping])
    table.add_column("queries", justify="right")
    for label in runs:
        table.add_column(label, justify="right")
    first = next(iter(runs.values()))["groupings"][grouping]["groups"]
    for i, group in enumerate(first):
        cells = [_f(r["groupings"][grouping]["groups"][i][NDCG]) for r in runs.values()]
        table.add_row(str(group["group"]), str(group["n"]), *cells)
    table.add_row("PSI", "", *[_f(r["groupings"][grouping]["psi"], 3) for r in runs.values()], style="bold")
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
        cells = [_f(r["relative_bins"]["groups"][i][NDCG]) for r in runs.values()]
        table.add_row(f"{k / N_BINS:.2f}-{(k + 1) / N_BINS:.2f}", str(group["n"]), *cells)
    table.add_row("PSI", "", *[_f(r["relative_bins"]["psi"], 3) for r in runs.values()], style="bold")
    return table


def _length_table(runs: dict) -> Table:
    table = Table(title=f"length buckets: nDCG@10 / PSI over {N_BINS} position bins", title_justify="left")
    table.add_column("bucket")
    table.add_column("queries", justify="right")
    for label in runs:
        table.add_column(label, justify="right")
    buckets = next(iter(runs.values()))["length_buckets"]
    for bucket, stats in buckets.items():
        cells = [f"{_f(r['length_buckets'][bucket][NDCG])} / {_f(r['length_buckets'][bucket]['psi_bins'], 3)}"
                 for r in runs.values()]
        table.add_row(f"{bucket} ({stats['empty_bins']} empty bins)", str(stats["n"]), *cells)
    return table


def _window_table(runs: dict, grouping: str | None) -> Table:
    """'Never saw the evidence' (beyond) apart from 'saw it' (visible, with its own PSI)."""
    table = Table(title="model window: evidence visible vs beyond the last token read", title_justify="left")
    psi_col = [f"visible PSI {_NAMES[grouping]}"] if grouping else []
    for col in ("retriever", "max tokens", "positives over", "visible n", "visible nDCG", *psi_col,
                "beyond n", "beyond nDCG", "unknown n"):
        table.add_column(col, justify="left" if col == "retriever" else "right")
    for label, r in runs.items():
        t = r["truncation"]
        q = t["queries"]
        visible_psi = [_f(t.get("visible_only", r["groupings"])[grouping]["psi"], 3)] if grouping else []
        table.add_row(label, str(t["max_length"] or "none"), f"{t['positive_docs_over_limit']}/{t['positive_docs']}",
                      str(q["visible"]["n"]), _f(q["visible"][NDCG]), *visible_psi, str(q["beyond"]["n"]),
                      _f(q["beyond"][NDCG]), str(q["unknown"]["n"]))
    return table


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
    for label, r in runs.items():
        groups = r["relative_bins"]["groups"] if use_bins else r["groupings"][groupings[0]]["groups"]
        xs = [(g["group"] + 0.5) / N_BINS if use_bins else i for i, g in enumerate(groups)]
        ys = [float("nan") if g[NDCG] is None else g[NDCG] for g in groups]
        ax.plot(xs, ys, marker="o", label=label)
    if use_bins:
        ax.set_xlabel(f"relative position of the evidence ({N_BINS} bins)")
        ax.set_xlim(0, 1)
    else:
        ax.set_xticks(range(len(groups)), [str(g["group"]) for g in groups])
        ax.set_xlabel(_NAMES[groupings[0]])
    ax.set_ylabel("nDCG@10")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / PLOT_NAME
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
