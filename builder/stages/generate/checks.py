"""Checks on freshly generated questions: repeats within a document, and the language.

A question whose normalized text repeats an earlier question of the same document is
`duplicate_query` (two calls may pick the same sentence). A question langdetect places,
with confidence, in another language than its document is `query_wrong_language`;
questions too short for langdetect to be trusted, and documents in a language it cannot
name, are not judged. langdetect costs about a second per process to load and a few
milliseconds per question, so `BackgroundDetector` does that work on a thread while
the stage waits on the model.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from builder.textutil.languages import (
    Detection,
    detect_base,
    detectable,
    load_profiles,
    normalise,
    same_language,
)
from builder.util.lazy import lazy_import

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_import("polars")

# Fewer letters than this and langdetect guesses (a Han, kana or Hangul character counts
# as 3 letters: it carries about a word).
MIN_LETTERS = 15
MIN_CONFIDENCE = 0.9
_CJK = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def repeated_questions(queries: pl.DataFrame, new_ids: list[str]) -> dict[str, str]:
    """New query ids whose normalized text an earlier query of the same document has."""
    from builder.textutil.normalize import normalize_text  # numpy: loaded when a stage runs, not to read its params

    fresh = set(new_ids)
    seen: set[tuple[str, str]] = set()
    out: dict[str, str] = {}
    for qid, text, doc_id in queries.select("query_id", "text", "doc_id").iter_rows():
        if text is None:
            continue
        key = (doc_id, normalize_text(text))
        if key in seen and qid in fresh:
            out[qid] = "duplicate_query"
        seen.add(key)
    return out


def letters(text: str) -> int:
    cjk = len(_CJK.findall(text))
    return sum(ch.isalpha() for ch in text) + 2 * cjk


class BackgroundDetector:
    """`detect_base` on one worker thread, which loads langdetect's profiles first.

    Questions handed to `submit` as their answers arrive are detected while later
    requests are still out; `detect` waits for a text's verdict (or detects it then).
    Verdicts depend only on the text (langdetect is seeded), so they match `detect_base`.
    Use it from one thread.
    """

    def __init__(self) -> None:
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="langdetect")
        self._worker.submit(load_profiles)
        self._found: dict[str, Future[Detection | None]] = {}

    def submit(self, texts: Iterable[str]) -> None:
        for text in texts:
            # Texts too short to judge are never asked about.
            if text not in self._found and letters(text) >= MIN_LETTERS:
                self._found[text] = self._worker.submit(_detect_and_yield, text)

    def detect(self, text: str) -> Detection | None:
        if text not in self._found:
            self._found[text] = self._worker.submit(_detect_and_yield, text)
        return self._found[text].result()

    def close(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)


def _detect_and_yield(text: str) -> Detection | None:
    found = detect_base(text)
    # Let the threads that send and receive requests in at once rather than after the
    # interpreter's switch interval: between questions the worker would otherwise keep it.
    time.sleep(0)
    return found


def wrong_language(
    queries: pl.DataFrame, detect: Callable[[str], Detection | None] = detect_base
) -> tuple[dict[str, str], dict[str, int]]:
    """Queries to drop as `query_wrong_language`, and how many were checked or too short."""
    out: dict[str, str] = {}
    counts = {"checked": 0, "too_short": 0, "wrong": 0}
    for qid, text, lang in queries.select("query_id", "text", "lang").iter_rows():
        expected = normalise(lang)
        if text is None or expected is None or not detectable(expected):
            continue
        if letters(text) < MIN_LETTERS:
            counts["too_short"] += 1
            continue
        counts["checked"] += 1
        found = detect(text)
        if found is not None and found.prob >= MIN_CONFIDENCE and not same_language(found.lang, expected):
            out[qid] = "query_wrong_language"
            counts["wrong"] += 1
    return out, counts
