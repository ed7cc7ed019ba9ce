"""Two releases pushed with `build-bench push` to the local Hub-like server, each read
back by `datasets.load_dataset(repo, config, revision=tag)` through `HF_ENDPOINT`."""

from __future__ import annotations

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
    doc = pl.DataFrame({"doc_id": ["d5"], "title": ["five"], "text": ["e" * 800], "lang": ["en"],
                        "domain": ["web"], "n_tokens": [250]})
    query = pl.DataFrame({"query_id": ["q6"], "text": ["Where is E?"], "doc_id": ["d5"], "lang": ["en"],
                          "rel_pos": [0.4]})
    return bench.replace(corpus=pl.concat([bench.corpus, doc]), queries=pl.concat([bench.queries, query]),
                         qrels=pl.concat([bench.qrels, pl.DataFrame({"query_id": ["q6"], "doc_id": ["d5"], "score": [1]})]))


def _folder(bench: Bench, where):
    folder = write_beir(bench, where, stats=mini_run_stats())
    publish_outputs(bench, folder, mini_run_stats(), None)
    return folder


def test_two_tagged_pushes_load_back_by_revision(hub, tmp_path):
    for tag, bench in (("v1.0.0", mini_bench()), ("v1.1.0", _grown(mini_bench()))):
        pushed = CliRunner().invoke(app, [str(_folder(bench, tmp_path / tag)), "--repo", REPO, "--tag", tag])
        assert pushed.exit_code == 0, pushed.output
    repo = hub.repos[REPO]
    assert list(repo.tags) == ["v1.0.0", "v1.1.0"] and len(repo.commits) == 2
    loaded = load_with_datasets(hub.url, REPO, [(c, t) for t in ("v1.0.0", "v1.1.0") for c in ("corpus", "queries")]
                                + [("default", "v1.1.0")], tmp_path / "hf_home")
    assert sorted(r["_id"] for r in loaded["corpus", "v1.0.0"]) == ["d1", "d2", "d3", "d4"]
    assert sorted(r["_id"] for r in loaded["queries", "v1.0.0"]) == ["q1", "q2", "q3", "q4", "q5"]
    assert sorted(r["_id"] for r in loaded["corpus", "v1.1.0"]) == ["d1", "d2", "d3", "d4", "d5"]
    assert sorted(r["_id"] for r in loaded["queries", "v1.1.0"]) == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert {"query-id": "q6", "corpus-id": "d5", "score": 1} in loaded["default", "v1.1.0"]
