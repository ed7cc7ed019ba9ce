"""A BM25 index built block by block, so its memory is the index itself, not the corpus.

The first pass tokenizes each block of texts into term ids over one shared vocabulary
(ids given in order of first appearance, as the reranker's Lexicon gives them) and
spills the block's term counts to a scratch folder. The second pass, once document
frequencies and the average length are known, turns each spilled block into bm25s's
Lucene scores and writes them into their columns of the term-major (CSC) score matrix,
so the matrix is filled in place rather than sorted whole.

The arithmetic is bm25s's own, in the same dtypes and order, and retrieval is bm25s's
scoring over that matrix: a document's score is what `bm25s.BM25.index` on the whole
corpus gives, to the last bit. The top k are then taken by score and corpus order (see
`top_k`), the same for any numpy release.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import sparse

from builder.backends.bm25_tokens import Counted, count_terms, counted_blocks
from builder.backends.ranking import top_k
from builder.backends.rerankers.bm25 import Lexicon, stopwords, terms_of
from builder.backends.rerankers.config import BM25Config

Hits = tuple[np.ndarray, np.ndarray]  # corpus row indices and their scores, best first


@dataclass(frozen=True)
class TermBlock:
    """Consecutive documents as sparse term counts: document i holds
    `terms[starts[i]:starts[i + 1]]` with `counts` alike, and has `lengths[i]` tokens."""

    starts: np.ndarray  # int64, one more than the documents
    terms: np.ndarray  # int32 term ids
    counts: np.ndarray  # int32
    lengths: np.ndarray  # int64

    @property
    def n_docs(self) -> int:
        return len(self.lengths)


class Vocabulary:
    """The BM25 tokens of texts as ids; a term gets the next id the first time it is seen."""

    def __init__(self, config: BM25Config, ids: dict[str, int] | None = None) -> None:
        self._stop = stopwords(config)
        self.ids: dict[str, int] = {} if ids is None else ids

    def terms(self, text: str) -> list[str]:
        return terms_of(text, self._stop)

    @property
    def stop(self) -> frozenset[str]:
        return self._stop

    def count(self, texts: Sequence[str]) -> TermBlock:
        return self.number(count_terms(texts, self._stop))

    def number(self, counted: Counted) -> TermBlock:
        """Term ids for counted texts; new terms get the next ids in order of first appearance
        (the block's terms come in that order, so numbering them in turn is enough)."""
        terms = counted.terms.split("\n") if counted.terms else []
        ids = self.ids
        corpus_ids = np.fromiter((ids.setdefault(t, len(ids)) for t in terms), np.int32, len(terms))
        return TermBlock(
            np.frombuffer(counted.starts, np.int64),
            corpus_ids[np.frombuffer(counted.ids, np.int32)],
            np.frombuffer(counted.counts, np.int32),
            np.frombuffer(counted.lengths, np.int64),
        )

    def query_ids(self, query: str) -> list[int]:
        """Distinct known terms of a query, sorted; unknown terms match nothing."""
        return sorted({self.ids[t] for t in self.terms(query) if t in self.ids})


class BM25Index:
    """Top-k BM25 search (bm25s's Lucene variant) over term-major scores built in blocks."""

    def __init__(
        self, config: BM25Config, vocabulary: Vocabulary, blocks: Iterable[TermBlock], scratch: Path | None = None
    ) -> None:
        self.config = config
        self.vocabulary = vocabulary
        with tempfile.TemporaryDirectory(prefix="bm25-", dir=scratch) as folder:
            spilled = _Spill(Path(folder))
            for block in blocks:
                spilled.add(block)
            self._bm25 = self._score_matrix(spilled)

    @classmethod
    def from_texts(
        cls,
        config: BM25Config,
        text_blocks: Iterable[Sequence[str]],
        scratch: Path | None = None,
        workers: int | None = None,
    ) -> BM25Index:
        """`workers` processes tokenize the blocks (default: up to two; 1 keeps it in this process)."""
        vocabulary = Vocabulary(config)
        counted = counted_blocks(text_blocks, vocabulary.stop, workers)
        return cls(config, vocabulary, (vocabulary.number(block) for block in counted), scratch)

    @classmethod
    def from_lexicon(cls, lexicon: Lexicon, block_size: int = 4096, scratch: Path | None = None) -> BM25Index:
        """The index of a fitted reranker's corpus, from its term counts (no second tokenization)."""
        return cls(
            lexicon.config, Vocabulary(lexicon.config, lexicon.vocab), _lexicon_blocks(lexicon, block_size), scratch
        )

    @property
    def n_docs(self) -> int:
        return int(self._bm25.scores["num_docs"])

    def _score_matrix(self, spilled: _Spill):  # -> bm25s.BM25
        import bm25s

        n_vocab, n_docs = len(self.vocabulary.ids), spilled.n_docs
        df = spilled.doc_freqs(n_vocab)
        idf = _lucene_idf(df, n_docs)
        avg_len = spilled.lengths().mean() if n_docs else np.float64(np.nan)
        indptr = np.zeros(n_vocab + 1, np.int64)
        np.cumsum(df, out=indptr[1:])
        data = np.empty(int(indptr[-1]), np.float32)
        rows = np.empty(int(indptr[-1]), np.int32)
        cursor = indptr[:-1].copy()
        k1, b = self.config.k1, self.config.b
        for first_row, block in spilled.blocks():
            per_entry = np.repeat(np.arange(block.n_docs), np.diff(block.starts))
            tf = block.counts.astype(np.float32)
            doc_len = block.lengths[per_entry]
            # bm25s: idf (float32) * tf / (k1 * ((1 - b) + b * l_d / l_avg) + tf), stored as float32.
            scores = (idf[block.terms] * (tf / (k1 * ((1 - b) + b * doc_len / avg_len) + tf))).astype(np.float32)
            # Term-major within the block (scipy's counting sort keeps the documents in order),
            # then each term's run goes after what earlier blocks put in its column.
            by_term = sparse.csr_matrix((scores, block.terms, block.starts), shape=(block.n_docs, n_vocab)).tocsc()
            n = np.diff(by_term.indptr)
            present = np.flatnonzero(n)
            n = n[present]
            slot = np.repeat(cursor[present] - by_term.indptr[present], n) + np.arange(by_term.nnz)
            data[slot] = by_term.data
            rows[slot] = by_term.indices + first_row
            cursor[present] += n
        bm25 = bm25s.BM25(k1=k1, b=b, method="lucene", backend="numpy")
        bm25.scores = {"data": data, "indices": rows, "indptr": indptr, "num_docs": n_docs}
        bm25.vocab_dict = self.vocabulary.ids
        bm25.nonoccurrence_array = None  # the Lucene variant has no score for absent terms
        return bm25

    def close(self) -> None:
        """Nothing to remove: the spilled blocks are gone once the index is built."""

    def search(self, queries: Sequence[str], k: int) -> list[Hits]:
        """(row indices, scores) per query, best first and equal scores in corpus order; rows
        with no shared term are left out. bm25s's scores, but not its top-k selection: which
        of several equal scores it keeps, and in what order, follows numpy's partition
        algorithm and so changes with the numpy release."""
        k = min(k, self.n_docs)
        out: list[Hits] = []
        for query in queries:
            ids = self.vocabulary.query_ids(query)
            if not ids or k == 0:
                out.append((np.zeros(0, np.int64), np.zeros(0)))
                continue
            scores = self._bm25.get_scores_from_ids(ids)
            sharing = np.flatnonzero(scores > 0)
            best, rows = top_k(scores[sharing], sharing, k)
            out.append((rows.astype(np.int64), best.astype(np.float64)))
        return out


def _lucene_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """bm25s's Lucene idf, computed with math.log per distinct document frequency."""
    values, where = np.unique(df, return_inverse=True)
    idf = np.array(
        [math.log(1 + (n_docs - int(d) + 0.5) / (int(d) + 0.5)) if d else 0.0 for d in values], dtype=np.float32
    )
    return idf[where]


class _Spill:
    """Term blocks written to a scratch folder as they come, read back one at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._rows: list[int] = []  # first row of each block
        self._lengths: list[np.ndarray] = []
        self._df = np.zeros(0, np.int64)
        self.n_docs = 0

    def add(self, block: TermBlock) -> None:
        np.savez(
            self.folder / f"{len(self._rows)}.npz",
            starts=block.starts,
            terms=block.terms,
            counts=block.counts,
            lengths=block.lengths,
        )
        self._rows.append(self.n_docs)
        self._lengths.append(block.lengths)
        self.n_docs += block.n_docs
        found = np.bincount(block.terms)
        if len(found) > len(self._df):
            self._df = np.concatenate([self._df, np.zeros(len(found) - len(self._df), np.int64)])
        self._df[: len(found)] += found

    def lengths(self) -> np.ndarray:
        return np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)

    def blocks(self) -> Iterator[tuple[int, TermBlock]]:
        for i, first_row in enumerate(self._rows):
            with np.load(self.folder / f"{i}.npz") as arrays:
                yield first_row, TermBlock(arrays["starts"], arrays["terms"], arrays["counts"], arrays["lengths"])

    def doc_freqs(self, n_vocab: int) -> np.ndarray:
        """Documents per term (a document's terms are distinct, so counting entries counts documents)."""
        return np.concatenate([self._df, np.zeros(n_vocab - len(self._df), np.int64)])


def _lexicon_blocks(lexicon: Lexicon, size: int) -> Iterator[TermBlock]:
    tf = lexicon.tf
    for at in range(0, tf.shape[0], size):
        rows = tf[at : at + size]
        yield TermBlock(
            rows.indptr.astype(np.int64),
            rows.indices.astype(np.int32),
            rows.data.astype(np.int32),
            lexicon.lengths[at : at + size].astype(np.int64),
        )
