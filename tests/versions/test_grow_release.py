"""A release grown end to end: v1 built, v2 grown from v1's published folder with new
documents and a new language, the two diffed, both pushed to the local Hub-like server
and each revision loaded back with `datasets`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from builder.publish.diff import diff_versions, fetch_version
from builder.publish.hub import push
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import SHARED
from tests.fixtures.scripted_translator import Tatoeba, translator
from tests.publish.fake_hub import load_with_datasets
from tests.support.openai_server import FakeOpenAIServer

REPO = "org/posir-ml"
_LANG = re.compile(r"into ([A-Z][\w ]+?)\. Your")
_MARKER = re.compile(r"[⟦⟪⦃⟬]\s*/?\s*\d+\s*[⟧⟫⦄⟭]")


def _build(
    srv: FakeOpenAIServer, data: Path, root: Path, n_docs: int, languages: list[str], from_ref: str | None = None
) -> Path:
    source = data / "fineweb_sample" / "fineweb_10bt_docs_1000.jsonl"
    overrides = [
        f"sources=[{{type: jsonl, path: '{source}', lang: en, domain: general, id_prefix: 'en-', "
        f"limit: {n_docs}, license: odc-by}}]",
        "tokenizer={kind: words}",
        "stages.sample_by_length.n_docs=100",
        f"stages.translate.languages=[{', '.join(languages)}]",
        "stages.translate.max_chunk_tokens=600",
        "stages.iqr_filter.min_stratum_size=4",
        "output={per_language: false}",
    ]
    for model in ("gen", "translator", "judge"):
        overrides += [f"models.{model}.base_url={srv.base_url}", f"models.{model}.max_concurrency=4"]
    loaded = parse_recipe(Path("recipes/posir_multilingual.yaml"), overrides)
    options = RunOptions(run_root=root / "runs", out_dir=root / "out", from_ref=from_ref)
    return Runner(loaded, options, Console(file=open("/dev/null", "w"))).run().out_dir  # noqa: SIM115


def _asked(srv: FakeOpenAIServer) -> list[tuple[str | None, str]]:
    """(target language or None, user message) of every request the server received."""
    out = []
    for body in srv.requests:
        lang = _LANG.search(body["messages"][0]["content"])
        out.append((lang.group(1) if lang else None, body["messages"][-1]["content"]))
    return out


def test_v1_grows_to_v2_with_new_documents_and_a_language_then_both_publish(hub, tmp_path):
    data = SHARED / "data"
    if not data.is_dir():
        pytest.skip("../shared/data is absent (a fresh clone has no shared datasets)")
    tatoeba = Tatoeba(data / "tatoeba_laser")
    with FakeOpenAIServer(responder=translator(tatoeba)) as srv:
        v1 = _build(srv, data, tmp_path / "v1", 14, ["fra-Latn"])
    # v2 runs elsewhere: its own run folder and cache, and a server that has seen nothing.
    with FakeOpenAIServer(responder=translator(tatoeba)) as srv:
        v2 = _build(srv, data, tmp_path / "v2", 20, ["fra-Latn", "deu-Latn"], from_ref=str(v1))
        asked = _asked(srv)

    english = ~pl.col("doc_id").str.contains("@")  # translations are `<id>@<lang>`
    old_docs = pl.read_parquet(v1 / "corpus.parquet").filter(english)
    new_docs = pl.read_parquet(v2 / "corpus.parquet").filter(english)
    old_texts, added = (
        old_docs["text"].to_list(),
        new_docs.filter(~pl.col("doc_id").is_in(old_docs["doc_id"].implode())),
    )
    assert added.height > 0 and set(old_docs["doc_id"]) <= set(new_docs["doc_id"])
    # Only what is new reached the model: nothing about v1's documents but their German translation.
    assert asked and not any(lang is None and any(t in user for t in old_texts) for lang, user in asked)
    for lang, user in asked:
        if lang == "French" and "<text>" in user:
            piece = _MARKER.sub("", user.split("<text>\n")[1].rsplit("\n</text>", 1)[0])
            assert any(piece in t for t in added["text"]), piece[:80]
    assert any(lang == "German" for lang, _ in asked)

    # v1's English and French queries survive with the same ids and texts.
    before = pl.read_parquet(v1 / "queries.parquet").select("query_id", "text", "lang")
    after = pl.read_parquet(v2 / "queries.parquet").select("query_id", "text", "lang")
    assert before.height > 10
    assert set(before.rows()) <= set(after.rows())
    assert set(after["lang"]) == {"eng-Latn", "fra-Latn", "deu-Latn"}

    result = diff_versions(fetch_version(str(v1)), fetch_version(str(v2)))
    assert result["queries"]["removed"]["count"] == 0 and result["queries"]["changed"]["count"] == 0
    assert result["documents"]["added"]["by_language"]["deu-Latn"] > 0

    for folder, tag in ((v1, "v1.0.0"), (v2, "v1.1.0")):
        push(folder, REPO, tag=tag, console=Console(file=open("/dev/null", "w")))  # noqa: SIM115
    changelog = hub.repos[REPO].commits[1]["files"]["CHANGELOG.md"].decode()
    assert f"| queries | {before.height} | {after.height} | {after.height - before.height} | 0 | 0 |" in changelog
    assert "| recipe.stages.3.translate.languages" in changelog
    from_hub = diff_versions(fetch_version(f"hf://datasets/{REPO}@v1.0.0"), fetch_version(str(v2)))
    assert from_hub["queries"] == result["queries"] and from_hub["documents"] == result["documents"]
    # Grown from the Hub revision instead of the folder: the same release, the same requests.
    with FakeOpenAIServer(responder=translator(tatoeba)) as srv:
        again = _build(
            srv, data, tmp_path / "v2_from_hub", 20, ["fra-Latn", "deu-Latn"], from_ref=f"hf://datasets/{REPO}@v1.0.0"
        )
        assert sorted(map(str, _asked(srv))) == sorted(map(str, asked))
    assert pl.read_parquet(again / "queries.parquet").equals(pl.read_parquet(v2 / "queries.parquet"))
    loaded = load_with_datasets(hub.url, REPO, [("queries", "v1.0.0"), ("queries", "v1.1.0")], tmp_path / "hf")
    assert sorted(r["_id"] for r in loaded["queries", "v1.0.0"]) == sorted(before["query_id"])
    assert sorted(r["_id"] for r in loaded["queries", "v1.1.0"]) == sorted(after["query_id"])


def test_build_from_a_folder_that_is_not_there_exits_2_before_building(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from builder.cli import main; main()",
            "quickstart",
            "--out",
            str(tmp_path / "out"),
            "--run-dir",
            str(tmp_path / "runs"),
            "--from",
            str(tmp_path / "v0"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"--from {tmp_path / 'v0'}: no such folder" in done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()
