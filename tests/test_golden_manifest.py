"""The golden manifests compare content, so a new pyarrow, polars or matplotlib that writes
the same table or picture in other bytes does not fail them."""

from __future__ import annotations

import json
import struct
import zlib

import polars as pl

from tests.golden import manifest


def _png(width: int, height: int, level: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    pixels = b"".join(b"\x00" + b"\xff" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(pixels, level))
        + chunk(b"IEND", b"")
    )


def _folder(root, compression: str, indent: int | None, level: int, score: float = 0.5):
    root.mkdir()
    pl.DataFrame({"id": ["a", "b"], "score": [score, 1.0]}).write_parquet(root / "t.parquet", compression=compression)
    (root / "stats.json").write_text(json.dumps({"b": 1, "a": {"seconds": level, "n": 2}}, indent=indent))
    (root / "plot.png").write_bytes(_png(3, 2, level))
    return manifest(root)


def test_tables_json_and_pictures_written_in_other_bytes_read_the_same(tmp_path):
    one = _folder(tmp_path / "one", "zstd", None, 1)
    other = _folder(tmp_path / "other", "uncompressed", 2, 9)
    assert one == other
    assert one["plot.png"] == "png 3x2"
    assert one["t.parquet"].startswith("parquet 2 rows sha256 ")


def test_a_changed_row_changes_the_manifest(tmp_path):
    assert (
        _folder(tmp_path / "one", "zstd", None, 1)["t.parquet"]
        != _folder(tmp_path / "other", "zstd", None, 1, score=0.25)["t.parquet"]
    )
