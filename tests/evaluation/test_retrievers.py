"""Retriever spec parsing: options, command-line defaults, and the errors a typo gets."""

from __future__ import annotations

import re

import pytest

from builder.evaluation.data import EvalError
from builder.evaluation.retrievers import parse_spec


def test_options_after_the_bar_override_command_line_defaults():
    spec = parse_spec(
        "st:intfloat/e5-base|query_prefix=query: |max_length=128",
        {"max_length": 512, "doc_prefix": "passage: ", "query_prefix": None},
    )
    assert (spec.kind, spec.model) == ("st", "intfloat/e5-base")
    assert (spec.query_prefix, spec.doc_prefix, spec.max_length) == ("query: ", "passage: ", 128)


def test_same_settings_share_a_cache_entry_however_spelled():
    a = parse_spec("st:m|max_length=64")
    b = parse_spec("st:m", {"max_length": 64})
    assert a.label != b.label
    assert (a.cache_key(), a.slug()) == (b.cache_key(), b.slug())
    assert a.cache_key() != parse_spec("st:m").cache_key()


def test_rerank_wraps_a_first_stage_spec():
    spec = parse_spec("rerank:flag:BAAI/bge-m3|max_length=1024+bge-reranker")
    assert spec.kind == "rerank" and spec.reranker == "bge-reranker"
    assert spec.first is not None and (spec.first.kind, spec.first.max_length) == ("flag", 1024)
    assert spec.slug() == "rerank_flag_BAAI/bge-m3_bge-reranker"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bm52", "did you mean 'bm25'"),
        ("bm25|max_length=3", "bm25 takes no model"),
        ("st:", "name a model"),
        ("st:m|window=3", "is not one of"),
        ("st:m|max_length=two", "valid integer"),
        ("rerank:bm25", re.escape("rerank:<retriever>+<reranker>")),
    ],
)
def test_bad_specs_say_what_is_wrong(text: str, message: str):
    with pytest.raises(EvalError, match=message):
        parse_spec(text)
