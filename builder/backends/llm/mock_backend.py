"""An in-process stand-in for every LLM of a recipe (`build-bench RECIPE --mock-llm`).

It answers build-bench's own prompts the way a careful model would, from the text the
prompt carries and nothing else: questions made from sentences of the requested third,
references copied character for character, grades by how much of a question one sentence
of the text covers, summaries made of the document's lead sentences, and "translations"
that copy the text (markers included). It is for trying a recipe offline, not for
building a benchmark anyone should publish. Answers depend only on the request and the
recipe seed. They are kept in a cache of their own (in the mock build's run folder, never
the LLM cache, so a later real run asks the real model) under keys no real model shares,
and ship with the output like real answers: a mock build `--from` a mock release reuses
them, as a real build reuses a real release's.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Sequence

from builder.backends.llm.base import ChatRequest, ChatResponse, LLMUsage, Message
from builder.backends.llm.budget import SpendGate, metered_now
from builder.backends.llm.cache import LLMCache, Origin, fill, key_for, split_cached
from builder.backends.llm.config import OpenAIModelConfig, VLLMModelConfig
from builder.backends.llm.mock_prompts import (
    STOPWORDS,
    Sentence,
    between,
    blocks,
    content_words,
    identify,
    numbered,
    outside,
    prompt_text,
    sentences,
)

MOCK_NAME = "build-bench mock LLM"
# Where a mock build keeps the mock's answers: in its own run folder, never the LLM cache.
MOCK_CACHE = "mock_answers.sqlite"
_THIRDS = {"first": 0, "middle": 1, "final": 2}
# A question restates a clause of its sentence, as a searcher who half-remembers it would ask.
_QUESTION_FORMS = (
    ("verification", "Is it true that {clause}?"),
    ("explanation", "Why is it that {clause}?"),
    ("source lookup", "Where can I read that {clause}?"),
)
_MAX_CLAUSE_WORDS = 18
_APOLOGY = re.compile(r"^\s*(i'm sorry|i am sorry|sorry|i cannot|i can't|as an ai)\b", re.I)


def _clause(sentence: str) -> str | None:
    """The sentence's richest clause (most content words; split at , ; :), at most
    `_MAX_CLAUSE_WORDS` words, without its closing punctuation; None when too thin."""
    clauses = [c.strip() for c in re.split(r"[,;:]\s", sentence) if c.strip()]
    best = max(clauses, key=lambda c: len(content_words(c)))
    if len(content_words(best)) < 4:
        return None
    tokens = best.lstrip("\"'“‘(").split()[:_MAX_CLAUSE_WORDS]
    if tokens[0].lower() in STOPWORDS:  # "The council ..." reads "that the council ..."
        tokens[0] = tokens[0][0].lower() + tokens[0][1:]
    return " ".join(tokens).rstrip(" ,;:.!?。！？\"'”’)")


def _question(sentence: str, rng: random.Random) -> tuple[str, str] | None:
    """(question type, question) about one sentence, or None when it is too short."""
    clause = _clause(sentence)
    if clause is None:
        return None
    qtype, form = rng.choice(_QUESTION_FORMS)
    return qtype, form.format(clause=clause)


def _items(pool: Sequence[Sentence], n: int, rng: random.Random) -> list[dict[str, str]]:
    """Up to `n` questions, each with the sentence it was made from as its answer."""
    order = list(pool)
    rng.shuffle(order)
    items = []
    for s in order:
        made = _question(s.text, rng)
        if made is not None:
            items.append({"question": made[1], "answer": s.text, "type": made[0]})
        if len(items) == n:
            break
    return items


def _int_after(pattern: str, text: str, default: int) -> int:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else default


def _generate(text: str, rng: random.Random, with_notes: bool) -> str:
    document = between(text, "document") or ""
    instructions = outside(text, "document")
    m = re.search(r"\b(first|middle|final) third\b", instructions)
    third = len(document) / 3
    lo = _THIRDS[m.group(1) if m else "first"] * third
    # A sentence belongs to the third holding its middle character.
    pool = [s for s in sentences(document) if lo <= (s.start + s.end) / 2 < lo + third]
    items = _items(pool, _int_after(r"write (\d+) search questions", instructions, 3), rng)
    answer = json.dumps({"usable": True, "questions": items} if items else {"usable": False}, ensure_ascii=False)
    if not with_notes:
        return answer
    notes = (
        "1. Searchers: people who want the facts this document states.\n"
        "2. Question types: fact lookups and explanations.\n"
        "3. Register: plain keyword-like questions.\n"
    )
    return f"{notes}4. Questions:\n```json\n{answer}\n```"


def _chunk_qa(text: str, rng: random.Random) -> str:
    chunk = between(text, "excerpt") or ""
    instructions = outside(outside(text, "excerpt"), "summary")
    items = _items(sentences(chunk), min(3, _int_after(r"at most (\d+)", instructions, 3)), rng)
    for i, item in enumerate(items):
        item["type"] = "simple" if i % 2 == 0 else "complicated"
    return json.dumps(items, ensure_ascii=False)


def _coverage(question: str, sentence: str) -> float:
    wanted = set(content_words(question))
    return len(wanted & set(content_words(sentence))) / len(wanted) if wanted else 0.0


def _best(question: str, document: str) -> tuple[float, Sentence | None]:
    scored = [(_coverage(question, s.text), s) for s in sentences(document)]
    return max(scored, key=lambda pair: pair[0], default=(0.0, None))


def _locate(text: str) -> str:
    document = between(text, "document") or ""
    out = []
    for qid, question in numbered(between(text, "questions") or ""):
        score, sentence = _best(question, document)
        refs = [sentence.text] if sentence is not None and score >= 0.5 else []
        out.append({"id": qid, "reference_texts": refs})
    return json.dumps(out, ensure_ascii=False)


def _grade(question: str, document: str) -> int:
    score = _best(question, document)[0]
    return next((g for g, least in ((4, 0.8), (3, 0.6), (2, 0.4), (1, 1e-9)) if score >= least), 0)


def _relevance(text: str) -> str:
    document = between(text, "document") or ""
    for passage in blocks(outside(text, "document"), "set_aside"):  # graded as if deleted
        document = document.replace(passage, " ", 1)
    query = between(text, "query")
    if query is not None:
        return str(_grade(query, document))
    grades = [{"id": qid, "grade": _grade(q, document)} for qid, q in numbered(between(text, "questions") or "")]
    return json.dumps(grades)


def _summarize(text: str) -> str:
    document = between(text, "document") or ""
    budget = _int_after(r"beyond (\d+) words", outside(text, "document"), 200)
    picked, used = [], 0
    for s in sentences(document):
        n = len(s.text.split())
        if used + n > budget:
            break
        picked.append(s.text)
        used += n
    return " ".join(picked) or " ".join(document.split()[:budget])


def _translate(text: str) -> str:
    texts = between(text, "texts")
    if texts is not None:
        return json.dumps([{"id": i, "text": t} for i, t in numbered(texts)], ensure_ascii=False)
    return between(text, "text") or ""


def _refusal(text: str) -> str:
    return json.dumps({"refusal": bool(_APOLOGY.match(between(text, "output") or ""))})


_ANSWERS: dict[str, Callable[[str, random.Random], str]] = {
    "posir_generate": lambda t, rng: _generate(t, rng, with_notes=True),
    "posir_generate_json": lambda t, rng: _generate(t, rng, with_notes=False),
    "chunk_qa": _chunk_qa,
    "locate_reference": lambda t, rng: _locate(t),
    "relevance_grade": lambda t, rng: _relevance(t),
    "summarize": lambda t, rng: _summarize(t),
    "translate": lambda t, rng: _translate(t),
    "refusal_check": lambda t, rng: _refusal(t),
}


def mock_stand_in(model: str | None) -> str:
    """How outputs name a model the mock answered for."""
    return f"{MOCK_NAME} (standing in for {model})"


def mock_answer(messages: Sequence[Message], seed: int) -> str | None:
    """The mock's answer to a conversation, or None when it is not one of our prompts."""
    kind = identify(messages)
    if kind is None:
        return None
    text = prompt_text(messages)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return _ANSWERS[kind](text, random.Random(f"{seed}:{digest}"))


class MockLLMBackend:
    """Same interface as the OpenAI and vLLM backends; answers in process, from `cache`
    first (the mock's own, see the module docstring)."""

    def __init__(
        self,
        name: str,
        config: OpenAIModelConfig | VLLMModelConfig,
        seed: int,
        cache: LLMCache | None = None,
        gate: SpendGate | None = None,
    ) -> None:
        self.name = name
        self._config = config
        self.seed = seed
        # A budget meters the mock's calls as it would a server's (it spends no tokens), so
        # stopping at a budget and resuming can be tried offline.
        self.gate = gate
        self.cache = cache if cache is not None else LLMCache.memory()
        self.usage = LLMUsage()

    @property
    def config(self) -> OpenAIModelConfig | VLLMModelConfig:
        return self._config

    def key(self, request: ChatRequest) -> str:
        """The answer depends on the messages and the seed alone, whatever model the recipe names."""
        return key_for("mock", MOCK_NAME, {"seed": self.seed}, request.messages, None)

    def chat_many(
        self, requests: Sequence[ChatRequest], on_done: Callable[[int], None] | None = None
    ) -> list[ChatResponse]:
        responses, missing = split_cached(self.cache, [self.key(r) for r in requests])
        made = []
        for key, positions in missing.items():
            answer = self._metered(requests[positions[0]])
            fill(responses, positions, answer)
            if answer.text is not None:
                made.append((key, answer.text, 0, 0, None, Origin(model=MOCK_NAME)))
        if made:
            self.cache.put_many(made)
        done = [r for r in responses if r is not None]
        self.usage.record(done)
        if on_done is not None and done:
            on_done(len(done))
        return done

    def _metered(self, request: ChatRequest) -> ChatResponse:
        return metered_now(self.gate, request, 0, None, lambda r, _: self._answer(r))

    def _answer(self, request: ChatRequest) -> ChatResponse:
        text = mock_answer(request.messages, self.seed)
        if text is None:
            return ChatResponse.failed(
                "the mock LLM answers only build-bench's own prompts (prompts/*.j2); this request matches none of them"
            )
        return ChatResponse(text, None, False, source=MOCK_NAME)  # no tokens: nothing was spent

    def close(self) -> None:
        return None
