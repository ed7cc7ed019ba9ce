"""Small real files of each kind the `files` source reads, written at test time.

PDFs are built with pypdf's writer: each page gets a Helvetica text layer (one line per
`\\n`), a page of None gets only an image (what a scan without OCR looks like).
"""

from __future__ import annotations

from pathlib import Path


def _pdf_string(line: str) -> str:
    return "(" + line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def make_pdf(
    path: Path, pages: list[str | None], title: str | None = None, password: str | None = None, owner_only: bool = False
) -> Path:
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject, NumberObject

    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
                NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
            }
        )
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        stream = DecodedStreamObject()
        resources = DictionaryObject()
        if text is None:
            image = DecodedStreamObject()
            image.set_data(bytes(range(0, 256, 4)))
            image.update(
                {
                    NameObject("/Type"): NameObject("/XObject"),
                    NameObject("/Subtype"): NameObject("/Image"),
                    NameObject("/Width"): NumberObject(8),
                    NameObject("/Height"): NumberObject(8),
                    NameObject("/ColorSpace"): NameObject("/DeviceGray"),
                    NameObject("/BitsPerComponent"): NumberObject(8),
                }
            )
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
        writer.encrypt(user_password="" if owner_only else password, owner_password="owner-secret", algorithm="RC4-128")
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
    path.write_text(
        f"<html><head><title>{title}</title></head><body>{NAV}<main><article><h1>{title}</h1>\n"
        f"{body}</article></main>{FOOTER}</body></html>",
        encoding="utf-8",
    )
    return path


def article_texts(repo: Path) -> list[tuple[str, str]]:
    """(title, text) of the shipped sample articles (recipes/examples, see its PROVENANCE.md):
    real, varied prose to fill the files with."""
    import json

    lines = (repo / "recipes" / "examples" / "articles.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [(r["title"], r["text"]) for r in rows]


def pdf_safe(text: str) -> str:
    """Text Helvetica's WinAnsi encoding can show (anything else becomes '?')."""
    return text.encode("cp1252", errors="replace").decode("cp1252")


def make_mixed_folder(folder: Path, repo: Path) -> dict[str, str]:
    """A folder of every kind, filled with the sample articles; returns {file: what it is}."""
    (folder / "kb").mkdir(parents=True, exist_ok=True)
    arts = article_texts(repo)

    def lines(i: int) -> list[str]:
        return [pdf_safe(x) for x in arts[i][1].splitlines() if x.strip()]

    def pages(i: int, per: int = 12) -> list[str | None]:
        ls = lines(i)
        return ["\n".join(ls[k : k + per]) for k in range(0, len(ls), per)]

    make_pdf(folder / "manual.pdf", pages(0), title=pdf_safe(arts[0][0]))
    make_pdf(folder / "report.pdf", [*pages(1, 5)[:2], None, *pages(1, 5)[2:]], title=pdf_safe(arts[1][0]))
    make_pdf(folder / "scanned.pdf", [None, None])
    make_pdf(folder / "locked.pdf", pages(2)[:1], password="letmein")
    paras = [p for p in arts[3][1].split("\n") if p.strip()]
    half = len(paras) // 2
    make_html(
        folder / "kb" / "article.html",
        arts[3][0],
        [("Background", " ".join(paras[:half])), ("Details", " ".join(paras[half:]))],
    )
    # The same page saved twice, the later copy with a line added: the longer one is kept.
    make_html(
        folder / "kb" / "article-saved-again.htm",
        arts[3][0],
        [("Background", " ".join(paras[:half])), ("Details", " ".join(paras[half:]) + " Updated.")],
    )
    md = [p for p in arts[4][1].split("\n") if p.strip()]
    (folder / "notes.md").write_text(
        f"# {arts[4][0]}\n\n" + "\n\n".join(md[:3]) + "\n\n## More\n\n" + "\n\n".join(md[3:]) + "\n", encoding="utf-8"
    )
    make_docx(folder / "policy.docx", arts[5][0], [p for p in arts[5][1].split("\n") if p.strip()])
    (folder / "plain.txt").write_text(arts[6][1], encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf\n")
    (folder / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return {
        "manual.pdf": "pdf",
        "report.pdf": "pdf",
        "scanned.pdf": "no_text_layer",
        "locked.pdf": "encrypted",
        "kb/article.html": "near_duplicate",
        "kb/article-saved-again.htm": "html",
        "notes.md": "markdown",
        "policy.docx": "docx",
        "plain.txt": "text",
        "broken.pdf": "unreadable",
        "picture.png": "unknown_extension",
    }
