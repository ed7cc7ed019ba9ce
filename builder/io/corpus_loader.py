"""Turn source rows into corpus rows; bad rows become drops with reasons."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from builder.io.jsonl import has_lone_surrogate, id_problem
from builder.io.sources import JsonlSource, Located, SourceError, _SourceBase, iter_rows, source_name


@dataclass
class _Collector:
    limit: int | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    drops: list[tuple[str, str]] = field(default_factory=list)
    seen_ids: set[str] = field(default_factory=set)
    seen_texts: set[int] = field(default_factory=set)
    # Mapped input fields no row has shown yet, and the columns seen while any is missing.
    unseen: set[str] = field(default_factory=set)
    columns: set[str] = field(default_factory=set)

    def full(self, kept_before: int) -> bool:
        return self.limit is not None and len(self.rows) - kept_before >= self.limit


def _mapping(spec: _SourceBase) -> dict[str, str]:
    return {k: v for k, v in spec.fields.model_dump().items() if v is not None}


def _check_fields(spec: _SourceBase, out: _Collector) -> None:
    """A mapped field that no row has is a recipe mistake, not a reason to drop every row."""
    if not out.unseen:
        return
    mapping = _mapping(spec)
    missing = ", ".join(f"{k} → {v!r}" for k, v in mapping.items() if v in out.unseen)
    wanted = ", ".join(f"{k} → {v!r}" for k, v in mapping.items())
    found = ", ".join(repr(c) for c in sorted(out.columns)[:30]) or "none"
    raise SourceError(
        f"source {source_name(spec)}: no row has {missing} (field mapping: {wanted}); "
        f"columns found: {found}. Map them with `fields:` in the source."
    )


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
    if has_lone_surrogate(text):
        return "invalid_unicode"
    return None


def _meta(spec: _SourceBase, row: dict[str, Any]) -> dict[str, str]:
    f = spec.fields
    return {
        "title": str(row.get(f.title) or "") if f.title else "",
        "lang": str(row.get(f.lang) or spec.lang) if f.lang else spec.lang,
        "domain": str(row.get(f.domain) or spec.domain) if f.domain else spec.domain,
    }


def _add_row(spec: _SourceBase, row: dict[str, Any], n: int, where: str, out: _Collector) -> None:
    f = spec.fields
    raw_id = row.get(f.id) if f.id else str(n)
    bad_id = id_problem(raw_id)
    if bad_id is not None:
        # The id itself is unusable as a drop id; say where the row is instead.
        out.drops.append((f"{spec.id_prefix}{where}", bad_id))
        return
    meta = _meta(spec, row)
    bad_meta = "invalid_unicode" if any(map(has_lone_surrogate, meta.values())) else None
    for doc_id, text in _text_items(spec, row.get(f.text), f"{spec.id_prefix}{raw_id}"):
        reason = bad_meta or _check_text(text)
        if reason is None and doc_id in out.seen_ids:
            reason = "duplicate_id"
        if reason is None and hash(text) in out.seen_texts:
            reason = "duplicate_text"
        if reason is not None:
            out.drops.append((doc_id, reason))
            continue
        out.seen_ids.add(doc_id)
        out.seen_texts.add(hash(text))
        out.rows.append({"doc_id": doc_id, "text": text, **meta})


def _collect(spec: _SourceBase, rows: Iterable[Located], out: _Collector) -> None:
    kept_before = len(out.rows)
    # Every row of a table-backed source has the same columns; JSON lines may differ.
    same_columns = not isinstance(spec, JsonlSource)
    out.unseen = set(_mapping(spec).values())
    objects = 0
    for n, (where, row) in enumerate(rows):
        if out.full(kept_before):
            return
        if isinstance(row, str):
            out.drops.append((f"{spec.id_prefix}{where}", row))
            continue
        objects += 1
        if out.unseen:
            out.unseen.difference_update(row)
            out.columns.update(row)
            if same_columns:
                _check_fields(spec, out)
        _add_row(spec, row, n, where, out)
    if objects:
        _check_fields(spec, out)


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
