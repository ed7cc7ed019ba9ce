"""Turning a data value (a language, a domain, a setting) into one path component.

Values come from the user's data, so one may hold `/`, `..`, a NUL or nothing at all.
Every writer that puts a value into a path goes through `safe_component`, which keeps a
plain name as it is and maps anything else to a cleaned name plus a short hash of the
original, so two different values never share a folder and nothing lands outside the
folder being written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_component(value: object, fallback: str = "x", reserved: Collection[str] = ()) -> str:
    """`value` itself when it is a plain name not in `reserved` (compared case-blind, as
    some file systems do); otherwise a cleaned name with a hash of the value appended."""
    text = "" if value is None else str(value)
    taken = {r.lower() for r in reserved}
    if _PLAIN.fullmatch(text) and text.lower() not in taken:
        return text
    cleaned = _UNSAFE.sub("_", text).strip("._-")[:60] or fallback
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned}-{digest}"
