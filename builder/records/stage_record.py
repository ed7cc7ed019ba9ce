"""What one stage did: the record the runner keeps per stage, checkpoints as stats.json,
and the run summary, stats.json and the data card report.

It serialises to the flat JSON object earlier versions wrote (the figures a stage
reports itself sit beside the counts), and reads those objects back, so old
checkpoints and built folders stay readable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from builder.textutil.positions import REGIONS

# Serialised in this order; `figures` spreads between `prompts` and `llm_transport_failures`.
_HEAD = (
    "stage",
    "docs_in",
    "docs_out",
    "docs_added",
    "docs_dropped",
    "queries_in",
    "queries_out",
    "queries_added",
    "queries_dropped",
    "dropped",
    "seconds",
    "tokenizer",
    "llm",
    "prompts",
)
_TAIL = ("llm_transport_failures",)


class StageRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stage: str  # the label, e.g. "02_generate_queries"; "00_load" for reading the sources
    docs_in: int | None = None
    docs_out: int | None = None
    docs_added: int | None = None  # rows the stage made, those it dropped again included
    docs_dropped: int | None = None  # so that in + added = out + dropped
    queries_in: int | None = None
    queries_out: int | None = None
    queries_added: int | None = None
    queries_dropped: int | None = None
    dropped: dict[str, int] = Field(default_factory=dict)  # rows removed, per reason
    seconds: float | None = None
    tokenizer: str | None = None  # the load step: what counted document tokens
    llm: dict[str, Any] | None = None  # the stage's share of LLM usage (LLMUsage fields)
    prompts: dict[str, str] | None = None  # prompt name -> sha256 of the template
    figures: dict[str, Any] = Field(default_factory=dict)  # extra figures the stage reports
    llm_transport_failures: int | None = None  # requests lost to an outage: the stage is unfinished
    resumed: bool = False  # loaded from a checkpoint instead of run
    warnings: list[str] = Field(default_factory=list)  # what the stage itself warned about

    @property
    def n_dropped(self) -> int:
        return sum(self.dropped.values())

    @property
    def kept_by_third(self) -> dict[str, Any] | None:
        """Queries in and kept per position third, where a QC stage recorded them."""
        return self.figures.get("kept_by_third")

    def to_json(self) -> dict[str, Any]:
        """The flat object of stats.json: unset fields left out, figures beside the counts."""
        out = {k: getattr(self, k) for k in _HEAD if getattr(self, k) is not None}
        out.update(self.figures)
        out.update({k: getattr(self, k) for k in _TAIL if getattr(self, k) is not None})
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.resumed:
            out["resumed"] = True
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | StageRecord) -> StageRecord:
        """Read a record as `to_json` (or an earlier version) wrote it."""
        if isinstance(data, StageRecord):
            return data
        known = {*_HEAD, *_TAIL, "resumed", "warnings"}
        fields = {k: v for k, v in data.items() if k in known}
        fields["figures"] = {k: v for k, v in data.items() if k not in known}
        return cls.model_validate(fields)


def stage_base_name(label: str) -> str:
    """`03_localize_spans` -> `localize_spans`."""
    head, _, rest = label.partition("_")
    return rest if head.isdigit() and rest else label


def format_kept_by_third(kept: dict[str, dict[str, Any]] | None) -> str:
    """`beginning 6/6 (100%) · middle 6/6 (100%) · end 0/6 (0%)`; empty when not recorded."""
    if not kept:
        return ""
    cells = []
    for third in REGIONS:
        row = kept.get(third) or {}
        if row.get("in"):
            cells.append(f"{third} {row['kept']}/{row['in']} ({round(100 * row['kept'] / row['in'])}%)")
    return " · ".join(cells)
