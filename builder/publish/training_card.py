"""The card's section on a split build: split sizes, the leakage check, the mined negatives
and each train set's position shares, target and achieved (from the stages' figures)."""

from __future__ import annotations

from typing import Any

from builder.records.stage_record import StageRecord, stage_base_name


def _shares(shares: dict[str, float]) -> str:
    return " / ".join(f"{name} {value:.0%}" for name, value in shares.items())


def training_context(run_stages: list[StageRecord]) -> dict[str, Any] | None:
    """None for a build without `split_documents`."""
    split = next((st for st in run_stages if stage_base_name(st.stage) == "split_documents"), None)
    if split is None:
        return None
    pairs = next((st for st in run_stages if stage_base_name(st.stage) == "training_pairs"), None)
    figures = pairs.figures if pairs is not None else {}
    sets = [
        {
            "name": name,
            "size": s["size"],
            "target": _shares(s["target"]),
            "achieved": _shares(s["achieved"]["thirds"]),
            "lengths": _shares(s["achieved"].get("length_buckets", {})) or "-",
        }
        for name, s in figures.get("sets", {}).items()
    ]
    return {
        "sizes": split.figures.get("split_sizes", {}),
        "leakage": split.figures.get("leakage", {}),
        "near_duplicate_pairs": split.figures.get("near_duplicate_pairs"),
        "negatives": figures.get("negatives", {}),
        "left_out": figures.get("left_out", {}),
        "sets": sets,
    }
