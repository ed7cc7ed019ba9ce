"""The data card: front matter that parses, sections from what ran, secrets masked."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml

from builder.bench import Bench
from builder.publish.beir import write_beir
from builder.publish.masking import mask_recipe_text
from builder.publish.outputs import publish_outputs
from builder.recipe.model import parse_recipe
from builder.textutil.languages import iso_639_1
from builder.util.resources import shipped_recipes
from builder.util.secrets import mask_mapping
from tests.conftest import require_recipe_extras
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
    assert meta["license"] == "other" and meta["license_name"] == "psf-2.0" and meta["language"] == ["en"]
    assert meta["size_categories"] == ["n<1K"]
    names = [c["config_name"] for c in meta["configs"]]
    assert names == ["default", "corpus", "queries", "qrels", "positions", "documents", "drops"]
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
    assert "Licence: `other` (`psf-2.0`, https://docs.python.org/3/license.html)." in card
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
    assert "| `02_generate_queries` | 4 | 1 | 0 | 1 | 100 | 0 | 20 |" in card
    assert "| `01_sample_by_length` | doc | `not_sampled` | 2 |" in card
    assert "## Recipe" not in card  # no recipe at hand, nothing to embed
    meta = front_matter(card)
    assert meta["language"] == ["en", "zh"]


@pytest.mark.parametrize("recipe", shipped_recipes(), ids=lambda p: p.stem)
def test_card_renders_for_every_shipped_recipe(recipe: Path, tmp_path):
    """Each shipped recipe's stages, parameters and papers, over a quickstart-sized bench."""
    require_recipe_extras(recipe)
    loaded = parse_recipe(recipe)
    stages = [{"stage": "00_load", "docs_in": 4, "docs_out": 4, "queries_in": 0, "queries_out": 0}]
    stages += [
        {"stage": f"{i:02d}_{s.name}", "docs_in": 4, "docs_out": 4, "queries_in": 5, "queries_out": 5}
        for i, s in enumerate(loaded.recipe.stage_objects(), start=1)
    ]
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
        '    hf_token: "hf_abcdefghijklmnopqrstuvwxyz"\n'
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


SECRET_URL = "https://alice:pa55word@llm.example.org/v1?api_key=k3y&model=x&token=t0k&X-Amz-Signature=s1g"
MASKED_URL = "https://***@llm.example.org/v1?api_key=***&model=x&token=***&X-Amz-Signature=***"


def test_url_credentials_secret_parameters_and_short_hf_tokens_are_masked():
    text = (
        "models:\n"
        f"  gen: {{model: m, base_url: '{SECRET_URL}'}}\n"
        "sources:\n"
        "  - {type: hf, path: org/ds, revision: hf_Ab12cd34}\n"
        "  - {type: jsonl, path: 'http://u@files.example.org/x.jsonl?sig=zz9&page=2'}\n"
        "push: {repo: org/out, hf_token_env: HF_TOKEN}\n"
    )
    masked = mask_recipe_text(text)
    for secret in ("alice", "pa55word", "k3y", "t0k", "s1g", "hf_Ab12cd34", "zz9", "u@"):
        assert secret not in masked
    data = yaml.safe_load(masked)
    assert data["models"]["gen"]["base_url"] == MASKED_URL
    assert data["sources"][1]["path"] == "http://***@files.example.org/x.jsonl?sig=***&page=2"
    assert data["push"] == {"repo": "org/out", "hf_token_env": "HF_TOKEN"}  # key names are not tokens
    assert mask_mapping(yaml.safe_load(text)) == data


def test_card_shows_the_effective_recipe_masked_and_the_file_as_written(tmp_path, monkeypatch):
    """After --set and ${ENV}, the card shows what ran; the file text is kept, second.
    (A base_url with user:password@ is refused before a build: tests/run/test_secrets_kept.py.)"""
    from typer.testing import CliRunner

    from builder.cli import app
    from builder.util.resources import find_recipe

    monkeypatch.setenv("BB_CARD_URL", SECRET_URL.replace("alice:pa55word@", ""))
    recipe = tmp_path / "quickstart.yaml"
    recipe.write_text(
        find_recipe("quickstart").read_text(encoding="utf-8")
        + ("models:\n  judge: {model: j, base_url: '${BB_CARD_URL}'}\n"),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "build",
            str(recipe),
            "--out",
            str(out),
            "--run-dir",
            str(tmp_path / "runs"),
            "--set",
            "stages.sample_by_length.n_docs=12",
            "--set",
            "description=overridden",
            "--set",
            "models.gen.model=g",
            "--set",
            "models.gen.base_url=http://h:8000/v1?key=hunter2",
        ],
    )
    assert result.exit_code == 0, result.output
    card = (out / "README.md").read_text(encoding="utf-8")
    for secret in ("hunter2", "k3y", "t0k", "s1g"):
        assert secret not in card
    section = card.split("## Recipe", 1)[1]
    effective, _, written = section.partition("as written")
    ran = yaml.safe_load(effective.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert ran["stages"][0]["sample_by_length"]["n_docs"] == 12
    assert ran["description"] == "overridden"
    assert ran["models"]["gen"]["base_url"] == "http://h:8000/v1?key=***"
    assert ran["models"]["judge"]["base_url"] == MASKED_URL.replace("***@", "")
    file_text = written.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert "n_docs: 36" in file_text and "# Quickstart:" in file_text
    assert "${BB_CARD_URL}" in file_text


def test_card_language_holds_iso_639_1_codes_and_keeps_script_tags(tmp_path):
    bench = mini_bench()
    langs = {"en": "eng-Latn", "zh": "cmn-Hans"}
    bench = Bench.of(
        bench.corpus.with_columns(pl.col("lang").replace_strict(langs)),
        bench.queries.with_columns(pl.col("lang").replace_strict(langs)),
        bench.qrels,
        bench.drops,
    )
    folder = write_beir(bench, tmp_path / "mini", stats=mini_run_stats())
    published = publish_outputs(bench, folder, mini_run_stats(), None)
    meta = front_matter((folder / "README.md").read_text(encoding="utf-8"))
    assert meta["language"] == ["en", "zh"]
    assert meta["language_details"] == "cmn-Hans, eng-Latn"
    assert {"eng-Latn-corpus", "cmn-Hans-queries"} <= set(published.configs)


@pytest.mark.parametrize(
    ("lang", "code"),
    [
        ("fra-Latn", "fr"),
        ("cmn-Hans", "zh"),
        ("cmn-Hant", "zh"),
        ("en", "en"),
        ("zh-cn", "zh"),
        ("xyz-Latn", None),
        ("und", None),
    ],
)
def test_iso_639_1_codes(lang, code):
    assert iso_639_1(lang) == code


def test_card_shows_kept_share_by_position_third_per_qc_stage(mini_folder):
    stats = mini_run_stats()
    stats["stages"].append(
        {
            "stage": "03_span_contrast",
            "docs_in": 4,
            "docs_out": 4,
            "queries_in": 5,
            "queries_out": 3,
            "dropped": {"contrast_not_higher:bm25": 2},
            "llm": NO_LLM,
            "prompts": {},
            "kept_by_third": {
                "beginning": {"in": 2, "kept": 2, "share": 1.0},
                "middle": {"in": 1, "kept": 1, "share": 1.0},
                "end": {"in": 2, "kept": 0, "share": 0.0},
            },
        }
    )
    publish_outputs(mini_bench(), mini_folder, stats, None)
    card = (mini_folder / "README.md").read_text(encoding="utf-8")
    assert "### Quality control by evidence position" in card
    assert "| `03_span_contrast` | beginning 2/2 (100%) · middle 1/1 (100%) · end 0/2 (0%) |" in card
    assert "| `02_generate_queries` | beginning" not in card
