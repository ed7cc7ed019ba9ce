"""What a worker does for the load step, given only picklable arguments.

`count_block` counts tokens and words of texts the driver read. `scan_shard` reads a
shard of a file source itself and checks each row as far as a row can be judged alone
(id, text, metadata); it sends back, per document, the counts, the metadata, a digest of
the text and where its row sits, never the text. Duplicates, caps and the choice of
sample need the whole stream, so the driver makes them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import polars as pl

from builder.backends.tokenizers import TokenCounter, TokenizerConfig, make_counter
from builder.io.corpus_loader import _check_text, _mapping, _meta
from builder.io.jsonl import has_lone_surrogate, id_problem
from builder.io.shards import Shard, read_shard
from builder.io.sources import SourceError, _SourceBase
from builder.stages.sample_by_length import word_count
from builder.util.stable import text_digest

_COUNTERS: dict[str, TokenCounter] = {}


class ScannedDoc(NamedTuple):
    item: int  # index in an exploded text list; -1 for a row with one text
    reason: str | None  # why the row alone rules it out
    title: str
    lang: str
    domain: str
    digest: bytes
    n_tokens: int
    words: int


class ScannedRow(NamedTuple):
    at: int  # jsonl: physical line within the shard (1-based); parquet: row number
    position: int  # where to read the row back: byte offset or row number
    unreadable: str | None  # the line is not a row: malformed_json, invalid_utf8, ...
    bad_id: str | None  # the row's id is unusable: missing_id, bad_id, ...
    row_id: str | None  # prefixed id; None when the source numbers its rows
    missing: tuple[str, ...]  # mapped input fields the row lacks
    docs: list[ScannedDoc]


class ShardScan(NamedTuple):
    rows: list[ScannedRow]
    lines: int  # physical lines the shard spans (jsonl)
    columns: list[str]  # every column seen, for the message when a mapped field is missing
    error: str | None  # the shard could not be read; rows before the failure are kept


def _counter(config: TokenizerConfig) -> TokenCounter:
    """One tokenizer per worker process, built on first use."""
    key = config.model_dump_json()
    if key not in _COUNTERS:
        _COUNTERS[key] = make_counter(config)
    return _COUNTERS[key]


def count_block(config: TokenizerConfig, texts: list[str]) -> list[tuple[int, int]]:
    """(tokens, words) per text, words counted as the sampler counts them."""
    tokens = _counter(config).count_many(texts)
    words = pl.DataFrame({"t": texts}, schema={"t": pl.Utf8}).select(word_count(pl.col("t")).cast(pl.Int64))
    return list(zip(tokens, words.to_series().to_list(), strict=True))


def scan_shard(config: TokenizerConfig, spec: _SourceBase, shards: list[Shard]) -> list[ShardScan]:
    return [_scan(config, spec, shard) for shard in shards]


# A document still to count: the list that holds it, its index there, its text.
_ToCount = tuple[list[ScannedDoc], int, str]


def _scan(config: TokenizerConfig, spec: _SourceBase, shard: Shard) -> ShardScan:
    try:
        located, lines = read_shard(shard)
    except SourceError as exc:
        return ShardScan([], 0, [], str(exc))
    mapped = set(_mapping(spec).values())
    columns: set[str] = set()
    rows: list[ScannedRow] = []
    todo: list[_ToCount] = []
    for at, position, row in located:
        if isinstance(row, str):
            rows.append(ScannedRow(at, position, row, None, None, (), []))
            continue
        columns.update(row)
        rows.append(_scan_row(spec, row, (at, position, tuple(sorted(mapped.difference(row)))), todo))
    counts = count_block(config, [text for _, _, text in todo]) if todo else []
    for (docs, k, _), (tokens, words) in zip(todo, counts, strict=True):
        docs[k] = docs[k]._replace(n_tokens=tokens, words=words)
    return ShardScan(rows, lines, sorted(columns), None)


def _scan_row(
    spec: _SourceBase, row: dict[str, Any], where: tuple[int, int, tuple[str, ...]], todo: list[_ToCount]
) -> ScannedRow:
    f = spec.fields
    row_id = None
    if f.id is not None:
        raw_id = row.get(f.id)
        bad_id = id_problem(raw_id)
        if bad_id is not None:
            return ScannedRow(where[0], where[1], None, bad_id, None, where[2], [])
        row_id = f"{spec.id_prefix}{raw_id}"
    meta = _meta(spec, row)
    bad_meta = "invalid_unicode" if any(map(has_lone_surrogate, meta.values())) else None
    raw: Any = row.get(f.text)
    docs: list[ScannedDoc] = []
    for k, text in list(enumerate(raw)) if spec.explode_text and isinstance(raw, list) else [(-1, raw)]:
        reason = bad_meta or _check_text(text)
        if reason is None:
            todo.append((docs, len(docs), text))
        docs.append(
            ScannedDoc(
                k,
                reason,
                meta["title"],
                meta["lang"],
                meta["domain"],
                b"" if reason is not None else text_digest(text),
                0,
                0,
            )
        )
    return ScannedRow(where[0], where[1], None, None, row_id, where[2], docs)
