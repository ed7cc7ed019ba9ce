"""The queries each stage is expected to keep, for `build-bench plan`: without them every
stage after generation would be planned on all the questions generated (an upper bound).

A stage's yield is the share of the queries it handled (its input plus those it made)
that it kept, as stats.json records it. Where the run folder holds a previous run of the
same recipe, its finished stages' measured yields are used (and false_negatives' measured
share of queries whose candidates reached the judges); else FineWeb-PosQ's funnel (paper
000, appendix A.2) for the stages it reports; else no loss.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.stages.base import Stage

# FineWeb-PosQ's funnel (paper 000, appendix A.2): 265,865 questions generated; 117,008
# kept by the three rerankers' segment agreement; balanced down to 3 x 13,061 = 39,183;
# 26,356 kept by DeepSeek's segment grading; 25,775 left after false-negative removal.
PAPER_FUNNEL = {
    ("segment_agreement", "rerankers"): 117_008 / 265_865,
    ("balance", ""): 39_183 / 117_008,
    ("segment_agreement", "llm"): 26_356 / 39_183,
    ("false_negatives", "llm"): 25_775 / 26_356,
}


@dataclass(frozen=True)
class Expected:
    """What plan assumes of one stage: the share of queries it keeps, the candidate pairs per
    query its judges see (false_negatives only), and where the figures come from."""

    yield_: float | None
    judged_per_query: float | None
    source: str


def _variant(stage: Stage) -> str:
    if stage.name == "balance":
        return ""
    return "llm" if stage.models_used() else "rerankers"


def _measured(run_dir: Path | None) -> dict[str, dict[str, Any]]:
    """label -> the stats a finished stage of a previous run recorded (its checkpoint's)."""
    if run_dir is None or not run_dir.is_dir():
        return {}
    out = {}
    for stats in sorted(run_dir.glob("[0-9][0-9]_*/stats.json")):
        try:
            record = json.loads(stats.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            out[stats.parent.name] = record
    return out


def _yield(record: dict[str, Any]) -> float | None:
    handled = (record.get("queries_in") or 0) + (record.get("queries_added") or 0)
    out = record.get("queries_out")
    return out / handled if handled and isinstance(out, int) else None


def expected_yields(stages: list[tuple[str, Stage]], run_dir: Path | None) -> dict[str, Expected]:
    """Per stage label: what plan assumes it keeps (absent: no loss assumed)."""
    measured = _measured(run_dir)
    out: dict[str, Expected] = {}
    for label, stage in stages:
        record = measured.get(label)
        if record is not None and record.get("stage") in (None, label) and _yield(record) is not None:
            judged = None
            if stage.name == "false_negatives" and record.get("queries_in"):
                judged = (record.get("false_negative_candidates") or 0) / record["queries_in"]
            out[label] = Expected(_yield(record), judged, f"measured in {run_dir}")
            continue
        paper = PAPER_FUNNEL.get((stage.name, _variant(stage)))
        if paper is not None:
            out[label] = Expected(paper, None, "FineWeb-PosQ's funnel")
    return out
