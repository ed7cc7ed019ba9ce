"""First-stage search in `build-bench eval` through the retrievers quality control uses
(builder.backends.retrievers): one BM25, whose tokens split Han and kana per character,
and one dense retriever over a bi-encoder's unit vectors."""

from __future__ import annotations

from builder.backends.llm import BackendUnavailable
from builder.backends.rerankers import BM25Config
from builder.backends.rerankers.bm25 import BM25Scorer
from builder.backends.retrievers import make_retriever
from builder.evaluation.data import EvalData, EvalError
from builder.evaluation.dense import dense_scorer, measure_windows
from builder.evaluation.retrievers import Retrieval, RetrieverSpec, document_inputs


def first_stage(spec: RetrieverSpec, data: EvalData, k: int, batch_size: int = 32) -> Retrieval:
    """Top `k` documents per query for a bm25/st/flag spec (rerank is composed by the caller).
    BM25 leaves out documents that share no term with the query rather than tie them at 0."""
    if spec.kind not in ("bm25", "st", "flag"):
        raise EvalError(f"{spec.label!r} is not a first-stage retriever")
    texts, _ = document_inputs(data)  # title + text; the bi-encoder adds its own prefix
    try:
        scorer = BM25Scorer(spec.label, BM25Config()) if spec.kind == "bm25" else dense_scorer(spec, batch_size)
        hits = make_retriever(scorer, texts).search(data.queries["text"].to_list(), k)
        doc_ids = data.corpus["doc_id"].to_list()
        run = {qid: {doc_ids[r]: float(s) for r, s in zip(rows, scores)}
               for qid, (rows, scores) in zip(data.queries["query_id"], hits)}
        if isinstance(scorer, BM25Scorer):
            return Retrieval(run=run)
        return measure_windows(Retrieval(run=run, tokenizer=spec.model), scorer, data, spec.doc_prefix)
    except BackendUnavailable as exc:
        raise EvalError(f"{spec.label}: {exc}") from None
