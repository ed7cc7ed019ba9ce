"""Stage contracts: a recipe whose stages come in an order that cannot work (a stage needs
what only a later stage provides) is refused by `validate`, `plan` and a build before
anything runs, one line per problem naming the stage's recipe line; and a build whose
queries end with no position at all is a failure, not a benchmark."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from builder.backends.llm import LLMUsage
from builder.bench import SPAN_DTYPE, Bench
from builder.cli import app
from builder.run.outcome import EmptyResult, check_result
from builder.stages import STAGES
from builder.stages.contracts import VOCABULARY
from builder.util.resources import find_recipe

runner = CliRunner()


def _reordered(text: str, order: list[int]) -> str:
    """The recipe text with its stage entries (each `  - name:` block) put in `order`."""
    head, _, body = text.partition("\nstages:\n")
    blocks: list[list[str]] = []
    for line in body.splitlines(keepends=True):
        if line.startswith("  - ") or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    return head + "\nstages:\n" + "".join("".join(blocks[i]) for i in order)


def _line_of(text: str, entry: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(f"  - {entry}:"))


def _problem_lines(output: str, path: Path) -> list[str]:
    flat = [" ".join(line.split()) for line in output.splitlines()]
    return [line for line in flat if line.startswith(f"{path}:")]


@pytest.fixture
def quickstart_localize_first(tmp_path: Path) -> Path:
    """The quickstart with localize_spans moved before generate_queries."""
    path = tmp_path / "quickstart_wrong_order.yaml"
    path.write_text(_reordered(find_recipe("quickstart").read_text(), [0, 2, 1]))
    return path


def test_validate_refuses_localize_before_generation_naming_the_stage_line(quickstart_localize_first):
    path = quickstart_localize_first
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    text = path.read_text()
    lines = _problem_lines(result.output, path)
    localize, generate = _line_of(text, "localize_spans"), _line_of(text, "generate_queries")
    # Without a model, localize_spans locates the generator's reference texts: a second need.
    assert [line.split(" (")[0] for line in lines] == [
        f"{path}:{localize}: stages.1.localize_spans: needs queries",
        f"{path}:{localize}: stages.1.localize_spans: needs reference_texts",
    ]
    for line in lines:
        assert f"generate_queries (stage 3, line {generate}) provides them" in line
    assert "Traceback" not in result.output


def test_plan_and_build_refuse_the_wrong_order_before_anything_runs(quickstart_localize_first, tmp_path):
    plan = runner.invoke(app, ["plan", str(quickstart_localize_first)])
    assert plan.exit_code == 2, plan.output
    build = runner.invoke(
        app,
        ["build", str(quickstart_localize_first), "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs")],
    )
    assert build.exit_code == 2, build.output
    assert "needs queries" in build.output
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


LLM_RECIPE = """name: wrong_order
seed: 3
sources: [{type: python_docs, domain: python}]
models:
  gen: {model: scripted, base_url: "BASE", max_concurrency: 2}
stages:
  - sample_by_length: {buckets: [200, 800, 4000], weights: [1, 1], n_docs: 4}
  - summarize: {llm: gen}
  - localize_spans: {llm: gen, questions_per_call: 3}
  - generate_queries: {llm: gen, questions_per_call: 2, calls_per_doc: 1}
"""


def test_an_llm_recipe_in_the_wrong_order_makes_no_llm_call(fake_openai, write_recipe, tmp_path):
    srv = fake_openai()
    path = write_recipe(LLM_RECIPE.replace("BASE", srv.base_url))
    result = runner.invoke(
        app, ["build", str(path), "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 2, result.output
    (line,) = _problem_lines(result.output, path)
    assert line.startswith(f"{path}:9: stages.2.localize_spans: needs queries")
    assert "generate_queries (stage 4, line 10) provides them" in line
    assert srv.request_count == 0


def test_chunked_generation_needs_a_summary_from_an_earlier_stage(write_recipe):
    path = write_recipe(
        LLM_RECIPE.replace("BASE", "http://127.0.0.1:9/v1")
        .replace("  - summarize: {llm: gen}\n", "")
        .replace("  - localize_spans: {llm: gen, questions_per_call: 3}\n", "")
        .replace("calls_per_doc: 1}", "calls_per_doc: 1, mode: chunked}\n  - summarize: {llm: gen}")
    )
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    (line,) = _problem_lines(result.output, path)
    assert re.match(
        rf"{re.escape(str(path))}:8: stages\.1\.generate_queries: needs summaries .*"
        r"summarize \(stage 3, line 9\) provides them",
        line,
    ), line


def test_a_need_no_stage_of_the_recipe_provides_lists_the_stages_that_could(write_recipe):
    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\nstages:\n  - sample_by_length: {n_docs: 3}\n  - span_contrast: {}\n"
    )
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    lines = _problem_lines(result.output, path)
    assert [line.split(": needs ")[0] for line in lines] == [f"{path}:5: stages.1.span_contrast"] * 2
    assert "needs queries" in lines[0] and "generate_queries" in lines[0]
    assert "needs spans" in lines[1] and "localize_spans" in lines[1] and "from_qa" in lines[1]


def test_a_category_column_is_a_need_of_its_own(write_recipe):
    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\nstages:\n"
        "  - generate_queries: {mode: extractive}\n  - balance: {column: position_tag}\n"
        "  - localize_spans: {}\n"
    )
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    (line,) = _problem_lines(result.output, path)
    assert line.startswith(f"{path}:5: stages.1.balance: needs positions")
    assert "localize_spans (stage 3, line 6) provides them" in line


def test_every_stage_speaks_the_one_vocabulary():
    for name, cls in STAGES.items():
        assert cls.needs <= VOCABULARY.keys(), name
        assert cls.provides <= VOCABULARY.keys(), name
    provided = set().union(*(cls.provides for cls in STAGES.values()))
    assert provided == VOCABULARY.keys()  # every word is something some stage provides


def _bench(spans: list | None, **columns: list) -> Bench:
    corpus = pl.DataFrame({"doc_id": ["d1"], "text": ["some text here"], "n_tokens": [3]})
    queries = pl.DataFrame({"query_id": ["q1", "q2"], "text": ["a?", "b?"], "doc_id": ["d1", "d1"], **columns})
    if spans is not None:
        queries = queries.with_columns(pl.Series("spans", spans, dtype=SPAN_DTYPE))
    qrels = pl.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d1", "d1"], "score": [1, 1]})
    return Bench.of(corpus, queries, qrels)


def test_queries_without_any_position_are_a_failed_build():
    with pytest.raises(EmptyResult) as failed:
        check_result(_bench(None, requested_position=["first", "final"]), [], LLMUsage())
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith("build failed: none of the 2 queries has a position")
    with pytest.raises(EmptyResult):
        check_result(_bench([None, []]), [], LLMUsage())


@pytest.mark.parametrize(
    "columns",
    [
        {"spans": [None, [{"start": 0, "end": 4, "method": "exact", "score": 100.0}]]},
        {"char_bucket": ["0-100", None]},
        {"chunk_tag": [None, "middle"]},
        {"rel_pos": [0.5, None]},
    ],
)
def test_one_query_with_a_position_is_enough(columns):
    spans = columns.pop("spans", None)
    check_result(_bench(spans, **columns), [], LLMUsage())


def test_a_build_that_never_locates_its_questions_fails_and_writes_nothing(tmp_path):
    path = tmp_path / "no_positions.yaml"
    path.write_text(_reordered(find_recipe("quickstart").read_text(), [0, 1]))
    result = runner.invoke(
        app, ["build", str(path), "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 1, result.output
    failed = [line for line in result.output.splitlines() if "build failed" in line]
    assert len(failed) == 1 and "has a position" in failed[0]
    assert not (tmp_path / "out").exists()
