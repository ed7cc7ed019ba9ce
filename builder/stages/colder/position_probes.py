"""ColDeR controlled probes (paper 004, §3): paired documents from Re-DocRED facts.

A fact (head, relation, tail) with exactly one evidence sentence that names both head
and tail becomes a query (a question template per relation, from the recipe). Each
setting builds that query's documents, differing only in the factor under test. All
settings share one Bench: a `setting` column on corpus and queries tells them apart, and
each query's `pairs` column (also written to `pairs.parquet` in the work folder) lists
the (document A, document B) comparisons, A being the paper's D1.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import Field, field_validator

from builder.bench import SPAN_DTYPE
from builder.io.bench_rows import add_rows, input_path
from builder.io.built_folder import TABLE_FILES
from builder.stages.base import Stage, StageParams, register_stage
from builder.stages.colder.probes import BUILDERS, SETTINGS, FactParts, Probe, Setting, foil_probe, shortfall
from builder.stages.colder.redocred import Document, Fact, load_documents
from builder.stages.contracts import DOCUMENTS, QUERIES, SPANS
from builder.stages.refs import DataPath
from builder.util.license_field import license_field

if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.context import StageContext

PAIR_DTYPE = pl.List(pl.Struct({"doc_a": pl.Utf8, "doc_b": pl.Utf8}))


class ProbeParams(StageParams):
    path: DataPath | list[DataPath] = Field(
        description="Re-DocRED file(s): release JSON, JSONL or parquet; "
        "local paths, hf://datasets/<repo>@<rev>/<file> or URLs"
    )
    templates: dict[str, str] = Field(description="relation id (e.g. P17) -> question with {head}")
    license: str | None = license_field()
    settings: list[Setting] = Field(
        default=list(SETTINGS), min_length=1, description=("the ColDeR probes built, one output folder each")
    )
    queries_per_setting: int | None = Field(default=250, ge=1, description="seeded sample size")
    max_neutral: int | None = Field(
        default=None, ge=1, description=("use at most this many neutral sentences (in document order); None: all")
    )
    unrelated_sentences: int = Field(default=4, ge=1, description="foil: sentences on each side")
    foil_prefix: str = Field(default='"{head}" "{head}"', description="foil: the repeated head")
    lang: str = Field(default="en", description="language given to every document")
    domain: str = Field(default="wikipedia", description="domain given to every document")
    id_prefix: str = Field(default="", description="prepended to document and query ids")

    @field_validator("templates")
    @classmethod
    def _templates(cls, templates: dict[str, str]) -> dict[str, str]:
        for rel, text in templates.items():
            _check_template(f"template {rel!r}", text)
        if not templates:
            raise ValueError("give at least one relation template")
        return templates

    @field_validator("settings")
    @classmethod
    def _distinct(cls, settings: list[Setting]) -> list[Setting]:
        if len(set(settings)) != len(settings):
            raise ValueError("each setting may be listed once")
        return settings

    @field_validator("foil_prefix")
    @classmethod
    def _prefix(cls, text: str) -> str:
        return _check_template("foil_prefix", text)


def _check_template(what: str, text: str) -> str:
    try:
        filled = text.format(head="\x00")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{what}: only the placeholder {{head}} is allowed ({exc})") from None
    if "\x00" not in filled:
        raise ValueError(f"{what}: must contain {{head}}")
    return text


@dataclass(frozen=True)
class Candidate:
    key: str  # "<file>.<doc>-<label index>": stable under the input files
    doc: Document
    fact: Fact
    parts: FactParts
    answer: str


def _candidate(
    doc: Document, fact: Fact, templates: dict[str, str], heads: Counter[tuple[int, str]], max_neutral: int | None
) -> Candidate | str:
    if fact.relation not in templates:
        return "no_template"
    if len(fact.evidence) != 1 or not 0 <= fact.evidence[0] < len(doc.tokens):
        return "not_single_evidence"
    ev = fact.evidence[0]
    head, tail = doc.mention_in(fact.head, ev), doc.mention_in(fact.tail, ev)
    if head is None or tail is None:
        return "evidence_lacks_head_or_tail"
    if heads[(fact.head, fact.relation)] > 1:
        return "ambiguous_answer"  # several tails answer the same question
    others = [i for i in range(len(doc.tokens)) if i != ev and not doc.mentions(fact.tail, i)]
    neutral = tuple(doc.sentences[i] for i in others if not doc.mentions(fact.head, i))
    head_only = tuple(doc.sentences[i] for i in others if doc.mentions(fact.head, i))
    parts = FactParts(head, doc.sentences[ev], neutral[:max_neutral], head_only)
    return Candidate(f"{doc.key}-{fact.index}", doc, fact, parts, tail)


def _candidates(docs: list[Document], p: ProbeParams) -> tuple[list[Candidate], Counter[str]]:
    """Facts that can become queries, and how many could not, by reason."""
    out: list[Candidate] = []
    reasons: Counter[str] = Counter()
    for doc in docs:
        heads = Counter((f.head, f.relation) for f in doc.facts)
        for fact in doc.facts:
            c = _candidate(doc, fact, p.templates, heads, p.max_neutral)
            if isinstance(c, Candidate):
                out.append(c)
            else:
                reasons[c] += 1
    return out, reasons


def _unrelated(c: Candidate, docs: list[Document], ctx: StageContext, k: int) -> tuple[str, ...] | None:
    """k sentences of another random document naming neither the head nor the tail."""
    rng = ctx.item_rng(f"foil:{c.key}")
    banned = (c.doc.name_pattern(c.fact.head), c.doc.name_pattern(c.fact.tail))
    for _ in range(20):
        other = docs[rng.randrange(len(docs))]
        picked = [s for s in other.sentences if not any(p.search(s) for p in banned)][:k]
        if other.key != c.doc.key and len(picked) == k:
            return tuple(picked)
    return None


@register_stage
class PositionProbes(Stage):
    """Build ColDeR's paired probe documents (position, brevity, repetition, answer, foil)."""

    name = "position_probes"
    needs = frozenset()
    provides = frozenset({DOCUMENTS, QUERIES, SPANS})
    Params = ProbeParams
    params: ProbeParams

    def run(self, bench: Bench, ctx: StageContext) -> Bench:
        p = self.params
        paths = [p.path] if isinstance(p.path, str) else p.path
        docs, malformed = load_documents([input_path(x, ctx.base_dir) for x in paths])
        candidates, reasons = _candidates(docs, p)
        ctx.stats["facts"] = {
            "documents": len(docs),
            "malformed_documents": malformed,
            "eligible": len(candidates),
            "ineligible": dict(reasons),
        }
        rows = _Rows(p, ctx)
        for setting in p.settings:
            for c, probe in self._pick(setting, candidates, docs, ctx):
                rows.add(c, probe)
        kept_as = rows.fold_identical()
        rows.pairs_table().write_parquet(ctx.work_dir / TABLE_FILES["pairs"])
        ctx.stats["identical_documents_folded"] = len(kept_as)
        return add_rows(
            bench,
            ctx.label,
            corpus=rows.corpus(),
            queries=rows.queries(),
            qrels=rows.qrels(),
            rejected=[("doc", d, "duplicate_text") for d in kept_as],
        )

    def _pick(
        self, setting: Setting, candidates: list[Candidate], docs: list[Document], ctx: StageContext
    ) -> list[tuple[Candidate, Probe]]:
        """A seeded sample of facts that can feed this setting, with their probes."""
        p = self.params
        ranked = sorted(candidates, key=lambda c: (ctx.item_rng(f"{setting}:{c.key}").random(), c.key))
        chosen: list[tuple[Candidate, Probe]] = []
        skipped: Counter[str] = Counter()
        for c in ranked:
            if p.queries_per_setting is not None and len(chosen) >= p.queries_per_setting:
                break
            probe = self._probe(setting, c, docs, ctx)
            if isinstance(probe, str):
                skipped[probe] += 1
            else:
                chosen.append((c, probe))
        ctx.stats.setdefault("settings", {})[setting] = {"queries": len(chosen), "skipped": dict(skipped)}
        return chosen

    def _probe(self, setting: Setting, c: Candidate, docs: list[Document], ctx: StageContext) -> Probe | str:
        """The setting's documents for one fact, or why the fact cannot feed the setting."""
        reason = shortfall(setting, c.parts)
        if reason is not None:
            return reason
        if setting != "foil":
            return BUILDERS[setting](c.parts)
        unrelated = _unrelated(c, docs, ctx, self.params.unrelated_sentences)
        if unrelated is None:
            return "no_unrelated_document"
        return foil_probe(c.parts, unrelated, self.params.foil_prefix)


class _Rows:
    """Corpus, query, qrel and pair rows of every probe, built up one probe at a time."""

    def __init__(self, p: ProbeParams, ctx: StageContext) -> None:
        self.p, self.ctx = p, ctx
        self.docs: list[dict[str, Any]] = []
        self.query_rows: list[dict[str, Any]] = []
        self.pair_rows: list[dict[str, str]] = []

    def add(self, c: Candidate, probe: Probe) -> None:
        qid = f"{self.p.id_prefix}{probe.setting}-{c.key}"
        spans: dict[str, dict[str, Any]] = {}
        for v in probe.variants:
            text, start, end = v.text_and_span()
            self.docs.append(
                {
                    "doc_id": f"{qid}-{v.name}",
                    "title": "",
                    "text": text,
                    "lang": self.p.lang,
                    "domain": self.p.domain,
                    "setting": probe.setting,
                    "variant": v.name,
                    "probe_query": qid,
                    "evidence_start": start,
                    "evidence_end": end,
                    "sentences": list(v.sentences),
                    "source_title": c.doc.title,
                }
            )
            if start is not None:
                spans[v.name] = {"start": start, "end": end, "method": "constructed", "score": 100.0}
        pairs = [{"doc_a": f"{qid}-{a}", "doc_b": f"{qid}-{b}"} for a, b in probe.pairs]
        self.pair_rows += [{"query_id": qid, "setting": probe.setting, **x} for x in pairs]
        self.query_rows.append(
            {
                "query_id": qid,
                "text": self.p.templates[c.fact.relation].format(head=c.parts.head),
                "doc_id": f"{qid}-{probe.positive}",
                "lang": self.p.lang,
                "answer": c.answer,
                "relation": c.fact.relation,
                "head": c.parts.head,
                "setting": probe.setting,
                "spans": [spans[probe.positive]],
                "pairs": pairs,
                "source_title": c.doc.title,
            }
        )

    def fold_identical(self) -> dict[str, str]:
        """Keep one document per text (the first built): settings share documents (pos01 is
        evidence_first is answer_present), and an identical copy judged for another query
        only would be a false negative. Queries, pairs and qrels move to the kept id; the
        kept row lists the ids folded into it. Returns folded id -> kept id."""
        first: dict[str, dict[str, Any]] = {}
        kept_as: dict[str, str] = {}
        for d in self.docs:
            keeper = first.setdefault(d["text"], d)
            keeper.setdefault("same_text_ids", [])
            if keeper is not d:
                keeper["same_text_ids"].append(d["doc_id"])
                kept_as[d["doc_id"]] = keeper["doc_id"]
        self.judged = [
            (d["probe_query"], kept_as.get(d["doc_id"], d["doc_id"]), int(d["evidence_start"] is not None))
            for d in self.docs
        ]
        self.docs = list(first.values())
        for q in self.query_rows:
            q["doc_id"] = kept_as.get(q["doc_id"], q["doc_id"])
            q["pairs"] = [{k: kept_as.get(v, v) for k, v in pair.items()} for pair in q["pairs"]]
        for pair in self.pair_rows:
            pair["doc_a"], pair["doc_b"] = (
                kept_as.get(pair["doc_a"], pair["doc_a"]),
                kept_as.get(pair["doc_b"], pair["doc_b"]),
            )
        return kept_as

    def corpus(self) -> pl.DataFrame:
        frame = pl.DataFrame(
            self.docs,
            schema={
                "doc_id": pl.Utf8,
                "title": pl.Utf8,
                "text": pl.Utf8,
                "lang": pl.Utf8,
                "domain": pl.Utf8,
                "setting": pl.Utf8,
                "variant": pl.Utf8,
                "probe_query": pl.Utf8,
                "evidence_start": pl.Int64,
                "evidence_end": pl.Int64,
                "sentences": pl.List(pl.Utf8),
                "source_title": pl.Utf8,
                "same_text_ids": pl.List(pl.Utf8),
            },
        )
        counts = self.ctx.tokenizer.count_many(frame["text"].to_list())
        return frame.with_columns(pl.Series("n_tokens", counts, pl.Int64))

    def queries(self) -> pl.DataFrame:
        return pl.DataFrame(
            self.query_rows,
            schema={
                "query_id": pl.Utf8,
                "text": pl.Utf8,
                "doc_id": pl.Utf8,
                "lang": pl.Utf8,
                "answer": pl.Utf8,
                "relation": pl.Utf8,
                "head": pl.Utf8,
                "setting": pl.Utf8,
                "spans": SPAN_DTYPE,
                "pairs": PAIR_DTYPE,
                "source_title": pl.Utf8,
            },
        )

    def qrels(self) -> pl.DataFrame:
        """Every probe document is judged by its probe's query: 1 where it holds the
        evidence, 0 where not (under the kept id, once per pair)."""
        return (
            pl.DataFrame(self.judged, schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "score": pl.Int64}, orient="row")
            .group_by("query_id", "doc_id", maintain_order=True)
            .agg(pl.col("score").max())
        )

    def pairs_table(self) -> pl.DataFrame:
        return pl.DataFrame(
            self.pair_rows, schema={"query_id": pl.Utf8, "setting": pl.Utf8, "doc_a": pl.Utf8, "doc_b": pl.Utf8}
        )
