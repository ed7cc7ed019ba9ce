"""Stage checkpoints: the Bench after a stage, its stats, and a stamp that says for which
fingerprint they were made and what every file hashed to when written.

A checkpoint is reused only when its fingerprint matches and every file still hashes as
stamped; anything else damaged (a garbled, empty or deleted parquet, an unreadable
stats.json or stamp) is moved aside with a one-line notice and the stage runs again.
The hash of the tables is also the stage's content digest, which the runner chains into
the next stage's fingerprint. Checking a checkpoint does not parse its tables: a rerun
reads only the tables of the stage it starts from (or writes out), not every stage's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.io.built_folder import STATS_FILE
from builder.records.stage_record import StageRecord
from builder.util.atomic import replace_dir, temp_dir_beside

if TYPE_CHECKING:  # read when a checkpoint is loaded: checking one reads no table
    from builder.bench import Bench

STAMP = "checkpoint.json"
STATS = STATS_FILE  # a stage's record, named as a built folder names its figures
KEYS_FILE = "llm_keys.txt"  # the LLM cache keys the stage used, shipped with the output
_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass
class Checkpoint:
    """A checked checkpoint; `load` reads its tables."""

    stage_dir: Path
    stats: StageRecord
    digest: str  # content hash of the four tables

    def load(self, notice: Callable[[str], None]) -> Bench | None:
        """The Bench, or None (with the folder moved aside) when its tables do not parse."""
        import polars as pl

        from builder.bench import Bench

        try:
            return Bench.load(self.stage_dir)
        except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
            _move_aside(self.stage_dir, f"{type(exc).__name__}: {exc}"[:160], notice)
            return None


class Damaged(Exception):
    pass


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _digest(files: dict[str, str], tables: list[str]) -> str:
    return hashlib.sha256(json.dumps({t: files[t] for t in tables}, sort_keys=True).encode()).hexdigest()


def save_checkpoint(
    stage_dir: Path,
    bench: Bench,
    stats: StageRecord,
    fingerprint: str | None,
    llm_keys: set[str] | frozenset[str] = frozenset(),
) -> str:
    """Write the checkpoint whole (one folder swap); `fingerprint` None keeps the data for
    inspection but marks the stage unfinished, so no rerun reuses it. `llm_keys` are
    stamped like the tables, so a damaged list is caught too. Returns the digest."""
    tmp = temp_dir_beside(stage_dir)
    try:
        tables = bench.write_tables(tmp)
        (tmp / STATS).write_text(json.dumps(stats.to_json(), indent=2, default=str), encoding="utf-8")
        extra = [STATS]
        if llm_keys:
            (tmp / KEYS_FILE).write_text("".join(f"{k}\n" for k in sorted(llm_keys)), encoding="utf-8")
            extra.append(KEYS_FILE)
        files = {name: _sha(tmp / name) for name in [*tables, *extra]}
        stamp = {"fingerprint": fingerprint, "tables": tables, "files": files}
        (tmp / STAMP).write_text(json.dumps(stamp, indent=1), encoding="utf-8")
        replace_dir(tmp, stage_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _digest(files, tables)


def open_checkpoint(stage_dir: Path, fingerprint: str, notice: Callable[[str], None]) -> Checkpoint | None:
    """The checkpoint made for `fingerprint`, its files checked against the stamp, or None
    when there is none to reuse."""
    stamp_path = stage_dir / STAMP
    if not stage_dir.is_dir() or not stamp_path.exists():
        return None
    try:
        stamp = json.loads(stamp_path.read_text(encoding="utf-8"))
        if stamp.get("fingerprint") != fingerprint:
            return None
        return _check(stage_dir, stamp)
    except Damaged as exc:
        problem = str(exc)
    except (OSError, ValueError, AttributeError, KeyError, TypeError) as exc:
        problem = f"{type(exc).__name__}: {exc}"[:160]
    _move_aside(stage_dir, problem, notice)
    return None


def _move_aside(stage_dir: Path, problem: str, notice: Callable[[str], None]) -> None:
    aside = stage_dir.with_name(f"{stage_dir.name}.damaged")
    if aside.exists():
        shutil.rmtree(aside, ignore_errors=True)
    os.replace(stage_dir, aside)
    notice(f"{stage_dir.name}: checkpoint damaged ({problem}); moved aside to {aside.name}, running the stage again")


def _check(stage_dir: Path, stamp: dict[str, Any]) -> Checkpoint:
    files: dict[str, str] = stamp["files"]
    for name, expected in files.items():
        path = stage_dir / name
        if not path.is_file():
            raise Damaged(f"{name} is missing")
        if _sha(path) != expected:
            raise Damaged(f"{name} changed since it was written")
    stats = json.loads((stage_dir / STATS).read_text(encoding="utf-8"))
    if not isinstance(stats, dict):
        raise Damaged(f"{STATS} is not an object")
    read_llm_keys(stage_dir)  # a list written before it was stamped is checked for form
    return Checkpoint(stage_dir, StageRecord.from_json(stats), _digest(files, list(stamp["tables"])))


def read_llm_keys(stage_dir: Path) -> set[str]:
    """The LLM cache keys a stage's checkpoint lists (none when it has no list); Damaged
    when the list is not one key per line."""
    path = stage_dir / KEYS_FILE
    if not path.is_file():
        return set()
    try:
        keys = path.read_text(encoding="utf-8").split()
    except UnicodeDecodeError:
        raise Damaged(f"{KEYS_FILE} is not text") from None
    bad = next((k for k in keys if not _KEY.fullmatch(k)), None)
    if bad is not None:
        raise Damaged(f"{KEYS_FILE} holds {bad[:20]!r}, not a cache key")
    return set(keys)
