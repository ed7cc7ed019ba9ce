"""What a files source's folder holds, as a key: a load is redone when it changes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from builder.io.sources import FilesSource, SourceError


def files_listing(spec: Any, base_dir: Path | None) -> str | None:
    """A digest of every listed file's path, size and modification time for a files source
    (None for another source, or a folder not there: the load says so)."""
    if not isinstance(spec, FilesSource):
        return None
    from builder.io.files.read import list_files

    try:
        root, files = list_files(spec, base_dir)
    except SourceError:
        return None
    digest = hashlib.sha256()
    for path in files:
        stat = path.stat()
        digest.update(f"{path.relative_to(root).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return f"files:{digest.hexdigest()}"
