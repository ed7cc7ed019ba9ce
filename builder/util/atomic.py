"""Writes that never leave a half-written file or folder behind.

Temporary names are `.<name>.tmp-<pid>-<token>` and swapped-out copies `.<name>.old-<pid>`,
both beside the target, so `recover` can find what a killed process left and undo it.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from pathlib import Path

TMP_TAG = ".tmp-"
OLD_TAG = ".old-"
_LEFTOVER = re.compile(r"^\.(.+?)\.(?:tmp|old)-")


def temp_path_beside(dst: Path) -> Path:
    """A name next to `dst`, unique to this process, that `recover` knows as temporary."""
    return dst.with_name(f".{dst.name}{TMP_TAG}{os.getpid()}-{secrets.token_hex(4)}")


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_beside(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def temp_dir_beside(dst: Path) -> Path:
    """A new empty folder next to `dst`, unique to this process. Unlike `mkdtemp` it
    follows the umask, so a published folder is as readable as any other the user makes."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_beside(dst)
    tmp.mkdir()
    return tmp


def replace_dir(src: Path, dst: Path) -> None:
    """Move a finished folder into place, swapping out any previous version."""
    old = None
    if dst.exists():
        old = dst.with_name(f".{dst.name}{OLD_TAG}{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        os.replace(dst, old)
    os.replace(src, dst)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def recover(dst: Path) -> list[str]:
    """Undo what a killed writer of `dst` left beside it: temporary folders and files are
    removed; a swapped-out copy is put back if `dst` is missing, else removed. Only call
    this while holding the lock on `dst`. Returns one line per action."""
    parent = dst.parent
    if not parent.is_dir():
        return []
    notes: list[str] = []
    for leftover in sorted(parent.glob(f".{dst.name}{TMP_TAG}*")):
        _remove(leftover)
        notes.append(f"removed the unfinished {leftover.name}")
    for old in sorted(parent.glob(f".{dst.name}{OLD_TAG}*")):
        if not dst.exists() and old.is_dir():
            os.replace(old, dst)
            notes.append(f"restored {dst.name} from {old.name} (a previous run was killed while replacing it)")
        else:
            _remove(old)
            notes.append(f"removed the stale copy {old.name}")
    return notes


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def recover_folder(folder: Path) -> list[str]:
    """`recover` every target in `folder` that has left-overs beside it."""
    targets = {m.group(1) for p in folder.glob(".*") if (m := _LEFTOVER.match(p.name))}
    return [note for name in sorted(targets) for note in recover(folder / name)]
