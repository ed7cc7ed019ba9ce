import polars as pl
import pytest

from builder.bench import Bench
from builder.stages.translate.iqr_filter import IQRFilter, IQRFilterParams
from tests.helpers import make_ctx

# fra-Latn/web, 12 documents; sorted, Q1 sits at index 2.75 and Q3 at 8.25 (linear):
# Q1 = 200 + 0.75·4 = 203, Q3 = 224 + 0.25·4 = 225, IQR = 22, so the bounds are
# 203 - 3·22 = 137 and 225 + 1.5·22 = 258; documents exactly on a bound stay.
FRA = [200, 50, 204, 208, 212, 216, 220, 224, 228, 400, 258, 137]
DEU = [10, 500, 20]  # too few documents to judge


def _bench() -> Bench:
    sizes = FRA + DEU
    ids = [f"f{i}" for i in range(len(FRA))] + [f"g{i}" for i in range(len(DEU))]
    corpus = pl.DataFrame(
        {
            "doc_id": ids,
            "text": ["x"] * len(ids),
            "lang": ["fra-Latn"] * len(FRA) + ["deu-Latn"] * len(DEU),
            "domain": ["web"] * len(ids),
            "n_tokens": sizes,
        }
    )
    queries = pl.DataFrame({"query_id": [f"q{d}" for d in ids], "text": ["?"] * len(ids), "doc_id": ids})
    qrels = pl.DataFrame({"query_id": [f"q{d}" for d in ids], "doc_id": ids, "score": [1] * len(ids)})
    return Bench.of(corpus, queries, qrels)


def test_bounds_and_cascades_on_a_hand_made_distribution(tmp_path):
    ctx = make_ctx(tmp_path)
    out = IQRFilter(IQRFilterParams()).run(_bench(), ctx)
    assert sorted(out.drops.select("kind", "id", "reason").rows()) == [
        ("doc", "f1", "iqr_lower"),
        ("doc", "f9", "iqr_upper"),
        ("query", "qf1", "doc_removed:iqr_lower"),
        ("query", "qf9", "doc_removed:iqr_upper"),
    ]
    assert {"f10", "f11", "g0", "g1", "g2"} <= set(out.corpus["doc_id"])
    stratum = ctx.stats["iqr_filter"]["lang=fra-Latn|domain=web"]
    assert stratum == {
        "n": 12,
        "q1": 203.0,
        "q3": 225.0,
        "low": 137.0,
        "high": 258.0,
        "checked": True,
        "iqr_lower": 1,
        "iqr_upper": 1,
    }
    assert ctx.stats["iqr_filter"]["lang=deu-Latn|domain=web"]["checked"] is False


def test_interpolation_strata_and_language_choice(tmp_path):
    nearest = IQRFilter(IQRFilterParams(interpolation="lower", min_stratum_size=2))
    bounds = nearest.bounds(_bench().corpus).filter(pl.col("lang") == "fra-Latn").row(0, named=True)
    assert (bounds["q1"], bounds["q3"]) == (200, 224)
    only_deu = IQRFilter(IQRFilterParams(min_stratum_size=3, languages=["deu-Latn"], k_high=0.1))
    out = only_deu.run(_bench(), make_ctx(tmp_path))
    assert out.drops.filter(pl.col("kind") == "doc").select("id", "reason").rows() == [("g1", "iqr_upper")]
    by_lang = IQRFilter(IQRFilterParams(by=["lang"], k_low=0.0, k_high=0.0, min_stratum_size=1))
    dropped = by_lang.run(_bench(), make_ctx(tmp_path)).drops.filter(pl.col("kind") == "doc")
    assert dropped.height == 8  # only values inside [Q1, Q3] survive with k = 0


def test_missing_column_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no column 'topic'"):
        IQRFilter(IQRFilterParams(by=["topic"])).run(_bench(), make_ctx(tmp_path))
