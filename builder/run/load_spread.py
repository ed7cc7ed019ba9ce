"""The streamed load with its reading and counting spread over an executor's workers.

JSON-lines and parquet sources are cut into shards that workers read, check and count
themselves (`load_tasks.scan_shard`); only counts, metadata, a text digest and a position
per document come back. Other sources (Hugging Face datasets, the Python docs) are read
here and their texts sent out in blocks to be counted. Either way the results come back
in source order and every global decision stays here, made in the order the local path
makes it: duplicate ids and texts, per-source caps, the missing-field check, the drops
with their line numbers, and the sample. Only the sampled documents' texts are read back
at the end, so the result is the local path's, row for row.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from builder.backends.tokenizers import TokenizerConfig
from builder.executors import Executor, blocks_of
from builder.io.corpus_loader import Doc, Dropped, _check_fields, _Fields, _mapping, _Seen, _source_docs, source_rows
from builder.io.shards import Shard, jsonl_shards, parquet_shards, read_back
from builder.io.sources import JsonlSource, ParquetSource, SourceError, _SourceBase, resolve_path
from builder.run.load_meter import LoadMeter
from builder.run.load_tasks import ScannedDoc, ScannedRow, ShardScan, count_block, scan_shard
from builder.stages.sample_by_length import WORDS
from builder.stages.sample_picker import StreamingPicker
from builder.util.stable import content_id

BLOCK = 512  # documents per block sent out for counting, and per block the sampler sees
# doc_id, title, payload, lang, domain, n_tokens, words: the payload is "=" + the text for a
# source read here, or "@source:position:item" for a row a worker read.
Record = tuple[str, str, str, str, str, int, int]
_SCHEMA = {
    "doc_id": pl.Utf8,
    "title": pl.Utf8,
    "_payload": pl.Utf8,
    "lang": pl.Utf8,
    "domain": pl.Utf8,
    "n_tokens": pl.Int64,
    WORDS: pl.Int64,
}


class _Load:
    """One load: the sources, the shared duplicate memory, the drops and the meter."""

    def __init__(
        self,
        specs: list[_SourceBase],
        base_dir: Path | None,
        limit: int | None,
        executor: Executor,
        tokenizer: TokenizerConfig,
        meter: LoadMeter,
    ) -> None:
        self.specs, self.base_dir, self.limit = specs, base_dir, limit
        self.executor, self.tokenizer, self.meter = executor, tokenizer, meter
        self.seen = _Seen()
        self.drops: list[Dropped] = []
        self.shards: dict[int, list[Shard]] = {}

    def drop(self, item: Dropped) -> None:
        self.drops.append(item)
        self.meter.add(dropped=1)

    def records(self) -> Iterator[Record]:
        for index, spec in enumerate(self.specs):
            caps = [x for x in (spec.limit, self.limit) if x is not None]
            cap = min(caps) if caps else None
            if isinstance(spec, JsonlSource | ParquetSource):
                yield from self._file_records(index, spec, cap)
            else:
                yield from self._read_records(spec, cap)

    def _read_records(self, spec: _SourceBase, cap: int | None) -> Iterator[Record]:
        """Read and checked here; the texts go out in blocks to be counted."""
        sent: deque[list[Doc]] = deque()

        def blocks() -> Iterator[list[str]]:
            for block in blocks_of(
                self._kept(_source_docs(spec, source_rows(spec, self.base_dir), cap, self.seen)), BLOCK
            ):
                sent.append(block)
                yield [d.text for d in block]

        for counts in self.executor.imap(functools.partial(count_block, self.tokenizer), blocks()):
            for d, (tokens, words) in zip(sent.popleft(), counts, strict=True):
                yield d.doc_id, d.title, "=" + d.text, d.lang, d.domain, tokens, words

    def _kept(self, items: Iterator[Doc | Dropped]) -> Iterator[Doc]:
        for item in items:
            if isinstance(item, Dropped):
                self.drop(item)
            else:
                yield item

    def _file_records(self, index: int, spec: JsonlSource | ParquetSource, cap: int | None) -> Iterator[Record]:
        """Shards read by the workers; the decisions that need the whole stream made here."""
        path = resolve_path(spec.path, self.base_dir)
        if not path.exists():
            raise SourceError(f"source file not found: {spec.path} (looked in . and {self.base_dir})")
        jsonl = isinstance(spec, JsonlSource)
        shards = self.shards.setdefault(index, [])
        planned = jsonl_shards(path) if jsonl else iter(parquet_shards(path))
        fields = _Fields(unseen=set(_mapping(spec).values()))
        state = {"objects": 0, "kept": 0, "lines": 0}

        def blocks() -> Iterator[list[Shard]]:
            for shard in planned:
                shards.append(shard)
                yield [shard]

        for (scan,) in self.executor.imap(functools.partial(scan_shard, self.tokenizer, spec), blocks()):
            for row in scan.rows:
                if cap is not None and state["kept"] >= cap:
                    return
                where = f"line:{state['lines'] + row.at}" if jsonl else f"row:{row.at}"
                yield from self._row(index, spec, row, where, scan, fields, state, same_columns=not jsonl)
            if scan.error is not None:
                raise SourceError(scan.error)
            state["lines"] += scan.lines
        if state["objects"]:
            _check_fields(spec, fields)

    def _row(
        self,
        index: int,
        spec: _SourceBase,
        row: ScannedRow,
        where: str,
        scan: ShardScan,
        fields: _Fields,
        state: dict[str, int],
        same_columns: bool,
    ) -> Iterator[Record]:
        if row.unreadable is not None:
            self.drop(Dropped(f"{spec.id_prefix}{where}", row.unreadable))
            return
        state["objects"] += 1
        if fields.unseen:
            fields.unseen.intersection_update(row.missing)
            fields.columns.update(scan.columns)
            if same_columns:
                _check_fields(spec, fields)
        if row.bad_id is not None:
            self.drop(Dropped(f"{spec.id_prefix}{where}", row.bad_id))
            return
        for d in row.docs:
            doc_id = _doc_id(spec, row.row_id, where, d)
            reason = d.reason
            if reason is None and doc_id in self.seen.ids:
                reason = "duplicate_id"
            if reason is None and d.digest in self.seen.texts:
                reason = "duplicate_text"
            if reason is not None:
                self.drop(Dropped(doc_id, reason))
                continue
            self.seen.ids.add(doc_id)
            self.seen.texts.add(d.digest)
            state["kept"] += 1
            yield doc_id, d.title, f"@{index}:{row.position}:{d.item}", d.lang, d.domain, d.n_tokens, d.words

    def texts(self, payloads: dict[str, str]) -> dict[str, str]:
        """doc_id -> text for the sampled documents, reading back those the workers read."""
        out: dict[str, str] = {}
        wanted: dict[int, list[tuple[str, int, int]]] = {}
        for doc_id, payload in payloads.items():
            if payload.startswith("="):
                out[doc_id] = payload[1:]
                continue
            index, position, item = map(int, payload[1:].split(":"))
            wanted.setdefault(index, []).append((doc_id, position, item))
        for index, docs in wanted.items():
            spec = self.specs[index]
            assert isinstance(spec, JsonlSource | ParquetSource)
            rows = read_back(
                spec.type, resolve_path(spec.path, self.base_dir), [p for _, p, _ in docs], self.shards[index]
            )
            for doc_id, position, item in docs:
                text: Any = rows[position].get(spec.fields.text)
                out[doc_id] = text if item < 0 else text[item]
        return out


def stream_spread(
    specs: list[_SourceBase],
    base_dir: Path | None,
    limit: int | None,
    picker: StreamingPicker,
    executor: Executor,
    tokenizer: TokenizerConfig,
    meter: LoadMeter,
) -> tuple[pl.DataFrame, list[Dropped]]:
    """(the corpus without texts but for the sampled ones, the drops), as the local
    streamed load gives them."""
    load = _Load(specs, base_dir, limit, executor, tokenizer, meter)
    parts: list[pl.DataFrame] = []
    for block in blocks_of(load.records(), BLOCK):
        frame = pl.DataFrame(block, schema=_SCHEMA, orient="row")
        picker.offer(frame, payload="_payload")
        parts.append(frame.drop("_payload"))
        meter.add(kept=len(block))
    reduced = pl.concat(parts) if parts else pl.DataFrame(schema=_SCHEMA).drop("_payload")
    texts = load.texts(picker.texts())
    corpus = reduced.with_columns(
        pl.Series("text", [texts.get(d, "") for d in reduced["doc_id"].to_list()], dtype=pl.Utf8)
    )
    return corpus, load.drops


def _doc_id(spec: _SourceBase, row_id: str | None, where: str, doc: ScannedDoc) -> str:
    """As the local load names it: the source id, else the text's hash, else its place."""
    if row_id is None and doc.reason is None:
        return f"{spec.id_prefix}{content_id(doc.digest)}"
    if row_id is None:
        row_id = f"{spec.id_prefix}{where}"
    return row_id if doc.item < 0 else f"{row_id}-{doc.item}"
