"""Span matching over a block of documents: the part of `localize_spans` that executors
ship to workers.

A block item is one document with the references of all its queries, so each text is
shipped (and, when it pays, indexed) once. Pure, module-level, and importing only text utilities, so a
worker loads little and a retried block gives the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from builder.textutil.direct_spans import matcher_for
from builder.textutil.spans import DocumentIndex, MatchMethod, SpanFailure, locate_references

DocQueries = tuple[str, list[list[str]]]  # a document's text, each query's references
Match = list[dict[str, Any]] | str  # the query's spans, or why it has none


def match_block(fuzzy_min_score: float, methods: Sequence[MatchMethod], block: list[DocQueries]) -> list[list[Match]]:
    """Per document, per query: its merged spans as dicts, or the failure reason. A
    document many references point into is indexed first; one with few is searched
    directly (see `builder.textutil.direct_spans`)."""
    out = []
    for text, queries in block:
        matcher = matcher_for(text, sum(map(len, queries)))
        out.append([_match(matcher, refs, fuzzy_min_score, methods) for refs in queries])
    return out


def _match(index: DocumentIndex, refs: list[str], fuzzy_min_score: float, methods: Sequence[MatchMethod]) -> Match:
    result = locate_references(index, refs, fuzzy_min_score, methods)
    return str(result) if isinstance(result, SpanFailure) else [vars(s) for s in result]
