import importlib.util
import json
from contextlib import contextmanager
from dataclasses import replace

import polars as pl
import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.bench import Bench
from builder.executors import ExecutorConfig, LocalExecutor, make_executor
from builder.stages.localize_spans import LocalizeParams, LocalizeSpans, match_queries
from tests.helpers import make_ctx

HAS_RAY = importlib.util.find_spec("ray") is not None
DOC = "Intro line here. The cat sat on the mat. A “quoted” phrase—with a dash. Repeat me. Repeat me. End."


def _bench(refs: list[list[str] | None], requested: list[str] | None = None) -> Bench:
    n = len(refs)
    return Bench.of(
        pl.DataFrame({"doc_id": ["d"], "text": [DOC], "n_tokens": [20]}),
        pl.DataFrame(
            {
                "query_id": [f"q{i}" for i in range(n)],
                "text": [f"question {i}?" for i in range(n)],
                "doc_id": ["d"] * n,
                "reference_texts": refs,
                "requested_position": requested or ["first"] * n,
            },
            schema_overrides={"reference_texts": pl.List(pl.Utf8)},
        ),
        pl.DataFrame({"query_id": [f"q{i}" for i in range(n)], "doc_id": ["d"] * n, "score": [1] * n}),
    )


def test_given_references_become_spans_and_drops(tmp_path):
    bench = _bench(
        [
            ["The cat sat on the mat."],
            ['A "quoted" phrase-with a dash'],
            ["Repeat me."],
            ["a dog barked loudly at night"],
            [],
            None,
        ]
    )
    out = LocalizeSpans(LocalizeParams()).run(bench, make_ctx(tmp_path))
    spans = dict(out.queries.select("query_id", "spans").iter_rows())
    s = spans["q0"][0]
    assert (DOC[s["start"] : s["end"]], s["method"], s["score"]) == ("The cat sat on the mat.", "exact", 100.0)
    s = spans["q1"][0]
    assert DOC[s["start"] : s["end"]].startswith("A “quoted” phrase—with a dash") and s["method"] == "normalized"
    assert sorted(out.drops.select("id", "reason").rows()) == [
        ("q2", "span_ambiguous"),
        ("q3", "span_not_found"),
        ("q4", "unanswerable"),
        ("q5", "no_reference_texts"),
    ]
    assert out.qrels["query_id"].to_list() == ["q0", "q1"]
    row = out.queries.row(0, named=True)
    assert row["rel_pos"] == DOC.index("The cat") / len(DOC)
    assert row["position_bin"] == int(20 * row["rel_pos"]) and row["position_tag"] == "beginning"
    assert row["pos_char_span"] == [[17, 40]] and row["pos_char_length"] == len(DOC)
    assert row["pos_token_length"] == 20 and row["length_bucket"] == "Q1" and row["on_target"] is True


def test_a_document_many_references_share_is_indexed_once_few_are_searched_directly(tmp_path, monkeypatch):
    import builder.textutil.direct_spans as direct_spans

    built: list[str] = []

    class Counted(direct_spans.DocumentIndex):
        def __init__(self, text: str) -> None:
            built.append(text)
            super().__init__(text)

    monkeypatch.setattr(direct_spans, "DocumentIndex", Counted)
    few = [["The cat sat on the mat."], ["END."], ['a "quoted" phrase-with a dash'], ["Intro line  here"]]
    many = few * (direct_spans.INDEX_FROM_REFERENCES // len(few) + 1)

    def spans(refs: list[list[str]]) -> list:
        out = LocalizeSpans(LocalizeParams()).run(_bench(refs), make_ctx(tmp_path))
        return out.queries["spans"].to_list()[: len(few)]

    direct = spans(few)
    assert built == []
    assert spans(many) == direct and built == [DOC]
    assert [s[0]["method"] for s in direct] == ["exact", "normalized", "normalized", "exact"]


def test_off_target_drop_is_optional(tmp_path):
    bench = _bench([["End."], ["The cat sat on the mat."]], requested=["first", "first"])
    kept = LocalizeSpans(LocalizeParams()).run(bench, make_ctx(tmp_path))
    assert kept.queries["on_target"].to_list() == [False, True]
    dropped = LocalizeSpans(LocalizeParams(drop_off_target=True)).run(bench, make_ctx(tmp_path))
    assert dropped.drops.select("id", "reason").rows() == [("q0", "off_target_region")]


def test_llm_extraction_batches_questions_per_document(tmp_path, fake_openai):
    def reply(body):
        user = body["messages"][-1]["content"]
        ids = [int(line.split(".")[0]) for line in user.split("<questions>")[1].strip().splitlines()[:-1]]
        return json.dumps([{"id": i, "reference_texts": ["The cat sat on the mat."] if i % 2 else []} for i in ids])

    srv = fake_openai(responder=reply)
    backend = OpenAIBackend("gen", OpenAIModelConfig(model="m", base_url=srv.base_url), LLMCache.memory())
    ctx = make_ctx(tmp_path, llms={"gen": backend}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    out = LocalizeSpans(LocalizeParams(llm="gen", questions_per_call=2)).run(_bench([None] * 5), ctx)
    assert srv.request_count == 3  # 5 questions, 2 per call
    assert out.queries["query_id"].to_list() == ["q0", "q2", "q4"]
    assert out.drops["reason"].to_list() == ["unanswerable"] * 2
    assert out.queries["reference_texts"].to_list() == [["The cat sat on the mat."]] * 3


def test_exact_only_is_posir_rule(tmp_path):
    bench = _bench([["The cat  sat on\nthe mat."], ['A "quoted" phrase-with a dash'], ["The cat sat on the mta."]])
    out = LocalizeSpans(LocalizeParams(methods=["exact"])).run(bench, make_ctx(tmp_path))
    (span,) = out.queries.row(0, named=True)["spans"]
    assert (DOC[span["start"] : span["end"]], span["method"]) == ("The cat sat on the mat.", "exact")
    assert sorted(out.drops.select("id", "reason").rows()) == [("q1", "span_not_found"), ("q2", "span_not_found")]
    default = LocalizeSpans(LocalizeParams()).run(bench, make_ctx(tmp_path))
    assert default.queries["query_id"].to_list() == ["q0", "q1", "q2"]


def test_methods_must_be_named_once():
    with pytest.raises(ValueError, match="each once"):
        LocalizeParams(methods=[])
    with pytest.raises(ValueError):
        LocalizeParams(methods=["regex"])


def test_batches_of_every_size_go_out_together(tmp_path, fake_openai):
    def reply(body):
        user = body["messages"][-1]["content"]
        ids = [int(line.split(".")[0]) for line in user.split("<questions>")[1].strip().splitlines()[:-1]]
        return json.dumps([{"id": i, "reference_texts": ["The cat sat on the mat."]} for i in ids])

    srv = fake_openai(responder=reply, latency_s=0.25)
    backend = OpenAIBackend("gen", OpenAIModelConfig(model="m", base_url=srv.base_url), LLMCache.memory())
    ctx = make_ctx(tmp_path, llms={"gen": backend}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    try:
        LocalizeSpans(LocalizeParams(llm="gen", questions_per_call=2)).run(_bench([None] * 5), ctx)
    finally:
        backend.close()
    # Requests for two questions and for one are in flight together, not in one round per size.
    assert srv.request_count == 3 and max(srv.arrived) < min(srv.answered)


RIVER = "Morning fog lifts slowly. Quiet rivers carry the old stones far down to the sea every spring. Nothing else."


def _three_docs() -> Bench:
    """Queries of three documents, interleaved, with every kind of match and of failure."""
    docs = {"d": DOC, "r": RIVER, "e": "An empty document."}
    rows = [
        ("r", ["Quiet rivers carry the old stones down to the sea every spring."]),  # fuzzy
        ("d", ["The cat sat on the mat."]),  # exact
        ("e", ["a dog barked loudly at night"]),  # span_not_found
        ("d", ['A "quoted" phrase-with a dash']),  # normalized
        ("r", ["Morning fog lifts slowly.", "Nothing else."]),  # two spans
        ("d", ["Repeat me."]),  # span_ambiguous
        ("r", []),  # unanswerable
        ("d", None),  # no_reference_texts
    ]
    n = len(rows)
    return Bench.of(
        pl.DataFrame({"doc_id": list(docs), "text": list(docs.values()), "n_tokens": [20, 20, 3]}),
        pl.DataFrame(
            {
                "query_id": [f"q{i}" for i in range(n)],
                "text": [f"question {i}?" for i in range(n)],
                "doc_id": [d for d, _ in rows],
                "reference_texts": [r for _, r in rows],
                "requested_position": ["first"] * n,
            },
            schema_overrides={"reference_texts": pl.List(pl.Utf8)},
        ),
        pl.DataFrame({"query_id": [f"q{i}" for i in range(n)], "doc_id": [d for d, _ in rows], "score": [1] * n}),
    )


class _Counting:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []

    @contextmanager
    def task(self, description: str, total: int):
        done = [0]

        class Bar:
            def advance(self, n: int = 1) -> None:
                done[0] += n

        yield Bar()
        self.seen.append((description, total, done[0]))


@pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install -e '.[ray]'")
def test_ray_executor_matches_local_spans_and_drops(ray_local, tmp_path):
    bench = _three_docs()
    local = LocalizeSpans(LocalizeParams()).run(bench, make_ctx(tmp_path))
    progress = _Counting()
    ctx = replace(
        make_ctx(tmp_path),
        progress=progress,
        executor_factory=lambda: make_executor(ExecutorConfig(kind="ray", block_size=1)),
    )
    on_ray = LocalizeSpans(LocalizeParams()).run(bench, ctx)
    assert on_ray.queries.equals(local.queries) and on_ray.drops.equals(local.drops)
    methods = {q: [s["method"] for s in spans] for q, spans in local.queries.select("query_id", "spans").iter_rows()}
    assert methods == {"q0": ["fuzzy"], "q1": ["exact"], "q3": ["normalized"], "q4": ["exact", "exact"]}
    assert sorted(local.drops.select("id", "reason").rows()) == [
        ("q2", "span_not_found"),
        ("q5", "span_ambiguous"),
        ("q6", "unanswerable"),
        ("q7", "no_reference_texts"),
    ]
    assert progress.seen == [("matching spans", 3, 3)]


class _RecordingExecutor(LocalExecutor):
    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[list] = []

    def imap(self, fn, blocks):
        for block in blocks:
            self.blocks.append(block)
            yield fn(block)


def test_match_queries_ships_each_document_once_and_keeps_query_order():
    texts = {"d": DOC, "r": RIVER}
    wanted = [
        ("r", ["Nothing else."]),
        ("d", ["The cat sat on the mat."]),
        ("r", ["Morning fog lifts slowly."]),
        ("d", ["Repeat me."]),
    ]
    executor = _RecordingExecutor()
    found = match_queries(executor, 2, texts, wanted, 90.0, ["exact", "normalized", "fuzzy"])
    assert executor.blocks == [
        [(RIVER, [["Nothing else."], ["Morning fog lifts slowly."]])],
        [(DOC, [["The cat sat on the mat."], ["Repeat me."]])],
    ]
    assert [m if isinstance(m, str) else m[0]["start"] for m in found] == [
        RIVER.index("Nothing"),
        DOC.index("The cat"),
        0,
        "span_ambiguous",
    ]


def test_requested_position_is_read_in_either_vocabulary(tmp_path):
    bench = _bench([["End."], ["The cat sat on the mat."], ["End."]], requested=["beginning", "first", "end"])
    kept = LocalizeSpans(LocalizeParams()).run(bench, make_ctx(tmp_path))
    assert kept.queries["on_target"].to_list() == [False, True, True]
