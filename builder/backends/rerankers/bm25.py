"""BM25 (Lucene variant) as a reranker and as a first-stage retriever.

Both share one `Lexicon`: the corpus tokenized once into a sparse term-count matrix,
with document frequencies and the average length. The scorer applies the BM25 formula
in float64 to corpus rows and to texts it has never seen (a document without its span,
a third of a document) alike, so scores of the two kinds compare exactly. The retriever
(builder.backends.bm25_index) searches the same token ids with `bm25s`.

Tokens: lower-cased runs of letters and digits; Han and kana characters count one by
one, since Chinese and Japanese are written without spaces.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from builder.backends.rerankers.base import Pair, RerankerBase
from builder.backends.rerankers.config import BM25Config

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Word runs first: the two branches never match at the same place, and most text is words,
# so trying them first halves the time findall takes.
_TOKEN = re.compile(rf"[^\W{_CJK}]+|[{_CJK}]")


def stopwords(config: BM25Config) -> frozenset[str]:
    if config.stopwords is None:
        return frozenset()
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def tokens_of(text: str) -> list[str]:
    """Every token, stopwords included."""
    return _TOKEN.findall(text.lower())


def terms_of(text: str, stop: frozenset[str]) -> list[str]:
    return [t for t in tokens_of(text) if t not in stop] if stop else tokens_of(text)


class Lexicon:
    """Term counts of a fitted corpus (rows follow the order of the texts given)."""

    def __init__(self, config: BM25Config, texts: Sequence[str]) -> None:
        self.config = config
        self._stop = stopwords(config)
        self.vocab: dict[str, int] = {}
        # Typed arrays, not lists: a 100k-document corpus has tens of millions of entries.
        indptr, indices, counts, lengths = array("q", [0]), array("i"), array("i"), array("i")
        for text in texts:
            terms = self.terms(text)
            ids = Counter(self.vocab.setdefault(t, len(self.vocab)) for t in terms)
            indices.extend(ids)
            counts.extend(ids.values())
            indptr.append(len(indices))
            lengths.append(len(terms))
        shape = (len(texts), len(self.vocab))
        self.tf = sparse.csr_matrix(
            (
                np.frombuffer(counts, np.int32).astype(np.float64),
                np.frombuffer(indices, np.int32),
                np.frombuffer(indptr, np.int64),
            ),
            shape=shape,
        )
        self.lengths = np.frombuffer(lengths, np.int32).astype(np.float64)
        self.avgdl = float(self.lengths.mean()) if len(texts) and self.lengths.mean() > 0 else 1.0
        df = np.bincount(self.tf.indices, minlength=len(self.vocab))
        n = len(texts)
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5))
        self.row_of = {text: i for i, text in enumerate(texts)}

    def terms(self, text: str) -> list[str]:
        return terms_of(text, self._stop)

    def query_ids(self, query: str) -> np.ndarray:
        """Distinct known terms of a query; unknown terms match nothing in the corpus."""
        ids = {self.vocab[t] for t in self.terms(query) if t in self.vocab}
        return np.fromiter(sorted(ids), dtype=np.int64, count=len(ids))

    def counts_for(self, texts: Sequence[str], qids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Counts of the query terms in each text (rows x terms) and each text's length."""
        rows = [self.row_of.get(t, -1) for t in texts]
        known = [i for i, r in enumerate(rows) if r >= 0]
        tf = np.zeros((len(texts), len(qids)))
        lengths = np.zeros(len(texts))
        if known and len(qids):
            picked = np.asarray([rows[i] for i in known])
            tf[known] = self.tf[picked][:, qids].toarray()
        if known:
            lengths[known] = self.lengths[[rows[i] for i in known]]
        position = {int(q): j for j, q in enumerate(qids)}
        for i, (text, row) in enumerate(zip(texts, rows)):
            if row >= 0:
                continue
            terms = self.terms(text)
            lengths[i] = len(terms)
            for term, n in Counter(terms).items():
                j = position.get(self.vocab.get(term, -1))
                if j is not None:
                    tf[i, j] = n
        return tf, lengths


class BM25Scorer(RerankerBase):
    def __init__(self, name: str, config: BM25Config) -> None:
        self.name = name
        self.config = config
        self.normalized = config.normalize
        self.lexicon: Lexicon | None = None
        self._fitted_on: Sequence[str] | None = None

    def fit(self, corpus_texts: Sequence[str]) -> None:
        # A stage that fits the retriever and the reranker on one list tokenizes it once.
        if corpus_texts is self._fitted_on:
            return
        self.lexicon = Lexicon(self.config, list(corpus_texts))
        self._fitted_on = corpus_texts

    def fitted_on(self, corpus_texts: Sequence[str]) -> bool:
        return corpus_texts is self._fitted_on

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        if self.lexicon is None:  # unfitted: the texts at hand are the corpus
            self.fit(list(dict.fromkeys(text for _, text in pairs)))
        by_query: dict[str, list[int]] = {}
        for i, (query, _) in enumerate(pairs):
            by_query.setdefault(query, []).append(i)
        out = [0.0] * len(pairs)
        for query, where in by_query.items():
            for i, s in zip(where, self._score_one(query, [pairs[i][1] for i in where])):
                out[i] = s
        return out

    def _score_one(self, query: str, texts: list[str]) -> list[float]:
        lex = self.lexicon
        assert lex is not None
        k1, b = self.config.k1, self.config.b
        qids = lex.query_ids(query)
        if not len(qids):
            return [0.0] * len(texts)
        tf, lengths = lex.counts_for(texts, qids)
        norm = k1 * (1 - b + b * lengths / lex.avgdl)
        scores = (lex.idf[qids] * tf / (tf + norm[:, None])).sum(axis=1)
        if self.config.normalize:
            scores = saturate(scores / (lex.idf[qids].sum() / (1 + k1)))
        return scores.tolist()


def saturate(x: np.ndarray) -> np.ndarray:
    """Map ratios in [0, inf) into [0, 1) without a cap: 2x / (2x + 1) is strictly increasing,
    so strong matches keep their order (a cap made them tie), and 0.5 still means half
    of the reference score."""
    return 2 * x / (2 * x + 1)
