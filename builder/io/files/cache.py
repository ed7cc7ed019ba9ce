"""Conversions kept under the sha256 of the file's bytes, so a rebuild does not convert again.

One JSON file per converted file: `<folder>/<digest[:2]>/<digest>.<kind>.json`, holding the
text, the location map, the title the file itself gives and its empty pages, or the drop
reason. It records the converter (`CONVERTER`, with the versions of the libraries), and a
conversion by another converter is done again. Writes go through a temporary file, so a
killed run never leaves a half-written entry.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from builder.io.files.convert import Converted, Unreadable, convert
from builder.io.files.text import assemble

# Raised when the cleaning or assembly changes what a conversion gives.
_FORMAT = 1
_LIBRARIES = {"pdf": ["pypdf"], "html": ["trafilatura"], "docx": ["python-docx"], "markdown": [], "text": []}


def converter(kind: str) -> str:
    """What a conversion of `kind` depends on: the format here and the libraries' versions."""
    libs = []
    for name in ["ftfy", *_LIBRARIES[kind]]:
        try:
            libs.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            libs.append(f"{name}==?")
    return f"{kind}/{_FORMAT}/" + ",".join(libs)


@dataclass
class Conversion:
    """A file's text and location map, or why it has none."""

    text: str = ""
    locations: list[dict[str, Any]] = field(default_factory=list)
    title: str | None = None
    empty_pages: list[int] = field(default_factory=list)
    reason: str | None = None
    detail: str = ""


def _convert(path: Path, kind: str) -> Conversion:
    try:
        got: Converted = convert(path, kind)
    except Unreadable as exc:
        return Conversion(reason=exc.reason, detail=str(exc))
    text, locations = assemble(got.pieces)
    return Conversion(text, locations, got.title, got.empty_pages)


class ConversionCache:
    """Converts through the folder when there is one; counts conversions and cache hits."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.converted = 0
        self.reused = 0

    def get(self, path: Path, kind: str, digest: str) -> Conversion:
        entry = self.folder / digest[:2] / f"{digest}.{kind}.json" if self.folder else None
        stamp = converter(kind)
        if entry is not None and entry.is_file():
            try:
                data = json.loads(entry.read_text(encoding="utf-8"))
                if data.pop("converter", None) == stamp:
                    self.reused += 1
                    return Conversion(**data)
            except (OSError, ValueError, TypeError):
                pass  # damaged or from another version: convert again and overwrite it
        found = _convert(path, kind)
        self.converted += 1
        if entry is not None:
            _write(entry, {"converter": stamp, **found.__dict__})
        return found


def _write(entry: Path, data: dict[str, Any]) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, entry)
    finally:
        tmp.unlink(missing_ok=True)
