"""End to end: recipes/squad_posq.yaml through the real runner, on the shared SQuAD dev half."""

from __future__ import annotations

import json

from builder.io.built_folder import read_beir
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import REPO, SHARED_INPUTS

# Answer-start buckets of the 2,910 answerable questions (half-open, 100 characters wide).
EXPECTED_BUCKETS = {"0-100": 615, "100-200": 487, "200-300": 395, "300-400": 366, "400-500": 328, "500+": 719}


def test_squad_posq_recipe_builds(tmp_path, shared_data, minilm_tokenizer, monkeypatch):
    monkeypatch.chdir(REPO)  # the shared data paths are relative to the repository root
    loaded = parse_recipe(REPO / "recipes" / "squad_posq.yaml", SHARED_INPUTS["squad_posq"])
    result = Runner(loaded, RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    bench = read_beir(result.out_dir)
    assert bench.counts() == {"docs": 646, "queries": 2910, "qrels": 2910}
    stats = json.loads((result.out_dir / "stats.json").read_text())
    assert stats["stages"][1]["queries_per_char_bucket"] == EXPECTED_BUCKETS
    texts = dict(bench.corpus.select("doc_id", "text").iter_rows())
    for doc_id, answer, spans in bench.queries.select("doc_id", "answer", "spans").iter_rows():
        assert texts[doc_id][spans[0]["start"] : spans[0]["end"]] == answer
    first = json.loads((result.out_dir / "queries.jsonl").open().readline())
    assert {"_id", "text", "char_bucket", "answer", "spans"} <= first.keys()
