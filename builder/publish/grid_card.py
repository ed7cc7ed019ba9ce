"""`build-bench eval`'s figures on a depth_grid build in the data card: the nDCG@10 table
per retriever and the heatmap, as one marked part a later eval replaces. Only a card
build-bench wrote is touched."""

from __future__ import annotations

import re
from pathlib import Path

from builder.evaluation.grid import psi_lines, table_rows
from builder.evaluation.metrics import NDCG
from builder.publish.eval_card import card_is_ours
from builder.publish.outputs import CARD_FILE
from builder.util.atomic import write_text_atomic


def card_section(report: dict, picture: str) -> str:
    """The card's marked part: the nDCG@10 table per retriever and the heatmap."""
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
