"""The documents of an evaluated benchmark, read from their file in blocks and never held
whole: the ids and lengths are kept, the texts are read again whenever a retriever
indexes them or a reranker needs a few of them."""

from __future__ import annotations

import io
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import polars as pl

from builder.evaluation.errors import EvalError

Blocks = Callable[[int], Iterator[pl.DataFrame]]  # block size -> frames of at most that many rows
_READ = 2048  # documents read at once where the caller does not care how many


class Corpus:
    """doc_id, title and text of every document, in file order, `size` rows at a time."""

    def __init__(self, read: Blocks, name: str) -> None:
        self._read = read
        self.name = name
        parts = [
            _normalized(frame).select("doc_id", pl.col("text").str.len_chars().alias("_doc_chars"))
            for frame in self._read(_READ)
        ]
        self.lengths = pl.concat(parts) if parts else pl.DataFrame(schema={"doc_id": pl.Utf8, "_doc_chars": pl.UInt32})

    @classmethod
    def from_frame(cls, frame: pl.DataFrame) -> Corpus:
        return cls(lambda size: iter(frame.iter_slices(size)), "corpus")

    @classmethod
    def from_parquet(cls, path: Path, renames: dict[str, str] | None = None) -> Corpus:
        return cls(lambda size: _parquet_blocks(path, size, renames or {}), str(path))

    @classmethod
    def from_jsonl(cls, path: Path) -> Corpus:
        return cls(lambda size: _jsonl_blocks(path, size), str(path))

    @property
    def height(self) -> int:
        return self.lengths.height

    @property
    def doc_ids(self) -> pl.Series:
        return self.lengths["doc_id"]

    def blocks(self, size: int) -> Iterator[pl.DataFrame]:
        """Frames of exactly `size` rows (the last one shorter), whatever the file's own
        row groups, so what is cut into blocks here is cut the same way every time."""
        pending: list[pl.DataFrame] = []
        held = 0
        for frame in self._read(size):
            pending.append(_normalized(frame))
            held += frame.height
            while held >= size:
                whole = pl.concat(pending)
                yield whole.head(size)
                rest = whole.slice(size)
                pending, held = ([rest] if rest.height else []), rest.height
        if held:
            yield pl.concat(pending)

    def select(self, doc_ids: Collection[str]) -> pl.DataFrame:
        """The rows of the given documents, in corpus order."""
        wanted = pl.Series(list(doc_ids), dtype=pl.Utf8)
        parts = [block.filter(pl.col("doc_id").is_in(wanted.implode())) for block in self.blocks(_READ)]
        return pl.concat(parts) if parts else _normalized(pl.DataFrame({"doc_id": [], "text": []}))

    def frame(self) -> pl.DataFrame:
        """Every document at once, for the few callers that need the whole corpus."""
        parts = list(self.blocks(_READ))
        return pl.concat(parts) if parts else _normalized(pl.DataFrame({"doc_id": [], "text": []}))


def _normalized(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(
        pl.col("doc_id").cast(pl.Utf8),
        pl.col("title").cast(pl.Utf8).fill_null("") if "title" in frame.columns else pl.lit("").alias("title"),
        pl.col("text").cast(pl.Utf8).fill_null(""),
    )


def _parquet_blocks(path: Path, size: int, renames: dict[str, str]) -> Iterator[pl.DataFrame]:
    import pyarrow.parquet as pq

    try:
        # Buffered, not pre-buffered: a row group's column is read page by page, not whole.
        handle = pq.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False)
        names = set(handle.schema_arrow.names)
        columns = [c for c in (*renames, "doc_id", "title", "text") if c in names]
        for batch in handle.iter_batches(batch_size=size, columns=columns):
            frame = pl.from_arrow(batch)
            assert isinstance(frame, pl.DataFrame)
            yield frame.rename(renames, strict=False)
    except OSError as exc:
        raise EvalError(f"cannot read {path}: {exc}") from exc


def _jsonl_blocks(path: Path, size: int) -> Iterator[pl.DataFrame]:
    lines: list[bytes] = []
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                lines.append(line)
            if len(lines) == size:
                yield _parse(path, lines)
                lines = []
    if lines:
        yield _parse(path, lines)


def _parse(path: Path, lines: list[bytes]) -> pl.DataFrame:
    try:
        frame = pl.read_ndjson(io.BytesIO(b"".join(lines)), infer_schema_length=None)
    except pl.exceptions.PolarsError as exc:
        raise EvalError(f"cannot read {path}: {exc}") from exc
    if "_id" not in frame.columns or "text" not in frame.columns:
        raise EvalError(f"{path.parent}: corpus.jsonl lacks {sorted({'_id', 'text'} - set(frame.columns))}")
    return frame.rename({"_id": "doc_id"})
