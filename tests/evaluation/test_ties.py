"""Score ties are broken as trec_eval breaks them (score descending, then document id
descending), so nDCG@10 and Recall@100 agree with BEIR, MTEB, pytrec_eval and ir_measures."""

from __future__ import annotations

import math
import random
from pathlib import Path

import polars as pl
import pytest

from builder.evaluation.data import EvalData
from builder.evaluation.metrics import NDCG, RECALL, per_query_scores, trec_order
from builder.evaluation.retrievers import Retrieval, rerank


def test_tied_documents_rank_by_id_descending_not_by_retrieval_order():
    # The retriever returned "a" first, but trec_eval ranks "b" above "a" at equal score.
    assert trec_order({"a": 1.0, "b": 1.0, "c": 2.0}) == ["c", "b", "a"]
    assert trec_order({"d9": 0.5, "d10": 0.5}) == ["d9", "d10"]  # string order, as strcmp
    scores = per_query_scores({"q": {"a": 1}}, {"q": {"a": 1.0, "b": 1.0}})
    assert scores[NDCG].to_list() == pytest.approx([1 / math.log2(3)])


def test_cutoffs_apply_after_the_tie_rule():
    # Twelve documents tied; the relevant "a00" is last in trec order, so beyond rank 10.
    run = {"q": {f"a{i:02d}": 1.0 for i in range(12)}}
    scores = per_query_scores({"q": {"a00": 1}}, run)
    assert scores[NDCG].to_list() == [0.0]
    assert scores[RECALL].to_list() == [1.0]


def _tied_run(seed: int) -> tuple[dict, dict]:
    """Queries whose runs are mostly ties, with graded judgements and ids that sort oddly."""
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(30):
        docs = [f"d{rng.randrange(400)}" for _ in range(rng.randrange(5, 160))]
        docs = list(dict.fromkeys(docs))
        run[f"q{q}"] = {d: float(rng.choice([0.5, 1.0, 1.0, 2.0, 3.25])) for d in docs}
        judged = rng.sample(docs, k=min(len(docs), rng.randrange(1, 6)))
        qrels[f"q{q}"] = {d: rng.choice([1, 1, 2, 3]) for d in judged}
        if q % 5 == 0:  # a relevant document the run never found
            qrels[f"q{q}"]["unfound"] = 1
    return qrels, run


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_agree_with_pytrec_eval_on_runs_full_of_ties(seed: int):
    pytrec_eval = pytest.importorskip("pytrec_eval", reason="pip install pytrec-eval-terrier (dev extra)")
    qrels, run = _tied_run(seed)
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
    ours = per_query_scores(qrels, run)
    for qid, ndcg, recall in ours.select("query_id", NDCG, RECALL).iter_rows():
        assert round(ndcg, 4) == round(theirs[qid]["ndcg_cut_10"], 4), qid
        assert round(recall, 4) == round(theirs[qid]["recall_100"], 4), qid


def test_rerank_depth_cuts_ties_as_trec_eval_ranks_them():
    corpus = pl.DataFrame({"doc_id": ["a", "b", "c"], "title": [""] * 3, "text": ["x", "y", "z"]})
    queries = pl.DataFrame({"query_id": ["q"], "text": ["?"], "doc_id": ["a"]})
    data = EvalData(Path("."), "f" * 64, corpus, queries, {"q": {"a": 1}}, unjudged_queries=0)
    first = Retrieval(run={"q": {"a": 1.0, "b": 1.0, "c": 0.5}})
    seen: list[list[str]] = []

    def scorer(query: str, texts: list[str]) -> list[float]:
        seen.append(texts)
        return [1.0] * len(texts)

    assert rerank(first, data, scorer, depth=1).run == {"q": {"b": 1.0}}
    assert seen == [["y"]]
