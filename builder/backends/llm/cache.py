"""SQLite store of model answers, keyed by everything that shapes an answer."""

# cohesive: the answer store's schema, writer thread and recovery must change together.

from __future__ import annotations

import hashlib
import json
import queue
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, cast

from builder.backends.llm.base import ChatResponse, Message
from builder.util.secrets import mask_optional

# Well under SQLite's host-parameter limit on old builds (999).
_CHUNK = 900

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created_at REAL NOT NULL,
    reasoning TEXT,
    model TEXT,
    stage TEXT,
    base_url TEXT,
    failure TEXT
) WITHOUT ROWID
"""
# A text searched for in cached answers: its first characters, and at least this many.
_PROBE_CHARS, _MIN_PROBE_CHARS = 200, 20
# Columns an older cache file lacks; they are added when it is opened (all may be NULL).
_ADDED_COLUMNS = ("reasoning", "model", "stage", "base_url", "failure", "build", "cached_tokens", "batch")
# SQLite's verdicts on a file that is not (or no longer) a sound database: SQLITE_CORRUPT and
# SQLITE_NOTADB, by number (sqlite3 names them only from Python 3.11 on), and the messages
# SQLite gives with them, all that Python 3.10 passes on (it sets no `sqlite_errorcode`).
_DAMAGE_CODES = {11, 26}
_DAMAGE_MESSAGES = ("database disk image is malformed", "file is not a database", "malformed database schema")

T = TypeVar("T")


@dataclass(frozen=True)
class Origin:
    """Where an answer came from, recorded beside it and never part of its key: the model
    (the served name), the stage that asked (its run label) and the server that answered
    (stored with its credentials masked: the cache file travels between machines); with
    what the answer cost beyond its token counts (prompt tokens the server's cache served,
    and whether it came through a provider batch), so a resumed build can count it as paid."""

    model: str | None = None
    stage: str | None = None
    base_url: str | None = None
    cached_tokens: int = 0
    batch: bool = False


@dataclass(frozen=True)
class PaidAnswer:
    """What one answer a build paid for cost, as the cache recorded it."""

    key: str
    model: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    batch: bool


# key, text, prompt tokens, completion tokens and, optionally, the reasoning and the origin.
Row = tuple[str, str, int, int] | tuple[str, str, int, int, str | None] | tuple[str, str, int, int, str | None, Origin]


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    prompt_tokens: int
    completion_tokens: int
    reasoning: str | None = None


def key_for(
    backend: str,
    model: str,
    sampling: dict[str, Any],
    messages: Sequence[Message],
    response_format: dict[str, Any] | None,
) -> str:
    """sha256 of the canonical JSON of one request; equal requests share a key."""
    payload = {
        "backend": backend,
        "model": model,
        "sampling": sampling,
        "messages": list(messages),
        "response_format": response_format,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _print_notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _damaged(error: sqlite3.DatabaseError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:
        return str(error).startswith(_DAMAGE_MESSAGES)
    return code & 0xFF in _DAMAGE_CODES


class LLMCache:
    """Answer cache shared by threads (one locked connection) and processes (WAL).

    A file SQLite finds damaged, when opened or later, is renamed aside (never deleted)
    with a one-line notice, and a fresh cache takes its place: its answers are asked again.

    An answer a stage could not use is marked with its failure kind (`mark_failed`); with
    `reask_failed` such answers read as missing, so they are asked again and replaced.
    `stage` is the run label of the stage now asking, recorded beside each answer, and
    `build` the build asking (its run folder, relative to the run root): together they
    tell the answers an earlier run of the same build paid for (`paid_by_build`).
    """

    def __init__(
        self, path: Path | None, notify: Callable[[str], None] = _print_notice, reask_failed: bool = False
    ) -> None:
        self.path = path
        self.reask_failed = reask_failed
        self.stage: str | None = None
        self.build: str | None = None
        # stage label -> keys of the answers it was served or stored (what a release ships)
        self.used: dict[str | None, set[str]] = {}
        # stage label -> keys of the answers this process stored (paid for now)
        self.stored: dict[str | None, set[str]] = {}
        self._notify = notify
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            try:
                self._db, self._inode = self._open()
            except sqlite3.DatabaseError as error:
                if path is None or not _damaged(error):
                    raise
                self._inode = _inode(path)
                self._set_aside(error)
                self._db, self._inode = self._open()

    @classmethod
    def memory(cls) -> LLMCache:
        return cls(None)

    def _open(self) -> tuple[sqlite3.Connection, int | None]:
        path = self.path
        # Autocommit: every write is durable once its statement returns.
        db = sqlite3.connect(
            ":memory:" if path is None else str(path),
            check_same_thread=False,
            isolation_level=None,
            timeout=60.0,
        )
        try:
            db.execute("PRAGMA busy_timeout = 60000")
            if path is not None:
                db.execute("PRAGMA journal_mode = WAL")
                # WAL + NORMAL survives a killed process; only power loss can drop the tail.
                db.execute("PRAGMA synchronous = NORMAL")
            db.execute(_SCHEMA)
            add_columns(db)
        except BaseException:
            db.close()
            raise
        return db, None if path is None else _inode(path)

    def _set_aside(self, error: sqlite3.DatabaseError) -> None:
        """Rename the damaged file (and its WAL files) next to itself, unless another process did."""
        path = cast(Path, self.path)
        if _inode(path) == self._inode:
            aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
            while aside.exists():
                aside = aside.with_name(aside.name + "+")
            for suffix in ("", "-wal", "-shm"):
                if Path(f"{path}{suffix}").exists():
                    Path(f"{path}{suffix}").rename(f"{aside}{suffix}")
            self._notify(
                f"LLM cache {path} is damaged ({error}): moved it to {aside.name}; "
                "a fresh cache is used and its answers will be asked again"
            )

    def _guarded(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` under the lock; if the file turns out damaged, set it aside and redo it on a fresh one."""
        with self._lock:
            try:
                return work(self._db)
            except sqlite3.DatabaseError as error:
                if self.path is None or not _damaged(error):
                    raise
                self._db.close()
                self._set_aside(error)
                self._db, self._inode = self._open()
                return work(self._db)

    def get_many(self, keys: Sequence[str]) -> dict[str, CachedAnswer]:
        unique = list(dict.fromkeys(keys))
        usable = " AND failure IS NULL" if self.reask_failed else ""

        def read(db: sqlite3.Connection) -> dict[str, CachedAnswer]:
            found: dict[str, CachedAnswer] = {}
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(
                    "SELECT key, text, prompt_tokens, completion_tokens, reasoning FROM answers "
                    f"WHERE key IN ({marks}){usable}",
                    chunk,
                )
                for key, text, pt, ct, reasoning in rows:
                    found[key] = CachedAnswer(text, pt, ct, reasoning)
            self.used.setdefault(self.stage, set()).update(found)
            return found

        return self._guarded(read)

    def get(self, key: str) -> CachedAnswer | None:
        return self.get_many([key]).get(key)

    def put(
        self,
        key: str,
        text: str,
        prompt_tokens: int,
        completion_tokens: int,
        reasoning: str | None = None,
        origin: Origin | None = None,
    ) -> None:
        self.put_many([(key, text, prompt_tokens, completion_tokens, reasoning, origin or Origin())])

    def put_many(self, rows: Iterable[Row]) -> None:
        """Store answers in one transaction, committed before returning; a stored answer
        replaces the one under its key, failure mark included."""
        now = time.time()
        values = []
        for row in rows:
            origin = row[5] if len(row) > 5 else Origin()  # type: ignore[misc]
            values.append(
                (
                    *row[:4],
                    now,
                    row[4] if len(row) > 4 else None,
                    origin.model,
                    origin.stage or self.stage,
                    mask_optional(origin.base_url),
                    self.build,
                    origin.cached_tokens,
                    int(origin.batch),
                )
            )

        def write(db: sqlite3.Connection) -> None:
            for v in values:
                self.used.setdefault(v[7], set()).add(v[0])
                self.stored.setdefault(v[7], set()).add(v[0])
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT OR REPLACE INTO answers (key, text, prompt_tokens, completion_tokens, created_at, "
                    "reasoning, model, stage, base_url, build, cached_tokens, batch, failure) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                    values,
                )
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

        self._guarded(write)

    def paid_by_build(self, stage: str) -> list[PaidAnswer]:
        """The answers `stage` was served from the cache in this process that an earlier run
        of this build stored for the same stage: what it paid for then (a resume after a
        budget stop, a kill or an outage), not answers it got for free. Batch answers are
        left out: the batch record bills each to its stage once, whichever run finishes it."""
        keys = sorted(self.used.get(stage, set()) - self.stored.get(stage, set()))
        if self.build is None or not keys:
            return []

        def read(db: sqlite3.Connection) -> list[PaidAnswer]:
            out: list[PaidAnswer] = []
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                rows = db.execute(
                    "SELECT key, model, prompt_tokens, completion_tokens, CAST(COALESCE(cached_tokens, 0) AS INTEGER), "
                    f"CAST(COALESCE(batch, 0) AS INTEGER) FROM answers WHERE key IN ({','.join('?' * len(chunk))}) "
                    "AND build = ? AND stage = ? AND CAST(COALESCE(batch, 0) AS INTEGER) = 0",
                    [*chunk, self.build, stage],
                )
                out += [PaidAnswer(k, m, pt, ct, cached, bool(batch)) for k, m, pt, ct, cached, batch in rows]
            return out

        return self._guarded(read)

    def guarded(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the cache's connection, under its lock (see `_guarded`)."""
        return self._guarded(work)

    def mark_failed(self, keys: Iterable[str], kind: str) -> None:
        """Record that the answers under `keys` were unusable, and how (a drop reason)."""
        unique = list(dict.fromkeys(keys))

        def write(db: sqlite3.Connection) -> None:
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start : start + _CHUNK]
                db.execute(
                    f"UPDATE answers SET failure = ? WHERE key IN ({','.join('?' * len(chunk))})", [kind, *chunk]
                )

        if unique:
            self._guarded(write)

    def mark_failed_containing(self, texts: Iterable[str], stage: str, kind: str) -> None:
        """Mark as `kind` the answers a stage named `stage` recorded (any run label
        `NN_<stage>`) whose text contains the start of one of `texts`: how a later stage
        that sees only the text (a refusal check) finds the answer it came from. Texts too
        short to be told apart from ordinary answers are skipped."""
        probes = list(dict.fromkeys(t.strip()[:_PROBE_CHARS] for t in texts if len(t.strip()) >= _MIN_PROBE_CHARS))

        def write(db: sqlite3.Connection) -> None:
            for probe in probes:
                db.execute(
                    "UPDATE answers SET failure = ? WHERE substr(stage, instr(stage, '_') + 1) = ? "
                    "AND instr(text, ?) > 0",
                    (kind, stage, probe),
                )

        if probes:
            self._guarded(write)

    def failed_stages(self) -> set[str | None]:
        """The stage labels that recorded an answer now marked unusable (None: an answer
        cached before stages were recorded)."""
        return self._guarded(
            lambda db: {row[0] for row in db.execute("SELECT DISTINCT stage FROM answers WHERE failure IS NOT NULL")}
        )

    def __len__(self) -> int:
        return self._guarded(lambda db: int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]))

    def close(self) -> None:
        with self._lock:
            self._db.close()


def add_columns(db: sqlite3.Connection) -> None:
    """Bring a cache written by an older version up to the current columns."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(answers)")}
    for name in _ADDED_COLUMNS:
        if name in columns:
            continue
        try:
            db.execute(f"ALTER TABLE answers ADD COLUMN {name} TEXT")
        except sqlite3.OperationalError as error:  # another process added it meanwhile
            if "duplicate column" not in str(error):
                raise


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


class CacheWriter:
    """Commits answers from a background thread, one transaction per burst.

    An event loop handing answers over pays a queue put instead of a disk write;
    `flush` returns once everything handed over so far is committed.
    """

    def __init__(self, cache: LLMCache) -> None:
        self._cache = cache
        self._queue: queue.SimpleQueue[Row | threading.Event | None] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="llm-cache-writer", daemon=True)
        self._thread.start()

    def put(
        self,
        key: str,
        text: str,
        prompt_tokens: int,
        completion_tokens: int,
        reasoning: str | None = None,
        origin: Origin | None = None,
    ) -> None:
        self._queue.put((key, text, prompt_tokens, completion_tokens, reasoning, origin or Origin()))

    def flush(self) -> None:
        if not self._thread.is_alive():
            raise RuntimeError("the cache writer is closed")
        done = threading.Event()
        self._queue.put(done)
        done.wait()
        error, self._error = self._error, None
        if error is not None:
            raise RuntimeError("could not write LLM answers to the cache") from error

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self.flush()
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            burst = [self._queue.get()]
            while True:
                try:
                    burst.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._commit([item for item in burst if isinstance(item, tuple)])
            for item in burst:
                if isinstance(item, threading.Event):
                    item.set()
            if None in burst:
                return

    def _commit(self, rows: list[Row]) -> None:
        if not rows:
            return
        try:
            self._cache.put_many(rows)
        except Exception as error:  # reported to the caller by flush()
            self._error = error


def split_cached(cache: LLMCache, keys: Sequence[str]) -> tuple[list[ChatResponse | None], dict[str, list[int]]]:
    """Answers already cached (None elsewhere), and the positions of each missing key.

    Identical requests in one batch share a key, so each missing key is sent once.
    """
    hits = cache.get_many(keys)
    responses: list[ChatResponse | None] = [None] * len(keys)
    missing: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        hit = hits.get(key)
        if hit is None:
            missing.setdefault(key, []).append(i)
        else:
            responses[i] = ChatResponse(
                hit.text, None, True, hit.prompt_tokens, hit.completion_tokens, 0, hit.reasoning
            )
    return responses, missing


def fill(responses: list[ChatResponse | None], positions: list[int], answer: ChatResponse) -> None:
    """Give one answer to every position that asked for it; copies past the first cost nothing."""
    responses[positions[0]] = answer
    copy = replace(answer, cached=True, retries=0) if answer.ok else answer
    for i in positions[1:]:
        responses[i] = copy
