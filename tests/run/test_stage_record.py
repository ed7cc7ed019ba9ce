"""StageRecord: the flat JSON object of stats.json, written and read back exactly."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from builder.records.stage_record import StageRecord

# A stage record as checkpoints and stats.json held it before StageRecord existed.
OLD_STAGE = {
    "stage": "03_span_contrast",
    "docs_in": 4,
    "docs_out": 4,
    "docs_added": 0,
    "queries_in": 5,
    "queries_out": 3,
    "queries_added": 0,
    "dropped": {"contrast_not_higher:bm25": 2},
    "seconds": 0.25,
    "llm": {
        "calls": 2,
        "cache_hits": 0,
        "retries": 0,
        "failures": 0,
        "prompt_tokens": 9,
        "completion_tokens": 3,
        "transport_failures": 0,
        "last_transport_error": None,
    },
    "prompts": {"relevance_grade": "ab" * 32},
    "span_contrast": {"bm25": {"higher": 3, "not_higher": 2, "no_score": 0}},
    "kept_by_third": {"beginning": {"in": 2, "kept": 2, "share": 1.0}},
    "llm_transport_failures": 1,
}
OLD_LOAD = {
    "stage": "00_load",
    "docs_in": 6,
    "docs_out": 6,
    "queries_in": 0,
    "queries_out": 0,
    "dropped": {},
    "seconds": 0.1,
    "tokenizer": "words",
}


@pytest.mark.parametrize("old", [OLD_STAGE, OLD_LOAD])
def test_old_records_read_back_and_serialise_byte_identical(old):
    record = StageRecord.from_json(json.loads(json.dumps(old)))
    assert json.dumps(record.to_json(), indent=2) == json.dumps(old, indent=2)


def test_stage_figures_are_kept_apart_from_the_counts():
    record = StageRecord.from_json(OLD_STAGE)
    assert record.figures == {"span_contrast": OLD_STAGE["span_contrast"], "kept_by_third": OLD_STAGE["kept_by_third"]}
    assert record.kept_by_third == OLD_STAGE["kept_by_third"]
    assert record.n_dropped == 2 and record.llm_transport_failures == 1 and not record.resumed
    assert StageRecord.from_json(OLD_LOAD).tokenizer == "words"


def test_resumed_is_written_last_and_only_when_true():
    record = StageRecord.from_json(OLD_LOAD).model_copy(update={"resumed": True})
    assert list(record.to_json())[-1] == "resumed"
    assert "resumed" not in StageRecord.from_json(OLD_LOAD).to_json()


def test_a_record_with_a_wrongly_typed_count_is_refused():
    with pytest.raises(ValidationError):
        StageRecord.from_json({**OLD_LOAD, "docs_in": "many"})
