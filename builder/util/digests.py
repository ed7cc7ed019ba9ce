"""The sha256 of a file's bytes, read in blocks: how a shipped or downloaded file is named
in cards and stats, and checked when it is read back."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    """sha256 of the file's bytes, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
