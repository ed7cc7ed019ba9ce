"""Answers that travel with a release: the cached answers a build used, exported beside
its output, and read into another machine's cache by `build-bench RECIPE --from OLD`,
so the requests that did not change are answered without asking the model again."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from builder.backends.llm.cache import _CHUNK, LLMCache

ANSWERS_FILE = "llm_answers.parquet"
SCHEMA = {"key": pl.Utf8, "text": pl.Utf8, "prompt_tokens": pl.Int64, "completion_tokens": pl.Int64,
          "reasoning": pl.Utf8, "model": pl.Utf8, "failure": pl.Utf8}


def export_answers(cache: LLMCache, keys: Iterable[str]) -> pl.DataFrame:
    """Every answer under `keys`, sorted by key. Answers a stage rejected travel with their
    mark, so a build from them drops what the original dropped (and `--reask-failed`
    asks those again), as a rerun on the original machine would."""
    unique = sorted(set(keys))

    def read(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            out += db.execute(
                "SELECT key, text, prompt_tokens, completion_tokens, reasoning, model, failure FROM answers "
                f"WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall()
        return out

    return pl.DataFrame(cache.guarded(read), schema=SCHEMA, orient="row").sort("key")


def seed_answers(cache: LLMCache, answers: pl.DataFrame, stage: str) -> int:
    """Add the answers this cache lacks (its own are kept); returns how many were added.
    `stage` is recorded as the answers' origin (`from:<where>`)."""
    now = time.time()
    values = [(k, t, pt, ct, now, r, m, stage, f) for k, t, pt, ct, r, m, f in answers.select(list(SCHEMA)).iter_rows()]

    def write(db: sqlite3.Connection) -> int:
        before = db.total_changes
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT OR IGNORE INTO answers (key, text, prompt_tokens, completion_tokens, created_at, "
                "reasoning, model, stage, failure) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return db.total_changes - before

    return cache.guarded(write)


def read_answers(folder: Path) -> pl.DataFrame | None:
    path = Path(folder) / ANSWERS_FILE
    if not path.is_file():
        return None
    return pl.read_parquet(path, columns=list(SCHEMA))
