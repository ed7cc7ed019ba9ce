"""What the grid adds to the data card: its construction figures (where the padding comes
from, what chance scores) and `build-bench eval`'s figures on a depth_grid build, the
nDCG@10 table per retriever and the heatmap, as one marked part a later eval replaces.
Only a card build-bench wrote is touched."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builder.io.built_folder import CARD_FILE, card_is_ours
from builder.util.atomic import write_text_atomic


def card_section(report: dict, picture: str) -> str:
    """The card's marked part: the nDCG@10 table per retriever and the heatmap."""
    from builder.evaluation.grid import psi_lines, table_rows
    from builder.evaluation.metrics import NDCG

    depths, lengths = report["dataset"]["depths"], report["dataset"]["lengths"]
    lines = [
        "<!-- build-bench:grid-evaluation -->",
        "## Evaluation on the depth x length grid",
        "",
        "nDCG@10 per cell, with its 95% bootstrap interval; each cell is its own retrieval task (`settings/<cell>/`).",
        "",
    ]
    unit = report["dataset"].get("length_unit", "tokens")
    for label, section in report["retrievers"].items():
        lines += [
            f"**{label}**",
            "",
            "| depth | " + " | ".join(f"{n} {unit}" for n in lengths) + " |",
            "|---|" + "---|" * len(lengths),
        ]
        lines += ["| " + " | ".join(row) + " |" for row in table_rows(section, lengths, depths, NDCG)]
        lines += ["", f"PSI over depth per length ({unit}; {report['definitions']['psi_null']}):", ""]
        lines += [f"- {line}" for line in psi_lines(section)] + [""]
    lines += [f"![nDCG@10 by depth and length]({picture})", "", "<!-- /build-bench:grid-evaluation -->", ""]
    return "\n".join(lines)


def update_grid_card(folder: Path, report: dict, picture: str) -> Path | None:
    """Put the grid's table and heatmap into a card build-bench wrote (replacing an earlier one)."""
    if not card_is_ours(folder):
        return None
    path = Path(folder) / CARD_FILE
    text = re.sub(
        r"<!-- build-bench:grid-evaluation -->\n.*?<!-- /build-bench:grid-evaluation -->\n",
        "",
        path.read_text(encoding="utf-8"),
        flags=re.DOTALL,
    )
    at = re.search(r"^## Construction$", text, re.MULTILINE)
    section = card_section(report, picture)
    text = text[: at.start()] + section + "\n" + text[at.start() :] if at else text.rstrip("\n") + "\n\n" + section
    write_text_atomic(path, text)
    return path


def padding_fields(figures: Mapping[str, Any]) -> dict[str, str]:
    """A depth_grid step's judge, the padding it left out by reason (most first), and what
    its cells are made of: where the padding comes from, distractors, chance, depth error."""
    grid = figures.get("grid")
    if not grid:
        return {"padding_judge": "", "padding_excluded": "", "grid_cells": ""}
    left_out = sorted(grid.get("padding_excluded", {}).items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "padding_judge": str(grid.get("judge")),
        "padding_excluded": ", ".join(f"{r} {n}" for r, n in left_out) or "none",
        "grid_cells": _grid_cells(grid),
    }


def _grid_cells(grid: dict[str, Any]) -> str:
    pool, share = grid.get("padding_pool"), grid.get("padding_share") or {}
    if not pool:  # a build from before the grid reported its pool
        return ""
    shares = ", ".join(f"{d} {v:.0%}" for d, v in share.items()) or "none"
    distractors = grid["distractors"]
    short = ", ".join(f"{r} {n}" for r, n in distractors["short"].items()) or "none"
    chance = "; ".join(
        f"{n}: {c['documents']} documents, nDCG@10 {c['ndcg@10']:.3f}, Recall@100 {c['recall@100']:.3f}"
        for n, c in grid["chance"].items()
    )
    depth = grid.get("largest_depth_gap")
    return (
        f"padding from {pool['from']} ({pool['documents']} documents; padding tokens by domain: {shares}); "
        f"{distractors['asked']} distractors asked per cell (short: {short}); chance per length: "
        f"{chance or 'no cells'}; largest depth error {'-' if depth is None else f'{depth:.3f}'}"
    )
