"""Executors run the row-parallel part of a stage: a pure function over blocks of rows.

The caller keeps every decision (what is dropped, sampled or balanced); an executor only
maps a function over blocks and hands the results back in block order, so the output
does not depend on where the blocks ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M")


class ExecutorUnavailable(RuntimeError):
    """The executor the recipe asks for cannot start here (extra missing, cluster unreachable)."""


@dataclass(frozen=True)
class ActorResources:
    """What one model worker needs: a model is loaded once per worker."""

    actors: int = 1
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    batch_size: int | None = None  # items per call to a worker; None: the executor's block size


class Executor(Protocol):
    kind: str
    block_size: int  # rows per block unless a caller has a reason to choose

    @property
    def workers(self) -> int:
        """How many blocks can run at once."""
        ...

    def imap(self, fn: Callable[[list[T]], list[R]], blocks: Iterable[list[T]]) -> Iterator[list[R]]:
        """`fn` over each block, yielded in block order; blocks are pulled lazily so a
        stream never has more than a few blocks in flight."""
        ...

    def map_with_model(
        self, make: Callable[[], M], fn: Callable[[M, list[T]], list[R]], items: Sequence[T], resources: ActorResources
    ) -> list[R]:
        """`fn(model, block)` over blocks of `items`, with `make()` building one model per
        worker; one result per item, in item order."""
        ...

    def close(self) -> None: ...


def blocks_of(items: Iterable[T], size: int) -> Iterator[list[T]]:
    block: list[T] = []
    for item in items:
        block.append(item)
        if len(block) == size:
            yield block
            block = []
    if block:
        yield block


def map_blocks(
    executor: Executor,
    fn: Callable[[list[T]], list[R]],
    items: Sequence[T],
    block_size: int,
    on_block: Callable[[int], None] | None = None,
) -> list[R]:
    """`fn` over `items` in blocks of `block_size`: one result per item, in item order."""
    out: list[R] = []
    for block in executor.imap(fn, blocks_of(items, block_size)):
        out += block
        if on_block is not None:
            on_block(len(block))
    if len(out) != len(items):
        raise RuntimeError(f"a block function returned {len(out)} results for {len(items)} items")
    return out


class LocalExecutor:
    """Everything in this process, in order: today's behaviour."""

    kind = "local"

    def __init__(self, block_size: int = 256) -> None:
        self.block_size = block_size

    @property
    def workers(self) -> int:
        return 1

    def imap(self, fn: Callable[[list[T]], list[R]], blocks: Iterable[list[T]]) -> Iterator[list[R]]:
        for block in blocks:
            yield fn(block)

    def map_with_model(
        self, make: Callable[[], M], fn: Callable[[M, list[T]], list[R]], items: Sequence[T], resources: ActorResources
    ) -> list[R]:
        model = make()
        size = resources.batch_size or self.block_size
        return [r for block in blocks_of(items, size) for r in fn(model, block)]

    def close(self) -> None:
        pass
