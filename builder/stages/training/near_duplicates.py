"""The split stage's near-duplicate settings; the MinHash LSH itself lives in
`builder.textutil.near_duplicates`. Used to keep near-duplicates in one split and to count,
afterwards, the pairs that a split still separates."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from builder.textutil.near_duplicates import near_duplicate_pairs as textutil_pairs


class NearDuplicateParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="estimated Jaccard similarity of two "
        "documents' word shingles at or above which they are near-duplicates",
    )
    shingle_words: int = Field(default=5, ge=1, description="words per shingle")
    num_perm: int = Field(default=128, ge=16, description="MinHash permutations (more: a closer estimate)")


def near_duplicate_pairs(texts: Sequence[str], params: NearDuplicateParams, seed: int) -> list[tuple[int, int]]:
    """(i, j), i < j, for every two texts whose estimated Jaccard similarity reaches the threshold."""
    return textutil_pairs(
        texts, params.threshold, shingle_words=params.shingle_words, num_perm=params.num_perm, seed=seed
    )
