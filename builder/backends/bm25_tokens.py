"""BM25 term counts of blocks of texts, in worker processes when there are many blocks.

Tokenizing is most of the cost of a BM25 index, and each block's counts depend on that
block alone, so blocks go to a small process pool (a bounded number in flight, results
taken in order). A worker numbers its block's terms by their first appearance in the
block; the caller maps those few distinct terms onto the corpus's ids, in order, so ids
come out as one pass in corpus order gives them, without a look-up per term per document.
"""

from __future__ import annotations

import itertools
import os
from array import array
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

from builder.backends.rerankers.bm25 import tokens_of

# Blocks tokenized in this process before a pool is worth starting it (it costs a second or two).
_POOL_AFTER = 2


@dataclass(frozen=True)
class Counted:
    """The block's distinct terms in order of first appearance (joined by newlines, which
    no term contains); each document's distinct terms as indices into them, in the order
    the document first uses them, with their counts; where each document's terms start;
    and each document's length in terms."""

    terms: str
    ids: array
    counts: array
    starts: array
    lengths: array


def count_terms(texts: Sequence[str], stop: frozenset[str]) -> Counted:
    local: dict[str, int] = {}
    ids, counts, starts, lengths = array("i"), array("i"), array("q", [0]), array("q")
    for text in texts:
        tokens = tokens_of(text)
        counted = Counter(tokens)  # keeps the order of first appearance
        # Stopwords are taken out of the counts rather than out of every token list.
        lengths.append(len(tokens) - sum(counted.pop(t) for t in stop.intersection(counted)))
        ids.extend([local.setdefault(t, len(local)) for t in counted])
        counts.extend(counted.values())
        starts.append(len(counts))
    return Counted("\n".join(local), ids, counts, starts, lengths)


def counted_blocks(
    text_blocks: Iterable[Sequence[str]], stop: frozenset[str], workers: int | None = None
) -> Iterator[Counted]:
    """`count_terms` of each block, in order; `workers` processes (default: up to two of
    the CPUs) once the corpus has proved long enough to pay for them."""
    workers = min(2, os.cpu_count() or 1) if workers is None else workers
    blocks = iter(text_blocks)
    for texts in itertools.islice(blocks, _POOL_AFTER if workers > 1 else None):
        yield count_terms(texts, stop)
    if workers <= 1:
        return
    first = next(blocks, None)
    if first is None:
        return
    # spawn, not fork: the parent runs polars' and rich's threads.
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        pending: deque[Future[Counted]] = deque()
        for texts in itertools.chain([first], blocks):
            pending.append(pool.submit(count_terms, list(texts), stop))
            if len(pending) > 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
