"""Encoding and retrieval report progress on a terminal, and stay silent elsewhere."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import polars as pl
from rich.console import Console

from builder.backends.retrievers import DenseRetriever
from builder.evaluation import progress
from builder.evaluation.data import EvalData
from builder.evaluation.search import ShowingEncoder, document_blocks


class CountingEncoder:
    class config:
        batch_size = 2

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: list[str], *, queries: bool = False) -> np.ndarray:
        self.calls.append(len(texts))
        return np.ones((len(texts), 2), dtype=np.float32)


def test_encoding_advances_a_bar_block_by_block():
    out = io.StringIO()
    progress.set_console(Console(file=out, force_terminal=True, width=120))
    try:
        encoder = CountingEncoder()
        data = EvalData(
            Path("."),
            "f" * 64,
            pl.DataFrame({"doc_id": [f"d{i}" for i in range(50)], "text": ["t"] * 50}),
            pl.DataFrame({"query_id": ["q"], "text": ["?"]}),
            {"q": {"d0": 1}},
            unjudged_queries=0,
        )
        blocks = document_blocks(data, 16, "st:m: encoding documents")
        found = DenseRetriever(ShowingEncoder(encoder, "st:m"), blocks).search(["a", "b", "c"], 5)
    finally:
        progress.set_console(None)
    assert encoder.calls == [16, 16, 16, 2, 3]
    assert len(found) == 3 and all(len(rows) == 5 for rows, _ in found)
    text = out.getvalue()
    assert "st:m: encoding documents" in text and "50/50" in text
    assert "st:m: encoding queries" in text and "3/3" in text


def test_no_terminal_no_bar():
    out = io.StringIO()
    progress.set_console(Console(file=out, force_terminal=False))
    try:
        ShowingEncoder(CountingEncoder(), "st:m").embed(["a", "b"])
    finally:
        progress.set_console(None)
    assert out.getvalue() == ""
