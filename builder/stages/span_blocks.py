"""Span matching over blocks of documents: the row-parallel part of `localize_spans`.

A block item is one document with the references of all its queries, so each text is
shipped (and indexed) once. The block function is module-level and pure, so an executor
can run it on any worker and a retried block gives the same answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from builder.executors import map_blocks
from builder.textutil.spans import DocumentIndex, MatchMethod, SpanFailure, locate_references

if TYPE_CHECKING:
    from builder.executors import Executor

DocQueries = tuple[str, list[list[str]]]  # a document's text, each query's references
Match = list[dict[str, Any]] | str  # the query's spans, or why it has none


def match_block(fuzzy_min_score: float, methods: Sequence[MatchMethod], block: list[DocQueries]) -> list[list[Match]]:
    """Per document, per query: its merged spans as dicts, or the failure reason."""
    out = []
    for text, queries in block:
        index = DocumentIndex(text)
        out.append([_match(index, refs, fuzzy_min_score, methods) for refs in queries])
    return out


def _match(index: DocumentIndex, refs: list[str], fuzzy_min_score: float, methods: Sequence[MatchMethod]) -> Match:
    result = locate_references(index, refs, fuzzy_min_score, methods)
    return str(result) if isinstance(result, SpanFailure) else [vars(s) for s in result]


def match_queries(executor: Executor, block_size: int, texts: dict[str, str], wanted: Sequence[tuple[str, list[str]]],
                  fuzzy_min_score: float, methods: Sequence[MatchMethod],
                  on_block: Callable[[int], None] | None = None) -> list[Match]:
    """One match per `(doc_id, references)` of `wanted`, in its order. Queries are grouped
    by document (in order of first appearance) and blocks of `block_size` documents run
    on `executor`; `on_block` hears how many documents each finished block held."""
    groups: dict[str, list[int]] = {}
    for at, (doc_id, _) in enumerate(wanted):
        groups.setdefault(doc_id, []).append(at)
    items = [(texts[doc_id], [wanted[at][1] for at in ats]) for doc_id, ats in groups.items()]
    fn = functools.partial(match_block, fuzzy_min_score, list(methods))
    results = map_blocks(executor, fn, items, block_size, on_block)
    out: list[Match] = [""] * len(wanted)
    for ats, matches in zip(groups.values(), results):
        for at, match in zip(ats, matches):
            out[at] = match
    return out


def documents_in(wanted: Sequence[tuple[str, list[str]]]) -> int:
    """How many blocks items `match_queries` makes of `wanted`: its distinct documents."""
    return len({doc_id for doc_id, _ in wanted})
