"""Cut long documents into pieces that fit the translator, on paragraph or sentence
boundaries, so that the pieces put back together give the document exactly."""

from __future__ import annotations

from collections.abc import Callable

Count = Callable[[list[str]], list[int]]
# Paragraphs first, then lines, then sentence ends (Latin, CJK, Arabic), then words.
SEPARATORS = ["\n\n", "\n", ". ", "! ", "? ", "。", "！", "？", "؟ ", "; ", ", ", " ", ""]


def split_pieces(text: str, max_tokens: int, count: Count) -> list[tuple[int, int]]:
    """[start, end) offsets of consecutive pieces covering `text`, each at most
    `max_tokens` long where the text allows it (one overlong word stays whole)."""
    if not text or count([text])[0] <= max_tokens:
        return [(0, len(text))]
    from langchain_text_splitters import RecursiveCharacterTextSplitter  # slow to import; needed only here

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=max_tokens,
        chunk_overlap=0,
        length_function=lambda t: count([t])[0],
        keep_separator="end",
        strip_whitespace=False,
        separators=SEPARATORS,
    )
    chunks = [c for c in splitter.split_text(text) if c]
    if "".join(chunks) != text:  # the splitter lost characters: keep the text whole
        return [(0, len(text))]
    return _merge(chunks, count(chunks), max_tokens)


def _merge(chunks: list[str], sizes: list[int], max_tokens: int) -> list[tuple[int, int]]:
    """Join neighbouring small chunks (the splitter leaves lone line breaks behind)."""
    pieces: list[tuple[int, int]] = []
    start = at = used = 0
    for chunk, size in zip(chunks, sizes):
        if at > start and used + size > max_tokens:
            pieces.append((start, at))
            start, used = at, 0
        at += len(chunk)
        used += size
    pieces.append((start, at))
    return pieces


def core(text: str) -> tuple[str, str, str]:
    """(leading whitespace, the rest, trailing whitespace): only the middle is translated."""
    body = text.strip()
    if not body:
        return text, "", ""
    lead = text[: len(text) - len(text.lstrip())]
    trail = text[len(text.rstrip()) :]
    return lead, body, trail
