"""Re-DocRED documents: sentences, entity mentions and (head, relation, tail, evidence) facts.

Reads the release JSON (`dev_revised.json`: a list of documents whose `labels` are
`{r, h, t, evidence}` dicts), JSONL, or parquet in the Hugging Face DocRED layout
(`labels` as columns `head, tail, relation_id, evidence`). Sentences are their tokens
joined by single spaces, the way the ColDeR paper shows them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from builder.io.sources import SourceError
from builder.util.stable import content_id, text_digest, unique


@dataclass(frozen=True)
class Mention:
    sent_id: int
    start: int  # token positions within the sentence, [start, end)
    end: int
    name: str


@dataclass(frozen=True)
class Fact:
    index: int  # position in the document's label list
    head: int  # entity indices into the vertex set
    tail: int
    relation: str
    evidence: tuple[int, ...]


@dataclass(frozen=True)
class Document:
    key: str  # unique across every file read: a hash of the title and sentences (see document_key)
    title: str
    tokens: tuple[tuple[str, ...], ...]
    entities: tuple[tuple[Mention, ...], ...]
    facts: tuple[Fact, ...]

    @cached_property
    def sentences(self) -> tuple[str, ...]:
        return tuple(" ".join(t) for t in self.tokens)

    def mention_in(self, entity: int, sent: int) -> str | None:
        """Surface text of the entity's first annotated mention in a sentence."""
        for m in self.entities[entity]:
            if m.sent_id == sent and 0 <= m.start < m.end <= len(self.tokens[sent]):
                return " ".join(self.tokens[sent][m.start : m.end])
        return None

    @cached_property
    def _patterns(self) -> dict[int, re.Pattern[str]]:
        return {}  # filled lazily: compiling every entity's pattern up front is slow

    def name_pattern(self, entity: int) -> re.Pattern[str]:
        """Any name of the entity as a whole word, case-insensitively."""
        if entity not in self._patterns:
            vertex = self.entities[entity]
            names = {m.name.strip() for m in vertex} | {self.mention_in(entity, m.sent_id) or "" for m in vertex}
            alts = sorted((re.escape(n) for n in names if n), key=len, reverse=True)
            body = "|".join(alts) if alts else r"(?!x)x"  # an entity without names matches nothing
            self._patterns[entity] = re.compile(r"(?<!\w)(?:" + body + r")(?!\w)", re.IGNORECASE)
        return self._patterns[entity]

    def mentions(self, entity: int, sent: int) -> bool:
        """Annotated in the sentence, or any of its names appears there verbatim."""
        if any(m.sent_id == sent for m in self.entities[entity]):
            return True
        return bool(self.name_pattern(entity).search(self.sentences[sent]))


def _facts(labels: Any) -> list[Fact]:
    if isinstance(labels, dict):  # Hugging Face layout: one list per field
        rows = zip(labels["head"], labels["tail"], labels["relation_id"], labels["evidence"])
        return [Fact(i, int(h), int(t), str(r), tuple(map(int, e))) for i, (h, t, r, e) in enumerate(rows)]
    return [
        Fact(i, int(x["h"]), int(x["t"]), str(x["r"]), tuple(map(int, x.get("evidence") or ())))
        for i, x in enumerate(labels or [])
    ]


def parse_document(raw: dict[str, Any], key: str) -> Document | None:
    """A document, or None when its structure is broken."""
    try:
        tokens = tuple(tuple(str(t) for t in sent) for sent in raw["sents"])
        entities = tuple(
            tuple(Mention(int(m["sent_id"]), int(m["pos"][0]), int(m["pos"][1]), str(m["name"])) for m in vertex)
            for vertex in raw["vertexSet"]
        )
        facts = tuple(_facts(raw.get("labels")))
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    n_sent, n_ent = len(tokens), len(entities)
    if any(not 0 <= m.sent_id < n_sent for v in entities for m in v) or any(
        not (0 <= f.head < n_ent and 0 <= f.tail < n_ent) for f in facts
    ):
        return None
    return Document(key, str(raw.get("title") or ""), tokens, entities, facts)


def read_raw(path: Path) -> list[dict[str, Any]]:
    try:
        if path.suffix == ".parquet":
            return pl.read_parquet(path).to_dicts()
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        data = json.loads(text)
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise SourceError(f"could not read Re-DocRED file {path}: {exc}") from exc
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected a JSON list of documents")
    return data


def load_documents(paths: list[Path]) -> tuple[list[Document], int]:
    """Every well-formed document of every file, and how many were malformed."""
    docs: list[Document] = []
    bad = 0
    keys = []
    for path in paths:
        for raw in read_raw(path):
            doc = parse_document(raw, document_key(raw)) if isinstance(raw, dict) else None
            if doc is None:
                bad += 1
            else:
                docs.append(doc)
                keys.append(doc.key)
    return [replace(d, key=k) for d, k in zip(docs, unique(keys))], bad


def document_key(raw: dict[str, Any]) -> str:
    """12 hex digits of the document's title and sentences: the same document keeps its
    probes' ids whichever files are read and in whatever order."""
    text = json.dumps([raw.get("title"), raw.get("sents")], ensure_ascii=False, sort_keys=True, default=str)
    return content_id(text_digest(text))[:12]
