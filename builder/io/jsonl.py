"""Read a JSON-lines file strictly, one verdict per physical line.

Shared by the document sources and the BEIR input reader so both treat bad bytes, a
byte-order mark and malformed lines the same way.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Yields (1-based line number, row) or (line number, reason) for a line that cannot be
    a row: `invalid_utf8`, `malformed_json`, `row_not_object`. Blank lines are skipped but
    counted, so the numbers match an editor's."""
    # Binary mode: lines end at b"\n" only, as `wc -l` and editors count them, and a bad
    # byte spoils its own line instead of being replaced with U+FFFD.
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            row = parse_line(raw, first=n == 1)
            if row is not None:
                yield n, row


def parse_line(raw: bytes, first: bool = False) -> dict[str, Any] | str | None:
    """One physical line: the row, a reason it cannot be one, or None for a blank line.
    `first` strips a byte-order mark, which only the file's first line may carry."""
    if first:
        raw = raw.removeprefix(codecs.BOM_UTF8)
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid_utf8"
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return "malformed_json"
    return row if isinstance(row, dict) else "row_not_object"


def has_lone_surrogate(value: Any) -> bool:
    """True for a string that cannot be written as UTF-8: JSON's `\\ud800` escapes decode to
    unpaired surrogates that every writer later rejects."""
    if not isinstance(value, str) or value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def id_problem(raw_id: Any) -> str | None:
    """`missing_id`, `bad_id` or `invalid_unicode` for an id no BEIR file can carry intact,
    else None.

    Tabs and line breaks split the qrels TSV and the line-based readers; lists, dicts and
    bytes only have a Python repr, not an id."""
    if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
        return "missing_id"
    if has_lone_surrogate(raw_id):
        return "invalid_unicode"
    if isinstance(raw_id, list | tuple | dict | set | bytes | bytearray):
        return "bad_id"
    if isinstance(raw_id, str) and ("\t" in raw_id or "\r" in raw_id or "\n" in raw_id):
        return "bad_id"
    return None
