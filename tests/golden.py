"""Content manifests of built output folders, for the golden-output tests.

A manifest maps every file of an output folder to the sha256 of its bytes. Run timings
(`seconds` in stats.json), the address of the local test server and the marker's record
of the folder's files (their modification times) change from run to run, so they are
taken out before hashing; the marker's fingerprint is build-bench's bookkeeping, not
output, so it is left out too.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "golden"


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def manifest(out_dir: Path, base_url: str | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted(p for p in out_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == ".build-bench":
            marker = json.loads(data)
            data = (json.dumps({k: marker[k] for k in ("written_by", "recipe")}) + "\n").encode()
        if path.name == "stats.json":
            data = json.dumps(_without_timings(json.loads(data)), sort_keys=True).encode()
        if base_url and path.suffix in {".md", ".json", ".jsonl"}:
            data = data.replace(base_url.encode(), b"BASE_URL")
        out[path.relative_to(out_dir).as_posix()] = hashlib.sha256(data).hexdigest()
    return out


def write_manifest(name: str, files: dict[str, str]) -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / f"{name}.json").write_text(json.dumps(files, indent=1, sort_keys=True) + "\n")


def read_manifest(name: str) -> dict[str, str]:
    return json.loads((GOLDEN / f"{name}.json").read_text())
