"""SQuAD-PosQ (paper 000, §3.1): extractive QA pairs become position-tagged retrieval queries.

Every unique context becomes a document (also those with unanswerable questions only);
every answerable question becomes a query whose span is its first answer, checked
against the context, and whose `char_bucket` is the bucket of that answer's start.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from builder.bench import SPAN_DTYPE
from builder.io.bench_rows import Rejected, add_rows, input_path
from builder.io.sources import SourceError
from builder.stages.base import Stage, StageParams, register_stage
from builder.stages.contracts import CHAR_BUCKETS, DOCUMENTS, QUERIES, SPANS
from builder.stages.refs import DataPath
from builder.textutil.positions import char_bucket
from builder.util.license_field import license_field
from builder.util.stable import content_id, text_digest

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext


class FromQAParams(StageParams):
    path: DataPath | list[DataPath] = Field(
        description=(
            "SQuAD JSON file(s), or JSONL/parquet rows in the HF squad_v2 layout, read in order: local "
            "paths, hf://datasets/<repo>@<rev>/<file> or URLs"
        )
    )
    lang: str = Field(default="en", description="language given to every context")
    domain: str = Field(default="general", description="domain given to every context")
    id_prefix: str = Field(default="", description="prepended to document and query ids")
    license: str | None = license_field()
    buckets: list[int] = Field(
        default=[100, 200, 300, 400, 500],
        description="answer-start edges in characters: [0, e1), [e1, e2), ..., [last, max]",
    )
    use_title: bool = Field(
        default=False,
        description="copy the article title into the corpus title (the paper ranks passages by text alone)",
    )
    keep_article: bool = Field(
        default=False,
        description="add the article title as corpus column `article`, "
        "for split_documents' group_by (the title stays out of the ranked text)",
    )

    @field_validator("buckets")
    @classmethod
    def _increasing(cls, edges: list[int]) -> list[int]:
        if not edges or edges[0] <= 0 or any(a >= b for a, b in zip(edges, edges[1:])):
            raise ValueError("buckets must be positive, strictly increasing edges")
        return edges

    @model_serializer(mode="wrap")
    def _omit_no_article(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # keep_article came later: left out while off, the stage fingerprints (and cards) of
        # recipes that never name it stay what they were.
        data: dict[str, Any] = handler(self)
        if data.get("keep_article") is False:
            del data["keep_article"]
        return data


@dataclass
class QARecord:
    qid: str
    title: str
    context: str
    question: str
    answers: list[tuple[str, Any]]  # (text, answer_start) as found in the file


def _squad_records(data: dict[str, Any]) -> Iterator[QARecord | Rejected]:
    for article in data.get("data") or []:
        title = str(article.get("title") or "")
        for para in article.get("paragraphs") or []:
            for qa in para.get("qas") or []:
                # A question without an id is named by what it asks about what.
                qid = qa.get("id") or content_id(text_digest(f"{para.get('context')}\0{qa.get('question')}"))
                answers = (
                    []
                    if qa.get("is_impossible")
                    else [(ans.get("text"), ans.get("answer_start")) for ans in qa.get("answers") or []]
                )
                yield QARecord(str(qid), title, para.get("context"), qa.get("question"), answers)


def _hf_records(rows: Iterator[Any]) -> Iterator[QARecord | Rejected]:
    for n, row in enumerate(rows):
        if not isinstance(row, dict):
            yield ("query", f"row:{n}", row if row == "malformed_json" else "row_not_object")
            continue
        if not row.get("id"):
            yield ("query", f"row:{n}", "missing_id")
            continue
        answers = row.get("answers") or {}
        pairs = list(zip(answers.get("text") or [], answers.get("answer_start") or []))
        yield QARecord(str(row["id"]), str(row.get("title") or ""), row.get("context"), row.get("question"), pairs)


def _jsonl_rows(path: Path) -> Iterator[Any]:
    """Parsed lines; a line that is not JSON comes back as the reason string."""
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    yield "malformed_json"


def read_qa(path: Path) -> Iterator[QARecord | Rejected]:
    """QA records from a SQuAD JSON file or an HF-layout JSONL/parquet file."""
    try:
        if path.suffix == ".parquet":
            return _hf_records(pl.read_parquet(path).iter_rows(named=True))
        if path.suffix == ".jsonl":
            return _hf_records(_jsonl_rows(path))
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise SourceError(f"could not read QA file {path}: {exc}") from exc
    if isinstance(data, dict) and "data" in data:
        return _squad_records(data)
    if isinstance(data, list):
        return _hf_records(iter(data))
    raise SourceError(f"{path}: neither SQuAD JSON (a 'data' list) nor a list of rows")


def _first_answer(rec: QARecord) -> tuple[str, int] | str:
    """The verified first answer, or why the question cannot become a query."""
    text, start = rec.answers[0]
    if not isinstance(text, str) or not text or not isinstance(start, int) or start < 0:
        return "malformed_answer"
    if rec.context[start : start + len(text)] != text:
        return "answer_offset_mismatch"
    return text, start


@dataclass
class _Build:
    p: FromQAParams
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)  # context -> corpus row
    queries: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    unanswerable: int = 0

    def doc_id(self, rec: QARecord) -> str:
        row = self.docs.get(rec.context)
        if row is None:
            # Named by its text, so a new article or paragraph never renames the others.
            row = {
                "doc_id": f"{self.p.id_prefix}{content_id(text_digest(rec.context))}",
                "title": rec.title.replace("_", " ") if self.p.use_title else "",
                "text": rec.context,
                "lang": self.p.lang,
                "domain": self.p.domain,
            }
            if self.p.keep_article:
                row["article"] = rec.title
            self.docs[rec.context] = row
        return row["doc_id"]

    def add(self, rec: QARecord) -> None:
        qid = f"{self.p.id_prefix}{rec.qid}"
        if not isinstance(rec.context, str) or not rec.context.strip():
            self.rejected.append(("query", qid, "missing_context"))
            return
        doc_id = self.doc_id(rec)
        if not rec.answers:
            self.unanswerable += 1  # never a query in SQuAD-PosQ, so not a drop
            return
        if qid in self.seen:
            self.rejected.append(("query", f"{qid}#dup", "duplicate_id"))
            return
        found = _first_answer(rec)
        if isinstance(found, tuple) and (not isinstance(rec.question, str) or not rec.question.strip()):
            found = "empty_question"
        if isinstance(found, str):
            self.rejected.append(("query", qid, found))
            return
        self.seen.add(qid)
        text, start = found
        self.queries.append(
            {
                "query_id": qid,
                "text": rec.question.strip(),
                "doc_id": doc_id,
                "lang": self.p.lang,
                "answer": text,
                "spans": [{"start": start, "end": start + len(text), "method": "given", "score": 100.0}],
                "char_bucket": char_bucket(start, self.p.buckets),
            }
        )


_QUERY_SCHEMA = {
    "query_id": pl.Utf8,
    "text": pl.Utf8,
    "doc_id": pl.Utf8,
    "lang": pl.Utf8,
    "answer": pl.Utf8,
    "spans": SPAN_DTYPE,
    "char_bucket": pl.Utf8,
}


@register_stage
class FromQA(Stage):
    """Load SQuAD-style QA pairs: contexts become documents, answerable questions queries."""

    name = "from_qa"
    needs = frozenset()
    provides = frozenset({DOCUMENTS, QUERIES, SPANS, CHAR_BUCKETS})
    Params = FromQAParams
    params: FromQAParams

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        build = _Build(self.params)
        paths = [self.params.path] if isinstance(self.params.path, str) else self.params.path
        for path in paths:
            for rec in read_qa(input_path(path, ctx.base_dir)):
                if isinstance(rec, tuple):
                    build.rejected.append(rec)
                else:
                    build.add(rec)
        columns = ("doc_id", "title", "text", "lang", "domain", *(("article",) if self.params.keep_article else ()))
        corpus = pl.DataFrame(list(build.docs.values()), schema={k: pl.Utf8 for k in columns})
        corpus = corpus.with_columns(
            pl.Series("n_tokens", ctx.tokenizer.count_many(corpus["text"].to_list()), pl.Int64)
        )
        queries = pl.DataFrame(build.queries, schema=_QUERY_SCHEMA)
        qrels = queries.select("query_id", "doc_id", pl.lit(1, pl.Int64).alias("score"))
        self._report(ctx, build, corpus, queries)
        return add_rows(bench, ctx.label, corpus=corpus, queries=queries, qrels=qrels, rejected=build.rejected)

    def _report(self, ctx: StageContext, build: _Build, corpus: pl.DataFrame, queries: pl.DataFrame) -> None:
        edges = self.params.buckets
        order = [char_bucket(0, edges)] + [char_bucket(e, edges) for e in edges]
        counts = Counter(queries["char_bucket"].to_list())
        ctx.stats["unanswerable_skipped"] = build.unanswerable
        ctx.stats["contexts"] = corpus.height
        ctx.stats["contexts_without_queries"] = corpus.height - queries["doc_id"].n_unique()
        ctx.stats["queries_per_char_bucket"] = {b: counts.get(b, 0) for b in order}
