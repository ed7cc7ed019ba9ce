"""Query types by interrogative word, in English and Chinese.

English questions are typed by their first word. Chinese puts the question word
anywhere ("X是什么"), so the first interrogative found in the text decides; longer
words are tried first so 为什么 is not read as 什么 and 哪里 not as 哪. A query with
no question word and no question mark is a claim (SciFact-style statements).
"""

from __future__ import annotations

import re

QUERY_TYPES = ("what", "how", "why", "which", "when", "where", "who", "claim", "other")

_ENGLISH = {
    "what": "what",
    "whats": "what",
    "what's": "what",
    "how": "how",
    "why": "why",
    "which": "which",
    "when": "when",
    "where": "where",
    "who": "who",
    "whom": "who",
    "whose": "who",
    "who's": "who",
}
# Ordered longest-first so the more specific word wins where one contains another.
_CHINESE = (
    ("什么时候", "when"),
    ("为什么", "why"),
    ("为何", "why"),
    ("何时", "when"),
    ("几时", "when"),
    ("哪里", "where"),
    ("哪儿", "where"),
    ("何处", "where"),
    ("在哪", "where"),
    ("怎么样", "how"),
    ("怎么", "how"),
    ("怎样", "how"),
    ("如何", "how"),
    ("什么", "what"),
    ("啥", "what"),
    ("哪", "which"),
    ("谁", "who"),
)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_FIRST_WORD = re.compile(r"[A-Za-z']+")
_QUESTION_MARKS = ("?", "？")
_CHINESE_PARTICLES = ("吗", "呢")


def _is_chinese(text: str, lang: str | None) -> bool:
    if lang:
        return lang.lower().startswith("zh")
    return bool(_CJK.search(text))


def query_type(text: str | None, lang: str | None = None) -> str:
    """One of `QUERY_TYPES` for a query text."""
    text = (text or "").strip()
    if not text:
        return "other"
    asks = text.endswith(_QUESTION_MARKS)
    if _is_chinese(text, lang):
        for word, kind in _CHINESE:
            if word in text:
                return kind
        asks = asks or text.rstrip("。.！!").endswith(_CHINESE_PARTICLES)
        return "other" if asks else "claim"
    match = _FIRST_WORD.match(text)
    if match and match.group(0).lower() in _ENGLISH:
        return _ENGLISH[match.group(0).lower()]
    return "other" if asks else "claim"
