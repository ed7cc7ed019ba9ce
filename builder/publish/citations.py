"""The papers whose procedures the stages implement, for the card's citation block.

Titles and authors are as the papers (or, for the FineWeb-PosQ study, PosIR's
reference list) give them. A stage class may also declare `papers = ("posir", ...)`,
which takes precedence over the table below.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Paper:
    key: str
    title: str
    authors: tuple[str, ...]
    venue: str
    year: int
    note: str = ""
    url: str = ""

    def bibtex(self) -> str:
        kind = "misc" if self.venue.startswith(("arXiv", "Under review")) else "inproceedings"
        field = "howpublished" if kind == "misc" else "booktitle"
        lines = [
            f"@{kind}{{{self.key},",
            f"  title = {{{self.title}}},",
            f"  author = {{{' and '.join(self.authors)}}},",
            f"  {field} = {{{self.venue}}},",
            f"  year = {{{self.year}}},",
        ]
        if self.url:
            lines.append(f"  url = {{{self.url}}},")
        if self.note:
            lines.append(f"  note = {{{self.note}}},")
        return "\n".join(lines) + "\n}"


PAPERS: dict[str, Paper] = {
    "posir": Paper(
        "zeng2026posir",
        "PosIR: Position-Aware Heterogeneous Information Retrieval Benchmark",
        ("Zeng, Ziyang", "Zhang, Dun", "Yan, Yu", "Sun, Xu", "Zhou, Yudong", "Yang, Yuqing"),
        "arXiv preprint arXiv:2601.08363",
        2026,
        url="https://arxiv.org/abs/2601.08363",
    ),
    "posq": Paper(
        "zeng2025position",
        "An Empirical Study of Position Bias in Modern Information Retrieval",
        ("Zeng, Z.", "Zhang, D.", "Li, J.", "Zou, P.", "Zhou, Y.", "Yang, Y."),
        "Findings of the Association for Computational Linguistics: EMNLP 2025",
        2025,
        note="SQuAD-PosQ and FineWeb-PosQ; pages 5069--5081",
    ),
    "farrelevant": Paper(
        "farrelevant",
        "Positional Bias in Long-Document Ranking: Impact, Assessment, and Mitigation",
        ("Anonymous",),
        "Under review (anonymous ACL submission)",
        2025,
        note="MS MARCO FarRelevant; authors withheld in the reviewed version",
    ),
    "colder": Paper(
        "fayyaz2025collapse",
        "Collapse of Dense Retrievers: Short, Early, and Literal Biases Outranking Factual Evidence",
        ("Fayyaz, Mohsen", "Modarressi, Ali", "Schuetze, Hinrich", "Peng, Nanyun"),
        "arXiv preprint arXiv:2503.05037",
        2025,
        url="https://arxiv.org/abs/2503.05037",
    ),
}

# Stage name -> papers whose procedure it follows. Stages not listed here (and without
# a `papers` attribute) cite nothing.
STAGE_PAPERS: dict[str, tuple[str, ...]] = {
    "sample_by_length": ("posir",),
    "generate_queries": ("posir",),
    "localize_spans": ("posir",),
    "span_contrast": ("posir",),
    "summarize": ("posq",),
    "segment_agreement": ("posq",),
    "from_qa": ("posq",),
    "far_relevant": ("farrelevant",),
    "shuffle_debias": ("farrelevant",),
    "position_probes": ("colder",),
}


# A stage whose `mode` switches between papers' procedures.
MODE_PAPERS: dict[tuple[str, str], tuple[str, ...]] = {
    ("generate_queries", "chunked"): ("posq",),
}


def papers_for(stages: Iterable[tuple[str, dict[str, Any]]]) -> list[Paper]:
    """Papers behind (stage name, params) pairs, each once, in the order first used."""
    from builder.stages import STAGES

    keys: list[str] = []
    for name, params in stages:
        declared = getattr(STAGES.get(name), "papers", None)
        by_mode = MODE_PAPERS.get((name, str(params.get("mode"))))
        for key in declared or by_mode or STAGE_PAPERS.get(name, ()):
            if key in PAPERS and key not in keys:
                keys.append(key)
    return [PAPERS[k] for k in keys]
