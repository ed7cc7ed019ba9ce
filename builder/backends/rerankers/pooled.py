"""Neural scorers on an executor's actor pool: one model per worker, placed by the
reranker entry's `actors`, `num_gpus` and `num_cpus`.

The scorer in the driver keeps its batching and windowing (and loads only the tokenizer);
each batch of pairs or texts is shipped to a worker that built the same scorer from the
same config, so a score does not depend on where it was computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from builder.backends.rerankers.config import AnyRerankerConfig, BiEncoderConfig, CrossEncoderConfig, FlagConfig

if TYPE_CHECKING:
    from builder.executors import Executor

# Model batches per call to a worker, at most: enough to keep a GPU busy between calls,
# few enough that a small job still spreads over every worker.
_MAX_PER_CALL = 16


def build_scorer(name: str, config: AnyRerankerConfig) -> Any:
    """A worker's own scorer (module level, so Ray can ship it by reference)."""
    from builder.backends.rerankers.factory import make_reranker

    return make_reranker(name, config, lambda llm: None)


class ModelPool:
    """Ships a scorer's batches through `executor.map_with_model`; the executor is asked
    for on first use, so building a scorer starts no cluster."""

    def __init__(
        self, name: str, config: FlagConfig | CrossEncoderConfig | BiEncoderConfig, executor: Callable[[], Executor]
    ) -> None:
        self.make = partial(build_scorer, name, config)
        self.config = config
        self.executor = executor

    def map(self, fn: Callable[[Any, list[Any]], list[Any]], batches: list[Any]) -> list[Any]:
        from builder.executors import ActorResources

        c = self.config
        per_call = max(1, min(_MAX_PER_CALL, math.ceil(len(batches) / (4 * c.actors))))
        resources = ActorResources(actors=c.actors, num_cpus=c.num_cpus, num_gpus=c.num_gpus, batch_size=per_call)
        return self.executor().map_with_model(self.make, fn, batches, resources)


def model_pool(name: str, config: AnyRerankerConfig, executor: Callable[[], Executor]) -> ModelPool | None:
    """A pool for a neural scorer; None for bm25 and llm_judge, which stay in the driver."""
    if isinstance(config, (FlagConfig, CrossEncoderConfig, BiEncoderConfig)):
        return ModelPool(name, config, executor)
    return None
