"""Position arithmetic for evidence spans: relative positions, bins and tags, and a text cut
into chunks with their offsets.

Offsets are character offsets with half-open spans ``[start, end)``. Every
boundary rule is spelled out in the docstring of the function that applies it.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

__all__ = [
    "Anchor",
    "REGIONS",
    "REGION_OF_NAME",
    "Region",
    "RequestedRegion",
    "char_bucket",
    "length_bucket",
    "position_bin",
    "region_of_requested",
    "rel_pos",
    "requested_of_region",
    "split_with_offsets",
    "tag_chunk",
    "third_of",
]

Anchor = Literal["start", "midpoint"]
Region = Literal["beginning", "middle", "end"]
# The one vocabulary of every output, in document order.
REGIONS: tuple[Region, ...] = ("beginning", "middle", "end")
# PosIR's generation prompt asks for the first, middle or final third. Query ids derive
# from these words, so a release grown from an older one keeps its ids; older releases'
# `requested_position` and recipes' `region_weights` may hold them too.
RequestedRegion = Literal["first", "middle", "final"]

_REGION_OF_REQUESTED: dict[str, Region] = {"first": "beginning", "middle": "middle", "final": "end"}
# Either vocabulary to the canonical one.
REGION_OF_NAME: dict[str, Region] = {**_REGION_OF_REQUESTED, "beginning": "beginning", "end": "end"}
_REQUESTED_OF_REGION: dict[str, RequestedRegion] = {"beginning": "first", "middle": "middle", "end": "final"}


def _check_positive(name: str, value: int) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")


def _check_unit(rel: float) -> None:
    # `not` also catches NaN, which fails every comparison.
    if not 0.0 <= rel <= 1.0:
        raise ValueError(f"relative position must be within [0, 1], got {rel}")


def _check_increasing(edges: Sequence[int]) -> None:
    if not edges or any(a >= b for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must be non-empty and strictly increasing, got {list(edges)}")


def rel_pos(spans: Sequence[tuple[int, int]], doc_len: int, anchor: Anchor = "start") -> float:
    """Relative position of a query's evidence within its document.

    ``anchor="start"`` averages the span starts, ``"midpoint"`` averages the
    span midpoints; the mean is divided by ``doc_len`` and clamped to [0, 1].
    Raises ``ValueError`` for ``doc_len <= 0``, no spans, or a span whose end
    precedes its start.
    """
    _check_positive("doc_len", doc_len)
    if not spans:
        raise ValueError("at least one span is required")
    if any(end < start for start, end in spans):
        raise ValueError(f"span end precedes start in {list(spans)}")
    if anchor == "start":
        points = [float(start) for start, _ in spans]
    elif anchor == "midpoint":
        points = [(start + end) / 2 for start, end in spans]
    else:
        raise ValueError(f"unknown anchor {anchor!r}")
    return min(1.0, max(0.0, math.fsum(points) / len(points) / doc_len))


def position_bin(rel: float, n_bins: int = 20) -> int:
    """Equal-width bin of a relative position, numbered ``0 .. n_bins - 1``.

    Bin ``k`` holds ``k/n_bins <= rel < (k+1)/n_bins``; ``rel == 1.0`` goes to
    the last bin. A position exactly on a boundary belongs to the upper bin,
    even where ``rel * n_bins`` rounds to just below an integer.
    """
    _check_positive("n_bins", n_bins)
    _check_unit(rel)
    index = min(int(rel * n_bins), n_bins - 1)
    if index < n_bins - 1 and rel >= (index + 1) / n_bins:
        index += 1
    return index


def third_of(rel: float) -> Region:
    """Third of the document a point position falls in.

    Mirrors the strict comparisons of :func:`tag_chunk`: only ``rel < 1/3`` is
    the beginning and only ``rel > 2/3`` is the end, so both boundary points
    count as middle.
    """
    _check_unit(rel)
    if rel < 1 / 3:
        return "beginning"
    if rel > 2 / 3:
        return "end"
    return "middle"


def tag_chunk(chunk_start: int, chunk_end: int, doc_len: int) -> Region:
    """Tag a chunk with its third of the document (FineWeb-PosQ, Algorithm 1).

    The algorithm takes ``third = floor(doc_len / 3)`` and returns
    ``beginning`` if ``chunk_end < third``, else ``end`` if
    ``chunk_start > 2 * third``, else ``middle``. So a chunk that crosses a
    boundary between thirds is middle, and so are the boundary cases the
    strict comparisons exclude: ``chunk_end == third`` and
    ``chunk_start == 2 * third`` both give middle, even though with our
    exclusive ``chunk_end`` the first chunk lies wholly inside the first third.
    Because of the floor, the last third is up to two characters longer than
    the others. Offsets are compared as given, with no adjustment.
    """
    _check_positive("doc_len", doc_len)
    if not 0 <= chunk_start <= chunk_end <= doc_len:
        raise ValueError(f"need 0 <= chunk_start <= chunk_end <= doc_len, got {chunk_start}, {chunk_end}, {doc_len}")
    third = doc_len // 3
    if chunk_end < third:
        return "beginning"
    if chunk_start > 2 * third:
        return "end"
    return "middle"


def length_bucket(n_tokens: int, edges: Sequence[int] = (512, 1024, 1536)) -> str:
    """PosIR document-length bucket ``"Q1"`` .. ``"Q{len(edges)+1}"``.

    Upper edges are inclusive, as in PosIR where Q1 means up to 512 tokens:
    Q1 is ``n <= 512``, Q2 is ``512 < n <= 1024``, Q3 is ``1024 < n <= 1536``
    and Q4 is everything longer.
    """
    if n_tokens < 0:
        raise ValueError(f"n_tokens must be non-negative, got {n_tokens}")
    _check_increasing(edges)
    return f"Q{bisect_left(edges, n_tokens) + 1}"


def char_bucket(offset: int, edges: Sequence[int] = (100, 200, 300, 400, 500)) -> str:
    """SQuAD-PosQ character-offset bucket with half-open ranges.

    ``[0, 100)`` is ``"0-100"``, ``[100, 200)`` is ``"100-200"`` and so on, and
    everything from the last edge on is ``"500+"``; an offset equal to an edge
    belongs to the bucket that starts there.
    """
    if offset < 0:
        raise ValueError(f"offset must be non-negative, got {offset}")
    _check_increasing(edges)
    index = bisect_right(edges, offset)
    if index == len(edges):
        return f"{edges[-1]}+"
    lower = 0 if index == 0 else edges[index - 1]
    return f"{lower}-{edges[index]}"


def region_of_requested(requested: RequestedRegion) -> Region:
    """The canonical name of a region the prompt's words name ("first" -> "beginning")."""
    try:
        return _REGION_OF_REQUESTED[requested]
    except KeyError:
        raise ValueError(f"unknown requested region {requested!r}") from None


def requested_of_region(region: Region) -> RequestedRegion:
    """The prompt's word for a region ("end" -> "final"), which ids derive from."""
    try:
        return _REQUESTED_OF_REGION[region]
    except KeyError:
        raise ValueError(f"unknown region {region!r}") from None


def split_with_offsets(splitter: RecursiveCharacterTextSplitter, text: str) -> list[tuple[int, int, str]]:
    """Chunks with their [start, end) character offsets in the original text."""
    docs = splitter.create_documents([text])
    out = []
    for d in docs:
        start = d.metadata["start_index"]
        if start < 0 or text[start : start + len(d.page_content)] != d.page_content:
            start = text.find(d.page_content)
        out.append((start, start + len(d.page_content), d.page_content))
    return out
