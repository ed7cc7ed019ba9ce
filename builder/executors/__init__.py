"""Where the row-parallel part of a stage runs: this process, or a Ray cluster."""

from __future__ import annotations

from builder.executors.base import ActorResources, Executor, ExecutorUnavailable, LocalExecutor, blocks_of, map_blocks
from builder.executors.config import ExecutorConfig, missing_ray


def make_executor(config: ExecutorConfig) -> Executor:
    if config.kind == "ray":
        from builder.executors.ray_executor import RayExecutor

        return RayExecutor(config)
    return LocalExecutor(config.block_size)


__all__ = [
    "ActorResources",
    "Executor",
    "ExecutorConfig",
    "ExecutorUnavailable",
    "LocalExecutor",
    "blocks_of",
    "make_executor",
    "map_blocks",
    "missing_ray",
]
