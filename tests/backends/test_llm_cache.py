from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from builder.backends.llm import LLMCache, key_for
from builder.backends.llm.cache import CacheWriter

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
