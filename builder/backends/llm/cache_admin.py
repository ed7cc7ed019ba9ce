"""Looking into an LLM answer cache and clearing part of it: counts per model, stage and
failure kind, and deletions that touch only the answers they select."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from builder.util.secrets import mask_string

CACHE_FILE = "llm_cache.sqlite"
# How a cached answer can have failed: the drop reasons the stages record.
FAILURE_KINDS = ("llm_unparseable", "refusal")
ANY_FAILURE = "any"


class CacheAdminError(RuntimeError):
    """The cache cannot be read or the selection makes no sense; the message says why."""


@dataclass(frozen=True)
class Selection:
    """Which answers: all filters given must match. `stage` is a run label (`02_generate_queries`)
    or a stage name (`generate_queries`); `failed` a failure kind or `any`."""

    model: str | None = None
    stage: str | None = None
    failed: str | None = None

    def where(self) -> tuple[str, list[str]]:
        clauses: list[str] = []
        values: list[str] = []
        if self.model is not None:
            clauses.append("model = ?")
            values.append(self.model)
        if self.stage is not None:
            # A label is the stage's position and name: "02_generate_queries".
            clauses.append("(stage = ? OR substr(stage, instr(stage, '_') + 1) = ?)")
            values += [self.stage, self.stage]
        if self.failed == ANY_FAILURE:
            clauses.append("failure IS NOT NULL")
        elif self.failed is not None:
            clauses.append("failure = ?")
            values.append(self.failed)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), values


@dataclass(frozen=True)
class Count:
    model: str | None
    stage: str | None
    failure: str | None
    answers: int
    servers: str | None  # the base_urls that gave these answers, comma-separated


def cache_path(run_dir: Path) -> Path:
    """The cache file of a run folder; CacheAdminError when there is none."""
    from builder.backends.llm.mock_backend import MOCK_CACHE  # with the mock's prompt reader: not for --help

    path = run_dir / CACHE_FILE
    if not path.is_file():
        if not run_dir.is_dir():
            raise CacheAdminError(f"{run_dir} is not a folder: no LLM cache to show or clear")
        mock = (
            "; its builds ran with --mock-llm, and mock builds never write an LLM cache: the mock's "
            "answers stay in their run folders and ship in each output's llm_answers.parquet"
            if any(run_dir.glob(f"*/*/{MOCK_CACHE}"))
            else ""
        )
        raise CacheAdminError(f"{run_dir} has no LLM cache ({CACHE_FILE}): nothing to show or clear{mock}")
    return path


def check_selection(selection: Selection) -> None:
    if selection.failed is not None and selection.failed not in (*FAILURE_KINDS, ANY_FAILURE):
        kinds = ", ".join((*FAILURE_KINDS, ANY_FAILURE))
        raise CacheAdminError(f"unknown failure kind {selection.failed!r}: use one of {kinds}")


def _connect(path: Path) -> sqlite3.Connection:
    from builder.backends.llm.cache import add_columns  # with pydantic's model configs: not for --help

    db = sqlite3.connect(str(path), isolation_level=None, timeout=60.0)
    try:
        add_columns(db)  # a cache written by an older version lacks the columns we group by
    except sqlite3.DatabaseError as error:
        db.close()
        raise CacheAdminError(f"cannot read the LLM cache {path}: {error}") from None
    return db


def _counts(db: sqlite3.Connection, selection: Selection) -> list[Count]:
    where, values = selection.where()
    rows = db.execute(
        f"SELECT model, stage, failure, COUNT(*), group_concat(DISTINCT base_url) FROM answers{where} "
        "GROUP BY model, stage, failure ORDER BY model, stage, failure",
        values,
    )
    # A cache written by an older version may hold a server's credentials in clear.
    return [
        Count(
            model,
            mask_string(stage) if stage else stage,
            failure,
            answers,
            ", ".join(sorted({mask_string(s) for s in servers.split(",")})) if servers else None,
        )
        for model, stage, failure, answers, servers in rows
    ]


def count(path: Path, selection: Selection = Selection()) -> list[Count]:
    """How many answers the cache holds per model, stage and failure kind (None: a good answer)."""
    check_selection(selection)
    with closing(_connect(path)) as db:
        return _counts(db, selection)


def clear(path: Path, selection: Selection) -> list[Count]:
    """Delete the selected answers in one transaction; returns what was deleted."""
    check_selection(selection)
    where, values = selection.where()
    with closing(_connect(path)) as db:
        db.execute("BEGIN IMMEDIATE")
        try:
            removed = _counts(db, selection)
            db.execute(f"DELETE FROM answers{where}", values)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    return removed
