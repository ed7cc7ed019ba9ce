"""Inputs from their public homes: `hf://datasets/...` references and URLs (an archive served
over real HTTP on 127.0.0.1 here), read by the same stage code as local files."""

from __future__ import annotations

import functools
import http.server
import threading
import zipfile

import pytest

from builder.io.remote import HubFile, fetch_input, is_remote, parse_hub_ref
from builder.io.sources import SourceError
from builder.stages.far_relevant.from_beir import FromBEIR
from tests.conftest import FIXTURES


def test_hub_references_name_repository_revision_and_path():
    assert parse_hub_ref("hf://datasets/rajpurkar/squad_v2@3ffb306/squad_v2/dev.parquet") == HubFile(
        "rajpurkar/squad_v2", "3ffb306", "squad_v2/dev.parquet"
    )
    assert parse_hub_ref("hf://datasets/org/name/folder/") == HubFile("org/name", None, "folder")
    assert parse_hub_ref("hf://datasets/org/name/folder").is_file is False
    with pytest.raises(SourceError, match="expected hf://datasets/<org>/<name>@<revision>/<path"):
        parse_hub_ref("hf://datasets/org-only")


def test_only_hub_references_and_urls_are_remote():
    assert is_remote("hf://datasets/a/b/c.json") and is_remote("https://x.org/a.zip")
    assert not is_remote("data/hf.json") and not is_remote("/abs/https.json")


def test_a_missing_local_input_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SourceError, match=r"input not found: gone.json \(looked in the working directory"):
        fetch_input("gone.json", tmp_path / "recipes")


@pytest.fixture
def archive_server(tmp_path, monkeypatch):
    """A BEIR folder zipped and served over HTTP; downloads land in a private datasets cache."""
    import datasets.config

    served = tmp_path / "served"
    served.mkdir()
    with zipfile.ZipFile(served / "tiny.zip", "w") as zf:
        for path in sorted((FIXTURES / "beir_tiny").rglob("*")):
            if path.is_file():
                zf.write(path, f"tiny/{path.relative_to(FIXTURES / 'beir_tiny')}")
    cache = tmp_path / "datasets_cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
    monkeypatch.setattr(datasets.config, "EXTRACTED_DATASETS_PATH", cache / "downloads" / "extracted")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    handler = functools.partial(_Quiet, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_a_zipped_beir_folder_is_downloaded_unpacked_and_read(archive_server, tmp_path):
    folder = fetch_input(f"{archive_server}/tiny.zip#tiny", None)
    assert sorted(p.name for p in folder.iterdir()) == ["corpus.jsonl", "qrels", "queries.jsonl"]
    assert (folder / "corpus.jsonl").read_bytes() == (FIXTURES / "beir_tiny" / "corpus.jsonl").read_bytes()
    again = fetch_input(f"{archive_server}/tiny.zip#tiny", None)
    assert again == folder  # cached, not fetched twice into a new place


def test_from_beir_reads_a_url_as_it_reads_a_folder(archive_server, tmp_path):
    from builder.bench import Bench
    from tests.helpers import make_ctx

    ctx = make_ctx(tmp_path, label="01_from_beir")
    remote = FromBEIR(FromBEIR.Params(path=f"{archive_server}/tiny.zip#tiny")).run(Bench.of(), ctx)
    local = FromBEIR(FromBEIR.Params(path=str(FIXTURES / "beir_tiny"))).run(Bench.of(), ctx)
    assert remote.corpus.equals(local.corpus) and remote.queries.equals(local.queries)
    assert remote.qrels.equals(local.qrels) and remote.drops.equals(local.drops)
    assert remote.corpus.height == 3


def test_a_path_missing_inside_the_archive_is_named(archive_server):
    with pytest.raises(SourceError, match="'nope' is not inside the downloaded archive"):
        fetch_input(f"{archive_server}/tiny.zip#nope", None)


def test_an_unreachable_url_is_a_source_error(archive_server):
    with pytest.raises(SourceError, match="could not download"):
        fetch_input(f"{archive_server}/absent.json", None)
