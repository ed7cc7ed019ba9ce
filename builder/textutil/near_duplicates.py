"""Near-duplicate texts by MinHash LSH (datasketch): word shingles, an estimated Jaccard
similarity, and the pairs at or above a threshold. The files source keeps one document of
each group; training splits keep a group in one split and count the pairs a split separates.

LSH only proposes candidates; each is confirmed on its MinHash estimate, so a pair is called
a near-duplicate only at or above the threshold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD = re.compile(r"\w+")


def _shingles(text: str, size: int) -> set[bytes]:
    words = _WORD.findall(text.lower())
    if len(words) <= size:
        return {" ".join(words).encode("utf-8")}
    return {" ".join(words[i : i + size]).encode("utf-8") for i in range(len(words) - size + 1)}


def near_duplicate_pairs(
    texts: Sequence[str], threshold: float, *, shingle_words: int = 5, num_perm: int = 128, seed: int = 1
) -> list[tuple[int, int]]:
    """(i, j), i < j, for every two texts whose estimated Jaccard similarity of their word
    shingles reaches `threshold`."""
    from datasketch import MinHash, MinHashLSH  # numpy and scipy: imported when this runs

    hashes = []
    for text in texts:
        sketch = MinHash(num_perm=num_perm, seed=seed)
        sketch.update_batch(sorted(_shingles(text, shingle_words)))
        hashes.append(sketch)
    index = MinHashLSH(threshold=threshold, num_perm=num_perm)
    for i, sketch in enumerate(hashes):
        index.insert(i, sketch)
    pairs = set()
    for i, sketch in enumerate(hashes):
        for j in index.query(sketch):
            if j != i and hashes[i].jaccard(hashes[j]) >= threshold:
                pairs.add((min(i, j), max(i, j)))
    return sorted(pairs)
