"""Answers that travel with a release: the cached answers a build used, exported beside
its output, and read into another machine's cache by `build-bench RECIPE --from OLD`,
so the requests that did not change are answered without asking the model again.

A file read back must be the file that was shipped (`builder.util.digests.file_sha256`,
checked by the caller against the digest the release records) and have the columns and
types written here."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from builder.backends.llm.cache import _CHUNK, LLMCache
from builder.io.built_folder import LLM_ANSWERS_FILE
from builder.util.secrets import mask_string

ANSWERS_FILE = LLM_ANSWERS_FILE
SCHEMA = {
    "key": pl.Utf8,
    "text": pl.Utf8,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "reasoning": pl.Utf8,
    "model": pl.Utf8,
    "failure": pl.Utf8,
}
# The cache's NOT NULL columns; a cache key is a sha256 in hex (`cache.key_for`).
_REQUIRED = ("key", "text", "prompt_tokens", "completion_tokens")
_KEY = r"^[0-9a-f]{64}$"


class AnswersFileError(ValueError):
    """An answers file that cannot be used; the message names it and says why."""


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
                f"WHERE key IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
        return out

    return pl.DataFrame(cache.guarded(read), schema=SCHEMA, orient="row").sort("key")


def seed_answers(cache: LLMCache, answers: pl.DataFrame, stage: str) -> int:
    """Add the answers this cache lacks (its own are kept); returns how many were added.
    `stage` is recorded as the answers' origin (`from:<where>`)."""
    now, stage = time.time(), mask_string(stage)
    values = [(k, t, pt, ct, now, r, m, stage, f) for k, t, pt, ct, r, m, f in answers.select(list(SCHEMA)).iter_rows()]

    def write(db: sqlite3.Connection) -> int:
        before = db.total_changes
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT OR IGNORE INTO answers (key, text, prompt_tokens, completion_tokens, created_at, "
                "reasoning, model, stage, failure) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            )
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return db.total_changes - before

    return cache.guarded(write)


def read_answers(path: Path) -> pl.DataFrame:
    """The answers in `path`, with the columns and types `export_answers` writes, every
    key a cache key and no gap where the cache needs a value; AnswersFileError if not."""
    try:
        schema = pl.read_parquet_schema(path)
        missing = [c for c in SCHEMA if c not in schema]
        if missing:
            raise AnswersFileError(
                f"{path} lacks the column(s) {', '.join(missing)} (it has {', '.join(schema) or 'none'})"
            )
        wrong = [f"{c} is {schema[c]}, not {t}" for c, t in SCHEMA.items() if schema[c] != t]
        if wrong:
            raise AnswersFileError(f"{path} has columns of the wrong type: {'; '.join(wrong)}")
        answers = pl.read_parquet(path, columns=list(SCHEMA))
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as error:
        # Rust's messages can span lines; their first says what is wrong.
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise AnswersFileError(f"{path} is not a readable parquet file ({first})") from None
    gaps = [c for c in _REQUIRED if answers[c].null_count()]
    if gaps:
        raise AnswersFileError(f"{path} has empty values in {', '.join(gaps)}")
    if not answers["key"].str.contains(_KEY).all():
        raise AnswersFileError(f"{path} has keys that are not cache keys (64 hex digits)")
    if answers["key"].n_unique() != answers.height:
        raise AnswersFileError(f"{path} holds a key twice")
    return answers
