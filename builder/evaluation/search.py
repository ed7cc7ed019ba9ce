"""First-stage search in `build-bench eval` through the retrievers quality control uses
(builder.backends.retrievers): one BM25, whose tokens split Han and kana per character,
and one dense retriever over a bi-encoder's unit vectors."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from builder.backends.llm import BackendUnavailable
from builder.backends.rerankers import BM25Config
from builder.backends.rerankers.bm25 import BM25Scorer
from builder.backends.retrievers import BLOCK, make_retriever
from builder.evaluation.data import EvalData, EvalError
from builder.evaluation.dense import dense_scorer, measure_windows
from builder.evaluation.progress import in_batches, task
from builder.evaluation.retrievers import Retrieval, RetrieverSpec, document_inputs

if TYPE_CHECKING:
    from builder.backends.rerankers.neural import BiEncoderScorer


def first_stage(
    spec: RetrieverSpec,
    data: EvalData,
    k: int,
    batch_size: int = 32,
    scratch: Path | None = None,
    block_size: int | None = None,
    encoder: BiEncoderScorer | None = None,
) -> Retrieval:
    """Top `k` documents per query for a bm25/st/flag spec (rerank is composed by the caller).
    BM25 leaves out documents that share no term with the query rather than tie them at 0.

    The corpus is read in blocks of `block_size` documents (by default 8 encoding batches
    for a bi-encoder, which is how its documents are batched anyway); BM25 and the dense
    vectors keep their scratch files in a temporary folder under `scratch`. A dense spec
    uses `encoder` where given (a grid's cells share one, which keeps every vector it
    computed), else a bi-encoder of its own."""
    if spec.kind not in ("bm25", "st", "flag"):
        raise EvalError(f"{spec.label!r} is not a first-stage retriever")
    try:
        scorer = (
            BM25Scorer(spec.label, BM25Config()) if spec.kind == "bm25" else encoder or dense_scorer(spec, batch_size)
        )
        size = block_size or (BLOCK if spec.kind == "bm25" else 8 * batch_size)
        what = f"{spec.label}: " + ("indexing" if spec.kind == "bm25" else "encoding documents")

        def texts() -> Iterator[list[str]]:
            return document_blocks(data, size, what)

        queries = data.queries["text"].to_list()
        searcher = make_retriever(scorer if spec.kind == "bm25" else ShowingEncoder(scorer, spec.label), texts, scratch)
        try:
            with task(f"{spec.label}: retrieving", len(queries)) as advance:
                hits = searcher.search(queries, k)
                advance(len(queries))
        finally:
            searcher.close()
        doc_ids = data.corpus.doc_ids.to_list()
        run = {
            qid: {doc_ids[int(r)]: float(s) for r, s in zip(rows, scores)}
            for qid, (rows, scores) in zip(data.queries["query_id"], hits)
        }
        if isinstance(scorer, BM25Scorer):
            return Retrieval(run=run)
        return measure_windows(Retrieval(run=run, tokenizer=spec.model), scorer, data, spec.doc_prefix)
    except BackendUnavailable as exc:
        raise EvalError(f"{spec.label}: {exc}") from None


def document_blocks(data: EvalData, size: int, label: str) -> Iterator[list[str]]:
    """What a retriever reads of each document (title + text; a bi-encoder adds its own
    prefix), `size` documents at a time, under a progress bar named `label`."""
    with task(label, data.corpus.height) as advance:
        for block in data.corpus.blocks(size):
            yield document_inputs(block)[0]
            advance(block.height)


class ShowingEncoder:
    """A bi-encoder whose `embed` of a long list (the queries) runs in blocks of a few
    batches, so a progress bar can follow."""

    def __init__(self, encoder: Any, label: str) -> None:
        self.encoder = encoder
        self.name = label

    def embed(self, texts: Sequence[str], *, queries: bool = False) -> np.ndarray:
        if not queries:  # documents arrive in blocks, under the bar of the corpus read
            return self.encoder.embed(texts)
        size = 8 * int(getattr(getattr(self.encoder, "config", None), "batch_size", 32))
        chunks = in_batches(texts, size, f"{self.name}: encoding queries")
        blocks = [b for chunk in chunks if (b := self.encoder.embed(list(chunk), queries=True)).size]
        return np.concatenate(blocks) if blocks else self.encoder.embed([], queries=True)
