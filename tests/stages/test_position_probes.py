"""position_probes: ColDeR paired documents; each pair differs only in the factor under test."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest
import yaml

from builder.bench import Bench
from builder.io.sources import SourceError
from builder.run.invariants import check_invariants
from builder.stages.colder.position_probes import PositionProbes
from builder.stages.colder.redocred import document_key
from tests.conftest import FIXTURES, REPO
from tests.helpers import make_ctx

TINY = FIXTURES / "redocred" / "tiny_redocred.json"
ALPHA = document_key(json.loads(TINY.read_text())[0])  # the first document's probes are named by it
TEMPLATES = {
    "P17": "Which country is {head} in?",
    "P131": "Where is {head}?",
    "P206": "Which lake is near {head}?",
    "P361": "What is {head} part of?",
}
EV = "Alpha Town is a town in Betaland ."
NEUTRAL = ["It has a river .", "The fair is held at Delta Lake .", "The weather is mild ."]
HEAD_ONLY = ["Alpha Town hosts a fair .", "Locals love Alpha Town .", "Trains from alpha town run daily ."]
OMEGA = ["Omega is a band .", "They play jazz .", "Omega tours often .", "Fans like them ."]


def _run(tmp_path, path, seed=0, **params):
    ctx = make_ctx(tmp_path, seed=seed, label="01_position_probes")
    stage = PositionProbes(PositionProbes.Params(path=str(path), **params))
    before = Bench.of()
    bench = stage.run(before, ctx)
    check_invariants(before, bench, stage, ctx.label)
    return bench, ctx


def _docs(bench: Bench, qid: str) -> dict[str, list[str]]:
    """A probe's documents by variant, found through every id a document stands for."""
    out = {}
    for doc_id, same, sentences in bench.corpus.select("doc_id", "same_text_ids", "sentences").iter_rows():
        for i in [doc_id, *same]:
            if i.startswith(f"{qid}-"):
                out[i[len(qid) + 1 :]] = list(sentences)
    return out


def test_identical_documents_are_written_once_and_judged_under_the_kept_id(tmp_path):
    # [EV, *NEUTRAL] is position_i's pos01, first_vs_last's evidence_first, brevity's
    # evidence_and_rest and answer_importance's answer_present: one document, four ids.
    bench, _ = _run(tmp_path, TINY, templates=TEMPLATES)
    assert bench.corpus["text"].n_unique() == bench.corpus.height
    kept = f"position_i-{ALPHA}-0-pos01"
    row = bench.corpus.filter(pl.col("doc_id") == kept).row(0, named=True)
    assert row["same_text_ids"] == [
        f"first_vs_last-{ALPHA}-0-evidence_first",
        f"brevity-{ALPHA}-0-evidence_and_rest",
        f"answer_importance-{ALPHA}-0-answer_present",
    ]
    # [*NEUTRAL, EV] is both pos04 and evidence_last.
    folded = [*row["same_text_ids"], f"first_vs_last-{ALPHA}-0-evidence_last"]
    assert sorted(bench.drops.select("id", "reason").rows()) == sorted((i, "duplicate_text") for i in folded)
    qrels = set(bench.qrels.select("query_id", "doc_id", "score").iter_rows())
    for qid in (
        f"position_i-{ALPHA}-0",
        f"first_vs_last-{ALPHA}-0",
        f"brevity-{ALPHA}-0",
        f"answer_importance-{ALPHA}-0",
    ):
        assert (qid, kept, 1) in qrels
    first_vs_last = bench.queries.filter(pl.col("setting") == "first_vs_last").row(0, named=True)
    assert first_vs_last["doc_id"] == kept
    assert first_vs_last["pairs"] == [{"doc_a": kept, "doc_b": f"position_i-{ALPHA}-0-pos04"}]
    assert set(bench.qrels["doc_id"]) == set(bench.corpus["doc_id"])


def test_tiny_fact_filter(tmp_path):
    bench, ctx = _run(tmp_path, TINY, templates=TEMPLATES)
    assert ctx.stats["facts"] == {
        "documents": 2,
        "malformed_documents": 1,
        "eligible": 1,
        "ineligible": {
            "no_template": 1,
            "not_single_evidence": 1,
            "evidence_lacks_head_or_tail": 2,
            "ambiguous_answer": 1,
        },
    }
    q = bench.queries.filter(pl.col("setting") == "brevity").row(0, named=True)
    assert (q["query_id"], q["text"], q["answer"], q["relation"]) == (
        f"brevity-{ALPHA}-0",
        "Which country is Alpha Town in?",
        "Betaland",
        "P17",
    )
    assert bench.queries["setting"].to_list() == [
        "position_i",
        "first_vs_last",
        "brevity",
        "repetition",
        "answer_importance",
        "foil",
    ]


def test_tiny_documents_per_setting(tmp_path):
    bench, _ = _run(tmp_path, TINY, templates=TEMPLATES)
    assert _docs(bench, f"position_i-{ALPHA}-0") == {
        "pos01": [EV, *NEUTRAL],
        "pos02": [NEUTRAL[0], EV, *NEUTRAL[1:]],
        "pos03": [*NEUTRAL[:2], EV, NEUTRAL[2]],
        "pos04": [*NEUTRAL, EV],
    }
    assert _docs(bench, f"first_vs_last-{ALPHA}-0") == {
        "evidence_first": [EV, *NEUTRAL],
        "evidence_last": [*NEUTRAL, EV],
    }
    assert _docs(bench, f"brevity-{ALPHA}-0") == {"evidence_only": [EV], "evidence_and_rest": [EV, *NEUTRAL]}
    assert _docs(bench, f"repetition-{ALPHA}-0") == {
        "more_heads": [EV, *HEAD_ONLY[:2]],
        "fewer_heads": [EV, *NEUTRAL[:2]],
    }
    assert _docs(bench, f"answer_importance-{ALPHA}-0") == {
        "answer_present": [EV, *NEUTRAL],
        "answer_absent": [HEAD_ONLY[0], *NEUTRAL],
    }
    assert _docs(bench, f"foil-{ALPHA}-0") == {
        "foil": ['"Alpha Town" "Alpha Town"', HEAD_ONLY[0]],
        "evidence_buried": [*OMEGA, EV, *OMEGA],
    }
    foil = bench.queries.filter(pl.col("setting") == "foil").row(0, named=True)
    assert foil["doc_id"] == f"foil-{ALPHA}-0-evidence_buried"
    assert foil["pairs"] == [{"doc_a": f"foil-{ALPHA}-0-foil", "doc_b": f"foil-{ALPHA}-0-evidence_buried"}]
    scores = dict(bench.qrels.select("doc_id", "score").iter_rows())
    assert scores[f"foil-{ALPHA}-0-foil"] == 0 and scores[f"answer_importance-{ALPHA}-0-answer_absent"] == 0
    assert sum(scores.values()) == len(scores) - 2


def test_spans_point_at_the_evidence(tmp_path):
    bench, _ = _run(tmp_path, TINY, templates=TEMPLATES)
    texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
    for doc_id, spans in bench.queries.select("doc_id", "spans").iter_rows():
        assert texts[doc_id][spans[0]["start"] : spans[0]["end"]] == EV
    for text, start, end in bench.corpus.select("text", "evidence_start", "evidence_end").iter_rows():
        assert (start is None) == (EV not in text)
        assert start is None or text[start:end] == EV


def test_pairs_table_in_work_dir(tmp_path):
    bench, _ = _run(tmp_path, TINY, templates=TEMPLATES, settings=["position_i", "foil"])
    pairs = pl.read_parquet(tmp_path / "pairs.parquet")
    assert pairs.columns == ["query_id", "setting", "doc_a", "doc_b"]
    assert pairs.height == 3 + 1
    exploded = bench.queries.select("query_id", "setting", "pairs").explode("pairs").unnest("pairs")
    assert exploded.equals(pairs)


def test_bad_params_and_inputs(tmp_path):
    with pytest.raises(ValueError, match="must contain"):
        PositionProbes.Params(path="x", templates={"P17": "Which country?"})
    with pytest.raises(ValueError, match="only the placeholder"):
        PositionProbes.Params(path="x", templates={"P17": "{tail} of {head}?"})
    with pytest.raises(SourceError, match="input not found"):
        _run(tmp_path, tmp_path / "nope.json", templates=TEMPLATES)


@pytest.fixture(scope="module")
def recipe_templates() -> dict[str, str]:
    recipe = yaml.safe_load((REPO / "recipes" / "colder_probes.yaml").read_text())
    return recipe["stages"][0]["position_probes"]["templates"]


def _check_differs_only_in_factor(setting: str, docs: dict[str, list[str]]) -> None:
    """The by-construction checks: what each pair shares and where it differs."""
    if setting == "position_i":
        multisets = {tuple(sorted(s)) for s in docs.values()}
        assert len(multisets) == 1 and len(docs) == len(docs["pos01"])
        ev = docs["pos01"][0]
        assert [s.index(ev) for _, s in sorted(docs.items())] == list(range(len(docs)))
    elif setting == "first_vs_last":
        a, b = docs["evidence_first"], docs["evidence_last"]
        assert a[1:] == b[:-1] and a[0] == b[-1]
    elif setting == "brevity":
        assert docs["evidence_and_rest"][:1] == docs["evidence_only"]
        assert len(docs["evidence_and_rest"]) > 1
    elif setting == "repetition":
        a, b = docs["more_heads"], docs["fewer_heads"]
        assert a[0] == b[0] and len(a) == len(b) == 3 and not set(a[1:]) & set(b[1:])
    elif setting == "answer_importance":
        a, b = docs["answer_present"], docs["answer_absent"]
        assert a[1:] == b[1:] and a[0] != b[0]
    elif setting == "foil":
        b = docs["evidence_buried"]
        assert b[:4] == b[5:] and len(b) == 9 and len(docs["foil"]) == 2


def test_shared_redocred_pairs_differ_only_in_their_factor(tmp_path, shared_data, recipe_templates):
    path = shared_data / "redocred" / "dev_revised.json"
    bench, ctx = _run(tmp_path, path, seed=4, templates=recipe_templates, queries_per_setting=60)
    assert Counter(bench.queries["setting"]) == {s: 60 for s in ctx.stats["settings"]}
    by_query: dict[str, dict[str, list[str]]] = {}
    assert bench.corpus["text"].n_unique() == bench.corpus.height
    kept_as: dict[str, str] = {}
    for doc_id, same in bench.corpus.select("doc_id", "same_text_ids").iter_rows():
        kept_as.update({i: doc_id for i in [doc_id, *same]})
    for q in bench.queries.iter_rows(named=True):
        docs = by_query[q["query_id"]] = _docs(bench, q["query_id"])
        _check_differs_only_in_factor(q["setting"], docs)
        assert q["head"].lower() in q["text"].lower()
        assert {p["doc_a"] for p in q["pairs"]} | {p["doc_b"] for p in q["pairs"]} == {
            kept_as[f"{q['query_id']}-{v}"] for v in docs
        }
    again, _ = _run(tmp_path, path, seed=4, templates=recipe_templates, queries_per_setting=60)
    assert again.corpus.equals(bench.corpus) and again.queries.equals(bench.queries)
