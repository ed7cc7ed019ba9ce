"""Answering a model's requests through the provider's batch API (`batch: true`, `--batch`).

A stage asks as it always does. Answers the LLM cache holds are served at once; when some
are missing, this run first polls the model's open batches and collects the finished ones
into the cache (the same cache synchronous calls fill). What is still missing, neither
waiting in an open batch nor failed for good, is submitted as a new batch, and the build
stops with `BatchPending`: one line saying what was submitted and how to collect. The
next run of the same command does the same, and once every request of the stage has its
answer, the stage goes on exactly as a synchronous one would (a stage whose re-asks depend
on earlier answers takes a batch per round).

An answer collected into the cache is billed, as a batch answer, to the stage that uses it
in a run that finishes it; until then the record (`batch_book`) keeps its token counts.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Final, cast

import openai

from builder.backends.llm.base import ChatRequest, ChatResponse
from builder.backends.llm.batch_book import BatchBook, BatchPending, ModelBook, OpenBatch
from builder.backends.llm.batch_lines import CHAT_URL, LineOutcome, input_lines, read_lines
from builder.backends.llm.budget import SpendGate
from builder.backends.llm.cache import LLMCache, Origin, Row, split_cached
from builder.backends.llm.config import OpenAIModelConfig
from builder.util.secrets import mask_string

# A provider batch takes at most 50,000 requests (OpenAI's limit; others take fewer or as many).
MAX_LINES = 50_000
_RUNNING = ("validating", "in_progress", "finalizing", "cancelling")
WINDOW: Final = "24h"
# Local servers ignore the key, but the SDK insists on having one (as in openai_backend).
_PLACEHOLDER_KEY = "sk-local-placeholder"


def _print_notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def open_client(config: OpenAIModelConfig | None, api_key: str, base_url: str | None) -> openai.OpenAI:
    """The files and batches endpoints of the model's (first) server."""
    timeout = config.timeout_s if config is not None else 120.0
    retries = config.max_retries if config is not None else 2
    return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=retries)


def api_failure(error: Exception) -> str:
    """A provider error in a few words (masked: a server may quote the key back)."""
    if isinstance(error, openai.APIStatusError):
        return mask_string(f"HTTP {error.status_code}: {error.message}"[:240])
    return mask_string(f"{type(error).__name__}: {error}"[:240])


class BatchAsker:
    """One model's requests, answered from the cache or through provider batches."""

    def __init__(
        self,
        name: str,
        config: OpenAIModelConfig,
        cache: LLMCache,
        book: BatchBook,
        api_key: str,
        key: Callable[[ChatRequest], str],
        body: Callable[[ChatRequest, int], dict[str, Any]],
        gate: SpendGate | None = None,
        notify: Callable[[str], None] = _print_notice,
    ) -> None:
        self.name = name
        self.config = config
        self.cache = cache
        self.book = book
        self._api_key = api_key
        self._key = key
        self._body = body
        self._gate = gate
        self._notify = notify
        self._client: openai.OpenAI | None = None
        # Keys whose batch answer (or failure) a stage of this process was handed.
        self._served: set[str] = set()

    @property
    def _mine(self) -> ModelBook:
        return self.book.model(self.name)

    def _open_client(self) -> openai.OpenAI:
        if self._client is None:
            self._client = open_client(self.config, self._api_key, self.config.endpoints[0])
        return self._client

    def answer(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Every request's answer, in order; raises BatchPending while any is not in yet."""
        keys = [self._key(r) for r in requests]
        responses, missing = split_cached(self.cache, keys)
        if missing:
            self._collect()
            responses, missing = split_cached(self.cache, keys)
        mine = self._mine
        for i, (key, hit) in enumerate(zip(keys, responses)):
            if hit is not None and key in mine.collected and key not in self._served:
                # First use in this process of an answer a batch paid for: billed here, once.
                self._served.add(key)
                prompt, completion, cached = mine.collected[key]
                responses[i] = replace(
                    hit,
                    cached=False,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    cached_tokens=cached,
                    batch=True,
                )
        waiting = self.book.waiting_keys(self.name)
        to_send: dict[str, ChatRequest] = {}
        lost = {key: mine.lost.pop(key) for key in missing if key in mine.lost}
        if lost:
            # Out of batches, like a request out of retries: handed out once as a failure
            # that got no answer, so the stage is left unfinished and the next run asks again.
            self.book.save()
        for key, positions in missing.items():
            error = mine.failed.get(key) or lost.get(key)
            if error is not None:
                self._served.add(key)
                for i in positions:
                    responses[i] = ChatResponse(None, error, False, transport=key in lost)
            elif key not in waiting:
                to_send[key] = requests[positions[0]]
        refused = {key for key, request in to_send.items() if not self._admitted(key, request)}
        for key in refused:
            del to_send[key]
            for i in missing[key]:
                responses[i] = cast(SpendGate, self._gate).refusal()
        if to_send:
            self._submit(to_send)
        if to_send or missing.keys() - mine.failed.keys() - lost.keys() - refused:
            raise BatchPending(self._waiting_line(len(to_send)))
        return [r for r in responses if r is not None]

    def _admitted(self, key: str, request: ChatRequest) -> bool:
        """Whether the run's budget lets this request go into a batch. Its worst case stays
        held for the rest of the run (the run ends once it has submitted): a budget bounds
        what one run sends, and the answers are not known before a later run."""
        if self._gate is None:
            return True
        return self._gate.admit(request, self._budget(key, request), self.config.price) is not None

    def settle(self) -> None:
        """The stage that was handed this process's batch answers is finished and counted:
        they are ordinary cache hits from now on, and its failures may be asked again."""
        if not self._served:
            return
        mine = self._mine
        for key in self._served:
            for served in (mine.collected, mine.failed):
                served.pop(key, None)
        self._served.clear()
        self.book.save()

    # -- collecting ------------------------------------------------------------

    def _collect(self) -> None:
        """Poll each open batch of this model; store the answers of the finished ones."""
        for entry in self.book.open_of(self.name):
            try:
                batch = self._open_client().batches.retrieve(entry.id)
            except openai.APIError as error:
                self._notify(f"batch {entry.id} of model {self.name!r}: could not poll it ({api_failure(error)})")
                continue
            entry.status = str(batch.status)
            if batch.status in _RUNNING:
                continue
            texts: list[str] = []
            try:
                for file_id in (batch.output_file_id, batch.error_file_id):
                    if file_id:
                        texts.append(self._open_client().files.content(file_id).text)
            except openai.APIError as error:
                self._notify(f"batch {entry.id}: could not download its results ({api_failure(error)})")
                continue
            self._take(entry, str(batch.status), texts)
        self.book.save()

    def _budget(self, key: str, request: ChatRequest) -> int:
        return self._mine.budgets.get(key) or request.max_tokens or self.config.max_tokens

    def _take(self, entry: OpenBatch, status: str, texts: list[str]) -> None:
        mine = self._mine
        wanted = set(entry.keys)
        outcomes, skipped = read_lines(texts, wanted, lambda k: mine.budgets.get(k) or self.config.max_tokens)
        rows: list[Row] = []
        for key in entry.keys:
            outcome = outcomes.get(key) or LineOutcome(retry=f"batch {status} without answering it")
            answer = outcome.answer
            if answer is not None and answer.ok:
                before = mine.spent.pop(key, [0, 0, 0])
                mine.collected[key] = [
                    before[0] + answer.prompt_tokens,
                    before[1] + answer.completion_tokens,
                    before[2] + answer.cached_tokens,
                ]
                mine.budgets.pop(key, None)
                mine.rounds.pop(key, None)
                prompt, completion, cached = mine.collected[key]
                # Marked as a batch answer so a resumed build prices it at the batch rate.
                origin = Origin(self.config.model, entry.stage, self.config.endpoints[0], cached, batch=True)
                rows.append((key, answer.text or "", prompt, completion, answer.reasoning, origin))
            elif answer is not None and key not in mine.spent:
                # Cut off at max_tokens: asked once more with twice the budget, as a synchronous call is.
                mine.budgets[key] = 2 * (mine.budgets.get(key) or self.config.max_tokens)
                mine.spent[key] = [answer.prompt_tokens, answer.completion_tokens, answer.cached_tokens]
            elif answer is not None:
                mine.failed[key] = str(answer.error)
                mine.budgets.pop(key, None)
                mine.spent.pop(key, None)
            elif outcome.final is not None:
                mine.failed[key] = f"llm_failed: {mask_string(outcome.final)}"
            else:
                rounds = mine.rounds[key] = mine.rounds.get(key, 0) + 1
                if rounds > self.config.max_retries:
                    # Given up for this run, as a request out of retries is: the stage is left
                    # unfinished and the next run asks it again.
                    mine.lost[key] = f"llm_failed: {outcome.retry} after {rounds} batches"
                    mine.rounds.pop(key)
        # The answers are in the cache before the batch leaves the record: a run killed in
        # between collects them again, never loses them.
        self.cache.put_many(rows)
        self.book.close_batch(entry.id)
        if skipped:
            self.book.count_problems(self.name, skipped)
            reasons = ", ".join(f"{reason}: {n}" for reason, n in sorted(skipped.items()))
            self._notify(f"batch {entry.id} of model {self.name!r}: {sum(skipped.values())} lines skipped ({reasons})")
        self.book.save()

    # -- submitting ------------------------------------------------------------

    def _submit(self, to_send: dict[str, ChatRequest]) -> None:
        keys = list(to_send)
        for start in range(0, len(keys), MAX_LINES):
            chunk = keys[start : start + MAX_LINES]
            for k in chunk:
                self._mine.budgets[k] = self._budget(k, to_send[k])
            data = input_lines((k, self._body(to_send[k], self._budget(k, to_send[k]))) for k in chunk)
            try:
                client = self._open_client()
                upload = client.files.create(file=("requests.jsonl", data), purpose="batch")
                batch = client.batches.create(
                    input_file_id=upload.id,
                    endpoint=CHAT_URL,
                    completion_window=WINDOW,
                    metadata={"build_bench_stage": str(self.cache.stage or "")},
                )
            except openai.APIError as error:
                raise BatchPending(
                    f"{self.cache.stage}: could not submit {len(keys) - start} requests of model {self.name!r} "
                    f"as a batch ({api_failure(error)}); nothing is lost — run the same command again later "
                    "(a provider's daily token limit resets)"
                ) from None
            self.book.open.append(
                OpenBatch(
                    id=batch.id,
                    model=self.name,
                    served_model=self.config.model,
                    base_url=self.config.endpoints[0],
                    api_key_env=self.config.api_key_env,
                    stage=self.cache.stage,
                    input_file_id=upload.id,
                    keys=chunk,
                    submitted_at=time.time(),
                    status=str(batch.status),
                )
            )
            self.book.save()

    def _waiting_line(self, sent: int) -> str:
        batches = self.book.open_of(self.name)
        ids = ", ".join(b.id for b in batches[:3]) + (f" and {len(batches) - 3} more" if len(batches) > 3 else "")
        waiting = sum(len(b.keys) for b in batches)
        head = (
            f"submitted {sent} requests of model {self.name!r} as a provider batch"
            if sent
            else f"{waiting} requests of model {self.name!r} still in a provider batch"
        )
        return (
            f"{self.cache.stage}: {head} ({ids}; {waiting} waiting in all, answered within {WINDOW}); "
            "run the same command again to collect them — answers already in are kept"
        )


def cancel(entry: OpenBatch) -> str:
    """Ask the provider to cancel an open batch; its new status, or why it was not cancelled.
    The key is read from the environment variable the model named, as a build reads it."""
    api_key = os.environ.get(entry.api_key_env) or (_PLACEHOLDER_KEY if entry.base_url else None)
    if api_key is None:
        return f"not cancelled: set {entry.api_key_env}, the API key the build used"
    try:
        return str(open_client(None, api_key, entry.base_url).batches.cancel(entry.id).status)
    except openai.APIError as error:
        return f"not cancelled: {api_failure(error)}"
