"""PNG plots of the statistics, drawn with matplotlib's Agg canvas.

Figures are built with `matplotlib.figure.Figure` rather than pyplot, so no global
backend or figure state is touched (safe in threads and inside other programs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PLOT_DIR = "plots"
POSITION = "position_histogram.png"
LENGTH = "length_histogram.png"
HEATMAP = "position_by_length.png"


def write_plots(stats: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Draw every plot the data allows into `folder/plots/`.

    Returns {"files": {name: path relative to folder}, "skipped": {name: why}}.
    """
    out = Path(folder) / PLOT_DIR
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for name, draw in ((POSITION, _position), (LENGTH, _length), (HEATMAP, _heatmap)):
        target = out / name
        why = draw(stats, target)
        if why is None:
            files[name] = f"{PLOT_DIR}/{name}"
        else:
            target.unlink(missing_ok=True)  # an old plot would contradict the new stats
            skipped[name] = why
    return {"files": files, "skipped": skipped}


def _figure(width: float = 7.0, height: float = 3.6) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # Fixed margins: an automatic layout engine costs more time than the drawing itself.
    fig = Figure(figsize=(width, height), dpi=110)
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.16, top=0.9)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    fig.savefig(tmp, format="png")
    tmp.replace(target)


def _position(stats: dict[str, Any], target: Path) -> str | None:
    pos = stats.get("positions") or {}
    if not pos.get("available"):
        return "no query carries a span position yet"
    bins = pos["bins"]
    n = len(bins)
    fig = _figure()
    ax = fig.add_subplot()
    ax.bar([(k + 0.5) / n for k in range(n)], bins, width=0.9 / n, color="#4C72B0")
    ax.set_xlim(0, 1)
    ax.set_xlabel("relative position of the evidence in its document")
    ax.set_ylabel("queries")
    ax.set_title(f"Evidence position ({n} equal-width bins, {pos['n_queries']} queries)")
    _save(fig, target)
    return None


def _length(stats: dict[str, Any], target: Path) -> str | None:
    lengths = stats.get("doc_lengths") or {}
    buckets = lengths.get("buckets") or []
    if not buckets:
        return "the corpus is empty"
    size = lengths["bucket_size"]
    fig = _figure()
    ax = fig.add_subplot()
    ax.bar(
        [k * size + size / 2 for k in range(len(buckets))],
        [b["docs"] for b in buckets],
        width=size * 0.9,
        color="#55A868",
    )
    unit = f"tokens ({lengths['tokenizer']})" if lengths.get("tokenizer") else "tokens"
    ax.set_xlabel(f"document length, {unit}")
    ax.set_ylabel("documents")
    ax.set_title(f"Document length ({size}-token buckets)")
    _save(fig, target)
    return None


def _heatmap(stats: dict[str, Any], target: Path) -> str | None:
    grid = stats.get("position_by_length")
    if not grid:
        return "no query has both a span position and a length bucket"
    matrix = grid["matrix"]
    n = grid["n_bins"]
    fig = _figure(height=3.0)
    ax = fig.add_subplot()
    image = ax.imshow(matrix, aspect="auto", cmap="viridis", extent=(0, 1, len(matrix), 0))
    ax.set_yticks([i + 0.5 for i in range(len(matrix))], grid["rows"])
    ax.set_xlabel("relative position of the evidence")
    ax.set_ylabel("document length bucket")
    ax.set_title(f"Queries by position ({n} bins) and document length")
    fig.colorbar(image, ax=ax, label="queries")
    _save(fig, target)
    return None
