"""`eval` on a depth x length grid (a `depth_grid` build): one retrieval task per cell.

Each cell's BEIR set (settings/<cell>/) is evaluated on its own, so its nDCG@10 and
Recall@100 (with n and the bootstrap interval eval computes) are plain retrieval figures.
Per length: PSI over the depths' nDCG@10, and the paired view: the retriever's score of a
query's own document at each depth against the same evidence, in the same padding, at the
first depth (paired t-test, scipy), Holm-corrected across the depths of that length
(statsmodels). A cell whose evidence the model cannot read (it starts past the tokens a
dense model reads) is named "beyond window".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import polars as pl

from builder.evaluation.data import EvalData, EvalError, load_eval_data
from builder.evaluation.intervals import BootstrapSettings, psi_values
from builder.evaluation.metrics import NDCG, RECALL
from builder.evaluation.retrievers import RerankerFactory, RetrieverSpec

GRID_FILE = "grid_heatmap.png"
Log = Callable[[str], None]


def is_grid(folder: Path) -> bool:
    """A build whose queries carry the grid's depth and length."""
    path = Path(folder) / "queries.parquet"
    if not path.is_file():
        return False
    try:
        names = pl.read_parquet_schema(path)
    except (pl.exceptions.PolarsError, OSError):
        return False
    return "grid_depth" in names and "grid_length" in names and (Path(folder) / "settings").is_dir()


def grid_cells(folder: Path) -> pl.DataFrame:
    """setting, grid_depth, grid_length of every cell, by length then depth."""
    queries = pl.read_parquet(Path(folder) / "queries.parquet", columns=["setting", "grid_depth", "grid_length"])
    return queries.unique().sort("grid_length", "grid_depth")


def evaluate_grid(folder: Path, specs: list[RetrieverSpec], cache_dir: Path, batch_size: int = 32,
                  rerankers: Mapping[str, RerankerFactory] | None = None, log: Log = lambda _: None,
                  bootstrap: BootstrapSettings = BootstrapSettings()) -> dict:
    """The grid report (eval.json's content) for every retriever."""
    from builder.evaluation.evaluate import evaluate

    folder = Path(folder)
    cells = grid_cells(folder)
    depths = sorted(cells["grid_depth"].unique().to_list())
    lengths = sorted(cells["grid_length"].unique().to_list())
    runs: dict[str, dict] = {s.label: {"cells": [], "own_scores": {}} for s in specs}
    for cell, depth, length in cells.iter_rows():
        data = load_eval_data(folder / "settings" / cell)
        log(f"cell {cell}: {data.queries.height} queries")
        report = evaluate(data, specs, cache_dir / cell, batch_size, rerankers, bootstrap=bootstrap)
        for spec in specs:
            section = report["retrievers"][spec.label]
            beyond = section["truncation"]["queries"].get("beyond", {}).get("n", 0)
            runs[spec.label]["cells"].append({
                "cell": cell, "depth": depth, "length": length, "n": section["overall"]["n"],
                NDCG: section["overall"][NDCG], RECALL: section["overall"][RECALL],
                "beyond_window": beyond, "max_length": section["truncation"]["max_length"]})
            runs[spec.label]["own_scores"][cell] = own_scores(spec, data, batch_size, rerankers)
    out = {"dataset": {"path": str(folder), "kind": "depth_grid", "depths": depths, "lengths": lengths,
                       "cells": cells.height},
           "definitions": {"intervals": bootstrap.describe(),
                           "paired": "score of the query's own document at depth d minus at the first depth, "
                                     "same query and length; paired t-test (scipy.stats.ttest_rel), "
                                     "Holm-corrected across the depths of a length (statsmodels multipletests)",
                           "psi": "1 - min/max of nDCG@10 over the depths of a length"},
           "retrievers": {}}
    for label, run in runs.items():
        out["retrievers"][label] = {"cells": run["cells"],
                                    "psi_by_length": psi_by_length(run["cells"], lengths),
                                    "paired": paired_tests(run["own_scores"], cells)}
    return out


def own_scores(spec: RetrieverSpec, data: EvalData, batch_size: int,
               rerankers: Mapping[str, RerankerFactory] | None) -> dict[str, float]:
    """source query id -> the retriever's score of the query's own document in this cell."""
    from builder.evaluation.probes import pair_scorer
    from builder.evaluation.retrievers import document_inputs

    queries = pl.read_parquet(data.folder / "queries.parquet", columns=["query_id", "source_query_id"])
    source = dict(zip(queries["query_id"].to_list(), queries["source_query_id"].to_list()))
    rows = data.queries.select("query_id", "text", "doc_id").rows()
    documents = data.corpus.select({d for _, _, d in rows})
    inputs = dict(zip(documents["doc_id"], document_inputs(documents)[0]))
    scores = pair_scorer(spec, data, batch_size, rerankers)([(t, inputs[d]) for _, t, d in rows])
    return {source[q]: float(s) for (q, _, _), s in zip(rows, scores)}


def psi_by_length(cells: list[dict], lengths: list[int]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for length in lengths:
        means = np.array([c[NDCG]["value"] for c in cells if c["length"] == length and c[NDCG]["value"] is not None])
        value = float(psi_values(means)) if len(means) else float("nan")
        out[str(length)] = value if np.isfinite(value) else None
    return out


def paired_tests(scores: dict[str, dict[str, float]], cells: pl.DataFrame) -> list[dict]:
    """Per length, each depth against the first, on the queries scored at both; Holm across depths."""
    from statsmodels.stats.multitest import multipletests

    from builder.evaluation.probes import paired_t

    out: list[dict] = []
    for (length,), part in cells.partition_by("grid_length", as_dict=True, maintain_order=True).items():
        rows = part.sort("grid_depth").rows()
        reference_cell, reference_depth, _ = rows[0]
        tests = []
        for cell, depth, _ in rows[1:]:
            common = sorted(set(scores[cell]) & set(scores[reference_cell]))
            a = np.array([scores[cell][q] for q in common])
            b = np.array([scores[reference_cell][q] for q in common])
            tests.append({"length": length, "depth": depth, "reference_depth": reference_depth, **paired_t(a, b)})
        tested = [t for t in tests if t["p"] is not None]
        if tested:
            reject, corrected, _, _ = multipletests([t["p"] for t in tested], alpha=0.05, method="holm")
            for t, r, c in zip(tested, reject, corrected):
                t.update(p_holm=float(c), significant=bool(r))
        for t in tests:
            t.setdefault("p_holm", None)
            t.setdefault("significant", False)
        out += tests
    return out


def cell_text(cell: dict, metric: str = NDCG) -> str:
    """`0.812 [0.70, 0.90]`, marked `beyond window` where the model read none of the
    evidence (or how many of its queries it could not read)."""
    figure = cell[metric]
    if figure["value"] is None:
        return "-"
    text = f"{figure['value']:.3f} [{_f(figure['ci_low'])}, {_f(figure['ci_high'])}]"
    if cell["beyond_window"] and cell["beyond_window"] >= cell["n"]:
        return text + " beyond window"
    if cell["beyond_window"]:
        text += f" ({cell['beyond_window']}/{cell['n']} beyond window)"
    return text


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table_rows(section: dict, lengths: list[int], depths: list[float], metric: str) -> list[list[str]]:
    """One row per depth: the depth, then each length's cell."""
    by = {(c["depth"], c["length"]): c for c in section["cells"]}
    return [[f"{d:.0%}", *[cell_text(by[(d, n)], metric) if (d, n) in by else "-" for n in lengths]]
            for d in depths]


def print_grid(console: object, report: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    depths, lengths = report["dataset"]["depths"], report["dataset"]["lengths"]
    for label, section in report["retrievers"].items():
        for metric in (NDCG, RECALL):
            n = section["cells"][0]["n"] if section["cells"] else 0
            table = Table(title=f"{escape(label)}: {metric} by depth x length ({n} queries per cell, 95% interval)",
                          title_justify="left")
            table.add_column("depth")
            for length in lengths:
                table.add_column(f"{length} tokens", justify="right")
            for row in table_rows(section, lengths, depths, metric):
                table.add_row(*row)
            console.print(table)  # type: ignore[attr-defined]
        psi = ", ".join(f"{k}: {'-' if v is None else f'{v:.3f}'}" for k, v in section["psi_by_length"].items())
        console.print(f"{escape(label)}: PSI over depth per length: {psi}", highlight=False)  # type: ignore[attr-defined]
        for t in section["paired"]:
            p = "-" if t["p_holm"] is None else f"{t['p_holm']:.3g}"
            diff = "-" if t["mean_difference"] is None else f"{t['mean_difference']:+.4f}"
            console.print(f"  {t['length']} tokens, depth {t['depth']:.0%} vs {t['reference_depth']:.0%}: "  # type: ignore[attr-defined]
                          f"mean score difference {diff}, n {t['n']}, Holm p {p}"
                          + (" (significant)" if t["significant"] else ""), highlight=False)


def plot_grid(report: dict, out_dir: Path) -> Path:
    """A heatmap of nDCG@10 (depth x length) per retriever; cells beyond the window hatched."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    depths, lengths = report["dataset"]["depths"], report["dataset"]["lengths"]
    runs = report["retrievers"]
    fig, axes = plt.subplots(1, len(runs), figsize=(1.4 * len(lengths) * len(runs) + 1.5, 0.5 * len(depths) + 1.8),
                             squeeze=False)
    for ax, (label, section) in zip(axes[0], runs.items()):
        by = {(c["depth"], c["length"]): c for c in section["cells"]}
        values = np.array([[by[(d, n)][NDCG]["value"] if (d, n) in by and by[(d, n)][NDCG]["value"] is not None
                            else np.nan for n in lengths] for d in depths])
        image = ax.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for i, d in enumerate(depths):
            for j, n in enumerate(lengths):
                cell = by.get((d, n))
                if cell is None:
                    continue
                beyond = cell["beyond_window"] and cell["beyond_window"] >= cell["n"]
                text = "-" if np.isnan(values[i, j]) else f"{values[i, j]:.2f}" + ("\nbeyond\nwindow" if beyond else "")
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="white" if np.nan_to_num(values[i, j]) < 0.6 else "black")
        ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:.0%}" for d in depths])
        ax.set_xlabel("document length (tokens)")
        ax.set_ylabel("evidence depth")
        ax.set_title(label, fontsize=9)
    fig.colorbar(image, ax=axes[0].tolist(), label="nDCG@10")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / GRID_FILE
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def check_grid(folder: Path) -> None:
    """EvalError unless every cell's set is there."""
    for cell in grid_cells(folder)["setting"].to_list():
        if not (Path(folder) / "settings" / cell / "queries.parquet").is_file():
            raise EvalError(f"{folder}: the grid cell {cell} has no settings/{cell}/ folder; rebuild the grid")
