"""The run folder's record of provider batches: what was submitted, and what came of it.

A build in batch mode writes its requests to a provider batch and exits; the next run of
the same command collects the answers. Between the two, only this file (and the batch at
the provider) knows the requests are paid for, so it is written atomically after every
change and read back by every run (and by `build-bench cache`, which lists and cancels).

It holds, per model: the batches still open (id, where they were sent, the cache keys in
each), the answers collected into the LLM cache but not yet counted by a finished stage
(so the stage that uses them bills them, even when it ran to its end only a run later),
the budget a key is asked with after an answer cut off at max_tokens, how many batches a
key went through without an answer, and the keys whose answer failed for good.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from builder.util.atomic import write_text_atomic

BOOK_NAME = "llm_batches.json"
# A build that left work at a provider batch exits with this status (EX_TEMPFAIL: "try
# again later"), apart from failures (1, 2, 3) and stops on a signal (128 + N).
BATCH_PENDING_EXIT = 75
# How a custom_id is made from a cache key: the key itself, behind a prefix that says whose.
_ID_PREFIX = "bb-"


def custom_id(key: str) -> str:
    return f"{_ID_PREFIX}{key}"


def key_of(custom: object) -> str | None:
    """The cache key a custom_id names, or None when it is not one of ours."""
    if isinstance(custom, str) and custom.startswith(_ID_PREFIX) and len(custom) == len(_ID_PREFIX) + 64:
        return custom[len(_ID_PREFIX) :]
    return None


class BatchPending(Exception):
    """Work is waiting at a provider batch (or could not be submitted yet): the build stops
    here with one line saying what and how to go on; every answer so far is kept."""

    exit_code = BATCH_PENDING_EXIT


@dataclass
class OpenBatch:
    """A batch submitted and not yet collected."""

    id: str
    model: str  # the recipe's name for the model
    served_model: str
    base_url: str | None
    api_key_env: str
    stage: str | None
    input_file_id: str
    keys: list[str]
    submitted_at: float = field(default_factory=time.time)
    status: str = "submitted"  # the last status a poll saw


@dataclass
class ModelBook:
    collected: dict[str, list[int]] = field(default_factory=dict)  # key -> prompt, completion, cached tokens
    budgets: dict[str, int] = field(default_factory=dict)  # key -> max_tokens for its next submission
    spent: dict[str, list[int]] = field(default_factory=dict)  # key -> tokens of a cut-off answer before
    rounds: dict[str, int] = field(default_factory=dict)  # key -> batches it went through unanswered
    failed: dict[str, str] = field(default_factory=dict)  # key -> the error its answer failed with
    lost: dict[str, str] = field(default_factory=dict)  # key -> why no batch answered it (asked again later)
    problems: dict[str, int] = field(default_factory=dict)  # reason -> lines skipped, over all batches


class BatchBook:
    """`llm_batches.json` in a run folder; one object per run, shared by its models."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.open: list[OpenBatch] = []
        self.models: dict[str, ModelBook] = {}
        if path.is_file():
            self._read()

    def _read(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.open = [OpenBatch(**b) for b in data.get("open", [])]
            self.models = {name: ModelBook(**m) for name, m in data.get("models", {}).items()}
        except (ValueError, TypeError) as error:
            # An OSError: the build ends with this line (exit 1), as with any unreadable file.
            raise OSError(
                f"{self.path} is not a batch record this version can read ({error}); "
                "move it aside to start the batches over (answers already collected stay in the LLM cache)"
            ) from None

    def model(self, name: str) -> ModelBook:
        return self.models.setdefault(name, ModelBook())

    def open_of(self, model: str) -> list[OpenBatch]:
        return [b for b in self.open if b.model == model]

    def waiting_keys(self, model: str) -> set[str]:
        return {k for b in self.open_of(model) for k in b.keys}

    def close_batch(self, batch_id: str) -> None:
        self.open = [b for b in self.open if b.id != batch_id]

    def count_problems(self, model: str, problems: Counter[str]) -> None:
        book = self.model(model)
        for reason, n in problems.items():
            book.problems[reason] = book.problems.get(reason, 0) + n

    def save(self) -> None:
        models = {name: asdict(m) for name, m in self.models.items() if any(asdict(m).values())}
        if not self.open and not models:
            self.path.unlink(missing_ok=True)
            return
        data: dict[str, Any] = {"open": [asdict(b) for b in self.open], "models": models}
        write_text_atomic(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def books_under(run_root: Path) -> list[Path]:
    """Every batch record under a --run-dir (one per run folder: run_root/<recipe>/<inputs>/)."""
    return sorted(run_root.glob(f"*/*/{BOOK_NAME}"))
