"""Turn source rows into corpus rows; bad rows become drops with reasons.

`iter_documents` is the one reading loop: it yields every kept document and every drop in
source order, holding only ids and a digest per text, so a caller can stream a corpus of
any size. `load_sources` collects it into tables for corpora that fit in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from builder.io.files.read import iter_files
from builder.io.jsonl import has_lone_surrogate, id_problem
from builder.io.sources import FilesSource, JsonlSource, Located, SourceError, _SourceBase, iter_rows, source_name
from builder.util.stable import content_id, text_digest


class Doc(NamedTuple):
    doc_id: str
    title: str
    text: str
    lang: str
    domain: str


class Dropped(NamedTuple):
    id: str
    reason: str


@dataclass
class _Seen:
    """What duplicates are judged against, across all sources: ids, and a digest of each
    kept text (16 bytes, not the text, so memory does not grow with document length)."""

    ids: set[str] = field(default_factory=set)
    texts: set[bytes] = field(default_factory=set)


@dataclass
class _Fields:
    """Mapped input fields no row has shown yet, and the columns seen while any is missing."""

    unseen: set[str]
    columns: set[str] = field(default_factory=set)


def _mapping(spec: _SourceBase) -> dict[str, str]:
    return {k: v for k, v in spec.fields.model_dump().items() if v is not None}


def _check_fields(spec: _SourceBase, fields: _Fields) -> None:
    """A mapped field that no row has is a recipe mistake, not a reason to drop every row."""
    if not fields.unseen:
        return
    mapping = _mapping(spec)
    missing = ", ".join(f"{k} → {v!r}" for k, v in mapping.items() if v in fields.unseen)
    wanted = ", ".join(f"{k} → {v!r}" for k, v in mapping.items())
    found = ", ".join(repr(c) for c in sorted(fields.columns)[:30]) or "none"
    raise SourceError(
        f"source {source_name(spec)}: no row has {missing} (field mapping: {wanted}); "
        f"columns found: {found}. Map them with `fields:` in the source."
    )


def _text_items(spec: _SourceBase, raw: Any, row_id: str | None, where: str) -> list[tuple[str, Any]]:
    """(doc id, text) per document of a row; without a source id, a text names itself by its
    hash (a text that cannot be hashed is named by its place, for its drop)."""
    texts = list(enumerate(raw)) if spec.explode_text and isinstance(raw, list) else [(-1, raw)]
    out = []
    for k, text in texts:
        if row_id is not None:
            out.append((row_id if k < 0 else f"{row_id}-{k}", text))
        elif _check_text(text) is None:
            out.append((f"{spec.id_prefix}{content_id(text_digest(text))}", text))
        else:
            out.append((f"{spec.id_prefix}{where}" if k < 0 else f"{spec.id_prefix}{where}-{k}", text))
    return out


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


def _row_docs(spec: _SourceBase, row: dict[str, Any], where: str, seen: _Seen) -> Iterator[Doc | Dropped]:
    f = spec.fields
    row_id = None
    if f.id:
        raw_id = row.get(f.id)
        bad_id = id_problem(raw_id)
        if bad_id is not None:
            # The id itself is unusable as a drop id; say where the row is instead.
            yield Dropped(f"{spec.id_prefix}{where}", bad_id)
            return
        row_id = f"{spec.id_prefix}{raw_id}"
    meta = _meta(spec, row)
    bad_meta = "invalid_unicode" if any(map(has_lone_surrogate, meta.values())) else None
    for doc_id, text in _text_items(spec, row.get(f.text), row_id, where):
        reason = bad_meta or _check_text(text)
        if reason is None and doc_id in seen.ids:
            reason = "duplicate_id"
        digest = text_digest(text) if reason is None else b""
        if reason is None and digest in seen.texts:
            reason = "duplicate_text"
        if reason is not None:
            yield Dropped(doc_id, reason)
            continue
        seen.ids.add(doc_id)
        seen.texts.add(digest)
        yield Doc(doc_id, meta["title"], text, meta["lang"], meta["domain"])


def _source_docs(spec: _SourceBase, rows: Iterable[Located], cap: int | None, seen: _Seen) -> Iterator[Doc | Dropped]:
    # Every row of a table-backed source has the same columns; JSON lines may differ.
    same_columns = not isinstance(spec, JsonlSource)
    fields = _Fields(unseen=set(_mapping(spec).values()))
    objects = kept = 0
    for where, row in rows:
        if cap is not None and kept >= cap:
            return
        if isinstance(row, str):
            yield Dropped(f"{spec.id_prefix}{where}", row)
            continue
        objects += 1
        if fields.unseen:
            fields.unseen.difference_update(row)
            fields.columns.update(row)
            if same_columns:
                _check_fields(spec, fields)
        for item in _row_docs(spec, row, where, seen):
            kept += isinstance(item, Doc)
            yield item
    if objects:
        _check_fields(spec, fields)


def iter_documents(
    specs: Sequence[_SourceBase], base_dir: Path | None, limit: int | None = None
) -> Iterator[Doc | Dropped]:
    """Every source in turn, each capped at the smaller of its own `limit` and `limit`."""
    seen = _Seen()
    for spec in specs:
        caps = [x for x in (spec.limit, limit) if x is not None]
        yield from _source_docs(spec, source_rows(spec, base_dir), min(caps) if caps else None, seen)


def source_rows(spec: _SourceBase, base_dir: Path | None) -> Iterator[Located]:
    """A source's rows: a files source's converted files, any other source's records."""
    return iter_files(spec, base_dir) if isinstance(spec, FilesSource) else iter_rows(spec, base_dir)


def load_sources(
    specs: Sequence[_SourceBase], base_dir: Path | None, limit: int | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Read every source; returns (corpus without n_tokens, drops as id/reason)."""
    rows: list[Doc] = []
    drops: list[Dropped] = []
    for item in iter_documents(specs, base_dir, limit):
        if isinstance(item, Doc):
            rows.append(item)
        else:
            drops.append(item)
    corpus = pl.DataFrame(rows, schema=CORPUS_IN, orient="row")
    drop_frame = pl.DataFrame(drops, schema={"id": pl.Utf8, "reason": pl.Utf8}, orient="row")
    return corpus, drop_frame


CORPUS_IN = {"doc_id": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8, "lang": pl.Utf8, "domain": pl.Utf8}
