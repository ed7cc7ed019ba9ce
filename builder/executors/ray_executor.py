"""Blocks of rows on a Ray cluster: plain tasks for CPU work, a Ray Data actor pool for
models. Results come back in block order, so a Ray run writes what a local run writes.

A worker that dies mid-task is replaced and its task re-run by Ray (`max_retries`); the
functions shipped here are pure, so a re-run gives the same answer.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from builder.executors.base import ActorResources, ExecutorUnavailable
from builder.executors.config import RAY_INSTALL_HINT, ExecutorConfig

T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M")

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def _run_block(fn: Callable[[list[Any]], list[Any]], block: list[Any]) -> list[Any]:
    return fn(block)


class _ModelWorker:
    """One per actor: builds its model once, then scores the batches Ray Data hands it."""

    def __init__(self, make: Callable[[], Any], fn: Callable[[Any, list[Any]], list[Any]]) -> None:
        self.model = make()
        self.fn = fn

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        items = [pickle.loads(blob) for blob in batch["blob"]]
        results = self.fn(self.model, items)
        if len(results) != len(items):
            raise RuntimeError(f"a model function returned {len(results)} results for {len(items)} items")
        return {"i": batch["i"], "blob": np.array([pickle.dumps(r) for r in results], dtype=object)}


class RayExecutor:
    kind = "ray"

    def __init__(self, config: ExecutorConfig) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorUnavailable(f"executor kind 'ray' needs Ray, which is not installed: {RAY_INSTALL_HINT}") from None
        self._ray = ray
        self.config = config
        self.block_size = config.block_size
        self._owns = not ray.is_initialized()
        if self._owns:
            # Workers of a private instance import this checkout, as the driver does.
            path = os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p)
            try:
                ray.init(address=config.address, num_cpus=config.num_cpus if config.address is None else None,
                         include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True,
                         runtime_env={"env_vars": {"PYTHONPATH": path}})
            except ConnectionError as exc:
                raise ExecutorUnavailable(
                    f"cannot reach the Ray cluster at executor.address {config.address!r}: {exc} "
                    "(start one with `ray start --head`, or leave address out for a private local "
                    "instance)") from None
        self._task = ray.remote(max_retries=config.max_retries, num_cpus=1)(_run_block)

    @property
    def workers(self) -> int:
        return max(1, int(self._ray.available_resources().get("CPU", 1)))

    def imap(self, fn: Callable[[list[T]], list[R]], blocks: Iterable[list[T]]) -> Iterator[list[R]]:
        fn_ref = self._ray.put(fn)
        window = 2 * self.workers  # enough to keep every worker busy, little held in memory
        pending: deque[Any] = deque()
        for block in blocks:
            pending.append(self._task.remote(fn_ref, block))
            if len(pending) >= window:
                yield self._ray.get(pending.popleft())
        while pending:
            yield self._ray.get(pending.popleft())

    def map_with_model(self, make: Callable[[], M], fn: Callable[[M, list[T]], list[R]],
                       items: Sequence[T], resources: ActorResources) -> list[R]:
        if not items:
            return []
        import ray.data

        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False
        rows = [{"i": i, "blob": pickle.dumps(item)} for i, item in enumerate(items)]
        data = ray.data.from_items(rows).map_batches(
            _ModelWorker, fn_constructor_args=(make, fn), batch_size=resources.batch_size or self.block_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=resources.actors),
            num_cpus=resources.num_cpus, num_gpus=resources.num_gpus or None)
        out = sorted(data.iter_rows(), key=lambda row: int(row["i"]))
        if len(out) != len(items):
            raise RuntimeError(f"the actor pool returned {len(out)} results for {len(items)} items")
        return [pickle.loads(row["blob"]) for row in out]

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
