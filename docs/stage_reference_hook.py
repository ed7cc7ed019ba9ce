"""mkdocs hook: adds the stage reference page (stages.md), made at build time from the
registered stages' parameter models, so it is never out of date."""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from builder.run.stage_reference import stage_reference_markdown


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "stages.md", content=stage_reference_markdown()))
    return files
