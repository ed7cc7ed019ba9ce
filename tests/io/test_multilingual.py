import json

import polars as pl
import pytest

from builder.bench import Bench
from builder.publish.multilingual import language_views, write_multilingual
from builder.recipe.sections import MultilingualOutput

LANGS = ["eng-Latn", "fra-Latn", "deu-Latn"]


def _bench() -> Bench:
    """Two source docs (two domains) with one query each, translated into fra and deu."""
    rows, queries = [], []
    for lang in LANGS:
        tag = "" if lang == "eng-Latn" else f"@{lang}"
        for d, domain in (("d1", "law"), ("d2", "web")):
            rows.append(
                {
                    "doc_id": d + tag,
                    "title": "",
                    "text": f"{d} in {lang}",
                    "lang": lang,
                    "domain": domain,
                    "n_tokens": 3,
                    "source_doc_id": d,
                }
            )
            queries.append(
                {
                    "query_id": f"q{d}{tag}",
                    "text": f"q about {d} in {lang}",
                    "doc_id": d + tag,
                    "lang": lang,
                    "source_query_id": f"q{d}",
                    "rel_pos": 0.5,
                }
            )
    corpus, q = pl.DataFrame(rows), pl.DataFrame(queries)
    qrels = q.select("query_id", "doc_id", pl.lit(1).alias("score"))
    drops = pl.DataFrame(
        {
            "stage": ["s"] * 3,
            "kind": ["doc"] * 3,
            "id": ["d9", "d9@fra-Latn", "d8@deu-Latn"],
            "reason": ["iqr_upper", "refusal", "wrong_language"],
        }
    )
    return Bench.of(corpus, q, qrels, drops)


def _ids(path):
    return [json.loads(line)["_id"] for line in path.read_text().splitlines()]


def test_per_language_folders_share_ids_and_qrels(tmp_path):
    write_multilingual(_bench(), tmp_path, MultilingualOutput(per_language=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(LANGS)
    for lang in LANGS:
        assert _ids(tmp_path / lang / "corpus.jsonl") == ["d1", "d2"]
        assert _ids(tmp_path / lang / "queries.jsonl") == ["qd1", "qd2"]
        qrels = (tmp_path / lang / "qrels" / "test.tsv").read_text()
        assert qrels == "query-id\tcorpus-id\tscore\nqd1\td1\t1\nqd2\td2\t1\n"
        query = json.loads((tmp_path / lang / "queries.jsonl").read_text().splitlines()[0])
        assert query["text"] == f"q about d1 in {lang}" and "source_query_id" not in query
        assert query["doc_id"] == "d1" and query["lang"] == lang
    drops = {lang: pl.read_parquet(tmp_path / lang / "drops.parquet").select("id", "reason").rows() for lang in LANGS}
    assert drops == {
        "eng-Latn": [("d9", "iqr_upper")],
        "fra-Latn": [("d9", "refusal")],
        "deu-Latn": [("d8", "wrong_language")],
    }
    assert json.loads((tmp_path / "fra-Latn" / "stats.json").read_text())["language"] == "fra-Latn"


def test_posir_layout_splits_by_language_and_domain(tmp_path):
    write_multilingual(_bench(), tmp_path, MultilingualOutput(posir_layout=True))
    for lang in LANGS:
        for d, domain in (("d1", "law"), ("d2", "web")):
            folder = tmp_path / "posir" / lang / domain
            assert pl.read_parquet(folder / "corpus.parquet").rows() == [(d, "", f"{d} in {lang}")]
            assert pl.read_parquet(folder / "queries.parquet")["_id"].to_list() == [f"q{d}"]
            assert pl.read_parquet(folder / "qrels" / "test.parquet").rows() == [(f"q{d}", d, 1)]
    qrels = pl.read_parquet(tmp_path / "posir/fra-Latn/law/qrels/test.parquet")
    assert qrels.columns == ["query-id", "corpus-id", "score"]


def test_cross_lingual_sets_pair_translated_queries_with_the_source_corpus(tmp_path):
    bench = _bench()
    bench = bench.drop_docs({"d2": "iqr_upper"}, "x")  # gone in English only
    written = write_multilingual(bench, tmp_path, MultilingualOutput(cross_lingual=True))
    assert sorted(p.name for p in written) == ["deu-Latn-eng-Latn", "fra-Latn-eng-Latn"]
    folder = tmp_path / "cross" / "fra-Latn-eng-Latn"
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    assert [(c["_id"], c["text"]) for c in corpus] == [("d1", "d1 in eng-Latn")]
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    assert [(q["_id"], q["text"]) for q in queries] == [("qd1", "q about d1 in fra-Latn")]
    assert json.loads((folder / "stats.json").read_text())["excluded_queries"] == 1


def test_an_untranslated_bench_is_split_by_language_as_is(tmp_path):
    corpus = pl.DataFrame({"doc_id": ["a", "b"], "text": ["x", "y"], "lang": ["en", "zh"]})
    bench = Bench.of(
        corpus,
        pl.DataFrame({"query_id": ["q"], "text": ["?"], "doc_id": ["b"]}),
        pl.DataFrame({"query_id": ["q"], "doc_id": ["b"], "score": [1]}),
    )
    views = language_views(bench)
    assert views["zh"].queries["query_id"].to_list() == ["q"] and views["en"].queries.is_empty()


def test_options_reject_unknown_keys():
    with pytest.raises(ValueError):
        MultilingualOutput(per_langauge=True)


def test_posir_layout_writes_pos_char_span_as_one_pair_and_keeps_every_span(tmp_path):
    corpus = pl.DataFrame({"doc_id": ["a"], "title": [""], "text": ["x" * 1000], "lang": ["en"], "domain": ["web"]})
    queries = pl.DataFrame(
        {
            "query_id": ["q"],
            "text": ["?"],
            "doc_id": ["a"],
            "spans": [[{"start": 533, "end": 576}, {"start": 700, "end": 720}]],
            "pos_char_span": [[[533, 576], [700, 720]]],
        }
    )
    bench = Bench.of(corpus, queries, pl.DataFrame({"query_id": ["q"], "doc_id": ["a"], "score": [1]}))
    write_multilingual(bench, tmp_path, MultilingualOutput(posir_layout=True))
    row = pl.read_parquet(tmp_path / "posir/eng-Latn/web/queries.parquet").row(0, named=True)
    # PosIR's analysis computes sum(pos_char_span) / 2: one [start, end] pair, the first span.
    assert row["pos_char_span"] == [533, 576]
    assert sum(row["pos_char_span"]) / 2 == 554.5
    assert [(s["start"], s["end"]) for s in row["spans"]] == [(533, 576), (700, 720)]


@pytest.mark.parametrize(
    ("lang", "folder"),
    [("en", "eng-Latn"), ("zh", "cmn-Hans"), ("fr", "fra-Latn"), ("fra-Latn", "fra-Latn"), ("zh-cn", "cmn-Hans")],
)
def test_posir_layout_names_language_folders_like_posir(tmp_path, lang, folder):
    corpus = pl.DataFrame({"doc_id": ["a"], "title": [""], "text": ["x"], "lang": [lang], "domain": ["web"]})
    bench = Bench.of(
        corpus,
        pl.DataFrame({"query_id": ["q"], "text": ["?"], "doc_id": ["a"]}),
        pl.DataFrame({"query_id": ["q"], "doc_id": ["a"], "score": [1]}),
    )
    write_multilingual(bench, tmp_path, MultilingualOutput(posir_layout=True))
    assert [p.name for p in (tmp_path / "posir").iterdir()] == [folder]
