"""The `files` source: real PDF, HTML, Markdown, Word and text files written at test time
are read into documents whose location maps slice the published text exactly; what cannot
be read is a counted drop with its reason; conversions are cached by digest; near-duplicates
are kept once; a mixed folder builds offline with the mock LLM and every span's page is right."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

for _module in ("pypdf", "trafilatura", "docx", "ftfy", "datasketch"):
    pytest.importorskip(_module, reason='the `files` extra is not installed: pip install -e ".[files]"')

from builder.io.corpus_loader import load_sources  # noqa: E402
from builder.io.files.cache import ConversionCache  # noqa: E402
from builder.io.files.locate import evidence_location  # noqa: E402
from builder.io.files.read import file_columns, files_plan_lines, iter_files  # noqa: E402
from builder.io.files.text import clean  # noqa: E402
from builder.io.sources import FilesSource, JsonlSource, SourceError  # noqa: E402
from builder.recipe.model import parse_recipe  # noqa: E402
from builder.run.runner import Runner, RunOptions  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.io.file_makers import make_docx, make_html, make_mixed_folder, make_pdf  # noqa: E402

# my_domain with its CPU choices that need no extra beyond `files`
_OFFLINE = [
    "tokenizer={kind: words}",
    "rerankers.contrast_a={backend: bm25}",
    "rerankers.contrast_b={backend: bm25}",
    "rerankers.recall={backend: bm25}",
]


def _read(folder: Path, **settings) -> tuple[pl.DataFrame, pl.DataFrame, FilesSource]:
    spec = FilesSource(type="files", path=str(folder), **settings)
    corpus, drops = load_sources([spec], None)
    return file_columns(corpus, [spec]), drops, spec


def _row(corpus: pl.DataFrame, doc_id: str) -> dict:
    return corpus.filter(pl.col("doc_id") == doc_id).row(0, named=True)


def test_pdf_pages_map_back_and_a_hyphen_at_a_line_end_is_joined(tmp_path):
    make_pdf(
        tmp_path / "manual.pdf",
        ["Pump manual\nThe instal-\nlation takes two hours.", None, "Page three: wiring.\nUse a grounded socket."],
        title="Pump manual",
    )
    corpus, drops, spec = _read(tmp_path)
    doc = _row(corpus, "manual.pdf")
    assert doc["title"] == "Pump manual" and doc["source_kind"] == "pdf" and drops.height == 0
    assert doc["text"] == (
        "Pump manual\nThe installation takes two hours.\n\nPage three: wiring.\nUse a grounded socket."
    )
    pages = [(loc["number"], doc["text"][loc["start"] : loc["end"]]) for loc in doc["locations"]]
    assert pages == [
        (1, "Pump manual\nThe installation takes two hours."),
        (3, "Page three: wiring.\nUse a grounded socket."),
    ]
    assert spec._last_read.empty_pages == {"manual.pdf": [2]}


def test_what_cannot_be_read_is_a_counted_drop_with_its_reason(tmp_path):
    make_pdf(tmp_path / "scanned.pdf", [None, None])
    make_pdf(tmp_path / "locked.pdf", ["a secret"], password="letmein")
    make_pdf(tmp_path / "open-to-read.pdf", ["Only editing is locked."], owner_only=True)
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a pdf at all\n")
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    (tmp_path / "empty.md").write_text("\n\n   \n", encoding="utf-8")
    (tmp_path / "big.txt").write_text("word " * 400_000, encoding="utf-8")
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    (tmp_path / ".hidden.txt").write_text("not a document", encoding="utf-8")
    corpus, drops, spec = _read(tmp_path, max_file_mb=1)
    assert corpus["doc_id"].to_list() == ["open-to-read.pdf"]
    assert dict(drops.iter_rows()) == {
        "big.txt": "too_large",
        "broken.docx": "unreadable",
        "broken.pdf": "unreadable",
        "empty.md": "empty_text",
        "locked.pdf": "encrypted",
        "photo.jpg": "unknown_extension",
        "scanned.pdf": "no_text_layer",
    }
    figures = spec._last_read.figures()
    assert figures["found"] == {"docx": 1, "markdown": 1, "other": 1, "pdf": 4, "text": 1}
    assert figures["documents"] == 1 and sum(figures["dropped"].values()) == 7
    assert "OCR" in figures["drop_details"]["scanned.pdf"]


def test_html_loses_its_navigation_and_keeps_its_headings(tmp_path):
    make_html(
        tmp_path / "page.html",
        "Pump guide",
        [
            ("Power", "Connect the pump to a grounded socket rated for sixteen amperes, never to an extension cord."),
            ("First start", "Open the valve slowly and watch the gauge until it reads two bar, then switch on."),
        ],
    )
    doc = _row(_read(tmp_path)[0], "page.html")
    assert doc["title"] == "Pump guide"
    for boilerplate in ("Products", "Sign in", "Cookie settings"):
        assert boilerplate not in doc["text"]
    labels = {loc["label"]: doc["text"][loc["start"] : loc["end"]] for loc in doc["locations"]}
    assert labels["Pump guide > Power"].startswith("## Power\n\nConnect the pump")
    assert labels["Pump guide > First start"].endswith("then switch on.")


def test_word_paragraphs_and_markdown_sections_map_back(tmp_path):
    make_docx(
        tmp_path / "policy.docx", "Leave policy", ["Staff get 25 days.", "Carry over at most five."], heading="Leave"
    )
    (tmp_path / "notes.md").write_text(
        "# Notes\n\nIntro.\n\n## Filters\n\nChange the filter caf\u00c3\u00a9 monthly.\n\n"
        "```\n# not a heading\n```\n\n## Seals\n\nCheck the seals.\n",
        encoding="utf-8",
    )
    corpus = _read(tmp_path)[0]
    word = _row(corpus, "policy.docx")
    assert word["title"] == "Leave policy"
    assert [(loc["label"], word["text"][loc["start"] : loc["end"]]) for loc in word["locations"]] == [
        ("paragraph 1", "Leave"),
        ("paragraph 2", "Staff get 25 days."),
        ("paragraph 3", "Carry over at most five."),
    ]
    md = _row(corpus, "notes.md")
    assert md["title"] == "Notes" and "café" in md["text"]  # mojibake repaired before the map is made
    sections = {loc["label"]: md["text"][loc["start"] : loc["end"]] for loc in md["locations"]}
    assert list(sections) == ["Notes", "Notes > Filters", "Notes > Seals"]
    assert sections["Notes > Filters"] == "## Filters\n\nChange the filter café monthly.\n\n```\n# not a heading\n```"


def test_cleaning_keeps_quotes_and_joins_only_lower_case_continuations():
    assert (
        clean("\u201cfine\u201d instal-\nlation, X-\nRay, soft\u00adhyphen")
        == "\u201cfine\u201d installation, X-\nRay, softhyphen"
    )


def test_near_duplicates_are_kept_once_the_longest(tmp_path):
    body = " ".join(f"Sentence number {i} says something about valves and pumps." for i in range(60))
    (tmp_path / "v1.md").write_text(body, encoding="utf-8")
    (tmp_path / "v2.md").write_text(body + " A note added in version two.", encoding="utf-8")
    (tmp_path / "other.md").write_text(
        " ".join(f"Unrelated line {i} about tax forms." for i in range(60)), encoding="utf-8"
    )
    corpus, drops, spec = _read(tmp_path)
    assert sorted(corpus["doc_id"].to_list()) == ["other.md", "v2.md"]
    assert dict(drops.iter_rows()) == {"v1.md": "near_duplicate"}
    assert spec._last_read.near_duplicates == {"v1.md": "v2.md"}
    assert _read(tmp_path, near_duplicates=None)[0].height == 3


def test_conversions_are_cached_by_digest(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    make_pdf(docs / "a.pdf", ["Page one text."])
    (docs / "b.md").write_text("# B\n\nText.", encoding="utf-8")
    spec = FilesSource(type="files", path=str(docs))
    spec.cache_conversions(tmp_path / "cache")
    first = list(iter_files(spec, None))
    assert (spec._last_read.converted, spec._last_read.from_cache) == (2, 0)
    assert list(iter_files(spec, None)) == first
    assert (spec._last_read.converted, spec._last_read.from_cache) == (0, 2)
    (docs / "b.md").write_text("# B\n\nChanged text.", encoding="utf-8")
    list(iter_files(spec, None))
    assert (spec._last_read.converted, spec._last_read.from_cache) == (1, 1)
    # Another folder holding the same bytes reads them back too.
    assert ConversionCache(tmp_path / "cache").get(docs / "a.pdf", "pdf", _sha(docs / "a.pdf")).text == "Page one text."


def _sha(path: Path) -> str:
    from builder.util.digests import file_sha256

    return file_sha256(path)


def test_evidence_location_names_pages_sections_and_paragraphs():
    pages = [
        {"start": 0, "end": 10, "kind": "page", "label": "page 1", "number": 1},
        {"start": 12, "end": 30, "kind": "page", "label": "page 2", "number": 2},
        {"start": 32, "end": 40, "kind": "page", "label": "page 4", "number": 4},
    ]
    assert evidence_location([{"start": 13, "end": 20}], pages) == ("page 2", 2)
    assert evidence_location([{"start": 5, "end": 15}], pages) == ("pages 1-2", 1)
    assert evidence_location([{"start": 2, "end": 4}, {"start": 33, "end": 35}], pages) == ("pages 1, 4", 1)
    assert evidence_location([{"start": 10, "end": 12}], pages) == ("page 2", 2)  # the blank line between
    heads = [{"start": 0, "end": 9, "kind": "heading", "label": "Setup > Linux", "number": 1}]
    assert evidence_location([{"start": 1, "end": 3}], heads) == ("Setup > Linux", None)
    assert evidence_location(None, heads) == (None, None)


def test_missing_extra_is_one_clear_error(tmp_path, monkeypatch):
    make_pdf(tmp_path / "a.pdf", ["text"])
    monkeypatch.setattr("builder.io.files.read.missing_modules", lambda kinds: ["pypdf"])
    with pytest.raises(
        SourceError, match=r'files` extra is not installed \(pypdf missing\): pip install -e "\.\[files\]"'
    ):
        _read(tmp_path)


def test_my_domain_takes_a_folder_or_a_jsonl(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_DOCS", str(tmp_path))
    assert isinstance(parse_recipe(REPO / "recipes" / "my_domain.yaml", _OFFLINE).recipe.sources[0], FilesSource)
    monkeypatch.setenv("MY_DOCS", str(tmp_path / "docs.jsonl"))
    assert isinstance(parse_recipe(REPO / "recipes" / "my_domain.yaml", _OFFLINE).recipe.sources[0], JsonlSource)


def test_a_mixed_folder_builds_offline_and_every_span_points_to_its_page(tmp_path, monkeypatch):
    from pypdf import PdfReader

    folder = tmp_path / "docs"
    kinds = make_mixed_folder(folder, REPO)
    monkeypatch.setenv("MY_DOCS", str(folder))
    loaded = parse_recipe(REPO / "recipes" / "my_domain.yaml", _OFFLINE)
    options = RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out", mock_llm=True)
    result = Runner(loaded, options).run()
    out = tmp_path / "out"
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    load = stats["stages"][0]
    want_drops = {
        f: k
        for f, k in kinds.items()
        if k in ("no_text_layer", "encrypted", "near_duplicate", "unreadable", "unknown_extension")
    }
    drops = pl.read_parquet(out / "drops.parquet").filter(pl.col("stage") == "00_load")
    assert dict(drops.select("id", "reason").iter_rows()) == want_drops
    assert load["dropped"] == {r: 1 for r in want_drops.values()}
    assert load["files"][0]["found"] == {"docx": 1, "html": 2, "markdown": 1, "other": 1, "pdf": 5, "text": 1}
    assert load["files"][0]["empty_pages"] == {"report.pdf": [3]}
    corpus = pl.read_parquet(out / "corpus.parquet")
    queries = pl.read_parquet(out / "queries.parquet")
    assert set(corpus["source_kind"]) == {"pdf", "html", "markdown", "docx", "text"}
    texts = dict(corpus.select("doc_id", "text").iter_rows())
    pdf_queries = queries.filter(pl.col("doc_id").str.ends_with(".pdf"))
    assert pdf_queries.height > 0 and queries["evidence_location"].null_count() == 0
    assert set(pdf_queries["evidence_page"].to_list()) != {1}  # evidence found beyond the first page
    for row in queries.iter_rows(named=True):
        for span in row["spans"]:
            assert 0 <= span["start"] < span["end"] <= len(texts[row["doc_id"]])
        if row["evidence_page"] is None:
            continue
        # The page as pypdf reads it from the file itself, cleaned as the source cleans it.
        page = clean(PdfReader(folder / row["doc_id"]).pages[row["evidence_page"] - 1].extract_text())
        first = row["spans"][0]
        assert texts[row["doc_id"]][first["start"] : first["end"]].split("\n")[0] in page
    assert (stats["stages"][0]["files"][0]["converted"], result.written) == (10, True)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "#### Evidence in the source files" in card and "| third | by share of text | by page |" in card
    # The review page shows each item's file and page.
    from builder.review.sample import draw_sample

    located = {i["query_id"]: i["where"] for i in draw_sample(out, 0.5, 0)}
    expected = dict(queries.select("query_id", pl.col("doc_id") + ", " + pl.col("evidence_location")).iter_rows())
    assert located and all(located[q] == expected[q] for q in located)
    # A rebuild from scratch reads every conversion back instead of converting again.
    Runner(
        parse_recipe(REPO / "recipes" / "my_domain.yaml", _OFFLINE),
        RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out", mock_llm=True, fresh=True),
    ).run()
    again = json.loads((out / "stats.json").read_text(encoding="utf-8"))["stages"][0]["files"][0]
    assert (again["converted"], again["from_cache"]) == (0, 10)
    assert os.listdir(out)  # written whole


def test_plan_lists_files_per_kind_and_drops(tmp_path, monkeypatch):
    from builder.run.plan import make_plan

    make_mixed_folder(tmp_path / "docs", REPO)
    monkeypatch.setenv("MY_DOCS", str(tmp_path / "docs"))
    loaded = parse_recipe(REPO / "recipes" / "my_domain.yaml", _OFFLINE)
    make_plan(loaded, None)
    assert files_plan_lines(loaded.recipe.sources) == [
        f"files source {tmp_path / 'docs'}: found 11 files (5 pdf, 2 html, 1 docx, 1 markdown, 1 other, 1 text); "
        "reads 6, drops 5 (encrypted 1, near_duplicate 1, no_text_layer 1, unknown_extension 1, unreadable 1); "
        "1 PDF page(s) without text left out"
    ]


def test_the_load_is_redone_when_the_folder_changes(tmp_path):
    from builder.run.load_key import load_key

    loaded = parse_recipe(_recipe(tmp_path))
    (tmp_path / "my_files" / "a.md").write_text("# A\n\nText.", encoding="utf-8")
    before = load_key(loaded.recipe, loaded.base_dir)
    assert load_key(loaded.recipe, loaded.base_dir) == before
    (tmp_path / "my_files" / "b.md").write_text("# B\n\nMore.", encoding="utf-8")
    assert load_key(loaded.recipe, loaded.base_dir) != before


def _recipe(tmp_path: Path) -> Path:
    (tmp_path / "my_files").mkdir(exist_ok=True)
    path = tmp_path / "r.yaml"
    path.write_text(
        "name: r\nsources: [{type: files, path: my_files}]\nstages: [{sample_by_length: {n_docs: 5}}]\n",
        encoding="utf-8",
    )
    return path
