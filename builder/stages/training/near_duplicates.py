"""Near-duplicate documents by MinHash LSH (datasketch): word shingles, an estimated Jaccard
similarity, and the pairs above a threshold. Used to keep near-duplicates in one split and
to count, afterwards, the pairs that a split still separates."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

_WORD = re.compile(r"\w+", re.UNICODE)


class NearDuplicateParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(default=0.8, gt=0, le=1, description="estimated Jaccard similarity of two "
                             "documents' word shingles at or above which they are near-duplicates")
    shingle_words: int = Field(default=5, ge=1, description="words per shingle")
    num_perm: int = Field(default=128, ge=16, description="MinHash permutations (more: a closer estimate)")


def _shingles(text: str, size: int) -> set[bytes]:
    words = _WORD.findall(text.lower())
    if len(words) <= size:
        return {" ".join(words).encode("utf-8")}
    return {" ".join(words[i:i + size]).encode("utf-8") for i in range(len(words) - size + 1)}


def near_duplicate_pairs(texts: Sequence[str], params: NearDuplicateParams, seed: int) -> list[tuple[int, int]]:
    """(i, j), i < j, for every two texts whose estimated Jaccard similarity reaches the
    threshold. LSH only proposes candidates; each is confirmed on its MinHash estimate."""
    from datasketch import MinHash, MinHashLSH  # numpy and scipy: imported when this runs

    hashes = []
    for text in texts:
        m = MinHash(num_perm=params.num_perm, seed=seed)
        m.update_batch(list(_shingles(text, params.shingle_words)))
        hashes.append(m)
    lsh = MinHashLSH(threshold=params.threshold, num_perm=params.num_perm)
    for i, m in enumerate(hashes):
        lsh.insert(i, m)
    pairs = set()
    for i, m in enumerate(hashes):
        for j in lsh.query(m):
            if j != i and hashes[i].jaccard(hashes[j]) >= params.threshold:
                pairs.add((min(i, j), max(i, j)))
    return sorted(pairs)
