"""Small real files of each kind the `files` source reads, written at test time.

PDFs are built with pypdf's writer: each page gets a Helvetica text layer (one line per
`\\n`), a page of None gets only an image (what a scan without OCR looks like).
"""

from __future__ import annotations

from pathlib import Path


def _pdf_string(line: str) -> str:
    return "(" + line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def make_pdf(path: Path, pages: list[str | None], title: str | None = None, password: str | None = None,
             owner_only: bool = False) -> Path:
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject, NumberObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"), NameObject("/Encoding"): NameObject("/WinAnsiEncoding")}))
    for text in pages:
        page = writer.add_blank_page(612, 792)
        stream = DecodedStreamObject()
        resources = DictionaryObject()
        if text is None:
            image = DecodedStreamObject()
            image.set_data(bytes(range(0, 256, 4)))
            image.update({NameObject("/Type"): NameObject("/XObject"), NameObject("/Subtype"): NameObject("/Image"),
                          NameObject("/Width"): NumberObject(8), NameObject("/Height"): NumberObject(8),
                          NameObject("/ColorSpace"): NameObject("/DeviceGray"),
                          NameObject("/BitsPerComponent"): NumberObject(8)})
            resources[NameObject("/XObject")] = DictionaryObject({NameObject("/Im1"): writer._add_object(image)})
            stream.set_data(b"q 400 0 0 400 100 200 cm /Im1 Do Q")
        else:
            resources[NameObject("/Font")] = DictionaryObject({NameObject("/F1"): font})
            lines = " T* ".join(f"{_pdf_string(line)} Tj" for line in text.split("\n"))
            stream.set_data(f"BT /F1 11 Tf 14 TL 72 720 Td {lines} ET".encode("cp1252"))
        page[NameObject("/Resources")] = resources
        page[NameObject("/Contents")] = writer._add_object(stream)
    if title:
        writer.add_metadata({"/Title": title})
    if password is not None or owner_only:
        writer.encrypt(user_password="" if owner_only else password, owner_password="owner-secret",
                       algorithm="RC4-128")
    with path.open("wb") as fh:
        writer.write(fh)
    return path


def make_docx(path: Path, title: str, paragraphs: list[str], heading: str | None = None) -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    if heading:
        document.add_heading(heading, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))
    return path


NAV = """<nav><a href="/">Home</a> | <a href="/products">Products</a> | <a href="/support">Support</a></nav>
<header><div class="menu">Sign in · Basket · Contact us · Careers</div></header>"""
FOOTER = "<footer>Copyright 2025 Example Pumps Ltd. Privacy policy. Cookie settings. Imprint.</footer>"


def make_html(path: Path, title: str, sections: list[tuple[str, str]]) -> Path:
    body = "\n".join(f"<h2>{h}</h2>\n<p>{p}</p>" for h, p in sections)
    path.write_text(f"<html><head><title>{title}</title></head><body>{NAV}<main><article><h1>{title}</h1>\n"
                    f"{body}</article></main>{FOOTER}</body></html>", encoding="utf-8")
    return path
