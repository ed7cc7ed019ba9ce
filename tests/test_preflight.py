"""Preflight: missing inputs and models are found by `validate`, `plan` and a build before
anything is spent, one line each with the recipe line at fault, exit 2."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.recipe.model import parse_recipe
from builder.recipe.preflight import model_problem, preflight
from builder.util.install_hint import install_command
from tests.conftest import REPO

MISSING_INPUTS = """name: t
sources:
  - {type: jsonl, path: nowhere/docs.jsonl}
stages:
  - from_qa:
      path:
        - also/missing.json
        - qa.json
"""


def test_validate_names_each_missing_local_input_and_exits_2(tmp_path, monkeypatch):
    (tmp_path / "qa.json").write_text('{"data": []}')
    (tmp_path / "r.yaml").write_text(MISSING_INPUTS)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate", "r.yaml"])
    assert result.exit_code == 2
    lines = [" ".join(line.split()) for line in result.output.splitlines()]
    assert lines[0] == "recipe r.yaml is not valid:"
    assert lines[1].startswith("r.yaml:3: sources.0.path: input not found: nowhere/docs.jsonl")
    assert lines[2].startswith("r.yaml:7: stages.0.from_qa.path.0: input not found: also/missing.json")
    assert len([x for x in lines if "input not found" in x]) == 2  # qa.json exists


def test_a_build_with_a_missing_input_spends_nothing(tmp_path, monkeypatch):
    (tmp_path / "r.yaml").write_text(MISSING_INPUTS)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["build", "r.yaml", "--run-dir", "runs"])
    assert result.exit_code == 2 and "input not found: nowhere/docs.jsonl" in result.output
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


def test_validate_goes_on_to_the_next_recipe_after_a_bad_one(tmp_path, monkeypatch):
    (tmp_path / "bad.yaml").write_text(MISSING_INPUTS)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate", "bad.yaml", str(REPO / "recipes" / "quickstart.yaml")])
    assert result.exit_code == 2
    assert "input not found" in result.output and "ok " in result.output and "quickstart.yaml" in result.output


def test_remote_inputs_are_left_to_the_build_when_online(tmp_path, monkeypatch):
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    path = tmp_path / "r.yaml"
    path.write_text("name: t\nstages:\n  - from_qa: {path: 'hf://datasets/org/qa@abc123/dev.parquet'}\n")
    assert preflight(parse_recipe(path), network=False) == []


def test_offline_a_remote_input_must_be_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "r.yaml"
    path.write_text("name: t\nstages:\n  - from_qa: {path: 'hf://datasets/org/not-cached@abc123/dev.parquet'}\n")
    (problem,) = preflight(parse_recipe(path), network=False)
    assert problem.loc == ("stages", 0, "from_qa", "path") and problem.line == 3
    assert problem.message.startswith(
        "hf://datasets/org/not-cached@abc123/dev.parquet is not in the Hugging "
        "Face cache and the Hub cannot be reached (offline mode is on)"
    )


def test_a_package_model_that_is_not_installed_names_the_install(monkeypatch):
    message = model_problem("pkg:no_such_model_package/model", "reranker 'x'", network=False)
    assert message == (
        "reranker 'x': pkg:no_such_model_package/model needs the Python package "
        "no-such-model-package, which is not installed; install it with: "
        "pip install no-such-model-package"
    )


def test_a_local_model_folder_that_is_missing_is_named(tmp_path):
    assert model_problem(str(tmp_path), "tokenizer", network=True) is None
    gone = str(tmp_path / "gone" / "model")
    assert model_problem(gone, "tokenizer", network=True) == (
        f"tokenizer: {gone} is neither a local file or folder nor a Hugging Face model id"
    )


def test_offline_a_hub_model_must_be_in_the_cache(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model_problem("org/never-downloaded", "reranker 'r'", network=True) == (
        "reranker 'r': org/never-downloaded is not in the Hugging Face cache and offline mode is on; "
        "download it where there is network (hf download org/never-downloaded), or name a local folder"
    )


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """Answers /api/models/<org>/<name> the way the Hub does for a public, a gated and a
    missing model."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        name = self.path.split("?")[0].removeprefix("/api/models/")
        if name == "org/public":
            body, status, code = json.dumps({"id": name, "sha": "0" * 40}).encode(), 200, None
        elif name == "org/gated":
            body, status, code = b'{"error": "gated"}', 403, "GatedRepo"
        else:
            body, status, code = b'{"error": "not found"}', 404, "RepoNotFound"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_hub(monkeypatch):
    from huggingface_hub import constants

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # read from the environment at import
    yield
    server.shutdown()


def test_plan_and_build_ask_the_hub_about_models_not_in_the_cache(fake_hub):
    assert model_problem("org/public", "reranker 'a'", network=True) is None
    assert model_problem("org/gated", "reranker 'b'", network=True) == (
        "reranker 'b': org/gated is gated on the Hub: accept its terms on its page and log in (hf auth login)"
    )
    assert model_problem("org/missing", "reranker 'c'", network=True) == (
        "reranker 'c': no model org/missing on the Hugging Face Hub (or it is private and you are not logged in)"
    )
    assert model_problem("org/missing", "reranker 'c'", network=False) is None  # validate stays offline


def test_plan_stops_on_a_missing_model_before_reading_anything(fake_hub, tmp_path, monkeypatch):
    (tmp_path / "r.yaml").write_text(
        "name: t\nsources: [{type: python_docs}]\n"
        "rerankers:\n  ce: {backend: cross_encoder, model: org/missing}\n"
        "stages:\n  - generate_queries: {mode: extractive}\n  - localize_spans: {}\n"
        "  - span_contrast: {rerankers: [ce]}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("builder.recipe.checks.missing_extra", lambda config: None)
    result = CliRunner().invoke(app, ["plan", "r.yaml"])
    assert result.exit_code == 2
    assert "r.yaml:4: rerankers.ce.model: reranker 'ce': no model org/missing" in " ".join(result.output.split())


def test_install_hint_names_the_checkout_it_runs_from(monkeypatch):
    monkeypatch.chdir(REPO)
    assert install_command("rerank") == 'pip install -e ".[rerank]"'
    monkeypatch.chdir(REPO / "builder")
    assert install_command("rerank") == 'pip install -e "..[rerank]"'


def test_install_hint_without_a_checkout_lists_the_packages(monkeypatch):
    from builder.util import install_hint

    monkeypatch.setattr(install_hint, "checkout_root", lambda: None)
    assert install_command("ray") == "pip install 'ray[data]'"
    assert install_command("rerank").startswith("pip install FlagEmbedding sentence-transformers torch")


def test_install_hint_packages_match_pyproject():
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    from builder.util.install_hint import EXTRA_PACKAGES

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, packages in EXTRA_PACKAGES.items():
        declared = [p.split(">=")[0] if "<" not in p else p for p in extras[extra]]
        assert packages == declared, extra


def test_plan_warns_when_a_stage_leaves_no_documents(tmp_path, monkeypatch):
    (tmp_path / "one.jsonl").write_text('{"id": "a", "text": "hello there"}\n')
    (tmp_path / "r.yaml").write_text(
        "name: z\nsources: [{type: jsonl, path: one.jsonl}]\n"
        "stages:\n  - sample_by_length: {n_docs: 5, buckets: [1000, 2000], weights: [1]}\n"
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["plan", "r.yaml"])
    assert result.exit_code == 0
    assert "warning: 01_sample_by_length leaves 0 documents out of 1: check its settings" in " ".join(
        result.output.split()
    )


def test_plan_says_when_a_stage_reads_files_it_does_not_count(tmp_path, monkeypatch):
    (tmp_path / "qa.json").write_text('{"data": []}')
    (tmp_path / "r.yaml").write_text("name: q\nstages:\n  - from_qa: {path: qa.json}\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["plan", "r.yaml"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "warning: 01_from_qa reads its own input files, which plan does not open" in text
    assert "00_load gets 0 documents" not in text


def test_every_shipped_recipe_reads_no_path_a_user_cannot_have():
    for path in sorted((REPO / "recipes").glob("*.yaml")):
        assert "../shared" not in Path(path).read_text(), path.name
