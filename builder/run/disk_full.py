"""A full disk, however the writer says it (an OSError, a polars or pyarrow error, SQLite's
"database or disk is full", the cache writer's RuntimeError around one), told as one line
naming the folder that ran out and the space left there. A file-size limit (`ulimit -f`,
EFBIG) is told the same way, naming the limit instead of the space."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXTS = ("no space left on device", "os error 28", "database or disk is full", "disk quota exceeded")


class DiskFull(RuntimeError):
    """A write failed for want of space; the message names the folder and what is free."""


_TOO_BIG_TEXTS = ("file too large", "os error 27")


def _is_too_big(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return True
    text = str(exc).lower()
    return any(t in text for t in _TOO_BIG_TEXTS)


def _size_limit() -> str:
    """The process's file-size limit, in words."""
    try:
        import resource
    except ImportError:  # Windows has no such limit
        return "the file-size limit"
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return "the file-size limit" if soft == resource.RLIM_INFINITY else f"the file-size limit of {_size(soft)}"


def _is_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    text = str(exc).lower()
    return any(t in text for t in _FULL_TEXTS)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _free(folder: Path) -> int:
    """Free bytes on the file system that holds (or would hold) `folder`."""
    place = folder.resolve()
    while not place.exists() and place != place.parent:
        place = place.parent
    return shutil.disk_usage(place).free


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"


def disk_full(exc: BaseException, folders: dict[str, Path]) -> DiskFull | None:
    """DiskFull for `exc` when it (or what caused it) is a full disk, else None. `folders`
    maps how the user named a folder (`--out`, `--run-dir`) to it; the one named is the
    folder the failed file was in, or else the one with the least space left."""
    too_big = any(_is_too_big(e) for e in _chain(exc))
    if not too_big and not any(_is_full(e) for e in _chain(exc)):
        return None
    names = [
        Path(name)
        for e in _chain(exc)
        if isinstance(e, OSError)
        for name in (e.filename, e.filename2)
        if isinstance(name, str | Path)
    ]
    blamed = next(
        (
            option
            for option, folder in folders.items()
            for name in names
            if folder.resolve() in Path(name).resolve().parents
        ),
        None,
    )
    free = {option: _free(folder) for option, folder in folders.items()}
    option = blamed or min(free, key=free.__getitem__)
    if too_big:
        where = f"{option} {folders[option]}" if blamed else " or ".join(f"{o} {f}" for o, f in folders.items())
        return DiskFull(
            f"a file under {where} outgrew {_size_limit()} (ulimit -f): raise the limit, "
            "then run the same command again (finished stages are kept)"
        )
    return DiskFull(
        f"no space left for {option} {folders[option]}: {_size(free[option])} free on its file system "
        "and the build needs more; free some space or point "
        f"{option} at a disk with room, then run the same command again (finished stages are kept)"
    )
