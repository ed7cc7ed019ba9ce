"""The posir_multilingual recipe end to end against the local server, with a Tatoeba-based
scripted translator that sometimes loses markers, chats, refuses or picks the wrong language."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import SHARED
from tests.fixtures.scripted_translator import NAMES, SCENARIOS, Tatoeba, scenario, translator
from tests.support.openai_server import FakeOpenAIServer

LANGS = {"fra-Latn": "fra", "deu-Latn": "deu", "kor-Kore": "kor", "ara-Arab": "ara"}


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """One build shared by the tests below (the shared_data fixture is per test, hence the own check)."""
    data = SHARED / "data"
    if not data.is_dir():
        pytest.skip("../shared/data is absent (a fresh clone has no shared datasets)")
    tatoeba = Tatoeba(data / "tatoeba_laser")
    with FakeOpenAIServer(responder=translator(tatoeba)) as srv:
        yield _build(srv, data, tmp_path_factory.mktemp("posir_ml")), srv, tatoeba


def _build(srv, data: Path, root: Path):
    source = data / "fineweb_sample" / "fineweb_10bt_docs_1000.jsonl"
    overrides = [
        f"sources=[{{type: jsonl, path: '{source}', lang: en, domain: general, id_prefix: 'en-', limit: 40}}]",
        "tokenizer={kind: words}",
        "stages.sample_by_length.n_docs=10",
        f"stages.translate.languages=[{', '.join(LANGS)}]",
        "stages.translate.max_chunk_tokens=600",
        "stages.iqr_filter.min_stratum_size=4",
    ]
    for model in ("gen", "translator", "judge"):
        overrides += [f"models.{model}.base_url={srv.base_url}", f"models.{model}.max_concurrency=4"]
    loaded = parse_recipe(Path("recipes/posir_multilingual.yaml"), overrides)
    result = Runner(loaded, RunOptions(run_root=root / "runs", out_dir=root / "out")).run()
    return result, root


def _stage(result, name):
    return next(s for s in result.stage_stats if s.stage.endswith(name))


def test_every_scripted_mishap_happened(build):
    _, srv, _ = build
    seen = set()
    for body in srv.requests:
        user = body["messages"][-1]["content"]
        lang = re.search(r"into ([A-Z][\w ]+?)\. Your", body["messages"][0]["content"])
        if lang and "<text>" in user:
            seen.add(scenario(user.split("<text>\n")[1].rsplit("\n</text>", 1)[0], NAMES[lang.group(1)]))
    assert set(SCENARIOS) <= seen


def test_spans_in_translations_cover_the_translated_passage(build):
    (result, _), _, tatoeba = build
    bench = result.bench
    texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
    source_q = {r["query_id"]: r for r in bench.queries.filter(pl.col("lang") == "eng-Latn").iter_rows(named=True)}
    checked = inherited = 0
    for row in bench.queries.filter(pl.col("lang") != "eng-Latn").iter_rows(named=True):
        src = source_q[row["source_query_id"]]
        if row["span_inherited"]:
            inherited += 1
            assert row["spans"] is None and row["rel_pos"] == src["rel_pos"]
            continue
        doc, src_doc = texts[row["doc_id"]], texts[src["doc_id"]]
        for span, old in zip(row["spans"], src["spans"], strict=True):
            expected = tatoeba.text(src_doc[old["start"] : old["end"]], LANGS[row["lang"]]).strip()
            assert doc[span["start"] : span["end"]] == expected
        assert row["rel_pos"] == pytest.approx(sum(s["start"] for s in row["spans"]) / len(row["spans"]) / len(doc))
        assert row["length_bucket"] == src["length_bucket"] and row["pos_char_length"] == len(doc)
        assert row["on_target"] == (row["requested_position"] == row["position_tag"])
        checked += 1
    assert checked > 20 and inherited > 0
    # No chatter, refusal or foreign piece survives in a translated document.
    for doc_id, text in texts.items():
        assert "Here is the" not in text and "I'm sorry" not in text
        if doc_id.endswith("@fra-Latn"):
            assert not re.search("[а-яА-Я]", text)


def test_removals_cascade_and_are_counted_per_language(build):
    (result, _), _, _ = build
    bench = result.bench
    drops = bench.drops.filter(pl.col("stage").str.ends_with("clean_translations"))
    docs = dict(drops.filter(pl.col("kind") == "doc").select("id", "reason").iter_rows())
    assert {"refusal", "wrong_language"} <= set(docs.values())
    live_queries = set(bench.queries["query_id"])
    for doc_id, reason in docs.items():
        src, lang = doc_id.split("@")
        lost = [q for q in bench.queries.filter(pl.col("doc_id") == src)["query_id"]]
        for q in lost:
            assert f"{q}@{lang}" not in live_queries
            assert drops.filter(pl.col("id") == f"{q}@{lang}")["reason"].to_list() == [f"doc_removed:{reason}"]
        assert src in set(bench.corpus["doc_id"])  # the English document stays
    assert not bench.qrels["doc_id"].is_in(list(docs)).any()
    stats = _stage(result, "clean_translations").figures["clean_translations"]
    counted = sum(n for lang in stats.values() for n in lang.get("docs_removed", {}).values())
    assert counted == len(docs) and sum(lang.get("prefixes_stripped", 0) for lang in stats.values()) > 0
    translate = _stage(result, "translate").figures["translate"]
    assert set(translate) == set(LANGS) and sum(t["pieces_reasked"] for t in translate.values()) > 0
    assert "lang=fra-Latn|domain=general" in _stage(result, "iqr_filter").figures["iqr_filter"]


def test_language_folders_share_ids_and_cross_sets_use_the_english_corpus(build):
    (result, root), _, _ = build
    out = result.out_dir  # the recipe asks for per-language, PosIR-layout and cross-lingual folders

    def ids(path):
        return {json.loads(line)["_id"] for line in path.read_text().splitlines()}

    english = ids(out / "eng-Latn" / "corpus.jsonl")
    qrels_en = set((out / "eng-Latn" / "qrels" / "test.tsv").read_text().splitlines())
    for lang in LANGS:
        assert ids(out / lang / "corpus.jsonl") <= english
        assert set((out / lang / "qrels" / "test.tsv").read_text().splitlines()) <= qrels_en
        assert (out / "posir" / lang / "general" / "qrels" / "test.parquet").exists()
        cross = out / "cross" / f"{lang}-eng-Latn"
        assert ids(cross / "corpus.jsonl") == english
        assert ids(cross / "queries.jsonl") <= ids(out / lang / "queries.jsonl")
