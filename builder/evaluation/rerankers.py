"""`rerank:<retriever>+<backend>[:<model>]` in `build-bench eval`: the quality-control
reranker backends (bm25, flag, cross_encoder, bi_encoder) as second-stage scorers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from builder.evaluation.retrievers import EvalError, document_inputs

if TYPE_CHECKING:
    from builder.evaluation.data import EvalData
    from builder.evaluation.retrievers import Scorer


def _no_llm(name: str) -> Any:
    raise EvalError("llm_judge needs a recipe's models; use it in a build, not in eval")


def reranker_factories(data: EvalData, names: list[str]) -> dict[str, Any]:
    """One factory per reranker named in the specs, e.g. `cross_encoder:BAAI/bge-reranker-v2-m3`."""
    return {name: lambda n, d=data: _make(n, d) for name in names}


def _make(name: str, data: EvalData) -> Scorer:
    from builder.backends.llm import BackendUnavailable
    from builder.backends.rerankers import RerankerConfig, make_reranker
    from builder.backends.retrievers import BLOCK

    backend, _, model = name.partition(":")
    try:
        config = TypeAdapter(RerankerConfig).validate_python(
            {"backend": backend, **({"model": model} if model else {})}
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise EvalError(
            f"reranker {name!r}: {first['msg']} (write <backend>[:<model>], backends: "
            "bm25, flag, cross_encoder, bi_encoder)"
        ) from None
    try:
        reranker = make_reranker(name, config, _no_llm)
    except BackendUnavailable as exc:
        raise EvalError(str(exc)) from None
    # Fitted on what `rerank` hands it (title + text), as the BM25 first stage is.
    reranker.fit([text for block in data.corpus.blocks(BLOCK) for text in document_inputs(block)[0]])
    return reranker.score
