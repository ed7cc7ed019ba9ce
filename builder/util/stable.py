"""Stable ids and seeds: derived from what a thing is, never from where it came in the
input or when it was processed.

What a document or query is called depends on what it is, so a rebuild with more
documents keeps every surviving id: a document without a source id is named by a hash of
its text; a generated query by its document, the request that produced it and its own
text. Seeded randomness is drawn per item from a hash of the seed and the item, so it does
not depend on processing order.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable


def text_digest(text: str) -> bytes:
    """16-byte digest of a text (also what duplicate texts are judged by)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def content_id(digest: bytes) -> str:
    """A document id from its text's digest: 16 hex characters."""
    return digest[:8].hex()


def query_id(doc_id: str, request: str, text: str) -> str:
    """`<doc id>-q<8 hex>`: readable next to its document, and the same whenever the same
    request on the same document yields the same question."""
    key = "\0".join((doc_id, request, text)).encode("utf-8")
    return f"{doc_id}-q{hashlib.blake2b(key, digest_size=4).hexdigest()}"


def unique(ids: Iterable[str], taken: Iterable[str] = ()) -> list[str]:
    """The ids with repeats made distinct in order (`x`, `x-2`, `x-3`, ...), avoiding `taken`."""
    seen = set(taken)
    out = []
    for base in ids:
        name, n = base, 1
        while name in seen:
            n += 1
            name = f"{base}-{n}"
        seen.add(name)
        out.append(name)
    return out


def derive_seed(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def rng_for(*parts: object) -> random.Random:
    return random.Random(derive_seed(*parts))
