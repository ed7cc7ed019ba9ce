"""Batch mode of the OpenAI-compatible backend against the local server's files and
batches endpoints: submit and exit, collect into the same cache, re-submit only what is
missing (partial, expired, failed batches), a refused submission, skipped lines."""

from __future__ import annotations

import json

import pytest

from builder.backends.llm import ChatRequest, LLMCache, OpenAIModelConfig
from builder.backends.llm.batch_book import BatchBook, BatchPending, custom_id
from builder.backends.llm.batch_lines import read_lines
from builder.backends.llm.openai_backend import OpenAIBackend
from tests.support.openai_batches import BatchScript
from tests.support.openai_server import FakeOpenAIServer


def _requests(n: int) -> list[ChatRequest]:
    return [ChatRequest.of([{"role": "user", "content": f"question {i}"}], item_id=f"q{i}") for i in range(n)]


def _backend(srv: FakeOpenAIServer, tmp_path, batch: bool = True) -> OpenAIBackend:
    config = OpenAIModelConfig(model="m", base_url=srv.base_url, batch=batch, max_retries=1, backoff_max_s=0.0)
    cache = LLMCache(tmp_path / "cache.sqlite")
    cache.stage = "02_test"
    return OpenAIBackend("gen", config, cache, batches=BatchBook(tmp_path / "llm_batches.json"))


def _until_answered(srv, tmp_path, requests, runs: int = 10):
    lines = []
    for _ in range(runs):
        with _backend(srv, tmp_path) as backend:
            try:
                return backend.chat_many(requests), backend.usage, lines
            except BatchPending as pending:
                lines.append(str(pending))
    raise AssertionError(lines[-1])


def test_batch_is_left_out_of_the_settings_so_fingerprints_hold():
    assert "batch" not in OpenAIModelConfig(model="m", batch=True).model_dump(mode="json")


def test_a_batch_is_submitted_then_collected_into_the_same_cache_as_synchronous_calls(tmp_path):
    requests = _requests(5) + _requests(1)  # a repeated request is sent once
    with FakeOpenAIServer() as srv:
        with _backend(srv, tmp_path) as backend, pytest.raises(BatchPending, match="submitted 5 requests"):
            backend.chat_many(requests)
        assert srv.requests == [] and srv.batches.created == 1
        sent = srv.batches.files["file-1"].decode().splitlines()
        line = json.loads(sent[0])
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions" and line["body"]["model"] == "m"
        answers, usage, _ = _until_answered(srv, tmp_path, requests)
        assert [a.text for a in answers] == [f"echo: question {i}" for i in range(5)] + ["echo: question 0"]
        assert all(a.batch for a in answers[:5]) and answers[5].cached
        assert usage.calls == usage.batch_calls == 5 and usage.cache_hits == 1
        # The synchronous path finds them in the cache: nothing more is asked.
        with _backend(srv, tmp_path, batch=False) as sync:
            again = sync.chat_many(requests)
        assert [a.text for a in again] == [a.text for a in answers] and srv.requests == []


def test_until_its_stage_is_counted_a_collected_answer_is_billed_not_free(tmp_path):
    requests = _requests(3)
    with FakeOpenAIServer() as srv:
        _until_answered(srv, tmp_path, requests)
        with _backend(srv, tmp_path) as backend:  # the stage that used them did not finish
            assert backend.chat_many(requests)[0].batch
            backend.settle_batches()  # now it did
        with _backend(srv, tmp_path) as backend:
            assert all(a.cached and not a.batch for a in backend.chat_many(requests))
    assert not (tmp_path / "llm_batches.json").exists()


@pytest.mark.parametrize(
    ("script", "runs"),
    [
        (BatchScript("partial"), 3),  # half the lines failed with HTTP 500: only those go again
        (BatchScript("expire"), 3),  # the window closed with half answered
        (BatchScript("fail"), 3),  # the whole batch failed (a token limit): all go again
        (BatchScript(polls=3), 5),  # in progress for three polls
        (BatchScript(poll_errors=2), 4),  # the provider failed two polls
    ],
)
def test_unfinished_batches_resubmit_only_what_is_missing(tmp_path, script, runs):
    requests = _requests(6)
    with FakeOpenAIServer() as srv:
        srv.batches.scripts = [script]
        answers, usage, lines = _until_answered(srv, tmp_path, requests)
        assert len(lines) == runs - 1
        assert all(a.ok for a in answers) and usage.batch_calls == 6
        assert sorted(srv.batches.lines.values()) == [1] * 6  # every request answered exactly once


def test_a_refused_submission_loses_nothing_and_the_next_run_submits(tmp_path):
    requests = _requests(4)
    with FakeOpenAIServer() as srv:
        srv.batches.scripts = [BatchScript("refuse")]
        with _backend(srv, tmp_path) as backend, pytest.raises(BatchPending, match="could not submit 4 requests.*429"):
            backend.chat_many(requests)
        answers, _, _ = _until_answered(srv, tmp_path, requests)
        assert all(a.ok for a in answers)


def test_a_request_the_provider_rejects_is_a_failure_for_good_not_resubmitted(tmp_path):
    requests = _requests(4)
    with FakeOpenAIServer() as srv:
        srv.batches.scripts = [BatchScript("partial", status=400)]
        answers, usage, _ = _until_answered(srv, tmp_path, requests)
        assert [a.ok for a in answers] == [True, False, True, False]
        assert answers[1].error.startswith("llm_failed: HTTP 400") and not answers[1].transport
        assert usage.failures == 2 and srv.batches.created == 1


def test_output_lines_are_checked_against_the_batch_and_skips_counted_by_reason():
    key, other = "a" * 64, "b" * 64
    good = {
        "custom_id": custom_id(key),
        "response": {
            "status_code": 200,
            "body": {
                "choices": [{"message": {"content": "yes"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            },
        },
    }
    lines = [
        json.dumps(good),
        json.dumps(good),  # the same request answered twice
        "{not json",
        "[1, 2]",
        json.dumps({**good, "custom_id": custom_id(other)}),  # not in this batch
        json.dumps({**good, "custom_id": "someone-else"}),
        json.dumps({"custom_id": custom_id(other)}),
    ]
    outcomes, skipped = read_lines(["\n".join(lines)], {key}, lambda k: 100)
    assert outcomes[key].answer.text == "yes" and outcomes[key].answer.prompt_tokens == 3
    assert skipped == {
        "custom_id answered twice": 1,
        "line is not JSON": 1,
        "line is not a JSON object": 1,
        "custom_id names no request of this batch": 3,
    }


def test_a_budget_bounds_what_a_run_submits(tmp_path):
    from builder.backends.llm.budget import BUDGET_SPENT, SpendGate

    requests = _requests(5)
    with FakeOpenAIServer() as srv:
        config = OpenAIModelConfig(model="m", base_url=srv.base_url, batch=True)
        cache = LLMCache(tmp_path / "cache.sqlite")
        book = BatchBook(tmp_path / "llm_batches.json")
        with OpenAIBackend("gen", config, cache, SpendGate(calls=3), book) as backend:
            with pytest.raises(BatchPending, match="submitted 3 requests"):
                backend.chat_many(requests)
        with OpenAIBackend("gen", config, cache, SpendGate(calls=0), BatchBook(book.path)) as backend:
            answers = backend.chat_many(requests[:3])  # collected: the budget meters only what is sent
            assert all(a.batch for a in answers)
            refused = backend.chat_many(requests[3:])
        assert all(a.reason == BUDGET_SPENT and a.transport for a in refused)


def test_an_unreadable_batch_record_is_a_clear_error_naming_the_file(tmp_path):
    path = tmp_path / "llm_batches.json"
    path.write_text('{"open": [{"id": 3}]}')
    with pytest.raises(OSError, match="llm_batches.json is not a batch record this version can read"):
        BatchBook(path)


def test_a_request_no_batch_answers_is_given_up_for_the_run_and_asked_again_by_the_next(tmp_path):
    requests = _requests(2)
    with FakeOpenAIServer() as srv:
        srv.batches.scripts = [BatchScript("fail"), BatchScript("fail")]  # max_retries=1: two batches
        answers, usage, lines = _until_answered(srv, tmp_path, requests)
        assert len(lines) == 2 and not any(a.ok for a in answers) and all(a.transport for a in answers)
        assert usage.transport_failures == 2
        again, _, _ = _until_answered(srv, tmp_path, requests)  # the stage is run again
        assert all(a.ok and a.batch for a in again) and srv.batches.created == 3
