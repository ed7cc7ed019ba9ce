"""First-stage search in `build-bench eval` through the retrievers quality control uses
(builder.backends.retrievers): one BM25, whose tokens split Han and kana per character,
and one dense retriever over a bi-encoder's unit vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from builder.backends.llm import BackendUnavailable
from builder.backends.rerankers import BM25Config
from builder.backends.rerankers.bm25 import BM25Scorer
from builder.backends.retrievers import make_retriever
from builder.evaluation.data import EvalData, EvalError
from builder.evaluation.dense import dense_scorer, measure_windows
from builder.evaluation.progress import in_batches, task
from builder.evaluation.retrievers import Retrieval, RetrieverSpec, document_inputs


def first_stage(spec: RetrieverSpec, data: EvalData, k: int, batch_size: int = 32) -> Retrieval:
    """Top `k` documents per query for a bm25/st/flag spec (rerank is composed by the caller).
    BM25 leaves out documents that share no term with the query rather than tie them at 0."""
    if spec.kind not in ("bm25", "st", "flag"):
        raise EvalError(f"{spec.label!r} is not a first-stage retriever")
    texts, _ = document_inputs(data)  # title + text; the bi-encoder adds its own prefix
    try:
        scorer = BM25Scorer(spec.label, BM25Config()) if spec.kind == "bm25" else dense_scorer(spec, batch_size)
        queries = data.queries["text"].to_list()
        searcher = make_retriever(scorer if spec.kind == "bm25" else ShowingEncoder(scorer, spec.label), texts)
        with task(f"{spec.label}: retrieving", len(queries)) as advance:
            hits = searcher.search(queries, k)
            advance(len(queries))
        doc_ids = data.corpus["doc_id"].to_list()
        run = {qid: {doc_ids[r]: float(s) for r, s in zip(rows, scores)}
               for qid, (rows, scores) in zip(data.queries["query_id"], hits)}
        if isinstance(scorer, BM25Scorer):
            return Retrieval(run=run)
        return measure_windows(Retrieval(run=run, tokenizer=spec.model), scorer, data, spec.doc_prefix)
    except BackendUnavailable as exc:
        raise EvalError(f"{spec.label}: {exc}") from None


class ShowingEncoder:
    """A bi-encoder whose `embed` runs in blocks of a few batches, so a progress bar can follow."""

    def __init__(self, encoder: Any, label: str) -> None:
        self.encoder = encoder
        self.name = label

    def embed(self, texts: Sequence[str], *, queries: bool = False) -> np.ndarray:
        size = 8 * int(getattr(getattr(self.encoder, "config", None), "batch_size", 32))
        what = f"{self.name}: encoding {'queries' if queries else 'documents'}"
        blocks = [self.encoder.embed(list(chunk), queries=queries) for chunk in in_batches(texts, size, what)]
        blocks = [b for b in blocks if b.size]
        return np.concatenate(blocks) if blocks else self.encoder.embed([], queries=queries)
