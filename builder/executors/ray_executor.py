"""Blocks of rows on a Ray cluster: plain tasks for CPU work, a pool of Ray actors for
models (one model each, kept for the run). Results come back in block order, so a Ray
run writes what a local run writes.

A worker that dies mid-task is replaced and its task re-run by Ray (`max_retries`); the
functions shipped here are pure, so a re-run gives the same answer.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from builder.executors.base import ActorResources, ExecutorUnavailable
from builder.executors.config import RAY_MISSING, ExecutorConfig
from builder.util.install_hint import missing_modules_message

T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M")

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def _run_block(fn: Callable[[list[Any]], list[Any]], block: list[Any]) -> list[Any]:
    return fn(block)


class _ModelActor:
    """One model, built once when the actor starts and kept for the whole run."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.model = make()

    def run(self, fn: Callable[[Any, list[Any]], list[Any]], items: list[Any]) -> list[Any]:
        results = fn(self.model, items)
        if len(results) != len(items):
            raise RuntimeError(f"a model function returned {len(results)} results for {len(items)} items")
        return results


class RayExecutor:
    kind = "ray"

    def __init__(self, config: ExecutorConfig) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorUnavailable(missing_modules_message(RAY_MISSING, ["ray"], "ray")) from None
        self._ray = ray
        self.config = config
        self.block_size = config.block_size
        self._owns = not ray.is_initialized()
        if self._owns:
            # Workers of a private instance import this checkout, as the driver does.
            path = os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p)
            try:
                ray.init(
                    address=config.address,
                    num_cpus=config.num_cpus if config.address is None else None,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    log_to_driver=True,
                    runtime_env={"env_vars": {"PYTHONPATH": path}},
                )
            except ConnectionError as exc:
                raise ExecutorUnavailable(
                    f"cannot reach the Ray cluster at executor.address {config.address!r}: {exc} "
                    "(start one with `ray start --head`, or leave address out for a private local "
                    "instance)"
                ) from None
        self._pools: dict[tuple[Any, ...], tuple[Callable[[], Any], list[Any]]] = {}
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

    def map_with_model(
        self, make: Callable[[], M], fn: Callable[[M, list[T]], list[R]], items: Sequence[T], resources: ActorResources
    ) -> list[R]:
        if not items:
            return []
        from ray.util import ActorPool

        size = resources.batch_size or self.block_size
        batches = [list(items[at : at + size]) for at in range(0, len(items), size)]
        fn_ref = self._ray.put(fn)
        pool = ActorPool(self._actors(make, resources))
        out = [r for batch in pool.map(lambda actor, b: actor.run.remote(fn_ref, b), batches) for r in batch]
        if len(out) != len(items):
            raise RuntimeError(f"the actor pool returned {len(out)} results for {len(items)} items")
        return out

    def _actors(self, make: Callable[[], Any], resources: ActorResources) -> list[Any]:
        """The actors holding `make()`'s model, started on first use and kept for the run:
        a stage that scores in many calls loads its model once per actor, not once per call.
        A dead actor is restarted (its model built again) and its call re-run."""
        key = (id(make), resources.actors, resources.num_cpus, resources.num_gpus)
        if key not in self._pools:
            remote = self._ray.remote(_ModelActor).options(
                num_cpus=resources.num_cpus,
                num_gpus=resources.num_gpus,
                max_restarts=self.config.max_retries,
                max_task_retries=self.config.max_retries,
            )
            self._pools[key] = (make, [remote.remote(make) for _ in range(resources.actors)])
        return self._pools[key][1]

    def close(self) -> None:
        if not self._ray.is_initialized():
            return
        for _, actors in self._pools.values():
            for actor in actors:
                self._ray.kill(actor)  # frees their GPUs on a cluster that outlives this run
        self._pools.clear()
        if self._owns:
            self._ray.shutdown()
