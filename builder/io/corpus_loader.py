"""Turn source rows into corpus rows; bad rows become drops with reasons."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from builder.io.sources import _SourceBase, iter_rows


@dataclass
class _Collector:
    limit: int | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    drops: list[tuple[str, str]] = field(default_factory=list)
    seen_ids: set[str] = field(default_factory=set)
    seen_texts: set[int] = field(default_factory=set)

    def full(self, kept_before: int) -> bool:
        return self.limit is not None and len(self.rows) - kept_before >= self.limit


def _text_items(spec: _SourceBase, raw: Any, row_id: str) -> list[tuple[str, Any]]:
    if spec.explode_text and isinstance(raw, list):
        return [(f"{row_id}-{k}", item) for k, item in enumerate(raw)]
    return [(row_id, raw)]


def _check_text(text: Any) -> str | None:
    if text is None:
        return "missing_text"
    if not isinstance(text, str):
        return "text_not_string"
    if not text.strip():
        return "empty_text"
    return None


def _add_row(spec: _SourceBase, row: dict[str, Any], n: int, out: _Collector) -> None:
    f = spec.fields
    raw_id = row.get(f.id) if f.id else str(n)
    if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
        out.drops.append((f"{spec.id_prefix}row:{n}", "missing_id"))
        return
    for doc_id, text in _text_items(spec, row.get(f.text), f"{spec.id_prefix}{raw_id}"):
        reason = _check_text(text)
        if reason is None and doc_id in out.seen_ids:
            reason = "duplicate_id"
        if reason is None and hash(text) in out.seen_texts:
            reason = "duplicate_text"
        if reason is not None:
            out.drops.append((doc_id, reason))
            continue
        out.seen_ids.add(doc_id)
        out.seen_texts.add(hash(text))
        out.rows.append({
            "doc_id": doc_id,
            "title": str(row.get(f.title) or "") if f.title else "",
            "text": text,
            "lang": str(row.get(f.lang) or spec.lang) if f.lang else spec.lang,
            "domain": str(row.get(f.domain) or spec.domain) if f.domain else spec.domain,
        })


def _collect(spec: _SourceBase, rows: Iterable[dict[str, Any] | str], out: _Collector) -> None:
    kept_before = len(out.rows)
    for n, row in enumerate(rows):
        if out.full(kept_before):
            break
        if isinstance(row, str):
            out.drops.append((f"{spec.id_prefix}line:{n + 1}", row))
            continue
        _add_row(spec, row, n, out)


def load_sources(
    specs: Sequence[_SourceBase], base_dir: Path | None, limit: int | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Read every source; returns (corpus without n_tokens, drops as id/reason)."""
    corpus_parts: list[pl.DataFrame] = []
    drops: list[tuple[str, str]] = []
    shared = _Collector(limit=None)
    for spec in specs:
        cap = min(x for x in (spec.limit, limit) if x is not None) if (spec.limit or limit) else None
        out = _Collector(limit=cap, seen_ids=shared.seen_ids, seen_texts=shared.seen_texts)
        _collect(spec, iter_rows(spec, base_dir), out)
        corpus_parts.append(pl.DataFrame(out.rows, schema=_CORPUS_IN))
        drops.extend(out.drops)
    corpus = pl.concat(corpus_parts) if corpus_parts else pl.DataFrame(schema=_CORPUS_IN)
    drop_frame = pl.DataFrame(drops, schema={"id": pl.Utf8, "reason": pl.Utf8}, orient="row")
    return corpus, drop_frame


_CORPUS_IN = {"doc_id": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8, "lang": pl.Utf8, "domain": pl.Utf8}
