"""Locks that keep two builds from writing the same run folder or output folder at once.

A lock is an `flock` on a small file that also names the process holding it, so the
process that has to wait (or give up) can say who is in the way. The kernel releases the
lock when its holder exits, however it exits, so a killed build never leaves a stale lock.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path


class LockBusy(RuntimeError):
    """Another build holds the lock; the message names it."""


class FileLock:
    def __init__(self, path: Path, what: str):
        self.path = path
        self.what = what
        self._fd: int | None = None

    def holder(self) -> str:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            text = ""
        return f"process {text}" if text else "another process"

    def acquire(
        self,
        wait: bool,
        on_wait: Callable[[str], None] | None = None,
        busy_hint: str = "wait for it to finish, or pass --wait",
    ) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                os.close(fd)
                raise LockBusy(
                    f"{self.what} {self.path.parent} is in use by {self.holder()} (lock file {self.path}); {busy_hint}"
                ) from None
            if on_wait is not None:
                on_wait(f"waiting for {self.holder()}, which is using {self.what} {self.path.parent}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            # The file stays: removing it would let a waiter lock a file nobody else sees.
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def out_lock_path(out_dir: Path) -> Path:
    """Beside the output folder, not in it: the folder itself is swapped whole."""
    return out_dir.with_name(f".{out_dir.name}.lock")


RUN_LOCK = ".lock"


def run_lock_paths(run_root: Path) -> list[Path]:
    """The lock of every run folder under a --run-dir (`<run-dir>/<recipe>/<inputs>/.lock`)."""
    return sorted(Path(run_root).glob(f"*/*/{RUN_LOCK}"))


@contextmanager
def holding_run_folders(run_root: Path, busy_hint: str) -> Iterator[None]:
    """Hold the lock of every run folder under `run_root`, or raise LockBusy naming the
    first one a build holds: the LLM cache they share must not change under a build."""
    with ExitStack() as stack:
        for path in run_lock_paths(run_root):
            lock = FileLock(path, "run folder")
            lock.acquire(wait=False, busy_hint=busy_hint)
            stack.callback(lock.release)
        yield
