"""Configs for every table a build writes beside the root MTEB configs: per-language
BEIR folders (`<lang>/`), cross-lingual sets (`cross/<X>-<source>/`), controlled-probe
settings (`settings/<name>/`), PosIR's layout (`posir/<lang>/<domain>/`), the drop log
and ColDeR's document pairs. Each points at the files as they were written (no copy):

- `beir_<lang>-<table>`, `cross_<X>-<source>-<table>`, `setting_<name>-<table>` (and
  `beir_<lang>_setting_<name>-<table>` for settings inside a language folder) for
  `corpus`, `queries`, `qrels` (and `drops`, `pairs` where the folder has them): the
  folder's parquet copies (every config is parquet: `datasets` reads one format per
  repository);
- `posir_<lang>_<domain>-corpus|queries|qrels`: PosIR's parquet files;
- `drops` (`drops.parquet`) and `pairs` (`pairs.parquet`);
- a split build's `train/` and `dev/` tables and train sets (builder.publish.training).

Files that are empty get no config: `datasets` cannot load an empty split.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builder.io.built_folder import CROSS_DIR, POSIR_FILES, SETTINGS_DIR, TABLE_FILES, BuiltFolder
from builder.publish.layout import SPLIT, UNSAFE_IN_NAME
from builder.publish.training import training_configs

_BEIR = ("corpus", "queries", "qrels", "drops", "pairs")
_KINDS = {CROSS_DIR: "cross", SETTINGS_DIR: "setting"}


def _config(name: str, path: str) -> dict[str, Any]:
    return {"config_name": name, "data_files": [{"split": SPLIT, "path": path}]}


def _nonempty(path: Path) -> bool:
    import pyarrow.parquet as pq

    return path.is_file() and pq.read_metadata(path).num_rows > 0


def _prefix(rel: Path) -> str:
    """`fra-Latn` -> `beir_fra-Latn`, `cross/X` -> `cross_X`, `settings/near` -> `setting_near`,
    `fra-Latn/settings/near` -> `beir_fra-Latn_setting_near`."""
    parts, names = list(rel.parts), []
    while parts:
        head = parts.pop(0)
        if head in _KINDS and parts:
            names.append(f"{_KINDS[head]}_{parts.pop(0)}")
        else:
            names.append(f"beir_{head}")
    return "_".join(names)


def subset_configs(folder: Path) -> list[dict[str, Any]]:
    """One config per loadable table below `folder`, paths relative to it."""
    folder = Path(folder)
    built = BuiltFolder.open(folder)
    configs: list[dict[str, Any]] = []
    for name in ("drops", "pairs"):
        if _nonempty(built.path(name)):
            configs.append(_config(name, built.path(name).relative_to(folder).as_posix()))
    for sub in built.sets():
        prefix = _prefix(sub.relative_to(folder))
        for table in _BEIR:
            path = sub / TABLE_FILES[table]
            if _nonempty(path):
                configs.append(
                    _config(UNSAFE_IN_NAME.sub("_", f"{prefix}-{table}"), path.relative_to(folder).as_posix())
                )
    for part in built.posir_parts():
        prefix = UNSAFE_IN_NAME.sub("_", f"posir_{part.parent.name}_{part.name}")
        for table, file in POSIR_FILES.items():
            if _nonempty(part / file):
                configs.append(_config(f"{prefix}-{table}", (part / file).relative_to(folder).as_posix()))
    return configs + training_configs(folder)
