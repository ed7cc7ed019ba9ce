"""Read a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) row by row.

Bad rows never raise: each becomes a rejected (kind, id, reason) record, so the stage
that loads the folder can count it as a drop.
"""

from __future__ import annotations

import codecs
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from builder.io.bench_rows import Rejected
from builder.io.built_folder import BEIR_FILES, beir_qrels_file
from builder.io.jsonl import has_lone_surrogate, id_problem, read_jsonl
from builder.io.sources import SourceError


@dataclass
class BEIRInput:
    corpus: pl.DataFrame  # doc_id, title, text
    queries: pl.DataFrame  # query_id, text, doc_id (first relevant document)
    qrels: pl.DataFrame  # query_id, doc_id, score
    rejected: list[Rejected] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)


def _records(path: Path, kind: str, prefix: str, rejected: list[Rejected]) -> list[dict[str, str]]:
    """Rows with a usable `_id` and non-empty `text`; everything else is rejected with a reason."""
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for n, row in read_jsonl(path):
        where = f"{path.name}:{n}"
        if isinstance(row, str):
            rejected.append((kind, where, row))
            continue
        raw_id, text, title = row.get("_id"), row.get("text"), str(row.get("title") or "")
        bad_id = id_problem(raw_id)
        if bad_id is not None:
            rejected.append((kind, where, bad_id))
        elif not isinstance(text, str) or not text.strip():
            rejected.append((kind, f"{prefix}{raw_id}", "empty_text"))
        elif has_lone_surrogate(text) or has_lone_surrogate(title):
            rejected.append((kind, f"{prefix}{raw_id}", "invalid_unicode"))
        elif f"{prefix}{raw_id}" in seen:
            rejected.append((kind, f"{prefix}{raw_id}#dup", "duplicate_id"))
        else:
            seen.add(f"{prefix}{raw_id}")
            rows.append({"id": f"{prefix}{raw_id}", "title": title, "text": text})
    return rows


def _qrel_lines(path: Path, stats: Counter[str]) -> Iterator[tuple[int, list[str]]]:
    """(0-based line number, tab-separated fields) of each decodable, non-blank line."""
    # Binary mode: only b"\n" ends a line, so a carriage return inside an id stays visible.
    with path.open("rb") as fh:
        for n, raw in enumerate(fh):
            if n == 0:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                stats["qrels_invalid_utf8"] += 1
                continue
            line = line.removesuffix("\n").removesuffix("\r")
            if line.strip():
                yield n, line.split("\t")


def _qrels(path: Path, prefix: str, stats: Counter[str]) -> list[tuple[str, str, int]]:
    """(query id, doc id, score) rows; a header line is skipped, bad lines are counted."""
    out: list[tuple[str, str, int]] = []
    for n, parts in _qrel_lines(path, stats):
        if n == 0 and parts[:2] == ["query-id", "corpus-id"]:
            continue
        try:
            qid, did, score = parts[0], parts[1], int(parts[2])
        except (IndexError, ValueError):
            stats["qrels_malformed"] += 1
            continue
        # A fourth field means a tab inside an id or a foreign format; neither is safe to guess.
        bad = "malformed" if len(parts) != 3 else id_problem(qid) or id_problem(did)
        if bad is not None:
            stats[f"qrels_{bad}"] += 1
            continue
        out.append((f"{prefix}{qid}", f"{prefix}{did}", score))
    return out


def _judgments(
    path: Path, doc_ids: set[str], prefix: str, stats: Counter[str]
) -> tuple[dict[str, list[tuple[str, int]]], set[str]]:
    """Per query, its judgments of documents we have; and every query the split judges."""
    judged: dict[str, list[tuple[str, int]]] = {}
    in_split: set[str] = set()
    for qid, did, score in _qrels(path, prefix, stats):
        in_split.add(qid)
        if did in doc_ids:
            judged.setdefault(qid, []).append((did, score))
        else:
            stats["qrels_unknown_doc"] += 1
    return judged, in_split


def read_beir_input(folder: Path, split: str, prefix: str, limit: int | None) -> BEIRInput:
    files = {
        "corpus": folder / BEIR_FILES["corpus"],
        "queries": folder / BEIR_FILES["queries"],
        "qrels": folder / beir_qrels_file(split),
    }
    for path in files.values():
        if not path.is_file():
            raise SourceError(f"BEIR folder {folder} lacks {path.relative_to(folder)}")
    rejected: list[Rejected] = []
    stats: Counter[str] = Counter()
    docs = _records(files["corpus"], "doc", prefix, rejected)
    judged, in_split = _judgments(files["qrels"], {d["id"] for d in docs}, prefix, stats)
    queries: list[dict[str, str]] = []
    qrels: list[tuple[str, str, int]] = []
    query_rows = _records(files["queries"], "query", prefix, rejected)
    rejected_ids = {row_id for kind, row_id, _ in rejected if kind == "query"}
    stats["qrels_unknown_query"] = len(in_split - {r["id"] for r in query_rows} - rejected_ids)
    for row in query_rows:
        if row["id"] not in in_split:
            stats["queries_not_in_split"] += 1
            continue
        if limit is not None and len(queries) >= limit:
            stats["queries_over_limit"] += 1
            continue
        positives = [d for d, s in judged.get(row["id"], []) if s > 0]
        if not positives:
            rejected.append(("query", row["id"], "no_relevant_doc"))
            continue
        queries.append({"query_id": row["id"], "text": row["text"], "doc_id": positives[0]})
        qrels.extend((row["id"], d, s) for d, s in judged[row["id"]])  # has a positive
    return BEIRInput(
        corpus=pl.DataFrame(docs, schema={"id": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8}).rename({"id": "doc_id"}),
        queries=pl.DataFrame(queries, schema={"query_id": pl.Utf8, "text": pl.Utf8, "doc_id": pl.Utf8}),
        qrels=pl.DataFrame(qrels, schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "score": pl.Int64}, orient="row"),
        rejected=rejected,
        stats=dict(stats),
    )
