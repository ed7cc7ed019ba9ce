"""A folder of files as source rows: one row per converted file, one counted drop with its
reason per file that gives no text, near-duplicates left out, and a report of what was found.

Rows come in path order. Every file is converted (or read back from the conversion cache)
before the first row is given, because near-duplicates are judged across the whole folder.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from builder.io.files.cache import Conversion, ConversionCache
from builder.io.files.convert import KINDS, missing_modules
from builder.io.files.dedup import near_duplicates
from builder.io.sources import FilesSource, Located, SourceError, resolve_path
from builder.util.digests import file_sha256

EXTRA_HINT = 'pip install -e ".[files]" from a checkout, or pip install "build-bench[files]"'
LOCATION_DTYPE = pl.List(
    pl.Struct({"start": pl.Int64, "end": pl.Int64, "kind": pl.Utf8, "label": pl.Utf8, "number": pl.Int64})
)
FILE_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "source_path": pl.Utf8,
    "source_kind": pl.Utf8,
    "locations": LOCATION_DTYPE,
}
FILE_CACHE = "file_cache"  # under the run folder root, beside the LLM cache
_GLOB = set("*?[")
_DETAILS_KEPT = 50  # drop details listed in stats.json per source; the counts cover all


@dataclass
class FolderRead:
    """What one read of a files source found."""

    path: str
    found: Counter[str] = field(default_factory=Counter)  # files per kind ("other": unknown extension)
    dropped: Counter[str] = field(default_factory=Counter)  # files left out, per reason
    details: dict[str, str] = field(default_factory=dict)  # file -> what the converter said
    empty_pages: dict[str, list[int]] = field(default_factory=dict)  # PDF -> its pages without text
    near_duplicates: dict[str, str] = field(default_factory=dict)  # file left out -> file kept
    located: dict[str, dict[str, Any]] = field(default_factory=dict)  # doc id -> path, kind, locations
    converted: int = 0
    from_cache: int = 0

    def figures(self) -> dict[str, Any]:
        """The read as stats.json reports it."""
        out: dict[str, Any] = {
            "path": self.path,
            "found": dict(sorted(self.found.items())),
            "documents": sum(self.found.values()) - sum(self.dropped.values()),
            "dropped": dict(sorted(self.dropped.items())),
            "converted": self.converted,
            "from_cache": self.from_cache,
        }
        if self.details:
            out["drop_details"] = dict(list(sorted(self.details.items()))[:_DETAILS_KEPT])
        if self.empty_pages:
            out["empty_pages_left_out"] = sum(len(p) for p in self.empty_pages.values())
            out["empty_pages"] = dict(sorted(self.empty_pages.items()))
        if self.near_duplicates:
            out["near_duplicates"] = dict(sorted(self.near_duplicates.items()))
        return out


def list_files(spec: FilesSource, base_dir: Path | None) -> tuple[Path, list[Path]]:
    """(the folder ids are relative to, the files in path order). Hidden files and folders
    (a name starting with a dot) are not documents and are not listed."""
    parts = Path(spec.path).expanduser().parts
    cut = next((i for i, part in enumerate(parts) if _GLOB & set(part)), None)
    if cut is None:
        root = resolve_path(spec.path, base_dir)
        if root.is_file():
            return root.parent, [root]
        if not root.is_dir():
            raise SourceError(f"files source not found: {spec.path} (looked in . and {base_dir})")
        found = root.rglob("*")
    else:
        root = resolve_path(str(Path(*parts[:cut])) if cut else ".", base_dir)
        if not root.is_dir():
            raise SourceError(f"files source {spec.path}: no folder {root} to search")
        found = root.glob("/".join(parts[cut:]))
    files = [p for p in found if p.is_file() and not any(x.startswith(".") for x in p.relative_to(root).parts)]
    return root, sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _conversion(path: Path, kind: str, cache: ConversionCache) -> Conversion:
    try:
        return cache.get(path, kind, file_sha256(path))
    except OSError as exc:
        return Conversion(reason="unreadable", detail=exc.strerror or str(exc))


def iter_files(spec: FilesSource, base_dir: Path | None) -> Iterator[Located]:
    root, files = list_files(spec, base_dir)
    if not files:
        raise SourceError(f"files source {spec.path}: no files found in {root} (hidden files are not read)")
    missing = missing_modules({k for p in files if (k := KINDS.get(p.suffix.lower()))})
    if missing:
        raise SourceError(
            f"files source {spec.path}: the `files` extra is not installed ({', '.join(missing)} missing): {EXTRA_HINT}"
        )
    read = FolderRead(spec.path)
    spec._last_read = read
    cache = ConversionCache(spec._cache_dir)
    rows: list[tuple[str, dict[str, Any] | str]] = []
    texts: list[tuple[str, str]] = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        kind = KINDS.get(path.suffix.lower())
        read.found[kind or "other"] += 1
        if kind is None:
            rows.append((rel, "unknown_extension"))
            continue
        if path.stat().st_size > spec.max_file_mb * 1_000_000:
            rows.append((rel, "too_large"))
            read.details[rel] = f"{path.stat().st_size / 1e6:,.1f} MB, over max_file_mb {spec.max_file_mb:g}"
            continue
        got = _conversion(path, kind, cache)
        if got.reason is None and not got.text.strip():
            got.reason, got.detail = "empty_text", "no text after conversion"
        if got.reason is not None:
            rows.append((rel, got.reason))
            read.details[rel] = got.detail
            continue
        if got.empty_pages:
            read.empty_pages[rel] = got.empty_pages
        rows.append((rel, {"id": rel, "title": got.title or path.stem, "text": got.text}))
        texts.append((rel, got.text))
        read.located[f"{spec.id_prefix}{rel}"] = {"source_path": rel, "source_kind": kind, "locations": got.locations}
    read.converted, read.from_cache = cache.converted, cache.reused
    if spec.near_duplicates is not None and len(texts) > 1:
        read.near_duplicates = near_duplicates(texts, spec.near_duplicates)
    rows = [(rel, "near_duplicate" if rel in read.near_duplicates else row) for rel, row in rows]
    for rel in read.near_duplicates:
        read.located.pop(f"{spec.id_prefix}{rel}")
    # Counted before the first row goes out: a capped read (--limit) stops early.
    read.dropped.update(row for _, row in rows if isinstance(row, str))
    yield from rows


def file_columns(corpus: pl.DataFrame, specs: Sequence[Any]) -> pl.DataFrame:
    """The corpus with `source_path`, `source_kind` and `locations` for the documents the
    files sources of the latest read gave (null for others); unchanged without such a source."""
    located: dict[str, dict[str, Any]] = {}
    for spec in specs:
        if isinstance(spec, FilesSource) and spec._last_read is not None:
            located.update(spec._last_read.located)
    if not located:
        return corpus
    meta = pl.DataFrame([{"doc_id": d, **m} for d, m in located.items()], schema={"doc_id": pl.Utf8, **FILE_COLUMNS})
    return corpus.join(meta, on="doc_id", how="left", maintain_order="left")


def files_figures(specs: Sequence[Any]) -> dict[str, Any]:
    """Per files source read, what stats.json reports (empty without one)."""
    reads = [s._last_read for s in specs if isinstance(s, FilesSource) and s._last_read is not None]
    return {"files": [r.figures() for r in reads]} if reads else {}


def empty_page_warnings(specs: Sequence[Any]) -> list[str]:
    """One line per files source whose PDFs have pages without text, which are left out."""
    out = []
    for spec in specs:
        read = spec._last_read if isinstance(spec, FilesSource) else None
        if read is None or not read.empty_pages:
            continue
        pages = sum(len(p) for p in read.empty_pages.values())
        shown = "; ".join(f"{name} p. {', '.join(map(str, p))}" for name, p in list(read.empty_pages.items())[:3])
        more = f" and {len(read.empty_pages) - 3} more files" if len(read.empty_pages) > 3 else ""
        out.append(f"{spec.path}: {pages} PDF page(s) without text left out (scanned or blank): {shown}{more}")
    return out


def files_plan_lines(specs: Sequence[Any]) -> list[str]:
    """Per files source read: the files found of each kind, and those it drops and why."""
    out = []
    for spec in specs:
        read = spec._last_read if isinstance(spec, FilesSource) else None
        if read is None:
            continue
        found = sum(read.found.values())
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(read.found.items(), key=lambda kv: (-kv[1], kv[0])))
        dropped = sum(read.dropped.values())
        why = ", ".join(f"{reason} {n}" for reason, n in sorted(read.dropped.items(), key=lambda kv: (-kv[1], kv[0])))
        line = f"files source {spec.path}: found {found} files ({kinds}); reads {found - dropped}"
        line += f", drops {dropped} ({why})" if dropped else ", drops none"
        if read.empty_pages:
            line += f"; {sum(len(p) for p in read.empty_pages.values())} PDF page(s) without text left out"
        out.append(line)
    return out
