from collections import Counter

from builder.stages.qc.balance import Balance, BalanceParams
from builder.stages.qc.subset import Subset, SubsetParams
from tests.stages.qc_factories import bench_of, qc_ctx

SIZES = {"beginning": 7, "middle": 12, "end": 4}


def _bench():
    queries = [
        {"query_id": f"{tag}{i}", "text": "q", "doc_id": f"d{i % 3}", "position_tag": tag, "position_bin": i % 2}
        for tag, n in SIZES.items()
        for i in range(n)
    ]
    queries.append({"query_id": "untagged", "text": "q", "doc_id": "d0", "position_tag": None, "position_bin": 1})
    return bench_of({"d0": "a", "d1": "b", "d2": "c"}, queries)


def _tags(bench):
    return Counter(bench.queries["position_tag"].to_list())


def test_balance_downsamples_to_the_smallest_category(tmp_path):
    ctx = qc_ctx(tmp_path, seed=1)
    out = Balance(BalanceParams()).run(_bench(), ctx)
    assert _tags(out) == {"beginning": 4, "middle": 4, "end": 4}
    assert Counter(out.drops["reason"].to_list()) == {"balanced_out": 3 + 8, "no_category": 1}
    assert out.corpus.height == 3
    assert ctx.stats["category_sizes_in"] == {"beginning": 7, "end": 4, "middle": 12}


def test_balance_is_seeded_and_independent_of_row_order(tmp_path):
    bench = _bench()
    first = Balance(BalanceParams()).run(bench, qc_ctx(tmp_path, seed=1))
    shuffled = bench.replace(queries=bench.queries.sample(fraction=1.0, shuffle=True, seed=9))
    again = Balance(BalanceParams()).run(shuffled, qc_ctx(tmp_path, seed=1))
    other = Balance(BalanceParams()).run(bench, qc_ctx(tmp_path, seed=2))
    kept = set(first.queries["query_id"])
    assert kept == set(again.queries["query_id"])
    assert kept != set(other.queries["query_id"])


def test_balance_by_bin(tmp_path):
    out = Balance(BalanceParams(column="position_bin")).run(_bench(), qc_ctx(tmp_path))
    assert Counter(out.queries["position_bin"].to_list()) == {0: 12, 1: 12}


def test_subset_keeps_n_per_category_and_the_whole_corpus(tmp_path):
    out = Subset(SubsetParams(per_category=5)).run(_bench(), qc_ctx(tmp_path))
    assert _tags(out) == {"beginning": 5, "middle": 5, "end": 4}
    assert Counter(out.drops["reason"].to_list()) == {"not_in_subset": 2 + 7, "no_category": 1}
    assert out.corpus.height == 3 and out.qrels.height == 14


def test_missing_column_drops_every_query_with_a_reason(tmp_path):
    bench = _bench()
    bench = bench.replace(queries=bench.queries.drop("position_tag"))
    out = Balance(BalanceParams()).run(bench, qc_ctx(tmp_path))
    assert out.queries.height == 0 and set(out.drops["reason"]) == {"no_category"}
