"""`eval` on a depth x length grid (a `depth_grid` build): one retrieval task per cell.

Each cell's BEIR set (settings/<cell>/) is evaluated on its own, so its nDCG@10 and
Recall@100 (with n and the bootstrap interval eval computes) are plain retrieval figures.
Per length: PSI over the depths' nDCG@10 with its permutation null (each query's scores
shuffled among its depths), and the paired view: the retriever's score of a query's own
document at each depth against the same evidence, in the same padding, at the first
depth (paired t-test, scipy), Holm-corrected across the testable depths of that length
(statsmodels); each test line names the test, its raw p and its family's size. Lengths
are in the unit the build counted them in (stats.json's tokenizer: words or tokens). A
cell whose evidence the model cannot read (it starts past the tokens a dense model reads)
is named "beyond window".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from builder.evaluation.data import EvalData, EvalError, load_eval_data
from builder.evaluation.intervals import BootstrapSettings
from builder.evaluation.metrics import NDCG, RECALL
from builder.evaluation.multiple import apply_holm, p_text
from builder.evaluation.psi_null import NullSettings, psi_null_text, psi_with_null
from builder.evaluation.report import figure_text
from builder.evaluation.retrievers import RerankerFactory, RetrieverSpec
from builder.io.built_folder import GRID, BuiltFolder

if TYPE_CHECKING:
    from builder.backends.rerankers.neural import BiEncoderScorer

GRID_FILE = "grid_heatmap.png"
Log = Callable[[str], None]


def is_grid(folder: Path) -> bool:
    """A depth_grid build, as its manifest says (or, for an older folder, its files)."""
    return Path(folder).is_dir() and BuiltFolder.open(folder).kind == GRID


def grid_cells(folder: Path) -> pl.DataFrame:
    """setting, grid_depth, grid_length of every cell, by length then depth."""
    return BuiltFolder.open(folder).grid_cells()


def evaluate_grid(
    folder: Path,
    specs: list[RetrieverSpec],
    cache_dir: Path,
    batch_size: int = 32,
    rerankers: Mapping[str, RerankerFactory] | None = None,
    log: Log = lambda _: None,
    bootstrap: BootstrapSettings = BootstrapSettings(),
) -> dict:
    """The grid report (eval.json's content) for every retriever.

    Each cell is retrieved on its own (its own BM25 index, its own top 100), but a dense
    model is loaded once per retriever and encodes each distinct query and document text
    of the whole grid once, up front; a cell then gets only what the grid's figures use
    (overall nDCG@10 and Recall@100 with their intervals, the window check, each query's
    own-document score), not eval's whole report with its nulls. The PSI nulls over depth
    are taken per length, once, over the cells' per-query scores."""
    folder = Path(folder)
    cells = grid_cells(folder)
    depths = sorted(cells["grid_depth"].unique().to_list())
    lengths = sorted(cells["grid_length"].unique().to_list())
    built = BuiltFolder.open(folder)
    data = {cell: load_eval_data(built.setting(cell).root) for cell in cells["setting"].to_list()}
    source = dict(built.read("queries", ["query_id", "source_query_id"]).iter_rows())
    unit = grid_unit(folder)
    out = {
        "dataset": {
            "path": str(folder),
            "kind": "depth_grid",
            "depths": depths,
            "lengths": lengths,
            "cells": cells.height,
            "length_unit": unit,
        },
        "definitions": {
            "intervals": bootstrap.describe(),
            "paired": PAIRED_TEST + ": score of the query's own document at depth d minus at the "
            "first depth, same query and length; Holm-corrected across the depths of a "
            "length (statsmodels multipletests), testable depths only",
            "psi": "1 - min/max of nDCG@10 over the depths of a length",
            "psi_null": "depth labels shuffled among the depths of each query of the length (the "
            "same queries sit at every depth); one-sided permutation p",
        },
        "retrievers": {},
    }
    for spec in specs:
        encoders = _grid_encoders(spec, data, batch_size, log)
        cell_rows, own, ndcg = [], {}, {}
        for cell, depth, length in cells.iter_rows():
            cell_data = data[cell]
            log(f"{spec.label}: cell {cell}, {cell_data.queries.height} queries")
            row, ndcg[cell] = cell_figures(
                spec, cell_data, cache_dir / cell, batch_size, rerankers, bootstrap, encoders
            )
            cell_rows.append({"cell": cell, "depth": depth, "length": length, **row})
            own[cell] = own_scores(spec, cell_data, source, batch_size, rerankers, encoders.get(spec.label))
        out["retrievers"][spec.label] = {
            "cells": cell_rows,
            "psi_by_length": psi_by_length(cell_rows, lengths, ndcg, source, bootstrap),
            "paired": paired_tests(own, cells),
        }
    return out


PAIRED_TEST = "paired t-test (scipy.stats.ttest_rel)"


def _grid_encoders(
    spec: RetrieverSpec, data: Mapping[str, EvalData], batch_size: int, log: Log
) -> dict[str, BiEncoderScorer]:
    """One remembering bi-encoder per dense spec (the first stage of a rerank spec too),
    which has already encoded every distinct query and document text of the grid."""
    from builder.evaluation.dense import dense_scorer
    from builder.evaluation.retrievers import document_inputs

    dense = [s for s in (spec, spec.first) if s is not None and s.kind in ("st", "flag")]
    if not dense:
        return {}
    queries = list(dict.fromkeys(t for d in data.values() for t in d.queries["text"].to_list()))
    documents = list(dict.fromkeys(t for d in data.values() for t in document_inputs(d.corpus.frame())[0]))
    total = sum(d.corpus.height for d in data.values())
    out = {}
    for first in dense:
        encoder = dense_scorer(first, batch_size, remember=True)
        log(
            f"{first.label}: encoding the grid's {len(documents)} distinct documents (of {total} in its cells) "
            f"and {len(queries)} distinct queries once"
        )
        encoder.embed(documents)
        encoder.embed(queries, queries=True)
        out[first.label] = encoder
    return out


def cell_figures(
    spec: RetrieverSpec,
    data: EvalData,
    cache_dir: Path,
    batch_size: int,
    rerankers: Mapping[str, RerankerFactory] | None,
    bootstrap: BootstrapSettings,
    encoders: Mapping[str, BiEncoderScorer],
) -> tuple[dict, dict[str, float]]:
    """One cell's figures, as eval's own report of the cell gives them (n, nDCG@10 and
    Recall@100 with their intervals, the window check), and its per-query nDCG@10."""
    from builder.evaluation.evaluate import RunCache, retrieve, scores_of
    from builder.evaluation.figures import Figures

    retrieval, _ = retrieve(spec, data, RunCache(cache_dir, data.fingerprint), batch_size, rerankers, encoders)
    scores = scores_of(data, retrieval)
    figures = Figures(scores, [], bootstrap)
    overall = figures.overall()
    row = {
        "n": overall["n"],
        NDCG: overall[NDCG],
        RECALL: overall[RECALL],
        "beyond_window": figures.visibility()["beyond"]["n"],
        "max_length": retrieval.max_length,
    }
    return row, dict(zip(scores["query_id"].to_list(), scores[NDCG].fill_null(0.0).to_list()))


def grid_unit(folder: Path) -> str:
    """What the grid's lengths count, from the build's stats.json: `words` for the words
    tokenizer, `tokens (<tokenizer>)` for a model's, `tokens` where it is not recorded."""
    stats = BuiltFolder.open(folder).stats()
    stages = [s for s in stats.get("stages", []) if isinstance(s, dict) and "grid" in s]
    name = next((s.get("tokenizer") for s in stages if s.get("tokenizer")), None) or (
        stats.get("doc_lengths") or {}
    ).get("tokenizer")
    if not name:
        return "tokens"
    return "words" if name == "words" else f"tokens ({name})"


def own_scores(
    spec: RetrieverSpec,
    data: EvalData,
    source: Mapping[str, str],
    batch_size: int,
    rerankers: Mapping[str, RerankerFactory] | None,
    encoder: BiEncoderScorer | None = None,
) -> dict[str, float]:
    """source query id -> the retriever's score of the query's own document in this cell
    (a dense spec through `encoder`, which remembers the grid's vectors, where given)."""
    from builder.evaluation.probes import pair_scorer
    from builder.evaluation.retrievers import document_inputs

    rows = data.queries.select("query_id", "text", "doc_id").rows()
    documents = data.corpus.select({d for _, _, d in rows})
    inputs = dict(zip(documents["doc_id"], document_inputs(documents)[0]))
    score = encoder.score_pairs if encoder is not None else pair_scorer(spec, data, batch_size, rerankers)
    scores = score([(t, inputs[d]) for _, t, d in rows])
    return {source[q]: float(s) for (q, _, _), s in zip(rows, scores)}


def psi_by_length(
    cell_rows: list[dict],
    lengths: list[int],
    ndcg: Mapping[str, Mapping[str, float]],
    source: Mapping[str, str],
    bootstrap: BootstrapSettings,
) -> dict[str, dict]:
    """Per length: PSI over its depths' nDCG@10 with its permutation null (psi_null.py).

    Every depth of a length holds the same queries, so the null shuffles each query's
    scores among its depths (strata: the source query) and every depth takes part, whatever
    the number of queries per cell; `ndcg` is each cell's per-query nDCG@10 and `source`
    maps a cell's query id to its source query."""
    settings = NullSettings(bootstrap.permutations, bootstrap.seed, min_group=1, include_small=True)
    out: dict[str, dict] = {}
    for length in lengths:
        part = sorted((c["depth"], c["cell"]) for c in cell_rows if c["length"] == length)
        rows = [(k, source[q], v) for k, (_, cell) in enumerate(part) for q, v in ndcg[cell].items()]
        codes = np.array([k for k, _, _ in rows], dtype=np.int64)
        strata = np.unique([q for _, q, _ in rows], return_inverse=True)[1] if rows else np.zeros(0, np.int64)
        values = np.array([v for _, _, v in rows], dtype=float)
        null = psi_with_null(values, codes, [d for d, _ in part], settings, strata)
        out[str(length)] = {**null, "stratified_by": "query (its scores shuffled among the depths)"}
    return out


def psi_lines(section: dict) -> list[str]:
    """`512: 0.020 (null median ..., p ...; above the null median ...)` per length."""
    return [f"{length}: {psi_null_text(null)}" for length, null in section["psi_by_length"].items()]


def paired_tests(scores: dict[str, dict[str, float]], cells: pl.DataFrame) -> list[dict]:
    """Per length, each depth against the first, on the queries scored at both; Holm across
    the testable depths of the length (a depth with no spread in its differences has no p)."""
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
            tests.append(
                {
                    "length": length,
                    "depth": depth,
                    "reference_depth": reference_depth,
                    "test": PAIRED_TEST,
                    **paired_t(a, b),
                }
            )
        apply_holm(tests, f"depths of length {length}")
        for t in tests:
            t["significant"] = t["p_holm"] is not None and t["p_holm"] < 0.05
        out += tests
    return out


def paired_line(test: dict, unit: str) -> str:
    """One paired test: which test ran, the difference, n, raw p, Holm p and the family."""
    diff = "-" if test["mean_difference"] is None else f"{test['mean_difference']:+.4f}"
    why = "" if test["p"] is not None else " (no spread in the differences: no test)"
    return (
        f"{test['length']} {unit}, depth {test['depth']:.0%} vs {test['reference_depth']:.0%}: {test['test']}, "
        f"mean score difference {diff}, n {test['n']}, p {p_text(test['p'])}, Holm p {p_text(test['p_holm'])} "
        f"(family: {test['family_size']} testable depths of this length)"
        + why
        + (" (significant)" if test["significant"] else "")
    )


def cell_text(cell: dict, metric: str = NDCG) -> str:
    """`0.812 [0.700, 0.901]`, `1.000 (no spread)` where every resample gave the same value,
    marked `beyond window` where the model read none of the evidence (or how many of its
    queries it could not read)."""
    figure = cell[metric]
    if figure["value"] is None:
        return "-"
    text = figure_text(figure)
    if cell["beyond_window"] and cell["beyond_window"] >= cell["n"]:
        return text + " beyond window"
    if cell["beyond_window"]:
        text += f" ({cell['beyond_window']}/{cell['n']} beyond window)"
    return text


def table_rows(section: dict, lengths: list[int], depths: list[float], metric: str) -> list[list[str]]:
    """One row per depth: the depth, then each length's cell."""
    by = {(c["depth"], c["length"]): c for c in section["cells"]}
    return [[f"{d:.0%}", *[cell_text(by[(d, n)], metric) if (d, n) in by else "-" for n in lengths]] for d in depths]


def print_grid(console: object, report: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    depths, lengths = report["dataset"]["depths"], report["dataset"]["lengths"]
    unit = report["dataset"].get("length_unit", "tokens")
    for label, section in report["retrievers"].items():
        for metric in (NDCG, RECALL):
            n = section["cells"][0]["n"] if section["cells"] else 0
            table = Table(
                title=f"{escape(label)}: {metric} by depth x length ({n} queries per cell, 95% interval)",
                title_justify="left",
            )
            table.add_column("depth")
            for length in lengths:
                table.add_column(f"{length} {unit}", justify="right")
            for row in table_rows(section, lengths, depths, metric):
                table.add_row(*row)
            console.print(table)  # type: ignore[attr-defined]
        first, *rest = psi_lines(section) or ["-"]
        console.print(f"{escape(label)}: PSI over depth per length: {escape(first)}", highlight=False)  # type: ignore[attr-defined]
        for line in rest:
            console.print(f"  {escape(line)}", highlight=False)  # type: ignore[attr-defined]
        console.print(f"  ({unit}; {report['definitions']['psi_null']})", highlight=False)  # type: ignore[attr-defined]
        for t in section["paired"]:
            console.print(f"  {escape(paired_line(t, unit))}", highlight=False)  # type: ignore[attr-defined]


def plot_grid(report: dict, out_dir: Path) -> Path:
    """A heatmap of nDCG@10 (depth x length) per retriever; cells beyond the window hatched."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    depths, lengths = report["dataset"]["depths"], report["dataset"]["lengths"]
    runs = report["retrievers"]
    fig, axes = plt.subplots(
        1, len(runs), figsize=(1.4 * len(lengths) * len(runs) + 1.5, 0.5 * len(depths) + 1.8), squeeze=False
    )
    for ax, (label, section) in zip(axes[0], runs.items()):
        by = {(c["depth"], c["length"]): c for c in section["cells"]}
        values = np.array(
            [
                [
                    by[(d, n)][NDCG]["value"] if (d, n) in by and by[(d, n)][NDCG]["value"] is not None else np.nan
                    for n in lengths
                ]
                for d in depths
            ]
        )
        image = ax.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for i, d in enumerate(depths):
            for j, n in enumerate(lengths):
                cell = by.get((d, n))
                if cell is None:
                    continue
                beyond = cell["beyond_window"] and cell["beyond_window"] >= cell["n"]
                text = "-" if np.isnan(values[i, j]) else f"{values[i, j]:.2f}" + ("\nbeyond\nwindow" if beyond else "")
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if np.nan_to_num(values[i, j]) < 0.6 else "black",
                )
        ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:.0%}" for d in depths])
        ax.set_xlabel(f"document length ({report['dataset'].get('length_unit', 'tokens')})")
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
    built = BuiltFolder.open(folder)
    for cell in built.grid_cells()["setting"].to_list():
        if not built.setting(cell).has("queries"):
            raise EvalError(f"{folder}: the grid cell {cell} has no settings/{cell}/ folder; rebuild the grid")
