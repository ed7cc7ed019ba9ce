"""Several short items per request: number them, batch them, read an id-keyed JSON list back.

Used wherever many small things are asked about together — questions about one document
(localize_spans, the LLM judge), texts to translate into one language. Items of one group
are cut into batches of at most `per_call` and numbered from 1; the model answers
`[{"id": 1, ...}, ...]` (or that list inside an object), and an answer that lacks an id
or has a malformed entry is re-asked, with every other request of the call in one pool
(see `json_answers.chat_json`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from builder.backends.llm.base import ChatRequest, LLMBackend
from builder.backends.llm.json_answers import JSONAnswer, chat_json

K = TypeVar("K")
G = TypeVar("G", bound=Hashable)
V = TypeVar("V")

# (group, offset of the batch in its group, the batch's keys, [{"id": 1, "text": ...}, ...]) -> request
RequestFor = Callable[[Any, int, list[Any], list[dict[str, Any]]], ChatRequest]


@dataclass(frozen=True)
class NumberedBatch(Generic[K]):
    """One request about several items; the item with key `keys[k]` has id k + 1."""

    keys: tuple[K, ...]
    request: ChatRequest


@dataclass(frozen=True)
class IdList(Generic[V]):
    """How to read an id-keyed answer list.

    `read` turns one entry into its value, raising ValueError worded for the model when
    the entry is not an object or lacks what it needs; a value of None counts as missing.
    `wrappers` are the keys under which an object may hold the list (any other object is
    taken as a list of one entry); `entry` and `item` name things in complaints
    ("expected a JSON list with one grade per question"). `fields` are the JSON Schema
    properties of an entry besides its id, all required: `schema` builds from them what a
    server that enforces schemas may answer, a shape `values` always accepts.
    """

    read: Callable[[Any], V | None]
    wrappers: tuple[str, ...] = ()
    entry: str = "entry"
    item: str = "question"
    fields: Mapping[str, Any] = field(default_factory=dict)

    def schema(self, n: int) -> dict[str, Any]:
        """The answer for n items as a JSON Schema: the list of n entries under the first
        wrapper key (hosted APIs want an object at the top)."""
        entry = {
            "type": "object",
            "properties": {"id": {"type": "integer", "minimum": 1, "maximum": n}, **self.fields},
            "required": ["id", *self.fields],
            "additionalProperties": False,
        }
        items = {"type": "array", "items": entry, "minItems": n, "maxItems": n}
        return {
            "type": "object",
            "properties": {self.wrappers[0]: items},
            "required": [self.wrappers[0]],
            "additionalProperties": False,
        }

    def unwrap(self, answer: Any) -> Any:
        """The list an object answer holds; other answers as they are."""
        if isinstance(answer, dict):
            return next((answer[k] for k in self.wrappers if k in answer), [answer])
        return answer

    def values(self, answer: Any, n: int) -> list[V]:
        """The values for ids 1..n, in id order."""
        answer = self.unwrap(answer)
        if not isinstance(answer, list):
            raise ValueError(f"expected a JSON list with one {self.entry} per {self.item}")
        found: dict[int, V | None] = {}
        for entry in answer:
            value = self.read(entry)
            try:
                found[int(entry.get("id"))] = value
            except (AttributeError, TypeError, ValueError):
                raise ValueError('every entry needs its numeric "id"') from None
        missing = [i for i in range(1, n + 1) if found.get(i) is None]
        if missing:
            raise ValueError(f"no {self.entry} for {self.item} ids {missing}")
        return [found[i] for i in range(1, n + 1)]  # type: ignore[misc]

    def validator(self, n: int) -> Callable[[Any], list[V]]:
        return lambda answer: self.values(answer, n)


def number_batches(items: Iterable[tuple[G, K, str]], per_call: int, request_for: RequestFor) -> list[NumberedBatch[K]]:
    """Batches of (group, key, text) items: each group's items in order, `per_call` at most."""
    groups: dict[G, list[tuple[K, str]]] = {}
    for group, key, text in items:
        groups.setdefault(group, []).append((key, text))
    out: list[NumberedBatch[K]] = []
    for group, rows in groups.items():
        for at in range(0, len(rows), per_call):
            batch = rows[at : at + per_call]
            keys = [key for key, _ in batch]
            numbered = [{"id": i, "text": text} for i, (_, text) in enumerate(batch, start=1)]
            out.append(NumberedBatch(tuple(keys), request_for(group, at, keys, numbered)))
    return out


def ask_numbered(
    backend: LLMBackend,
    batches: Sequence[NumberedBatch[K]],
    validator_for: Callable[[int], Callable[[Any], list[V]]],
    schema_for: Callable[[int], dict[str, Any]],
    raw_log: Path | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[JSONAnswer[list[V]]]:
    """Every batch's answer (values in id order), all batches in one pool.

    `validator_for(n)` checks an answer for n items, e.g. `IdList.validator`, and
    `schema_for(n)` is the JSON Schema sent with the request (e.g. `IdList.schema`).
    """
    validators: dict[int, Callable[[Any], list[V]]] = {}
    for batch in batches:
        validators.setdefault(len(batch.keys), validator_for(len(batch.keys)))
    requests = [replace(b.request, json_schema=schema_for(len(b.keys))) for b in batches]
    return chat_json(backend, requests, [validators[len(b.keys)] for b in batches], raw_log=raw_log, on_done=on_done)


def per_item(
    batches: Sequence[NumberedBatch[K]], answers: Sequence[JSONAnswer[list[V]]]
) -> Iterator[tuple[K, V | None, str | None]]:
    """(key, value, error) for every item: the value, or None and the batch's drop reason."""
    for batch, answer in zip(batches, answers, strict=True):
        for k, key in enumerate(batch.keys):
            yield (key, None, answer.error) if answer.value is None else (key, answer.value[k], None)
