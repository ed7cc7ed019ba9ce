"""A folder a build wrote, read back: the one module that knows its file names and layout.

A build records in its manifest (the `.build-bench` marker) what kind of folder it is and
which tables it holds; `BuiltFolder.open` reads that record, and for a folder written
before builds recorded it (or copied without its marker) infers both from the files, as
every reader once did on its own. Writers take the file names from here too, so a name
is spelled once. Plain BEIR folders and PosIR's layout, which other tools write, are
named here as well (`BEIR_FILES`, `POSIR_FILES`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Tables load (polars, the Bench) only when one is read: naming a folder's files, kind and
# figures stays light for an idle rerun.
if TYPE_CHECKING:
    import polars as pl

    from builder.bench import Bench

# The manifest: it claims the folder for build-bench and records what it holds.
MANIFEST_FILE = ".build-bench"
STATS_FILE = "stats.json"
CARD_FILE = "README.md"
LLM_ANSWERS_FILE = "llm_answers.parquet"
EVAL_DIR = "eval"
EVAL_FILE = "eval.json"
SETTINGS_DIR = "settings"  # one BEIR set per probe setting or grid cell
PLOTS_DIR = "plots"
POSIR_DIR = "posir"  # posir/<lang>/<domain>/
CROSS_DIR = "cross"  # cross/<queries lang>-<corpus lang>/
SPLIT_DIRS = ("train", "dev")

# A built set's parquet tables, every column kept (`write_beir`).
TABLE_FILES: dict[str, str] = {
    "corpus": "corpus.parquet",
    "queries": "queries.parquet",
    "qrels": "qrels.parquet",
    "drops": "drops.parquet",
    "pairs": "pairs.parquet",  # a probe build's document pairs
}
# The tables every reader of a built set needs, with the columns it needs of each.
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "corpus": ("doc_id", "text"),
    "queries": ("query_id", "text"),
    "qrels": ("query_id", "doc_id", "score"),
}
# The BEIR files beside them, as BEIR's loader reads them (`qrels/<split>.tsv`).
BEIR_FILES: dict[str, str] = {"corpus": "corpus.jsonl", "queries": "queries.jsonl", "qrels": "qrels/test.tsv"}
# PosIR's layout: parquet tables under BEIR's column names.
POSIR_FILES: dict[str, str] = {"corpus": "corpus.parquet", "queries": "queries.parquet", "qrels": "qrels/test.parquet"}
QRELS_DIR = "qrels"
# The Hub layout: `<table>/<lang>/<domain>.parquet` partitions in MTEB's column names.
HUB_TABLES = ("corpus", "queries", "qrels", "positions", "documents")

# The kinds of folder a build writes.
BENCHMARK, GRID, PROBES, MULTILINGUAL, TRAINING = "benchmark", "grid", "probes", "multilingual", "training"
KINDS = (BENCHMARK, GRID, PROBES, MULTILINGUAL, TRAINING)
GRID_COLUMNS = ("setting", "grid_depth", "grid_length")


def hub_partition(table: str, lang: str, domain: str) -> str:
    """Where the Hub layout puts one language's and domain's part of `table`."""
    return f"{table}/{lang}/{domain}.parquet"


def beir_qrels_file(split: str) -> str:
    """`qrels/<split>.tsv`, where BEIR's loader looks for a split's judgements."""
    return f"{QRELS_DIR}/{split}.tsv"


@dataclass(frozen=True)
class BuiltFolder:
    """A built folder (or one BEIR set inside it): its kind, its tables and its parts."""

    root: Path
    kind: str
    tables: dict[str, str]  # table -> its file, relative to root
    recorded: bool  # whether kind and tables came from the build's manifest

    @classmethod
    def open(cls, path: Path) -> BuiltFolder:
        """The folder as its manifest describes it; inferred from its files where the
        manifest does not say (a folder built before the manifest recorded it)."""
        root = Path(path)
        record = _manifest(root)
        kind, tables = record.get("kind"), record.get("tables")
        if kind in KINDS and isinstance(tables, dict):
            return cls(root, str(kind), {str(k): str(v) for k, v in tables.items()}, True)
        return cls(root, infer_kind(root), present_tables(root), False)

    def path(self, table: str) -> Path:
        """Where `table` is (or would be) in this folder."""
        return self.root / self.tables.get(table, TABLE_FILES.get(table, table))

    def has(self, table: str) -> bool:
        return self.path(table).is_file()

    def columns(self, table: str) -> list[str]:
        import polars as pl

        return list(pl.read_parquet_schema(self.path(table)))

    def read(self, table: str, columns: Sequence[str] | None = None) -> pl.DataFrame:
        import polars as pl

        return pl.read_parquet(self.path(table), columns=list(columns) if columns is not None else None)

    def read_bench(self) -> Bench:
        """The folder's tables as a Bench (the parquet copies keep every column)."""
        from builder.bench import Bench, canonical_positions

        return Bench.of(
            corpus=self.read("corpus"),
            queries=canonical_positions(self.read("queries")),
            qrels=self.read("qrels"),
            drops=self.read("drops"),
        )

    @property
    def stats_path(self) -> Path:
        return self.root / STATS_FILE

    def stats(self) -> dict[str, Any]:
        """stats.json's content; empty where there is none or it does not parse."""
        try:
            data = json.loads(self.stats_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def card_path(self) -> Path:
        return self.root / CARD_FILE

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_FILE

    @property
    def eval_dir(self) -> Path:
        return self.root / EVAL_DIR

    def setting(self, name: str) -> BuiltFolder:
        """The BEIR set of one probe setting or grid cell (`settings/<name>/`)."""
        root = self.root / SETTINGS_DIR / name
        return BuiltFolder(root, BENCHMARK, present_tables(root), False)

    def settings(self) -> list[str]:
        """The names of the folder's settings (probe settings or grid cells), sorted."""
        base = self.root / SETTINGS_DIR
        return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []

    def grid_cells(self) -> pl.DataFrame:
        """setting, grid_depth, grid_length of every cell of a grid, by length then depth."""
        return self.read("queries", GRID_COLUMNS).unique().sort("grid_length", "grid_depth")

    def sets(self) -> list[Path]:
        """Every BEIR set written below the root (language, cross-lingual and setting
        folders, at any depth), not the split folders or PosIR's layout, sorted."""
        found = []
        for corpus in sorted(self.root.rglob(BEIR_FILES["corpus"])):
            rel = corpus.parent.relative_to(self.root)
            if (
                rel.parts
                and not any(p.startswith(".") for p in rel.parts)
                and rel.parts[0]
                not in (
                    POSIR_DIR,
                    *SPLIT_DIRS,
                )
            ):
                found.append(corpus.parent)
        return found

    def languages(self) -> list[str]:
        """The per-language BEIR folders at the root (a multilingual build's `<lang>/`)."""
        if not self.root.is_dir():
            return []
        return sorted(
            d.name
            for d in self.root.iterdir()
            if d.is_dir()
            and not d.name.startswith(".")
            and d.name not in (POSIR_DIR, *SPLIT_DIRS)
            and (d / BEIR_FILES["corpus"]).is_file()
        )

    def partitions(self, table: str) -> list[Path]:
        """The Hub layout's partitions of `table` (`<table>/<lang>/<domain>.parquet`), sorted."""
        return sorted(self.root.glob(hub_partition(table, "*", "*")))

    def posir_parts(self) -> list[Path]:
        """PosIR's `posir/<lang>/<domain>/` folders, sorted."""
        base = self.root / POSIR_DIR
        return sorted(p for p in base.glob("*/*") if p.is_dir()) if base.is_dir() else []

    def splits(self) -> list[str]:
        """The split folders a split build wrote beside its test split (`train`, `dev`)."""
        return [s for s in SPLIT_DIRS if (self.root / s).is_dir()]


def card_is_ours(folder: Path) -> bool:
    """A README.md build-bench wrote: in a folder a build marked, with build-bench's front matter."""
    folder = Path(folder)
    if not (folder / MANIFEST_FILE).is_file() or not (folder / CARD_FILE).is_file():
        return False
    text = (folder / CARD_FILE).read_text(encoding="utf-8")
    head = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    return head is not None and re.search(r"^- build-bench$", head.group(1), re.MULTILINE) is not None


def _manifest(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((root / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def present_tables(root: Path) -> dict[str, str]:
    """The parquet tables present at the root, and stats.json where it is there."""
    tables = {name: file for name, file in TABLE_FILES.items() if (root / file).is_file()}
    if (root / STATS_FILE).is_file():
        tables["stats"] = STATS_FILE
    return tables


def infer_kind(root: Path) -> str:
    """The kind from the files alone: probe pairs make a probe build; queries with a grid's
    depth and length and their settings/ a grid; language folders a multilingual build;
    train/ or dev/ a split build; anything else a benchmark."""
    if (root / TABLE_FILES["pairs"]).is_file():
        return PROBES
    import polars as pl

    queries = root / TABLE_FILES["queries"]
    try:
        names = pl.read_parquet_schema(queries) if queries.is_file() else {}
    except (pl.exceptions.PolarsError, OSError, ValueError):
        names = {}
    if "grid_depth" in names and "grid_length" in names and (root / SETTINGS_DIR).is_dir():
        return GRID
    folder = BuiltFolder(root, BENCHMARK, {}, False)
    if folder.languages() or folder.posir_parts() or (root / CROSS_DIR).is_dir():
        return MULTILINGUAL
    if folder.splits():
        return TRAINING
    return BENCHMARK


def manifest_entries(root: Path) -> dict[str, Any]:
    """What a build records of the folder it just wrote: its kind and its tables."""
    return {"kind": infer_kind(root), "tables": present_tables(root)}


def read_beir(folder: Path) -> Bench:
    """Read a folder written by `write_beir` (the parquet copies keep every column)."""
    return BuiltFolder.open(folder).read_bench()
