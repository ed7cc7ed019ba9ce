"""An independent check of a depth grid, one whole cell at a time: no document of a cell
other than a query's own holds that query's evidence or span (exactly, or by rapidfuzz's
partial_ratio), and no paragraph of one answers the query by the recipe's padding judge."""

from __future__ import annotations

import re
from collections.abc import Sequence

import polars as pl
from rapidfuzz import fuzz

from builder.stages.grid.judges import Ask, PaddingJudge

PARAGRAPH = re.compile(r"\n[ \t]*\n")


def _flat(text: str) -> str:
    return " ".join(text.split())


def leaks(corpus: pl.DataFrame, queries: pl.DataFrame, judge: PaddingJudge | None, fuzzy: float) -> list[str]:
    """What breaks a cell as a retrieval task, one line per (query, other document) found;
    empty when every cell is clean. `judge` None checks the text only."""
    found: list[str] = []
    for cell in sorted(queries["setting"].unique().to_list()):
        docs = dict(corpus.filter(pl.col("setting") == cell).select("doc_id", "text").iter_rows())
        rows = list(queries.filter(pl.col("setting") == cell).iter_rows(named=True))
        own_evidence = {r["doc_id"]: (r["evidence_start"], r["evidence_end"]) for r in rows}
        for row in rows:
            own = docs[row["doc_id"]]
            evidence = own[row["evidence_start"] : row["evidence_end"]]
            span = own[row["spans"][0]["start"] : row["spans"][0]["end"]]
            for doc_id, text in docs.items():
                if doc_id == row["doc_id"]:
                    continue
                flat = _flat(text)
                where = f"{cell}: {row['query_id']} in {doc_id}"
                if _flat(evidence) in flat or _flat(span) in flat:
                    found.append(f"{where}: holds the evidence or span")
                elif fuzz.partial_ratio(_flat(evidence), flat) >= fuzzy:
                    found.append(f"{where}: holds a near copy of the evidence")
                if judge is not None:
                    paragraphs = _padding_paragraphs(text, own_evidence.get(doc_id))
                    (verdicts,) = judge.judge([Ask(row["text"], _flat(evidence), tuple(paragraphs))])
                    found += [f"{where}: judged to answer ({v}): {p[:60]!r}" for p, v in zip(paragraphs, verdicts) if v]
    return found


def _padding_paragraphs(text: str, evidence: tuple[int, int] | None) -> Sequence[str]:
    """A document's paragraphs, its own query's evidence cut out (a distractor has none)."""
    if evidence is not None:
        text = text[: evidence[0]] + "\n\n" + text[evidence[1] :]
    return [_flat(p) for p in PARAGRAPH.split(text) if p.strip()]
