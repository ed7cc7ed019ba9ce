"""The stage reference as Markdown, made from the registered stages' parameter models:
`build-bench stages --markdown` prints it and the docs site builds its stages page from it,
so the reference cannot drift from the code."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from builder.run.report import type_name

HEADER = """# Stage reference

Every stage a recipe can name under `stages:`, with its parameters: their type, default and
meaning. This page is generated from the stages' parameter models (`build-bench stages
--markdown` prints the same text); a nested option is listed under its parent as
`parent.option`. What the stages need from the stages before them and what they provide
is checked by `validate` (see [Recipes](recipes.md#stage-order)).
"""


def _cell(text: str) -> str:
    """Prose in a table cell: a pipe would end the cell, and a line break the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """Code in a table cell: Python-Markdown keeps a pipe inside backticks in its cell (an
    escaped one would show its backslash)."""
    return f"`{text.replace(chr(10), ' ')}`"


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "see below"
    return _code(repr(value))


def _nested(info: FieldInfo) -> type[BaseModel] | None:
    annotation = info.annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def parameter_rows(params: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """Every parameter with its dotted name, a nested model's options after the model itself."""
    for name, info in params.model_fields.items():
        yield prefix + name, info
        nested = _nested(info)
        if nested is not None:
            yield from parameter_rows(nested, f"{prefix}{name}.")


def stage_reference_markdown() -> str:
    from builder.stages import STAGES

    parts = [HEADER]
    for name in sorted(STAGES):
        stage = STAGES[name]
        parts.append(f"\n## {name}\n\n{stage.summary()}\n")
        rows = list(parameter_rows(stage.Params))
        if not rows:
            parts.append("\nNo parameters.\n")
            continue
        parts.append("\n| parameter | type | default | meaning |\n| --- | --- | --- | --- |\n")
        for field, info in rows:
            parts.append(
                f"| `{field}` | {_code(type_name(info.annotation))} | {_default(info)} | "
                f"{_cell(info.description or '')} |\n"
            )
    return "".join(parts)
