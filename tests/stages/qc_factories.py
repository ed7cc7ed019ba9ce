"""Small factories for the quality-control stage tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.backends.llm.prompt_templates import PromptLibrary
from builder.backends.rerankers import AnyRerankerConfig, make_reranker
from builder.backends.rerankers.base import RerankerBase
from builder.bench import SPAN_DTYPE, Bench
from tests.fixtures.scripted_grader import with_grades
from tests.helpers import make_ctx


def span(text: str, doc: str) -> list[dict[str, Any]]:
    start = doc.index(text)
    return [{"start": start, "end": start + len(text), "method": "exact", "score": 100.0}]


def bench_of(docs: dict[str, str], queries: Sequence[dict[str, Any]]) -> Bench:
    """Documents by id; queries as dicts with query_id, text, doc_id and any extra column."""
    corpus = pl.DataFrame(
        {"doc_id": list(docs), "text": list(docs.values()), "n_tokens": [len(t.split()) for t in docs.values()]}
    )
    rows = [dict(q) for q in queries]
    overrides = {"spans": SPAN_DTYPE} if any("spans" in q for q in rows) else {}
    table = pl.DataFrame(rows, schema_overrides=overrides) if rows else None
    qrels = (
        pl.DataFrame(
            {"query_id": [q["query_id"] for q in rows], "doc_id": [q["doc_id"] for q in rows], "score": [1] * len(rows)}
        )
        if rows
        else None
    )
    return Bench.of(corpus, table, qrels)


class ByLength:
    """A stand-in reranker: longer texts score higher (or lower, with sign=-1)."""

    normalized = False

    def __init__(self, name: str, sign: int = 1) -> None:
        self.name, self.sign = name, sign

    def fit(self, corpus_texts: Sequence[str]) -> None:
        pass

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.score_pairs([(query, t) for t in texts])

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return [float(self.sign * len(t)) for _, t in pairs]

    def close(self) -> None:
        pass


def graders(fake_openai: Any) -> Iterator[Callable[..., OpenAIBackend]]:
    """For a fixture: makes backends answered by the scripted grader, closed at teardown."""
    made: list[OpenAIBackend] = []

    def make(name: str = "judge", responder: Any = None, **config: Any) -> OpenAIBackend:
        srv = fake_openai(responder=responder or with_grades())
        backend = OpenAIBackend(name, OpenAIModelConfig(model=name, base_url=srv.base_url, **config), LLMCache.memory())
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def qc_ctx(
    tmp_path: Path,
    *,
    rerankers: dict[str, Any] | None = None,
    configs: dict[str, AnyRerankerConfig] | None = None,
    llms: dict[str, Any] | None = None,
    seed: int = 0,
) -> Any:
    """A stage context whose `reranker(name)` serves ready objects or builds from configs."""
    ctx = make_ctx(tmp_path, llms=llms, seed=seed)
    ready = dict(rerankers or {})
    for name, config in (configs or {}).items():
        ready[name] = make_reranker(name, config, ctx.llm, PromptLibrary())
    ctx.reranker_factory = ready.__getitem__
    return ctx


class ShortWindow(RerankerBase):
    """A stand-in neural scorer that reads only the first `max_length` words of a text
    (as a model truncates its input): the score is how many distinct query words it sees."""

    def __init__(self, name: str, max_length: int) -> None:
        self.name, self.max_length = name, max_length

    def text_budget(self, query: str) -> int | None:
        return self.max_length

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        out = []
        for query, text in pairs:
            seen = set(text.lower().split()[: self.max_length])
            out.append(float(sum(w in seen for w in set(query.lower().split()))))
        return out
