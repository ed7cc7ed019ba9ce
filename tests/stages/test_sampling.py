import polars as pl
import pytest

from builder.bench import Bench
from builder.stages.sample_by_length import SampleByLength, SampleParams, bucket_targets
from tests.helpers import make_ctx


def _bench(lengths: list[int]) -> Bench:
    return Bench.of(
        pl.DataFrame(
            {
                "doc_id": [f"d{i}" for i in range(len(lengths))],
                "text": ["w " * n for n in lengths],
                "n_tokens": lengths,
            }
        )
    )


def test_targets_split_by_weight_exactly():
    assert sum(bucket_targets(10, [3, 3, 3, 3, 2, 2, 2, 2])) == 10
    assert bucket_targets(20, [3, 3, 3, 3, 2, 2, 2, 2]) == [3, 3, 3, 3, 2, 2, 2, 2]
    assert bucket_targets(5, [1, 1]) == [3, 2]


def test_exact_counts_and_reasons(tmp_path):
    lengths = [10] * 6 + [150] * 6 + [500]  # buckets [0,100) and [100,200); 500 is outside
    stage = SampleByLength(SampleParams(buckets=[0, 100, 200], weights=[2, 1], n_docs=6))
    out = stage.run(_bench(lengths), ctx := make_ctx(tmp_path))
    kept = out.corpus["n_tokens"].to_list()
    assert sorted(kept) == [10, 10, 10, 10, 150, 150]
    reasons = out.drops.group_by("reason").len().sort("reason").rows()
    assert reasons == [("not_sampled", 6), ("outside_length_buckets", 1)]
    assert ctx.stats["buckets"] == [
        {"bucket": "[0, 100)", "had": 6, "target": 4, "got": 4},
        {"bucket": "[100, 200)", "had": 6, "target": 2, "got": 2},
    ]


def test_word_window_and_shortfall(tmp_path):
    stage = SampleByLength(SampleParams(buckets=[0, 1000], weights=[1], n_docs=10, min_words=5, max_words=20))
    out = stage.run(_bench([3, 10, 12, 30]), ctx := make_ctx(tmp_path))
    assert sorted(out.corpus["n_tokens"].to_list()) == [10, 12]
    assert sorted(out.drops["reason"].to_list()) == ["too_few_words", "too_many_words"]
    assert ctx.stats["shortfall"] == 8


def test_seeded_and_order_independent(tmp_path):
    lengths = list(range(0, 2000, 3))
    stage = SampleByLength(SampleParams(n_docs=100))
    a = stage.run(_bench(lengths), make_ctx(tmp_path, seed=1)).corpus["doc_id"].sort().to_list()
    shuffled = _bench(lengths).corpus.sample(fraction=1.0, shuffle=True, seed=5)
    b = stage.run(Bench.of(shuffled), make_ctx(tmp_path, seed=1)).corpus["doc_id"].sort().to_list()
    c = stage.run(_bench(lengths), make_ctx(tmp_path, seed=2)).corpus["doc_id"].sort().to_list()
    assert a == b and a != c


def test_proportions_follow_posir_weights_within_tolerance(tmp_path):
    lengths = [i % 2048 for i in range(0, 40000, 7)]
    out = SampleByLength(SampleParams(n_docs=2000)).run(_bench(lengths), make_ctx(tmp_path))
    counts = out.corpus.with_columns((pl.col("n_tokens") // 256).alias("b")).group_by("b").len().sort("b")["len"]
    shares = [c / 2000 for c in counts]
    expected = [w / 20 for w in [3, 3, 3, 3, 2, 2, 2, 2]]
    assert all(abs(s - e) < 0.01 for s, e in zip(shares, expected))


@pytest.mark.parametrize(
    "bad",
    [
        {"buckets": [0, 100], "weights": [1, 2]},
        {"buckets": [100, 0], "weights": [1]},
        {"buckets": [0, 100], "weights": [0]},
    ],
)
def test_invalid_params(bad):
    with pytest.raises(ValueError):
        SampleParams(n_docs=1, **bad)


def _two_language_bench() -> Bench:
    # English: 30 short + 30 long documents; Chinese: 8 short + 40 long. Pooled ranking
    # would hand most of the sample to whichever language hashes first.
    rows = [("en", 10)] * 30 + [("en", 150)] * 30 + [("zh", 10)] * 8 + [("zh", 150)] * 40
    return Bench.of(
        pl.DataFrame(
            {
                "doc_id": [f"{lang}{i}" for i, (lang, _) in enumerate(rows)],
                "text": ["w " * n for _, n in rows],
                "n_tokens": [n for _, n in rows],
                "lang": [lang for lang, _ in rows],
                "domain": ["general"] * len(rows),
            }
        )
    )


def test_stratified_sampling_gives_each_stratum_its_n_docs(tmp_path):
    stage = SampleByLength(SampleParams(buckets=[0, 100, 200], weights=[1, 1], n_docs=20, per=["lang", "domain"]))
    out = stage.run(_two_language_bench(), ctx := make_ctx(tmp_path))
    counts = out.corpus.group_by("lang", "n_tokens").len().sort("lang", "n_tokens").rows()
    # Each language gets 20, split 10:10 by bucket; Chinese has only 8 short ones.
    assert counts == [("en", 10, 10), ("en", 150, 10), ("zh", 10, 8), ("zh", 150, 10)]
    assert ctx.stats["strata"] == {
        "en/general": {"target": 20, "got": 20},
        "zh/general": {"target": 20, "got": 18},
    }
    assert ctx.stats["shortfall"] == 2
    assert out.drops.group_by("reason").len().rows() == [("not_sampled", 108 - 38)]


def test_strata_are_lang_and_domain_only():
    with pytest.raises(ValueError):
        SampleParams(n_docs=2, per=["topic"])
    with pytest.raises(ValueError, match="twice"):
        SampleParams(n_docs=2, per=["lang", "lang"])


def test_words_come_from_the_streamed_count_and_the_column_leaves_with_the_stage(tmp_path):
    # A streamed corpus holds texts only for the documents the stage keeps; the word
    # window must read the count made from the full text, not the blank.
    bench = Bench.of(
        pl.DataFrame(
            {
                "doc_id": ["a", "b", "c"],
                "text": ["", "kept text", ""],
                "n_tokens": [5, 5, 5],
                "_n_words": [3, 10, 30],
            }
        )
    )
    stage = SampleByLength(SampleParams(buckets=[0, 100], weights=[1], n_docs=5, min_words=5, max_words=20))
    out = stage.run(bench, make_ctx(tmp_path))
    assert out.corpus.select("doc_id", "text").rows() == [("b", "kept text")]
    assert "_n_words" not in out.corpus.columns
    assert sorted(out.drops.select("id", "reason").rows()) == [("a", "too_few_words"), ("c", "too_many_words")]
