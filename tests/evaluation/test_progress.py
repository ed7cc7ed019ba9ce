"""Encoding and retrieval report progress on a terminal, and stay silent elsewhere."""

from __future__ import annotations

import io

import numpy as np
from rich.console import Console

from builder.evaluation import progress
from builder.evaluation.dense import _encode, top_k


class CountingEncoder:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        self.calls.append(len(texts))
        return np.ones((len(texts), 2), dtype=np.float32)


def test_encoding_advances_a_bar_block_by_block():
    out = io.StringIO()
    progress.set_console(Console(file=out, force_terminal=True, width=120))
    try:
        encoder = CountingEncoder()
        vectors = _encode(encoder, [f"t{i}" for i in range(50)], 2, "st:m: encoding documents")
        run = top_k(vectors[:3], vectors, ["a", "b", "c"], [f"d{i}" for i in range(50)], 5)
    finally:
        progress.set_console(None)
    assert vectors.shape == (50, 2) and encoder.calls == [16, 16, 16, 2]
    assert len(run) == 3 and all(len(found) == 5 for found in run.values())
    text = out.getvalue()
    assert "st:m: encoding documents" in text and "50/50" in text
    assert "retrieving" in text and "3/3" in text


def test_no_terminal_no_bar():
    out = io.StringIO()
    progress.set_console(Console(file=out, force_terminal=False))
    try:
        _encode(CountingEncoder(), ["a", "b"], 1, "encoding")
    finally:
        progress.set_console(None)
    assert out.getvalue() == ""
