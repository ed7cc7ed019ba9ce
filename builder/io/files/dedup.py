"""Near-duplicate documents (the same manual in two versions, a page saved twice), found
with datasketch's MinHash LSH over word 5-grams, as FineWeb de-duplicated.

Candidates the LSH index returns are confirmed with the MinHash estimate of their Jaccard
similarity, so a pair is called a duplicate only at or above the threshold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD = re.compile(r"\w+")
SHINGLE_WORDS = 5
NUM_PERM = 128


def _shingles(text: str) -> list[bytes]:
    words = _WORD.findall(text.lower())
    if len(words) <= SHINGLE_WORDS:
        return [" ".join(words).encode("utf-8")]
    return [" ".join(words[i:i + SHINGLE_WORDS]).encode("utf-8") for i in range(len(words) - SHINGLE_WORDS + 1)]


def near_duplicates(docs: Sequence[tuple[str, str]], threshold: float) -> dict[str, str]:
    """{id of a document left out: id of the document kept in its place}. Longer documents
    are seen first, so of a group the longest one (then the first by id) is kept."""
    from datasketch import MinHash, MinHashLSH

    index = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    kept: dict[str, MinHash] = {}
    dropped: dict[str, str] = {}
    for doc_id, text in sorted(docs, key=lambda d: (-len(d[1]), d[0])):
        sketch = MinHash(num_perm=NUM_PERM, seed=1)
        sketch.update_batch(_shingles(text))
        twins = sorted(c for c in index.query(sketch) if kept[c].jaccard(sketch) >= threshold)
        if twins:
            dropped[doc_id] = twins[0]
        else:
            index.insert(doc_id, sketch)
            kept[doc_id] = sketch
    return dropped
