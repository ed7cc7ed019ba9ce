"""The choice `sample_by_length` makes, taken while a corpus streams past in blocks.

The stage keeps, in every (stratum, bucket), the `target` eligible documents with the
smallest seeded id hash, ties going to the earlier document. That is a top-k per group,
so a bounded heap per group finds the same documents in one pass and can hold their
texts: memory follows the sample, not the corpus.
"""

from __future__ import annotations

import heapq

import polars as pl

from builder.stages.sample_by_length import SampleParams, bucket_targets, classify, rank_expr

# (-rank, -arrival, doc_id, text): heapq keeps the smallest item on top, so negated keys put
# the worst document kept so far there, ready to be replaced by a better one.
_Entry = tuple[int, int, str, str]


class StreamingPicker:
    def __init__(self, params: SampleParams, seed: int) -> None:
        self.params = params
        self.seed = seed
        self.targets = bucket_targets(params.n_docs, params.weights)
        self._heaps: dict[tuple[str, int], list[_Entry]] = {}
        self._arrived = 0

    def offer(self, block: pl.DataFrame, payload: str = "text") -> None:
        """Consider a block of documents (`doc_id`, `text`, `n_tokens`, `lang`, `domain`,
        words), given in corpus order; a kept document holds its `payload` column (the
        text, or where to read it back)."""
        eligible = (
            classify(block, self.params)
            .with_row_index("_arrival", offset=self._arrived)
            .filter(pl.col("_reason").is_null())
            .select("_stratum", "_bucket", rank_expr(self.seed).alias("_rank"), "_arrival", "doc_id", payload)
        )
        self._arrived += block.height
        for stratum, bucket, rank, arrival, doc_id, text in eligible.iter_rows():
            self._push((stratum, bucket), (-rank, -arrival, doc_id, text))

    def _push(self, group: tuple[str, int], entry: _Entry) -> None:
        cap = self.targets[group[1]]
        if cap == 0:
            return
        heap = self._heaps.setdefault(group, [])
        if len(heap) < cap:
            heapq.heappush(heap, entry)
        elif entry[:2] > heap[0][:2]:
            heapq.heapreplace(heap, entry)

    def texts(self) -> dict[str, str]:
        """doc_id -> text (or payload) of every document the stage will keep."""
        return {doc_id: text for heap in self._heaps.values() for _, _, doc_id, text in heap}
