"""Tiny built folders of the three shapes that export as more than one MTEB subset or split:
ColDeR-style paired probes, a depth x length grid and a multilingual build."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from builder.bench import Bench
from builder.cli import app
from builder.publish.beir import write_beir
from builder.publish.outputs import publish_folder
from builder.stages.colder.position_probes import PAIR_DTYPE

# setting -> query id -> (question, [(variant, text, relevant)], [(A, B)])
PROBES = {
    "position_i": {
        "position_i-f1": (
            "Where was Ada Lovelace born?",
            [
                ("pos01", "Ada Lovelace was born in London. The weather was mild. Many people lived there.", 1),
                ("pos02", "The weather was mild. Ada Lovelace was born in London. Many people lived there.", 1),
                ("pos03", "The weather was mild. Many people lived there. Ada Lovelace was born in London.", 1),
            ],
            [("pos01", "pos02"), ("pos01", "pos03")],
        ),
        "position_i-f2": (
            "Who wrote Middlemarch?",
            [
                ("pos01", "Middlemarch was written by George Eliot. It sold well. Readers liked it.", 1),
                ("pos02", "It sold well. Middlemarch was written by George Eliot. Readers liked it.", 1),
            ],
            [("pos01", "pos02")],
        ),
    },
    "foil": {
        "foil-f1": (
            "Which country is Lyon in?",
            [
                ("foil", "Lyon Lyon. Lyon is a large city with many bridges.", 0),
                ("evidence", "Rivers run fast. Lyon is in France. Birds sing at dawn.", 1),
            ],
            [("foil", "evidence")],
        ),
        "foil-f2": (
            "What is the capital of Peru?",
            [
                ("foil", "Peru Peru. Peru has high mountains and old roads.", 0),
                ("evidence", "Boats sail north. The capital of Peru is Lima. Snow falls late.", 1),
            ],
            [("foil", "evidence")],
        ),
    },
}


def colder_folder(root: Path) -> Path:
    docs, queries, qrels = [], [], []
    for setting, probes in PROBES.items():
        for qid, (question, variants, pairs) in probes.items():
            for name, text, relevant in variants:
                docs.append(
                    {
                        "doc_id": f"{qid}-{name}",
                        "title": "",
                        "text": text,
                        "lang": "en",
                        "domain": "wikipedia",
                        "setting": setting,
                    }
                )
                qrels.append({"query_id": qid, "doc_id": f"{qid}-{name}", "score": relevant})
            queries.append(
                {
                    "query_id": qid,
                    "text": question,
                    "doc_id": f"{qid}-{variants[-1][0]}",
                    "lang": "en",
                    "setting": setting,
                    "pairs": [{"doc_a": f"{qid}-{a}", "doc_b": f"{qid}-{b}"} for a, b in pairs],
                }
            )
    bench = Bench.of(
        corpus=pl.DataFrame(docs),
        queries=pl.DataFrame(queries, schema_overrides={"pairs": PAIR_DTYPE}),
        qrels=pl.DataFrame(qrels),
    )
    folder = root / "colder"
    write_beir(bench, folder)
    publish_folder(folder)
    return folder


def grid_folder(root: Path) -> Path:
    """The depth_grid stage over a built folder: one question at depths 0 and 1 of 12- and 24-word documents."""
    from tests.stages.test_depth_grid import tiny_bench

    write_beir(tiny_bench(), root / "built")
    recipe = root / "regrid.yaml"
    recipe.write_text(
        f"name: regrid\nsources: []\ntokenizer: {{kind: words}}\nstages:\n"
        f"  - from_built: {{path: {root / 'built'}}}\n"
        "  - depth_grid: {depths: [0, 1], lengths: [12, 24], distractors: 0}\n"
    )
    result = CliRunner().invoke(
        app, ["build", str(recipe), "--out", str(root / "grid"), "--run-dir", str(root / "runs")]
    )
    assert result.exit_code == 0, result.output
    return root / "grid"


LANGS = {
    "en": ["The river Thames flows through London.", "Paris is the capital of France."],
    "fra-Latn": ["La Tamise traverse Londres.", "Paris est la capitale de la France."],
}
QUESTIONS = {
    "en": ["Which river flows through London?", "What is the capital of France?"],
    "fra-Latn": ["Quel fleuve traverse Londres ?", "Quelle est la capitale de la France ?"],
}


def multilingual_folder(root: Path) -> Path:
    docs, queries, qrels = [], [], []
    for lang, texts in LANGS.items():
        for i, (text, question) in enumerate(zip(texts, QUESTIONS[lang])):
            docs.append({"doc_id": f"d{i}@{lang}", "title": "", "text": text, "lang": lang, "domain": "web"})
            queries.append({"query_id": f"q{i}@{lang}", "text": question, "doc_id": f"d{i}@{lang}", "lang": lang})
            qrels.append({"query_id": f"q{i}@{lang}", "doc_id": f"d{i}@{lang}", "score": 1})
    folder = root / "multilingual"
    write_beir(Bench.of(corpus=pl.DataFrame(docs), queries=pl.DataFrame(queries), qrels=pl.DataFrame(qrels)), folder)
    publish_folder(folder)
    return folder
