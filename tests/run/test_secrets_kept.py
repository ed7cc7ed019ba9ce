"""Secrets in a model's base_url reach no file, log or listing: a build against the local
server with credentials in the URL's query leaves none of them in the output folder, the
run folder (the LLM cache's bytes included) or `build-bench cache`'s output; a base_url
with `user:password@` is refused before anything is sent."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from builder.cli import app
from builder.util.secrets import mask_mapping, mask_string
from tests.fixtures.scripted_llm import scripted_llm
from tests.support.openai_server import Reply

RECIPE = """
name: secrets_e2e
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2, max_reasks: 0, max_retries: 1,
        backoff_initial_s: 0.01, backoff_max_s: 0.05, timeout_s: 2.0}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 4}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
  - localize_spans: {llm: gen, questions_per_call: 2}
"""
SECRETS = ("QuerySecret1", "QuerySecret2", "PassSecret3")
runner = CliRunner()


def _invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def _leaks(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [s for s in SECRETS if s.encode() in data]


def _leaks_in(folder: Path) -> dict[str, list[str]]:
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and (leaked := _leaks(path.read_bytes())):
            found[str(path)] = leaked
    return found


def test_query_credentials_in_base_url_stay_out_of_every_file_and_listing(write_recipe, fake_openai, tmp_path):
    srv = fake_openai(responder=scripted_llm)
    recipe = write_recipe(RECIPE.replace("BASE", f"{srv.base_url}?api_key=QuerySecret1&token=QuerySecret2"))
    built = _invoke("build", str(recipe), "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out"))
    assert built.exit_code == 0, built.output
    assert srv.request_count > 0
    assert _leaks(built.output) == []
    assert (tmp_path / "out" / "queries.parquet").is_file()
    assert _leaks_in(tmp_path / "out") == {}
    assert _leaks_in(tmp_path / "runs") == {}  # llm_cache.sqlite, its journal, checkpoints
    shown = _invoke("cache", str(tmp_path / "runs"))
    assert shown.exit_code == 0, shown.output
    assert "api_key=***" in shown.stdout and "token=***" in shown.stdout
    assert _leaks(shown.stdout) == [] and _leaks(shown.stderr) == []

    # A cache written before answers were stored masked: its listing is masked all the same.
    with sqlite3.connect(tmp_path / "runs" / "llm_cache.sqlite") as db:
        db.execute("UPDATE answers SET base_url = ?", (f"{srv.base_url}?api_key=QuerySecret1",))
    shown = _invoke("cache", str(tmp_path / "runs"))
    assert shown.exit_code == 0 and "api_key=***" in shown.stdout and _leaks(shown.output) == []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_that_cannot_be_reached_is_named_without_its_credentials(write_recipe, tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1?api_key=QuerySecret1"
    recipe = write_recipe(RECIPE.replace("BASE", url))
    built = _invoke("build", str(recipe), "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out"))
    assert built.exit_code != 0
    assert "api_key=***" in built.output  # the failure still says which server
    assert _leaks(built.output) == []
    assert _leaks_in(tmp_path / "runs") == {}


@pytest.mark.parametrize("command", ["validate", "plan", "build"])
def test_a_base_url_with_a_password_is_refused_before_anything_is_sent(
    write_recipe, fake_openai, tmp_path, command: str
):
    srv = fake_openai(responder=scripted_llm)
    recipe = write_recipe(RECIPE.replace("BASE", srv.base_url.replace("http://", "http://user:PassSecret3@")))
    extra = ["--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out")] if command == "build" else []
    done = _invoke(command, str(recipe), *extra)
    assert done.exit_code == 2, done.output
    assert "Traceback" not in done.output
    assert "models.gen.base_url" in done.stderr and "user:password@" in done.stderr
    assert "api_key_env" in done.stderr  # what to do instead
    assert _leaks(done.output) == []
    assert srv.request_count == 0
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("http://user:pw@host:8000/v1", "http://***@host:8000/v1"),
        ("https://host/v1?api_key=abc&token=def&model=m", "https://host/v1?api_key=***&token=***&model=m"),
        ("https://host/v1?X-Amz-Signature=abc", "https://host/v1?X-Amz-Signature=***"),
        ("https://host/v1?max_tokens=12", "https://host/v1?max_tokens=12"),
        ("key " + "sk-" + "abcdefghijklmnopqrstuv" + " used", "key *** used"),  # joined: no key-shaped literal
    ],
)
def test_mask_string(text: str, masked: str) -> None:
    assert mask_string(text) == masked


def test_mask_mapping_masks_headers_and_urls_inside() -> None:
    headers = {
        "Authorization": "Bearer abc",
        "X-Api-Key": "abc",
        "Content-Type": "application/json",
        "Referer": "http://u:p@host/",
    }
    assert mask_mapping(headers) == {
        "Authorization": "***",
        "X-Api-Key": "***",
        "Content-Type": "application/json",
        "Referer": "http://***@host/",
    }


def test_a_key_the_server_quotes_back_is_masked_whatever_its_shape(write_recipe, fake_openai, tmp_path):
    # Not shaped like any well-known token (no sk-, hf_, ghp_): only its value gives it away.
    key = "Zq9plainKEYvalue42"
    quoted = json.dumps(
        {"error": {"message": f"Incorrect API key provided: Bearer {key}. Check it.", "type": "invalid_request_error"}}
    )
    srv = fake_openai(responder=lambda body: Reply(status=401, body=quoted))
    recipe = write_recipe(
        RECIPE.replace("BASE", srv.base_url).replace(
            "max_concurrency: 2,", "max_concurrency: 2, api_key_env: BB_QUOTED_KEY,"
        )
    )
    for extra in ([], ["--allow-empty"]):
        built = runner.invoke(
            app,
            ["build", str(recipe), "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), *extra],
            env={"BB_QUOTED_KEY": key},
        )
        assert srv.request_count > 0
        assert "Incorrect API key provided" in built.output, built.output
        assert key not in built.output, built.output
    found = [
        str(p) for p in sorted(tmp_path.rglob("*")) if p.is_file() and key.encode() in p.read_bytes() and p != recipe
    ]
    assert found == []
