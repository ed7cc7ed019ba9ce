"""Every stage parameter says what it is for, and the generated stage reference (the docs
site's stages page, `build-bench stages --markdown`) lists each of them."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field
from typer.testing import CliRunner

from builder.cli import app
from builder.run.stage_reference import parameter_rows, stage_reference_markdown
from builder.stages import STAGES


def test_every_stage_parameter_has_a_description():
    missing = [
        f"{name}.{field}"
        for name, stage in sorted(STAGES.items())
        for field, info in parameter_rows(stage.Params)
        if not (info.description or "").strip()
    ]
    assert missing == []


def test_the_row_finder_reaches_nested_options():
    class Inner(BaseModel):
        depth: int = 1

    class Outer(BaseModel):
        inner: Inner = Field(default=Inner(), description="nested")
        plain: str = Field(default="x", description="plain")

    assert [name for name, _ in parameter_rows(Outer)] == ["inner", "inner.depth", "plain"]


def test_the_reference_has_a_section_and_a_row_per_parameter():
    text = stage_reference_markdown()
    for name, stage in STAGES.items():
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert stage.summary() in section
        for field, info in parameter_rows(stage.Params):
            row = next(line for line in section.splitlines() if line.startswith(f"| `{field}` |"))
            assert row.endswith(f"| {info.description.replace('|', chr(92) + '|')} |")


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells as Python-Markdown splits them: not at a pipe inside
    backticks, nor at an escaped one."""
    return [c.strip() for c in re.split(r"(?<!\\)\|(?=(?:[^`]*`[^`]*`)*[^`]*$)", row.strip("|"))]


def test_a_pipe_in_a_type_or_a_description_does_not_split_the_row():
    section = stage_reference_markdown().split("\n## balance\n", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| `column` |"))
    kinds = ["position_tag", "chunk_tag", "position_bin", "char_bucket", "length_bucket", "requested_position"]
    assert _cells(row)[:3] == ["`column`", f"`{' | '.join(kinds)}`", "`'position_tag'`"]
    assert len(_cells(row)) == 4


def test_stages_markdown_prints_the_reference():
    result = CliRunner().invoke(app, ["stages", "--markdown"])
    assert result.exit_code == 0
    assert result.stdout == stage_reference_markdown()
