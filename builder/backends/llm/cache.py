"""SQLite store of model answers, keyed by everything that shapes an answer."""

from __future__ import annotations

import hashlib
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from builder.backends.llm.base import ChatResponse, Message

# Well under SQLite's host-parameter limit on old builds (999).
_CHUNK = 900

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created_at REAL NOT NULL
) WITHOUT ROWID
"""


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    prompt_tokens: int
    completion_tokens: int


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


class LLMCache:
    """Answer cache shared by threads (one locked connection) and processes (WAL)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit: every write is durable once its statement returns.
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path),
            check_same_thread=False,
            isolation_level=None,
            timeout=60.0,
        )
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA busy_timeout = 60000")
            if path is not None:
                self._db.execute("PRAGMA journal_mode = WAL")
                # WAL + NORMAL survives a killed process; only power loss can drop the tail.
                self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute(_SCHEMA)

    @classmethod
    def memory(cls) -> LLMCache:
        return cls(None)

    def get_many(self, keys: Sequence[str]) -> dict[str, CachedAnswer]:
        unique = list(dict.fromkeys(keys))
        found: dict[str, CachedAnswer] = {}
        with self._lock:
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, text, prompt_tokens, completion_tokens FROM answers WHERE key IN ({marks})",
                    chunk,
                )
                for key, text, pt, ct in rows:
                    found[key] = CachedAnswer(text, pt, ct)
        return found

    def get(self, key: str) -> CachedAnswer | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, text: str, prompt_tokens: int, completion_tokens: int) -> None:
        self.put_many([(key, text, prompt_tokens, completion_tokens)])

    def put_many(self, rows: Iterable[tuple[str, str, int, int]]) -> None:
        """Store answers in one transaction, committed before returning."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)",
                    [(*row, now) for row in rows],
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CacheWriter:
    """Commits answers from a background thread, one transaction per burst.

    An event loop handing answers over pays a queue put instead of a disk write;
    `flush` returns once everything handed over so far is committed.
    """

    def __init__(self, cache: LLMCache) -> None:
        self._cache = cache
        self._queue: queue.SimpleQueue[tuple[str, str, int, int] | threading.Event | None] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="llm-cache-writer", daemon=True)
        self._thread.start()

    def put(self, key: str, text: str, prompt_tokens: int, completion_tokens: int) -> None:
        self._queue.put((key, text, prompt_tokens, completion_tokens))

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

    def _commit(self, rows: list[tuple[str, str, int, int]]) -> None:
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
            responses[i] = ChatResponse(hit.text, None, True, hit.prompt_tokens, hit.completion_tokens, 0)
    return responses, missing


def fill(responses: list[ChatResponse | None], positions: list[int], answer: ChatResponse) -> None:
    """Give one answer to every position that asked for it; copies past the first cost nothing."""
    responses[positions[0]] = answer
    copy = replace(answer, cached=True, retries=0) if answer.ok else answer
    for i in positions[1:]:
        responses[i] = copy
