"""Near-duplicate documents (the same manual in two versions, a page saved twice), found
by MinHash LSH over word 5-grams (`builder.textutil.near_duplicates`), as FineWeb
de-duplicated.
"""

from __future__ import annotations

from collections.abc import Sequence

from builder.textutil.near_duplicates import near_duplicate_pairs


def near_duplicates(docs: Sequence[tuple[str, str]], threshold: float) -> dict[str, str]:
    """{id of a document left out: id of the document kept in its place}. Longer documents
    come first, so of a group the longest one (then the first by id) is kept."""
    ordered = sorted(docs, key=lambda d: (-len(d[1]), d[0]))
    twins: dict[int, set[int]] = {}
    for i, j in near_duplicate_pairs([text for _, text in ordered], threshold):
        twins.setdefault(j, set()).add(i)
    kept: set[int] = set()
    dropped: dict[str, str] = {}
    for j, (doc_id, _) in enumerate(ordered):
        kept_twins = sorted(ordered[i][0] for i in twins.get(j, ()) if i in kept)
        if kept_twins:
            dropped[doc_id] = kept_twins[0]
        else:
            kept.add(j)
    return dropped
