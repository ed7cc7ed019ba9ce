"""Write the task module, the descriptive statistics and the PR description for a folder."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.io.built_folder import BuiltFolder
from builder.mteb_export.descriptive import descriptive_statistics
from builder.mteb_export.folder_facts import read_facts
from builder.mteb_export.gates import config_failures, metadata_failures, shape_failures
from builder.mteb_export.metadata import ExportFlags, default_name, missing_flags, task_fields
from builder.mteb_export.pr import pr_description
from builder.mteb_export.shape import task_shape
from builder.mteb_export.source import task_module
from builder.util.atomic import write_text_atomic


class ExportError(Exception):
    """What stops an export: one line per failed check, or the flags still wanted."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass(frozen=True)
class Exported:
    module: Path
    statistics: Path
    pr: Path
    fields: dict[str, Any]


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def mteb_rejections(fields: dict[str, Any]) -> list[str]:
    """What the installed MTEB's own `TaskMetadata` rejects; nothing to say without MTEB."""
    try:
        from mteb.abstasks.task_metadata import TaskMetadata
    except ImportError:
        return []
    from pydantic import ValidationError

    try:
        TaskMetadata(**fields)
    except ValidationError as exc:
        return [
            f"metadata: MTEB rejects {'.'.join(map(str, e['loc']))}={e['input']!r}: {e['msg']}" for e in exc.errors()
        ]
    return []


def position_groups(folder: Path) -> bool:
    """Whether queries carry a position group the task can report nDCG@10 by."""
    return "position_tag" in BuiltFolder.open(folder).columns("queries")


def export_mteb(folder: Path, flags: ExportFlags, name: str | None = None, to: Path | None = None) -> Exported:
    facts = read_facts(folder)
    shape = task_shape(folder, facts.langs)
    groups = position_groups(folder)
    failures = shape_failures(shape) + config_failures(shape, facts.configs, groups)
    if failures:
        raise ExportError(failures)
    needed = missing_flags(facts, flags)
    if needed:
        raise ExportError(
            [
                f"the folder cannot tell {', '.join(needed)}: give {'them' if len(needed) > 1 else 'it'} "
                "on the command line (see build-bench export-mteb --help)"
            ]
        )
    task_name = name or default_name(facts.recipe, shape.type)
    if not task_name.isidentifier():
        raise ExportError([f"--name {task_name!r}: must be a Python class name, like MyBenchRetrieval"])
    try:
        fields = task_fields(task_name, facts, flags, shape)
    except ValueError as exc:
        raise ExportError([str(exc)]) from None
    problems = metadata_failures(fields) or mteb_rejections(fields)
    if problems:
        raise ExportError(problems)
    out = to or folder / "mteb"
    out.mkdir(parents=True, exist_ok=True)
    module = out / f"{snake(task_name)}.py"
    stats_path = out / f"{task_name}.json"
    pr = out / "PR.md"
    stats = descriptive_statistics(shape)
    write_text_atomic(module, task_module(fields, shape, groups))
    write_text_atomic(stats_path, json.dumps(stats, indent=4, ensure_ascii=False) + "\n")
    write_text_atomic(pr, pr_description(fields, stats, module.name))
    return Exported(module, stats_path, pr, fields)
