"""Judgments, one JSONL file per reviewer under OUT/review/, appended as each is made; the
latest line for an item wins, so a reviewer can change an answer and resume any time."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

ANSWERS = {"span_answers": ("yes", "partly", "no"), "understandable": ("yes", "no"), "better_elsewhere": ("yes", "no")}
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
_lock = threading.Lock()


class JudgmentError(ValueError):
    pass


def valid_reviewer(name: str) -> bool:
    return bool(_NAME.match(name))


def judgments_file(folder: Path, reviewer: str) -> Path:
    return folder / "review" / f"judgments-{reviewer}.jsonl"


def save_judgment(folder: Path, reviewer: str, judgment: dict[str, Any], known_ids: set[str]) -> dict[str, Any]:
    if judgment.get("query_id") not in known_ids:
        raise JudgmentError(f"no item {judgment.get('query_id')!r} in the sample")
    for question, allowed in ANSWERS.items():
        if judgment.get(question) not in allowed:
            raise JudgmentError(f"{question} must be one of {', '.join(allowed)}")
    line = {
        "query_id": judgment["query_id"],
        "reviewer": reviewer,
        **{q: judgment[q] for q in ANSWERS},
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path = judgments_file(folder, reviewer)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock, path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return line


def latest_judgments(path: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for text in path.read_text(encoding="utf-8").splitlines():
            if text.strip():
                row = json.loads(text)
                found[row["query_id"]] = row
    return found


def all_reviewers(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """reviewer -> query id -> their latest judgment."""
    return {
        p.stem.removeprefix("judgments-"): latest_judgments(p)
        for p in sorted((folder / "review").glob("judgments-*.jsonl"))
    }
