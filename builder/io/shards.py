"""File sources cut into shards a worker can read on its own, and single rows read back.

A JSON-lines file is cut at line starts into byte ranges; a parquet file into its row
groups. A worker reads one shard and yields its rows with where each row sits (the byte
offset of its line, or its row number), so the driver can later read back only the rows
it keeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl

from builder.io.jsonl import parse_line
from builder.io.sources import SourceError, _first_line

SHARD_BYTES = 8 << 20  # a JSON-lines shard: a few hundred documents, read in well under a second


@dataclass(frozen=True)
class Shard:
    kind: Literal["jsonl", "parquet"]
    path: str
    start: int  # jsonl: first byte (a line start); parquet: row group index
    end: int  # jsonl: the byte after its last line; parquet: the row after its last
    first_row: int  # parquet: the row number of the group's first row; jsonl: 0


# (line number within the shard, 1-based, or row number in the file; byte offset of the
# line, or row number; the row, or a reason it cannot be one)
ShardRow = tuple[int, int, dict[str, Any] | str]


def jsonl_shards(path: Path, size: int | None = None) -> Iterator[Shard]:
    """Byte ranges of about `size` bytes (default SHARD_BYTES), each starting at a line start."""
    size = size or SHARD_BYTES
    total = path.stat().st_size
    start = 0
    with path.open("rb") as fh:
        while start < total:
            fh.seek(min(start + size, total) - 1)
            fh.readline()  # to the end of the line that holds the cut
            end = max(fh.tell(), start + 1)
            yield Shard("jsonl", str(path), start, end, 0)
            start = end


def parquet_shards(path: Path) -> list[Shard]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError) as exc:
        raise SourceError(f"cannot read parquet source {path}: {_first_line(exc)}") from exc
    shards, row = [], 0
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        shards.append(Shard("parquet", str(path), g, row + n, row))
        row += n
    return shards


def read_shard(shard: Shard) -> tuple[list[ShardRow], int]:
    """The shard's rows in order, and how many physical lines it spans (JSON lines only, so
    the driver can number the next shard's lines)."""
    if shard.kind == "parquet":
        group = _row_group(Path(shard.path), shard.start)
        return [(shard.first_row + k, shard.first_row + k, row) for k, row in enumerate(group.iter_rows(named=True))], 0
    rows: list[ShardRow] = []
    with open(shard.path, "rb") as fh:
        fh.seek(shard.start)
        at, line = shard.start, 0
        while at < shard.end:
            raw = fh.readline()
            if not raw:
                break
            line += 1
            row = parse_line(raw, first=at == 0)
            if row is not None:
                rows.append((line, at, row))
            at += len(raw)
    return rows, line


def _row_group(path: Path, group: int) -> pl.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pl.from_arrow(pq.ParquetFile(path).read_row_group(group))
    except (pa.ArrowException, pl.exceptions.PolarsError, OSError) as exc:
        raise SourceError(f"cannot read parquet source {path}: {_first_line(exc)}") from exc
    assert isinstance(table, pl.DataFrame)  # a table always converts to a frame
    return table


def read_back(kind: str, path: Path, positions: list[int], shards: list[Shard]) -> dict[int, dict[str, Any]]:
    """The rows at `positions` (byte offsets of JSON lines, or parquet row numbers)."""
    out: dict[int, dict[str, Any]] = {}
    if kind == "jsonl":
        with path.open("rb") as fh:
            for at in sorted(set(positions)):
                fh.seek(at)
                row = parse_line(fh.readline(), first=at == 0)
                assert isinstance(row, dict), "a kept row reads back as a row"
                out[at] = row
        return out
    wanted = set(positions)
    for shard in shards:
        inside = sorted(r for r in wanted if shard.first_row <= r < shard.end)
        if inside:
            group = _row_group(path, shard.start)
            out.update((r, group.row(r - shard.first_row, named=True)) for r in inside)
    return out
