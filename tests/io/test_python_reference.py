"""`python_docs` reads the frozen copy of CPython's reference topics that build-bench ships,
so the quickstart builds the same benchmark on every Python, whatever the interpreter's own
`pydoc_data.topics` holds."""

from __future__ import annotations

import hashlib
import pydoc_data.topics
import sys

import pytest

from builder.io.sources import PYTHON_REFERENCE_CPYTHON, PythonDocsSource, iter_rows, python_reference_path


def _rows() -> list[tuple[str, object]]:
    return list(iter_rows(PythonDocsSource(type="python_docs"), None))


def test_the_topics_do_not_depend_on_the_running_interpreter(monkeypatch):
    before = _rows()
    monkeypatch.setattr(pydoc_data.topics, "topics", {"assert": "another release's text", "new-topic": "x"})
    assert _rows() == before


def test_the_shipped_copy_holds_79_topics_in_key_order_with_titles_from_their_keys():
    rows = [row for _, row in _rows()]
    assert len(rows) == 79
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    assert all(isinstance(r, dict) and r["title"] == r["id"].replace("-", " ") and r["text"] for r in rows)
    assert [where for where, _ in _rows()][:2] == ["row:0", "row:1"]


@pytest.mark.skipif(
    sys.version.split()[0] != PYTHON_REFERENCE_CPYTHON,
    reason=f"the copy was frozen from CPython {PYTHON_REFERENCE_CPYTHON}'s pydoc_data.topics",
)
def test_the_copy_is_cpython_3_11_7s_pydoc_topics():
    topics = pydoc_data.topics.topics
    assert [(r["id"], r["text"]) for _, r in _rows()] == sorted(topics.items())


def test_the_copy_is_the_one_whose_sha256_the_provenance_gives():
    digest = hashlib.sha256(python_reference_path().read_bytes()).hexdigest()
    provenance = (python_reference_path().parent / "PROVENANCE.md").read_text(encoding="utf-8")
    assert digest in provenance
