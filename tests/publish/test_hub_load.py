"""Two releases pushed with `build-bench push` to the local Hub-like server, each read
back by `datasets.load_dataset(repo, config, revision=tag)` through `HF_ENDPOINT`."""

from __future__ import annotations

import json

import polars as pl
import typer
from typer.testing import CliRunner

from builder.bench import Bench
from builder.publish.beir import write_beir
from builder.publish.cli import push_command
from builder.publish.outputs import publish_outputs
from tests.publish.conftest import mini_bench, mini_run_stats
from tests.publish.fake_hub import load_with_datasets

REPO = "org/bench"
app = typer.Typer()
app.command()(push_command)


def _grown(bench: Bench) -> Bench:
    """The mini bench with one more document and one more query on it."""
    doc = pl.DataFrame(
        {"doc_id": ["d5"], "title": ["five"], "text": ["e" * 800], "lang": ["en"], "domain": ["web"], "n_tokens": [250]}
    )
    query = pl.DataFrame(
        {"query_id": ["q6"], "text": ["Where is E?"], "doc_id": ["d5"], "lang": ["en"], "rel_pos": [0.4]}
    )
    return bench.replace(
        corpus=pl.concat([bench.corpus, doc]),
        queries=pl.concat([bench.queries, query]),
        qrels=pl.concat([bench.qrels, pl.DataFrame({"query_id": ["q6"], "doc_id": ["d5"], "score": [1]})]),
    )


def _inputs(prompt_sha: str, model: str) -> dict:
    return {
        "build_bench": "0.1.0",
        "recipe": {"name": "mini", "models": {"gen": {"model": model}}},
        "sources": [{"type": "jsonl", "path": "docs.jsonl", "sha256": "0" * 64}],
        "tokenizer": "words",
        "models": {"gen": model},
        "rerankers": {},
        "prompts": {"02_generate_queries": {"posir_generate": prompt_sha}},
    }


def _eval(ndcg: float, psi: float) -> dict:
    """The figures of eval.json that a changelog compares."""
    return {"retrievers": {"bm25": {"overall": {"ndcg@10": ndcg}, "groupings": {"position_tag": {"psi": psi}}}}}


def _folder(bench: Bench, where, inputs: dict, figures: dict):
    run = {**mini_run_stats(), "inputs": inputs}
    folder = write_beir(bench, where, stats=run)
    publish_outputs(bench, folder, run, None)
    card = folder / "README.md"  # push needs a licence; a recipe would set card.license
    card.write_text(card.read_text(encoding="utf-8").replace("license: unknown", "license: mit", 1), encoding="utf-8")
    (folder / "eval").mkdir()
    (folder / "eval" / "eval.json").write_text(json.dumps(figures))
    return folder


def test_two_tagged_pushes_load_back_by_revision(hub, tmp_path):
    releases = (
        ("v1.0.0", mini_bench(), _inputs("ab" * 32, "gpt-4o-mini"), _eval(0.5, 0.2)),
        ("v1.1.0", _grown(mini_bench()), _inputs("cd" * 32, "gpt-4.1-mini"), _eval(0.55, 0.125)),
    )
    for tag, bench, inputs, figures in releases:
        folder = _folder(bench, tmp_path / tag, inputs, figures)
        pushed = CliRunner().invoke(app, [str(folder), "--repo", REPO, "--tag", tag])
        assert pushed.exit_code == 0, pushed.output
    repo = hub.repos[REPO]
    assert list(repo.tags) == ["v1.0.0", "v1.1.0"] and len(repo.commits) == 2
    loaded = load_with_datasets(
        hub.url,
        REPO,
        [(c, t) for t in ("v1.0.0", "v1.1.0") for c in ("corpus", "queries")] + [("default", "v1.1.0")],
        tmp_path / "hf_home",
    )
    assert sorted(r["_id"] for r in loaded["corpus", "v1.0.0"]) == ["d1", "d2", "d3", "d4"]
    assert sorted(r["_id"] for r in loaded["queries", "v1.0.0"]) == ["q1", "q2", "q3", "q4", "q5"]
    assert sorted(r["_id"] for r in loaded["corpus", "v1.1.0"]) == ["d1", "d2", "d3", "d4", "d5"]
    assert sorted(r["_id"] for r in loaded["queries", "v1.1.0"]) == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert {"query-id": "q6", "corpus-id": "d5", "score": 1} in loaded["default", "v1.1.0"]


def test_the_second_release_says_what_changed_and_links_the_first(hub, tmp_path):
    test_two_tagged_pushes_load_back_by_revision(hub, tmp_path)
    files = hub.repos[REPO].commits[1]["files"]
    changelog = files["CHANGELOG.md"].decode()
    assert "| documents | 4 | 5 | 1 | 0 | 0 |" in changelog
    assert "| queries | 5 | 6 | 1 | 0 | 0 |" in changelog
    assert "| en/- | 1 | 0 | 0 |" in changelog  # the new query, in its language; it has no position tag
    assert "| models.gen | `gpt-4o-mini` | `gpt-4.1-mini` |" in changelog
    assert f"| prompts.02_generate_queries.posir_generate | `{'ab' * 32}` | `{'cd' * 32}` |" in changelog
    assert "| bm25 | nDCG@10 | 0.5000 | 0.5500 |" in changelog
    assert "| bm25 | PSI position_tag | 0.2000 | 0.1250 |" in changelog
    assert "eval/eval.json" in files
    card = files["README.md"].decode()
    assert f"## Previous release\n\n[v1.0.0]({hub.url}/datasets/{REPO}/tree/v1.0.0)" in card
