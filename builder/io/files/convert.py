"""One file to located pieces of text, with a library made for each format.

- PDF: pypdf (BSD-3-Clause, pure Python), page by page, so every piece is a page.
- HTML: trafilatura (Apache-2.0), the main-text extractor FineWeb used: navigation, menus
  and footers go, and its Markdown output keeps the headings, by which the text is cut.
- Word (.docx): python-docx (MIT), paragraph by paragraph.
- Markdown and plain text: read as they are (UTF-8, else Windows-1252), cut at headings or
  at blank lines.

A file that cannot give text raises `Unreadable` with the reason its drop carries.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from builder.io.files.text import Piece, first_heading, heading_sections, paragraphs

KINDS = {
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".docx": "docx",
    ".txt": "text",
}
# The import each kind needs beyond the cleaning every kind gets (ftfy).
_MODULES = {"pdf": "pypdf", "html": "trafilatura", "docx": "docx", "markdown": None, "text": None}
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an encrypted .docx is an OLE container, not a zip


class Unreadable(Exception):
    """The file gives no text; `reason` is the drop's reason, the message its detail."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason


@dataclass
class Converted:
    title: str | None  # from the file itself (metadata or first heading); None: use the file name
    pieces: list[Piece]
    empty_pages: list[int] = field(default_factory=list)  # PDF pages with no text on them


def missing_modules(kinds: set[str]) -> list[str]:
    """The importable names the `files` extra provides that reading `kinds` needs and this
    environment lacks."""
    wanted = {"ftfy"} | {m for k in kinds if (m := _MODULES.get(k))}
    return sorted(m for m in wanted if importlib.util.find_spec(m) is None)


def convert(path: Path, kind: str) -> Converted:
    reader = {"pdf": _pdf, "html": _html, "docx": _docx, "markdown": _markdown, "text": _text}[kind]
    return reader(path)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _pdf(path: Path) -> Converted:
    with _quiet("pypdf"):  # its warnings about a damaged file would land amid the progress lines
        return _read_pdf(path)


@contextmanager
def _quiet(logger: str) -> Iterator[None]:
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        log.setLevel(level)


def _read_pdf(path: Path) -> Converted:
    from pypdf import PdfReader

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            # Many PDFs are encrypted only against editing, with an empty password to open them.
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # noqa: BLE001 - a cipher pypdf cannot undo here
                raise Unreadable("encrypted", _first_line(exc)) from exc
            if not opened:
                raise Unreadable("encrypted", "needs a password")
        pieces, empty = [], []
        for number, page in enumerate(reader.pages, start=1):
            text = page.extract_text() or ""
            if text.strip():
                pieces.append(Piece("page", f"page {number}", number, text))
            else:
                empty.append(number)
        title = (reader.metadata.title if reader.metadata else None) or None
    except Unreadable:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds on a damaged file
        raise Unreadable("unreadable", _first_line(exc)) from exc
    if not pieces:
        raise Unreadable("no_text_layer", f"{len(empty)} page(s), none with text: scanned? (OCR it first)")
    return Converted(str(title).strip() or None, pieces, empty)


def _html(path: Path) -> Converted:
    import trafilatura

    try:
        page = path.read_bytes()
        with _quiet("trafilatura"):
            text = trafilatura.extract(page, output_format="markdown", include_comments=False, include_tables=True)
            meta = trafilatura.extract_metadata(page)
    except Exception as exc:  # noqa: BLE001 - lxml and the extractors raise many kinds
        raise Unreadable("unreadable", _first_line(exc)) from exc
    if not text or not text.strip():
        raise Unreadable("no_main_text", "no main text found beside navigation and boilerplate")
    title = (meta.title if meta else None) or first_heading(text)
    return Converted(title, heading_sections(text))


def _docx(path: Path) -> Converted:
    import docx

    with path.open("rb") as fh:
        if fh.read(len(_OLE_MAGIC)) == _OLE_MAGIC:
            raise Unreadable("encrypted", "an OLE container: a password-protected Word file")
    try:
        document = docx.Document(str(path))
        texts = [p.text for p in document.paragraphs if p.text.strip()]
        title = document.core_properties.title or None
    except Exception as exc:  # noqa: BLE001 - zip, XML and part errors alike
        raise Unreadable("unreadable", _first_line(exc)) from exc
    pieces = [Piece("paragraph", f"paragraph {n}", n, t) for n, t in enumerate(texts, start=1)]
    return Converted(title, pieces)


def _decoded(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            return raw.decode("cp1252")
        except UnicodeDecodeError as exc:
            raise Unreadable("unreadable", "neither UTF-8 nor Windows-1252 text") from exc


def _markdown(path: Path) -> Converted:
    text = _decoded(path)
    return Converted(first_heading(text), heading_sections(text))


def _text(path: Path) -> Converted:
    return Converted(None, paragraphs(_decoded(path)))
