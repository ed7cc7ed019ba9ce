"""The marker a build leaves in its output folder, its manifest: it claims the folder for
build-bench and records the fingerprint and files written, so a rerun can tell the output
is current and `eval` can tell a folder is a build's output, and the folder's kind and
tables (builder.io.built_folder reads them)."""

from __future__ import annotations

import json
from pathlib import Path

from builder.io.built_folder import MANIFEST_FILE, manifest_entries

MARKER = MANIFEST_FILE


def _files(folder: Path) -> dict[str, list[int]]:
    """Size and modification time of every file but the marker, by relative path."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_file() and path.name != MARKER:
            st = path.stat()
            found[path.relative_to(folder).as_posix()] = [st.st_size, st.st_mtime_ns]
    return found


def write_marker(folder: Path, recipe_name: str, fingerprint: str) -> None:
    """Mark `folder` as build-bench's, with the fingerprint of what it holds and its files
    as written, so a rerun can tell the folder is current and leave it alone, and with its
    kind and tables, which `BuiltFolder.open` reads back."""
    marker = {
        "written_by": "build-bench",
        "recipe": recipe_name,
        "fingerprint": fingerprint,
        **manifest_entries(folder),
        "files": _files(folder),
    }
    (folder / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")


def output_is_current(folder: Path, fingerprint: str) -> bool:
    """True when `folder` was written for `fingerprint` and no file in it changed since."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        return (
            isinstance(marker, dict)
            and marker.get("fingerprint") == fingerprint
            and marker.get("files") == _files(folder)
        )
    except (OSError, ValueError):
        return False
