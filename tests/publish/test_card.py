"""The data card: front matter that parses, sections from what ran, secrets masked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from builder.publish.beir import write_beir
from builder.publish.masking import mask_mapping, mask_recipe_text
from builder.publish.outputs import publish_outputs
from builder.recipe.model import parse_recipe
from builder.resources import shipped_recipes
from tests.publish.conftest import NO_LLM, PROMPT_SHA, mini_bench, mini_run_stats

PNG = b"\x89PNG\r\n\x1a\n"


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    head, _, _ = card[4:].partition("\n---\n")
    return yaml.safe_load(head)


def test_quickstart_card_front_matter(quickstart_build):
    card = (quickstart_build["folder"] / "README.md").read_text(encoding="utf-8")
    meta = front_matter(card)
    assert meta["task_categories"] == ["text-retrieval"]
    assert meta["license"] == "unknown" and meta["language"] == ["en"]
    assert meta["size_categories"] == ["n<1K"]
    names = [c["config_name"] for c in meta["configs"]]
    assert names == ["default", "corpus", "queries", "qrels"]
    info = {i["config_name"]: i for i in meta["dataset_info"]}
    bench = quickstart_build["bench"]
    assert info["corpus"]["splits"][0]["num_examples"] == bench.corpus.height
    assert info["queries"]["splits"][0]["num_examples"] == bench.queries.height
    assert [f["name"] for f in info["qrels"]["features"]] == ["query-id", "corpus-id", "score"]


def test_quickstart_card_body(quickstart_build):
    card = (quickstart_build["folder"] / "README.md").read_text(encoding="utf-8")
    for stage in quickstart_build["loaded"].recipe.stage_objects():
        assert f"_{stage.name}` parameters:" in card
    assert "| `00_load` |" in card
    assert "PosIR: Position-Aware Heterogeneous Information Retrieval Benchmark" in card
    assert "@misc{zeng2026posir," in card
    assert "name: quickstart" in card  # the recipe is embedded
    assert "![position_histogram.png](plots/position_histogram.png)" in card


def test_quickstart_plots_are_written(quickstart_build):
    folder = quickstart_build["folder"]
    plots = quickstart_build["published"].plots
    assert plots["skipped"] == {}
    for rel in plots["files"].values():
        data = (folder / rel).read_bytes()
        assert data.startswith(PNG) and len(data) > 5_000


def test_plots_are_skipped_with_a_note_when_there_are_no_positions(tmp_path):
    bench = mini_bench(positions=False)
    folder = write_beir(bench, tmp_path / "out")
    published = publish_outputs(bench, folder, mini_run_stats(), None)
    assert set(published.plots["files"]) == {"length_histogram.png"}
    assert "no query carries a span position" in published.plots["skipped"]["position_histogram.png"]
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "`position_histogram.png` not drawn" in card
    assert "No query carries an evidence span yet" in card
    assert not (folder / "plots" / "position_histogram.png").exists()


def test_card_lists_prompt_hashes_llm_usage_and_drops(mini_folder):
    publish_outputs(mini_bench(), mini_folder, mini_run_stats(), None)
    card = (mini_folder / "README.md").read_text(encoding="utf-8")
    assert f"| `02_generate_queries` | `posir_generate` | `{PROMPT_SHA}` |" in card
    assert "| `02_generate_queries` | 4 | 1 | 0 | 1 | 100 | 20 |" in card
    assert "| `01_sample_by_length` | doc | `not_sampled` | 2 |" in card
    assert "## Recipe" not in card  # no recipe at hand, nothing to embed
    meta = front_matter(card)
    assert meta["language"] == ["en", "zh"]


@pytest.mark.parametrize("recipe", shipped_recipes(), ids=lambda p: p.stem)
def test_card_renders_for_every_shipped_recipe(recipe: Path, tmp_path):
    """Each shipped recipe's stages, parameters and papers, over a quickstart-sized bench."""
    loaded = parse_recipe(recipe)
    stages = [{"stage": "00_load", "docs_in": 4, "docs_out": 4, "queries_in": 0, "queries_out": 0}]
    stages += [{"stage": f"{i:02d}_{s.name}", "docs_in": 4, "docs_out": 4, "queries_in": 5, "queries_out": 5}
               for i, s in enumerate(loaded.recipe.stage_objects(), start=1)]
    bench = mini_bench()
    folder = write_beir(bench, tmp_path / "out")
    publish_outputs(bench, folder, {"recipe": loaded.recipe.name, "stages": stages}, loaded)
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert front_matter(card)["pretty_name"] == loaded.recipe.name
    assert card.count(" parameters: `{") == len(stages) - 1
    assert "## Citation" in card and "```yaml" in card


def test_recipe_secrets_are_masked_and_env_names_kept():
    text = (
        "models:\n"
        "  gen: {model: m, api_key: sk-live-abcdefghijklmnopqrstuv, api_key_env: OPENAI_API_KEY}\n"
        "  judge:\n"
        "    model: j  # comment kept\n"
        "    hf_token: \"hf_abcdefghijklmnopqrstuvwxyz\"\n"
        "    password: |\n      two\n      lines\n"
        "    token: ${HF_TOKEN}\n"
        "    max_tokens: 512\n"
    )
    masked = mask_recipe_text(text)
    assert "sk-live" not in masked and "hf_abc" not in masked and "two" not in masked
    assert "# comment kept" in masked
    data = yaml.safe_load(masked)
    assert data["models"]["gen"] == {"model": "m", "api_key": "***", "api_key_env": "OPENAI_API_KEY"}
    assert data["models"]["judge"]["token"] == "${HF_TOKEN}"
    assert data["models"]["judge"]["max_tokens"] == 512
    assert data["models"]["judge"]["password"] == "***"
    assert mask_mapping({"a": [{"secret_key": "x", "n_tokens": 3}]}) == {"a": [{"secret_key": "***", "n_tokens": 3}]}


def test_card_shows_kept_share_by_position_third_per_qc_stage(mini_folder):
    stats = mini_run_stats()
    stats["stages"].append({
        "stage": "03_span_contrast", "docs_in": 4, "docs_out": 4, "queries_in": 5, "queries_out": 3,
        "dropped": {"contrast_not_higher:bm25": 2}, "llm": NO_LLM, "prompts": {},
        "kept_by_third": {"beginning": {"in": 2, "kept": 2, "share": 1.0},
                          "middle": {"in": 1, "kept": 1, "share": 1.0},
                          "end": {"in": 2, "kept": 0, "share": 0.0}}})
    publish_outputs(mini_bench(), mini_folder, stats, None)
    card = (mini_folder / "README.md").read_text(encoding="utf-8")
    assert "### Quality control by evidence position" in card
    assert "| `03_span_contrast` | beginning 2/2 (100%) · middle 1/1 (100%) · end 0/2 (0%) |" in card
    assert "| `02_generate_queries` | beginning" not in card
