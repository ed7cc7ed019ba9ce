"""Content manifests of built output folders, for the golden-output tests.

A manifest maps every file of an output folder to a digest of its content, compared in a
form that does not depend on the library versions that wrote it:

- a parquet table by its column names and rows (read with polars, one JSON array per row),
  not its bytes, which carry the writer's version and encoding choices;
- a JSON file by its content with sorted keys;
- a PNG by its width and height in pixels: matplotlib and its font rendering change pixels
  from one release to the next, so the picture itself is not compared;
- any other file by its bytes.

Run timings (`seconds` in stats.json), the address of the local test server and the
marker's record of the folder's files (their modification times) change from run to run,
so they are taken out first; the marker's fingerprint is build-bench's bookkeeping, not
output, so it is left out too.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import polars as pl

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "golden"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _table_rows(path: Path) -> tuple[int, bytes]:
    """The row count and a canonical text of the table: its column names, then each row."""
    table = pl.read_parquet(path)
    lines = [json.dumps(table.columns, ensure_ascii=False)]
    lines += [json.dumps(list(row), ensure_ascii=False, default=str) for row in table.iter_rows()]
    return table.height, "\n".join(lines).encode()


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header chunk (IHDR, right after the signature)."""
    assert data.startswith(_PNG_SIGNATURE) and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _entry(path: Path, base_url: str | None) -> str:
    data = path.read_bytes()
    if path.suffix == ".png":
        width, height = png_size(data)
        return f"png {width}x{height}"
    if path.suffix == ".parquet":
        rows, data = _table_rows(path)
        kind = f"parquet {rows} rows "
    elif path.name == ".build-bench":
        marker = json.loads(data)
        data, kind = json.dumps({k: marker[k] for k in ("written_by", "recipe")}, sort_keys=True).encode(), "json "
    elif path.suffix == ".json":
        content = json.loads(data)
        data = json.dumps(
            _without_timings(content) if path.name == "stats.json" else content, sort_keys=True, ensure_ascii=False
        ).encode()
        kind = "json "
    else:
        kind = ""
    if base_url:
        data = data.replace(base_url.encode(), b"BASE_URL")
    return f"{kind}sha256 {_sha256(data)}"


def manifest(out_dir: Path, base_url: str | None = None) -> dict[str, str]:
    return {
        path.relative_to(out_dir).as_posix(): _entry(path, base_url)
        for path in sorted(p for p in out_dir.rglob("*") if p.is_file())
    }


def write_manifest(name: str, files: dict[str, str]) -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / f"{name}.json").write_text(json.dumps(files, indent=1, sort_keys=True) + "\n")


def read_manifest(name: str) -> dict[str, str]:
    return json.loads((GOLDEN / f"{name}.json").read_text())
