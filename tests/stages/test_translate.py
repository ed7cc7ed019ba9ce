import json
import re

import polars as pl
import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.backends.tokenizers import WordCounter
from builder.bench import SPAN_DTYPE, Bench
from builder.stages.position_columns import PositionOptions, annotate_positions
from builder.stages.translate.markers import mark, pick_style
from builder.stages.translate.pieces import split_pieces
from builder.stages.translate.translate import Translate, TranslateParams
from tests.helpers import make_ctx
from tests.support.openai_server import Reply

_TEXT = re.compile(r"<text>\n(.*)\n</text>", re.S)
_LANG = re.compile(r"into (\w+)\. Your")


def fake_translate(text: str) -> str:
    """A stand-in 'translation' that changes lengths but leaves markers alone."""
    return re.sub(r"[A-Za-z]+", lambda m: m.group().upper() + "e", text)


def responder(body):
    user = body["messages"][-1]["content"]
    lang = _LANG.search(body["messages"][0]["content"]).group(1)[:2].lower()
    if "<texts>" in user:
        lines = user.split("<texts>\n")[1].split("\n</texts>")[0].splitlines()
        return json.dumps(
            [
                {"id": int(n), "text": f"[{lang}] {fake_translate(t)}"}
                for n, _, t in (line.partition(". ") for line in lines)
            ]
        )
    text = _TEXT.search(user).group(1)
    if "EMPTY" in text:
        return "<think>Nothing to say.</think>"
    if "FAIL" in text:
        return Reply(status=500)
    if "CUT" in text:
        return Reply(text=fake_translate(text)[:8], finish_reason="length")
    out = fake_translate(text)
    if "LOSE" in text or ("FLAKY" in text and "Important:" not in user):
        out = re.sub(r"[⟦⟪]/?\d+[⟧⟫]", "", out)
    return out


def _backend(srv) -> OpenAIBackend:
    config = OpenAIModelConfig(model="m", base_url=srv.base_url, max_retries=0, max_reasks=1)
    return OpenAIBackend("gen", config, LLMCache.memory())


def _bench(docs: dict[str, str], queries: list[tuple[str, str, list[str]]]) -> Bench:
    """queries: (query id, doc id, the span texts it cites)."""
    corpus = pl.DataFrame(
        {
            "doc_id": list(docs),
            "title": ["" for _ in docs],
            "text": list(docs.values()),
            "lang": ["en"] * len(docs),
            "domain": ["web"] * len(docs),
            "n_tokens": [len(t.split()) for t in docs.values()],
        }
    )
    spans = [
        [
            {"start": docs[d].index(s), "end": docs[d].index(s) + len(s), "method": "exact", "score": 100.0}
            for s in cited
        ]
        for _, d, cited in queries
    ]
    q = pl.DataFrame(
        {
            "query_id": [q for q, _, _ in queries],
            "text": [f"what about {q}?" for q, _, _ in queries],
            "doc_id": [d for _, d, _ in queries],
            "lang": ["en"] * len(queries),
        }
    )
    q = q.with_columns(pl.Series("spans", spans, dtype=SPAN_DTYPE))
    q = annotate_positions(q, corpus, WordCounter(), PositionOptions())
    qrels = pl.DataFrame({"query_id": q["query_id"], "doc_id": q["doc_id"], "score": [1] * q.height})
    return Bench.of(corpus, q, qrels)


def _run(tmp_path, srv, bench, **params):
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    p = TranslateParams(llm="gen", **{"languages": ["fra-Latn", "deu-Latn"], **params})
    backend = ctx.llm("gen")
    try:
        return Translate(p).run(bench, ctx), ctx
    finally:
        backend.close()


DOC = "Cats sleep a lot. They like warm places near windows. Dogs bark at night. Birds sing at dawn."


def test_spans_follow_markers_into_each_language(tmp_path, fake_openai):
    srv = fake_openai(responder=responder)
    bench = _bench(
        {"d1": DOC},
        [
            ("q1", "d1", ["They like warm places near windows."]),
            ("q2", "d1", ["Dogs bark at night.", "Birds sing at dawn."]),
            ("q3", "d1", ["They like warm places near windows."]),
        ],
    )
    out, ctx = _run(tmp_path, srv, bench)
    assert out.corpus.select("doc_id", "source_doc_id", "lang").rows() == [
        ("d1", "d1", "eng-Latn"),
        ("d1@fra-Latn", "d1", "fra-Latn"),
        ("d1@deu-Latn", "d1", "deu-Latn"),
    ]
    assert out.corpus["text"][1] == fake_translate(DOC)
    texts = dict(out.corpus.select("doc_id", "text").iter_rows())
    for row in out.queries.filter(pl.col("lang") == "fra-Latn").iter_rows(named=True):
        source = bench.queries.filter(pl.col("query_id") == row["source_query_id"]).row(0, named=True)
        got = [texts[row["doc_id"]][s["start"] : s["end"]] for s in row["spans"]]
        assert got == [fake_translate(DOC[s["start"] : s["end"]]) for s in source["spans"]]
        assert row["reference_texts"] == got
        assert row["text"] == f"[fr] {fake_translate(source['text'])}"
        assert row["rel_pos"] == row["spans"][0]["start"] / len(texts[row["doc_id"]]) or len(row["spans"]) > 1
        assert row["span_inherited"] is False and row["length_bucket_basis"] == "source"
    assert sorted(out.qrels.filter(pl.col("query_id").str.ends_with("@deu-Latn")).rows()) == [
        ("q1@deu-Latn", "d1@deu-Latn", 1),
        ("q2@deu-Latn", "d1@deu-Latn", 1),
        ("q3@deu-Latn", "d1@deu-Latn", 1),
    ]
    assert srv.request_count == 4  # one document call and one query call per language
    assert "⟦1⟧" in srv.requests[0]["messages"][-1]["content"]
    assert ctx.stats["translate"]["fra-Latn"]["docs"] == 1


def test_long_documents_go_piece_by_piece_and_spans_may_cross_pieces(tmp_path, fake_openai):
    srv = fake_openai(responder=responder)
    doc = "\n\n".join(f"Paragraph {i} talks about topic {i} at some length here." for i in range(6))
    cited = doc[doc.index("topic 1") : doc.index("Paragraph 3")].strip()  # crosses paragraph ends
    out, ctx = _run(
        tmp_path, srv, _bench({"d": doc}, [("q", "d", [cited])]), max_chunk_tokens=20, languages=["fra-Latn"]
    )
    translated = out.corpus["text"][1]
    assert translated == fake_translate(doc)
    (span,) = out.queries["spans"][1]
    assert translated[span["start"] : span["end"]] == fake_translate(cited)
    starts = out.corpus["piece_starts"][1].to_list()
    assert len(starts) == len(split_pieces(doc, 20, ctx.tokenizer.count_many)) > 2
    assert srv.request_count == len(starts) + 1


def test_lost_markers_are_reasked_once_then_inherited_or_dropped(tmp_path, fake_openai):
    srv = fake_openai(responder=responder)
    docs = {"ok": "FLAKY first. The second sentence is here.", "bad": "LOSE this. The cited sentence is here."}
    bench = _bench(
        docs, [("q1", "ok", ["The second sentence is here."]), ("q2", "bad", ["The cited sentence is here."])]
    )
    out, ctx = _run(tmp_path, srv, bench, languages=["fra-Latn"])
    rows = {r["query_id"]: r for r in out.queries.iter_rows(named=True)}
    assert rows["q1@fra-Latn"]["span_inherited"] is False and rows["q1@fra-Latn"]["spans"] is not None
    lost = rows["q2@fra-Latn"]
    assert lost["span_inherited"] is True and lost["spans"] is None
    assert lost["rel_pos"] == rows["q2"]["rel_pos"] and lost["position_bin"] == rows["q2"]["position_bin"]
    assert ctx.stats["translate"]["fra-Latn"]["pieces_reasked"] == 2
    assert srv.request_count == 2 + 2 + 1  # first tries, re-asks, queries
    dropped, _ = _run(tmp_path / "drop", srv, bench, languages=["fra-Latn"], on_marker_loss="drop")
    assert dropped.drops.select("id", "reason").rows() == [("q2@fra-Latn", "span_marker_lost")]


def test_failed_translations_are_dropped_with_their_queries(tmp_path, fake_openai):
    srv = fake_openai(responder=responder)
    bench = _bench(
        {"a": "EMPTY answer here. Cited bit.", "b": "Fine text. Cited bit.", "c": "FAIL. Cited bit."},
        [("qa", "a", ["Cited bit."]), ("qb", "b", ["Cited bit."]), ("qc", "c", ["Cited bit."])],
    )
    out, _ = _run(tmp_path, srv, bench, languages=["fra-Latn"])
    assert sorted(out.drops.select("kind", "id", "reason").rows()) == [
        ("doc", "a@fra-Latn", "empty_translation"),
        ("doc", "c@fra-Latn", "translation_failed"),
        ("query", "qa@fra-Latn", "doc_removed:empty_translation"),
        ("query", "qc@fra-Latn", "doc_removed:translation_failed"),
    ]
    assert out.corpus["doc_id"].to_list() == ["a", "b", "c", "b@fra-Latn"]
    assert out.qrels.height == 4


def test_translations_cut_off_at_max_tokens_are_dropped_as_truncated(tmp_path, fake_openai):
    srv = fake_openai(responder=responder)
    bench = _bench(
        {"b": "Fine text. Cited bit.", "d": "CUT short. Cited bit."},
        [("qb", "b", ["Cited bit."]), ("qd", "d", ["Cited bit."])],
    )
    out, _ = _run(tmp_path, srv, bench, languages=["fra-Latn"])
    assert sorted(out.drops.select("kind", "id", "reason").rows()) == [
        ("doc", "d@fra-Latn", "llm_truncated"),
        ("query", "qd@fra-Latn", "doc_removed:llm_truncated"),
    ]


def test_a_document_with_marker_brackets_gets_other_brackets():
    text = "Math uses ⟦x⟧ brackets. Cited part."
    style = pick_style(text)
    assert style is not None and style.left == "⟪"
    marked, tags = mark(text, 0, len(text), {1: (text.index("Cited"), len(text))}, style)
    assert marked.endswith("⟪1⟫Cited part.⟪/1⟫") and sum(tags.values()) == 2


def test_length_bucket_can_follow_the_translated_length(tmp_path, fake_openai):
    srv = fake_openai(responder=responder)
    bench = _bench({"d": DOC}, [("q", "d", ["Dogs bark at night."])])
    out, _ = _run(
        tmp_path, srv, bench, languages=["fra-Latn"], length_bucket_from="target", positions={"length_edges": [5, 100]}
    )
    assert out.queries.select("length_bucket", "source_length_bucket").rows() == [("Q1", "Q1"), ("Q2", "Q1")]
    assert out.queries["length_bucket_basis"].to_list() == [None, "target"]


@pytest.mark.parametrize(
    "bad",
    [
        {"languages": ["fr"]},
        {"languages": ["fra-Latn", "fra-Latn"]},
        {"languages": ["eng-Latn"]},
        {"languages": ["xyz-Latn"]},
        {"languages": []},
    ],
)
def test_invalid_params(bad):
    with pytest.raises(ValueError):
        TranslateParams(llm="gen", **bad)


def test_short_texts_of_every_batch_size_go_out_together(fake_openai):
    from builder.stages.translate.short_texts import translate_short

    def reply(body):
        lang, *lines = body["messages"][0]["content"].splitlines()
        return json.dumps([{"id": int(n), "text": f"{t}-{lang}"} for n, _, t in (ln.partition(". ") for ln in lines)])

    def render(lang, numbered):
        return ({"role": "user", "content": "\n".join([lang, *(f"{q['id']}. {q['text']}" for q in numbered)])},)

    srv = fake_openai(responder=reply, latency_s=0.25)
    backend = OpenAIBackend("t", OpenAIModelConfig(model="t", base_url=srv.base_url), LLMCache.memory())
    items = [("q1", "de", "a"), ("q2", "de", "b"), ("q3", "de", "c"), ("q1", "fr", "a")]
    try:
        got = translate_short(items, 2, render, backend, raw_log=None)
    finally:
        backend.close()
    assert got == {("q1", "de"): "a-de", ("q2", "de"): "b-de", ("q3", "de"): "c-de", ("q1", "fr"): "a-fr"}
    assert srv.request_count == 3 and max(srv.arrived) < min(srv.answered)
