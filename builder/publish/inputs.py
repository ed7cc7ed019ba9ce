"""Every input a build depended on, pinned: the recipe as it ran, each source with its
revision (a Hub revision, or the SHA-256 of a local file), the models and tokenizer by
name, and the prompts by hash. Kept in stats.json under `inputs`, shown on the card, and
compared between releases by the changelog.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.util.digests import file_sha256
from builder.util.secrets import mask_mapping, mask_string

if TYPE_CHECKING:
    from builder.recipe.model import LoadedRecipe
    from builder.records.stage_record import StageRecord


def _rows(path: Path) -> int | None:
    """Rows in a jsonl or parquet file (None for other kinds): what a cap on reading is
    measured against."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if path.suffix == ".jsonl":
        with path.open("rb") as f:
            return sum(1 for line in f if line.strip())
    return None


def _read_rows(spec: Any, path: Path | None, limit: int | None) -> dict[str, Any]:
    """The cap on rows read from one source (its own `limit` or the run's `--limit`,
    the smaller) and, for a local file, how many rows that left to read."""
    caps = [x for x in (getattr(spec, "limit", None), limit) if x is not None]
    if not caps:
        return {}
    out: dict[str, Any] = {"limit": min(caps)}
    rows = _rows(path) if path is not None and path.is_file() else None
    if rows is not None:
        out.update(rows_read=min(rows, min(caps)), rows_in_file=rows)
    return out


def _source(spec: Any, base_dir: Path, limit: int | None = None) -> dict[str, Any]:
    from builder.io.sources import resolve_path

    out: dict[str, Any] = {"type": spec.type}
    if spec.type == "python_docs":
        from builder.io.sources import PYTHON_REFERENCE_CPYTHON

        out["revision"] = f"CPython {PYTHON_REFERENCE_CPYTHON}"
    elif spec.type == "hf":
        out.update(path=spec.path, revision=spec.revision or "unpinned (the default branch when built)")
    else:
        path = resolve_path(spec.path, base_dir)
        out.update(
            path=mask_string(spec.path), sha256=file_sha256(path) if path.is_file() else "not found at publishing time"
        )
        return {**out, **_read_rows(spec, path, limit)}
    return {**out, **_read_rows(spec, None, limit)}


def pinned_inputs(
    loaded: LoadedRecipe, stages: list[StageRecord], limit: int | None = None, mock_llm: bool = False
) -> dict[str, Any]:
    """`limit` is the run's `--limit` (rows read per source), None when it read them all;
    `mock_llm` names the mock as every model (it answered for all of them)."""
    from importlib.metadata import version

    from builder.backends.llm.mock_backend import mock_stand_in

    recipe = loaded.recipe
    return {
        "build_bench": version("build-bench"),
        # Where row-parallel work ran does not change the data (local and Ray builds agree).
        "recipe": mask_mapping({k: v for k, v in loaded.data.items() if k != "executor"}),
        **({"limit": limit} if limit is not None else {}),
        "sources": [_source(s, loaded.base_dir, limit) for s in recipe.sources],
        "tokenizer": recipe.tokenizer.name or recipe.tokenizer.kind,
        "models": {name: mock_stand_in(m.model) if mock_llm else m.model for name, m in sorted(recipe.models.items())},
        "rerankers": {name: getattr(r, "model", None) or r.backend for name, r in sorted(recipe.rerankers.items())},
        "prompts": {st.stage: dict(sorted(st.prompts.items())) for st in stages if st.prompts},
    }


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        out = {}
        for k, v in enumerate(value):
            out.update(_flat(v, f"{prefix}.{k}"))
        return out
    return {prefix: value}


def input_changes(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """(key, old value, new value) for every pinned input that differs, recipe keys dotted."""
    if not old or not new:
        return []
    before, after = (
        _flat({k: v for k, v in old.items() if k != "build_bench"}),
        _flat({k: v for k, v in new.items() if k != "build_bench"}),
    )
    keys = [*before, *(k for k in after if k not in before)]
    changes = [(k, before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)]
    if old.get("build_bench") != new.get("build_bench"):
        changes.append(("build_bench", old.get("build_bench"), new.get("build_bench")))
    return changes
