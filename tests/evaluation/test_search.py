"""`eval` retrieves through the backends' retrievers: the BM25 that quality control uses
(Han and kana read per character) and the bi-encoder's dense search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.backends.rerankers import BM25Config
from builder.backends.rerankers.bm25 import BM25Scorer
from builder.evaluation.data import load_eval_data
from builder.evaluation.evaluate import evaluate
from builder.evaluation.retrievers import parse_spec
from builder.evaluation.search import first_stage

# Five short Chinese documents and one question per document, sharing some of its characters.
DOCS = {
    "d1": "长城是中国古代的军事防御工程，东起山海关，西至嘉峪关，全长两万多公里。",
    "d2": "熊猫主要生活在四川的山区竹林里，每天要吃大量的竹子。",
    "d3": "黄河是中国第二长河，发源于青海，流经九个省区，最后注入渤海。",
    "d4": "茶叶起源于中国，绿茶在江南地区最受欢迎，龙井茶产自杭州西湖。",
    "d5": "春节是中国最重要的传统节日，人们会吃饺子、贴春联、放鞭炮。",
}
QUERIES = {
    "q1": "长城全长多少公里？",
    "q2": "熊猫每天吃什么？",
    "q3": "黄河注入哪个海？",
    "q4": "龙井茶产自哪里？",
    "q5": "春节人们吃什么？",
}


@pytest.fixture(scope="module")
def chinese(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("zh")
    (folder / "qrels").mkdir()
    lines = [json.dumps({"_id": d, "title": "", "text": t}, ensure_ascii=False) for d, t in DOCS.items()]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [json.dumps({"_id": q, "text": t}, ensure_ascii=False) for q, t in QUERIES.items()]
    (folder / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = ["query-id\tcorpus-id\tscore", *(f"q{i}\td{i}\t1" for i in range(1, 6))]
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def test_bm25_finds_the_right_chinese_document(chinese: Path, tmp_path: Path):
    report = evaluate(load_eval_data(chinese), [parse_spec("bm25")], tmp_path)
    overall = report["retrievers"]["bm25"]["overall"]
    # A whole clause per token (bm25s' own splitter) matched nothing here: nDCG@10 was 0.0.
    assert overall["ndcg@10"]["value"] > 0.9 and overall["recall@100"]["value"] == 1.0


def test_eval_bm25_scores_are_the_quality_control_scores(chinese: Path):
    data = load_eval_data(chinese)
    run = first_stage(parse_spec("bm25"), data, k=100).run
    scorer = BM25Scorer("bm25", BM25Config())
    texts = data.corpus.frame()["text"].to_list()  # no titles, so these are exactly what eval indexed
    scorer.fit(texts)
    for qid, query in data.queries.select("query_id", "text").iter_rows():
        expected = {d: s for d, s in zip(data.corpus.frame()["doc_id"], scorer.score(query, texts)) if s > 0}
        assert run[qid].keys() == expected.keys()
        assert run[qid] == pytest.approx(expected, rel=1e-5)
