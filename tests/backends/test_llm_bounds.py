"""Every request is bounded: a deadline for the whole exchange and a cap on the reply's size,
against real servers on 127.0.0.1 that drip, hang or answer far too much."""

from __future__ import annotations

import re
from typing import Any

from builder.backends.llm import ChatRequest, OpenAIModelConfig
from tests.support.openai_server import Reply

from .conftest import MakeBackend


def ask(text: str) -> ChatRequest:
    return ChatRequest.of([{"role": "user", "content": text}])


def test_a_server_that_drips_its_reply_fails_at_the_deadline(fake_openai: Any, make_backend: MakeBackend) -> None:
    # 2,000 bytes announced, one every 0.05 s: 100 s to finish, and every byte resets a read
    # timeout, so only a deadline on the whole exchange makes both attempts time out.
    srv = fake_openai(responder=lambda body: Reply(body="x" * 2000, drip_s=0.05))
    backend = make_backend(srv, timeout_s=1.0, max_retries=1)
    (answer,) = backend.chat_many([ask("q")])
    assert answer.transport and re.fullmatch(
        r"llm_failed: timeout: no whole reply within timeout_s=1 s \(the attempt waited \d+\.\d s\) after 2 attempts",
        answer.error or "",
    ), answer.error
    assert srv.request_count == 2


def test_a_server_that_never_answers_fails_within_the_stated_bound(fake_openai: Any, make_backend: MakeBackend) -> None:
    # The answer comes after 30 s; each of the three attempts gives up at 0.5 s.
    srv = fake_openai(responder=lambda body: Reply(text="late", delay_s=30))
    backend = make_backend(srv, timeout_s=0.5, max_retries=2)
    (answer,) = backend.chat_many([ask("q")])
    assert re.fullmatch(
        r"llm_failed: timeout: no whole reply within timeout_s=0.5 s \(the attempt waited \d+\.\d s\) after 3 attempts",
        answer.error or "",
    ), answer.error
    assert srv.request_count == 3
    assert backend.config.worst_case_s() == 3 * 0.5 + 0.01 + 0.02


def test_an_announced_oversized_reply_is_refused_without_reading_it(
    fake_openai: Any, make_backend: MakeBackend
) -> None:
    srv = fake_openai(responder=lambda body: Reply(text="y" * 200_000))
    backend = make_backend(srv, max_reply_bytes=65_536)
    (answer,) = backend.chat_many([ask("q")])
    assert answer.error is not None and answer.error.startswith("llm_failed: reply of ")
    assert "over max_reply_bytes 65,536" in answer.error and not answer.transport
    assert srv.request_count == 1  # the same request would get the same reply: not retried
    assert backend.usage.failures == 1 and backend.usage.calls == 0


def test_an_unannounced_oversized_reply_stops_being_read_at_the_cap(
    fake_openai: Any, make_backend: MakeBackend
) -> None:
    srv = fake_openai(responder=lambda body: Reply(text="z" * 300_000, declare_length=False, chunk_bytes=8192))
    backend = make_backend(srv, max_reply_bytes=65_536)
    (answer,) = backend.chat_many([ask("q")])
    assert answer.error == "llm_failed: reply is over max_reply_bytes 65,536"


def test_a_reply_under_the_cap_streams_in_whole(fake_openai: Any, make_backend: MakeBackend) -> None:
    srv = fake_openai(responder=lambda body: Reply(text="fine", declare_length=False, chunk_bytes=7))
    (answer,) = make_backend(srv).chat_many([ask("q")])
    assert answer.text == "fine"


def test_the_worst_case_of_the_defaults_is_what_the_readme_states() -> None:
    # 7 attempts of 120 s, with backoffs of 1, 2, 4, 8, 16 and 32 s between them.
    assert OpenAIModelConfig(model="m").worst_case_s() == 7 * 120 + 63 == 903
