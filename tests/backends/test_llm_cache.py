from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.backends.llm import CachedAnswer, ChatRequest, LLMCache, key_for
from builder.backends.llm.cache import CacheWriter
from tests.support.openai_server import FakeOpenAIServer

MESSAGES = [{"role": "user", "content": "hello"}]
SAMPLING = {"temperature": 0.0, "max_tokens": 10}


def test_key_is_stable_and_sensitive() -> None:
    key = key_for("openai", "m", SAMPLING, MESSAGES, None)
    assert key == key_for("openai", "m", dict(reversed(SAMPLING.items())), list(MESSAGES), None)
    assert key != key_for("openai", "m", {**SAMPLING, "temperature": 0.5}, MESSAGES, None)
    assert key != key_for("openai", "m2", SAMPLING, MESSAGES, None)
    assert key != key_for("openai", "m", SAMPLING, MESSAGES, {"type": "json_object"})
    assert len(key) == 64


def test_put_then_get_many_across_chunks(tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "c.sqlite")
    keys = [f"k{i}" for i in range(2500)]
    cache.put_many((k, f"text {k}", 1, 2) for k in keys[::2])
    found = cache.get_many(keys)
    assert len(found) == 1250
    assert found["k10"].text == "text k10" and found["k10"].completion_tokens == 2
    assert "k11" not in found


def test_answers_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "c.sqlite"
    LLMCache(path).put("a", "answer", 3, 4)
    cached = LLMCache(path).get("a")
    assert cached is not None and cached.text == "answer" and cached.prompt_tokens == 3


def test_threads_and_processes_can_write_together(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    cache = LLMCache(path)
    writer = (
        "import sys; from pathlib import Path; from builder.backends.llm import LLMCache\n"
        "c = LLMCache(Path(sys.argv[1]))\n"
        "for i in range(200): c.put(f'p{i}', 'x', 0, 0)\n"
    )
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    other = subprocess.Popen([sys.executable, "-c", writer, str(path)], env=env)

    def write(thread_no: int) -> None:
        for i in range(100):
            cache.put(f"t{thread_no}-{i}", "y", 0, 0)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert other.wait(timeout=60) == 0
    assert len(cache) == 600


def test_memory_cache_is_private() -> None:
    first, second = LLMCache.memory(), LLMCache.memory()
    first.put("a", "x", 0, 0)
    assert second.get("a") is None and len(first) == 1


def test_writer_commits_everything_by_flush(tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "w.sqlite")
    writer = CacheWriter(cache)
    for i in range(500):
        writer.put(f"k{i}", "x", 1, 1)
    writer.flush()
    assert len(LLMCache(tmp_path / "w.sqlite")) == 500
    writer.close()


def test_writer_reports_a_failed_write() -> None:
    cache = LLMCache.memory()
    writer = CacheWriter(cache)
    cache.close()
    writer.put("k", "x", 0, 0)
    with pytest.raises(RuntimeError, match="cache"):
        writer.flush()


def _filled_cache(path: Path) -> bytes:
    cache = LLMCache(path)
    cache.put_many((f"k{i}", "x" * 200, 1, 1) for i in range(2000))
    cache.close()
    return path.read_bytes()


DAMAGE = {
    "truncated to half": lambda data: data[: len(data) // 2],
    "random bytes": lambda data: random.Random(0).randbytes(len(data) // 2),
    "pages overwritten": lambda data: data[:4096] + b"\xff" * (len(data) - 8192) + data[-4096:],
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_cache_is_set_aside_and_replaced(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    path = tmp_path / "llm_cache.sqlite"
    damaged = damage(_filled_cache(path))
    path.write_bytes(damaged)
    notices: list[str] = []
    cache = LLMCache(path, notify=notices.append)
    assert cache.get_many([f"k{i}" for i in range(2000)]) == {}
    cache.put("k1", "asked again", 1, 1)
    assert cache.get("k1") == CachedAnswer("asked again", 1, 1)

    (aside,) = tmp_path.glob("llm_cache.sqlite.damaged-*")
    assert aside.read_bytes() == damaged
    assert len(notices) == 1 and "damaged" in notices[0] and aside.name in notices[0]
    cache.close()
    assert LLMCache(path).get("k1") is not None


def test_damage_found_later_does_not_stop_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "llm_cache.sqlite"
    data = _filled_cache(path)
    notices: list[str] = []
    cache = LLMCache(path, notify=notices.append)
    path.write_bytes(DAMAGE["pages overwritten"](data))
    writer = CacheWriter(cache)
    writer.put("new", "answer", 2, 3, "why")
    writer.flush()
    writer.close()
    assert cache.get("new") == CachedAnswer("answer", 2, 3, "why")
    assert len(notices) == 1 and len(list(tmp_path.glob("llm_cache.sqlite.damaged-*"))) == 1


def test_a_damaged_cache_means_answers_are_asked_again(
    tmp_path: Path, fake_openai: Callable[..., FakeOpenAIServer], make_backend: Callable[..., Any]
) -> None:
    srv = fake_openai()
    path = tmp_path / "llm_cache.sqlite"
    question = ChatRequest.of([{"role": "user", "content": "q"}])
    for _ in range(2):
        cache = LLMCache(path)
        first = make_backend(srv, cache=cache).chat_many([question])[0]
        cache.close()
    assert srv.request_count == 1
    path.write_bytes(random.Random(1).randbytes(8192))
    again = make_backend(srv, cache=LLMCache(path, notify=lambda notice: None)).chat_many([question])[0]
    assert (again.text, again.cached, srv.request_count) == (first.text, False, 2)


def test_an_old_cache_gains_the_reasoning_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE answers (key TEXT PRIMARY KEY, text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,"
            " completion_tokens INTEGER NOT NULL, created_at REAL NOT NULL) WITHOUT ROWID"
        )
        db.execute("INSERT INTO answers VALUES ('a', 'kept', 1, 2, 0.0)")
    db.close()
    cache = LLMCache(path)
    assert cache.get("a") == CachedAnswer("kept", 1, 2, None)
    cache.put("b", "new", 1, 1, "thoughts")
    assert cache.get("b") == CachedAnswer("new", 1, 1, "thoughts")
