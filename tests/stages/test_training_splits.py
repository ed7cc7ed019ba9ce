"""split_documents and training_pairs on tiny hand-made inputs: no document or near-duplicate
crosses splits, the train sets' thirds, and no mined negative is a positive or a judged
false negative of its query."""

from __future__ import annotations

import polars as pl
import pytest

from builder.backends.rerankers import BM25Config
from builder.stages.base import StageParamError
from builder.stages.training.pairs import TrainingPairParams, TrainingPairs
from builder.stages.training.splits import SplitDocuments, SplitParams
from tests.stages.qc_factories import bench_of, graders, qc_ctx, span

TOPICS = [
    "comet",
    "glacier",
    "violin",
    "harbour",
    "orchard",
    "volcano",
    "lantern",
    "meadow",
    "canyon",
    "falcon",
    "bakery",
    "quarry",
]


def _doc(topic: str, variant: int = 0) -> str:
    body = " ".join(f"{topic} note {k} about the {topic} and its history in the valley" for k in range(6))
    return f"The {topic} story begins here. {body}. The {topic} ends{' well' if variant else ''}."


def _split_bench() -> tuple[dict[str, str], pl.DataFrame]:
    docs = {f"d_{t}": _doc(t) for t in TOPICS}
    docs["d_comet_copy"] = _doc("comet", variant=1)  # a near-duplicate of d_comet
    docs["d_violin_copy"] = _doc("violin", variant=1)
    articles = {d: ("a1" if d in ("d_harbour", "d_orchard", "d_volcano") else d) for d in docs}
    queries = [{"query_id": f"q_{d}", "text": f"what about the {d[2:]}", "doc_id": d} for d in docs]
    bench = bench_of(docs, queries)
    return articles, bench.replace(
        corpus=bench.corpus.with_columns(pl.Series("article", [articles[d] for d in bench.corpus["doc_id"]]))
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_no_document_near_duplicate_or_group_crosses_splits(tmp_path, seed):
    _, bench = _split_bench()
    ctx = qc_ctx(tmp_path, seed=seed)
    out = SplitDocuments(SplitParams(train=0.5, dev=0.2, test=0.3, group_by="article")).run(bench, ctx)
    split = dict(out.corpus.select("doc_id", "split").iter_rows())
    assert split["d_comet"] == split["d_comet_copy"] and split["d_violin"] == split["d_violin_copy"]
    assert split["d_harbour"] == split["d_orchard"] == split["d_volcano"]
    for qid, doc, s in out.queries.select("query_id", "doc_id", "split").iter_rows():
        assert s == split[doc], qid
    assert ctx.stats["near_duplicate_pairs"] == 2
    assert ctx.stats["leakage"] == {
        "same_text_across_splits": 0,
        "near_duplicate_pairs_across_splits": 0,
        "queries_judging_another_split": 0,
    }
    sizes = ctx.stats["split_sizes"]
    assert sum(v["documents"] for v in sizes.values()) == 14 and set(sizes) == {"train", "dev", "test"}
    assert out.drops.height == 0 and out.corpus.height == 14


def test_without_grouping_the_leakage_check_counts_the_crossings(tmp_path):
    # With near-duplicate grouping off, some seed deals a pair apart: the check must see it.
    _, bench = _split_bench()
    crossed = []
    for seed in range(8):
        ctx = qc_ctx(tmp_path, seed=seed)
        out = SplitDocuments(SplitParams(train=0.5, test=0.5, near_duplicates=None)).run(bench, ctx)
        split = dict(out.corpus.select("doc_id", "split").iter_rows())
        apart = (split["d_comet"] != split["d_comet_copy"]) + (split["d_violin"] != split["d_violin_copy"])
        assert ctx.stats["leakage"]["near_duplicate_pairs_across_splits"] == apart
        crossed.append(apart)
        assert bool(ctx.warnings) == bool(apart)
    assert any(crossed)


def test_shares_must_add_up_and_group_by_must_exist(tmp_path):
    with pytest.raises(ValueError, match="must be 1"):
        SplitParams(train=0.5, test=0.3)
    _, bench = _split_bench()
    with pytest.raises(StageParamError, match="no column 'site'"):
        SplitDocuments(SplitParams(train=0.5, test=0.5, group_by="site")).run(bench, qc_ctx(tmp_path))


# -- training pairs -----------------------------------------------------------


def _train_bench(thirds: dict[str, int]) -> tuple[dict[str, str], object]:
    """Every document in the train split but one test document; per third, that many
    queries whose span sits in it."""
    docs, queries = {}, []
    topics = iter(TOPICS * 3)
    n = 0
    for third, count in thirds.items():
        for _ in range(count):
            topic = next(topics)
            doc_id = f"d{n}"
            docs[doc_id] = _doc(topic) + f" number {n}"
            answer = {
                "beginning": f"The {topic} story begins",
                "middle": f"{topic} note 3 about",
                "end": f"number {n}",
            }[third]
            queries.append(
                {
                    "query_id": f"q{n}",
                    "text": f"which {topic} story note history",
                    "doc_id": doc_id,
                    "spans": span(answer, docs[doc_id]),
                    "position_tag": third,
                    "split": "train",
                }
            )
            n += 1
    bench = bench_of(docs, queries)
    return docs, bench.replace(corpus=bench.corpus.with_columns(pl.lit("train").alias("split")))


def test_train_sets_reach_their_shares(tmp_path):
    _, bench = _train_bench({"beginning": 12, "middle": 8, "end": 6})
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()})
    params = TrainingPairParams(
        negatives=2, sets={"balanced": {}, "skewed": {"shares": [0.6, 0.2, 0.2]}, "natural": {"shares": "natural"}}
    )
    out = TrainingPairs(params).run(bench, ctx)
    sets = ctx.stats["sets"]
    # balanced reaches 18 (6 per third), skewed 0.6/0.2/0.2 reaches 20, natural 26: all get 18.
    assert {n: s["size"] for n, s in sets.items()} == {"balanced": 18, "skewed": 18, "natural": 18}
    assert sets["balanced"]["achieved"]["thirds"] == {"beginning": 0.3333, "middle": 0.3333, "end": 0.3333}
    assert sets["skewed"]["achieved"]["thirds"] == {"beginning": 0.6111, "middle": 0.2222, "end": 0.1667}
    chosen = out.queries.filter(pl.col("train_sets").list.contains("balanced"))
    assert chosen.group_by("position_tag").len().sort("position_tag").rows() == [
        ("beginning", 6),
        ("end", 6),
        ("middle", 6),
    ]
    assert out.queries.height == 26 and out.drops.height == 0


def test_a_size_beyond_the_shares_is_refused(tmp_path):
    _, bench = _train_bench({"beginning": 6, "middle": 3, "end": 3})
    with pytest.raises(StageParamError, match="more than the shares allow: balanced reach 9"):
        TrainingPairs(TrainingPairParams(negatives=1, size=10)).run(
            bench, qc_ctx(tmp_path, configs={"bm25": BM25Config()})
        )


@pytest.fixture
def grader(fake_openai):
    yield from graders(fake_openai)


def test_no_negative_is_a_positive_or_a_judged_false_negative(tmp_path, grader):
    docs, bench = _train_bench({"beginning": 4, "middle": 4, "end": 4})
    # A second document judged relevant to q0, and a passage that answers q1 as well as its own.
    docs["d_twin"] = docs["d1"].replace("number 1", "number one")
    qrels = pl.concat([bench.qrels, pl.DataFrame({"query_id": ["q0"], "doc_id": ["d_twin"], "score": [1]})])
    corpus = pl.concat(
        [
            bench.corpus,
            pl.DataFrame({"doc_id": ["d_twin"], "text": [docs["d_twin"]], "n_tokens": [1], "split": ["train"]}),
        ],
        how="diagonal_relaxed",
    )
    bench = bench.replace(corpus=corpus, qrels=qrels)
    judges = {f"j{i}": grader(f"j{i}") for i in range(2)}
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()}, llms=judges)
    params = TrainingPairParams(negatives=3, top_k=12, judges=list(judges), min_votes=2, min_grade=4)
    out = TrainingPairs(params).run(bench, ctx)
    from tests.fixtures.scripted_grader import overlap_grade

    judged = {}
    for q, d in out.qrels.select("query_id", "doc_id").iter_rows():
        judged.setdefault(q, set()).add(d)
    texts = dict(out.corpus.select("doc_id", "text").iter_rows())
    rows = out.queries.filter(pl.col("negatives").is_not_null())
    assert rows.height == 12
    for qid, query, negatives in rows.select("query_id", "text", "negatives").iter_rows():
        assert len(negatives) == 3 and len({n["doc_id"] for n in negatives}) == 3
        for n in negatives:
            assert n["doc_id"] not in judged[qid]
            assert n["passage"] in texts[n["doc_id"]]
            assert overlap_grade(query, n["passage"]) < 4  # what both judges would grade relevant
    counts = ctx.stats["negatives"]
    assert counts["excluded_false_negative"] > 0 and counts["excluded_judged_document"] >= 12
    assert counts["mined"] == 36


def test_positive_is_the_passage_holding_the_span(tmp_path):
    docs, bench = _train_bench({"beginning": 2, "middle": 2, "end": 2})
    ctx = qc_ctx(tmp_path, configs={"bm25": BM25Config()})
    out = TrainingPairs(TrainingPairParams(negatives=1, passage_chars=120)).run(bench, ctx)
    for qid, doc_id, spans, positive in out.queries.select(
        "query_id", "doc_id", "spans", "positive_passage"
    ).iter_rows():
        text = docs[doc_id]
        answer = text[spans[0]["start"] : spans[0]["end"]]
        assert positive in text and len(positive) <= 120
        assert answer.split()[0] in positive, qid
