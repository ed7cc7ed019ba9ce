"""Where a build keeps its checkpoints: a folder per recipe name and loaded documents, so
`plan` finds a previous run of the same recipe as `build` does."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def digest(*parts: Any) -> str:
    """sha256 of the parts' canonical JSON: the fingerprints of the run folder and its stages."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def inputs_fingerprint(recipe: Any, limit: int | None, mock_llm: bool = False) -> str:
    """What the loaded documents depend on: the sources, the tokenizer and the limit. A mock
    build gets run folders (so checkpoints) of its own: a real build never resumes from one."""
    mock = ["mock-llm"] if mock_llm else []
    sources = [s.model_dump(mode="json") for s in recipe.sources]
    return digest(sources, recipe.tokenizer.model_dump(mode="json"), limit, *mock)


def run_folder(recipe: Any, run_root: Path, limit: int | None) -> Path:
    """Where a (not mock) build of `recipe` keeps its checkpoints under `run_root`."""
    return run_root / recipe.name / inputs_fingerprint(recipe, limit)[:12]
