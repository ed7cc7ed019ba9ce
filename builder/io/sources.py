"""Document sources: JSONL, parquet, Hugging Face datasets, CPython's reference topics, and a
folder of PDF, HTML, Markdown, Word and text files.

Each source yields raw rows; `load_sources` maps fields, and every bad row becomes a
counted drop with a reason instead of an exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from builder.io.jsonl import read_jsonl
from builder.util.license_field import license_field
from builder.util.resources import shipped_dir

# `python_docs` reads a frozen copy of CPython's `pydoc_data.topics` shipped with build-bench
# (recipes/examples/, see its PROVENANCE.md): each CPython release rewrites some topics, and the
# interpreter's own copy would make the same recipe build another benchmark on each Python.
PYTHON_REFERENCE_FILE = "python_reference.jsonl"
PYTHON_REFERENCE_CPYTHON = "3.11.7"


class FieldMap(BaseModel):
    """Which input field holds each corpus column; `id: null` names each text by its hash."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = "id"
    text: str = "text"
    title: str | None = None
    lang: str | None = None
    domain: str | None = None


class _SourceBase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fields: FieldMap = FieldMap()
    lang: str = "en"
    domain: str = "general"
    id_prefix: str = ""
    limit: int | None = Field(default=None, ge=1)
    explode_text: bool = Field(default=False, description="a text field holding a list makes one document per item")
    license: str | None = license_field()


class JsonlSource(_SourceBase):
    type: Literal["jsonl"]
    path: str


class ParquetSource(_SourceBase):
    type: Literal["parquet"]
    path: str


class HFSource(_SourceBase):
    type: Literal["hf"]
    path: str
    name: str | None = None
    split: str = "train"
    revision: str | None = None
    data_files: str | list[str] | dict[str, str | list[str]] | None = None
    streaming: bool = False


class PythonDocsSource(_SourceBase):
    """The Python Language Reference topics (CPython's `pydoc_data.topics`), as frozen from
    CPython 3.11.7 and shipped with build-bench: the same 79 documents on every Python."""

    type: Literal["python_docs"]
    fields: FieldMap = FieldMap(id="id", text="text", title="title")


class FilesSource(_SourceBase):
    """A folder (read with its subfolders) or a glob of .pdf, .html/.htm, .md, .docx and .txt
    files, each converted to one document (see builder/io/files)."""

    type: Literal["files"]
    path: str = Field(description="a folder, or a glob such as `manuals/**/*.pdf`")
    fields: FieldMap = FieldMap(id="id", text="text", title="title")
    max_file_mb: float = Field(
        default=50.0, gt=0, description=("a file larger than this many MB is not read (dropped as `too_large`)")
    )
    near_duplicates: float | None = Field(
        default=0.8,
        gt=0,
        le=1,
        description=(
            "documents whose word 5-gram Jaccard similarity (MinHash) reaches this are kept once, "
            "the longest (dropped as `near_duplicate`); null keeps them all"
        ),
    )
    # Set by whoever runs the load (the build: <run-dir>/file_cache); not part of the recipe.
    _cache_dir: Path | None = PrivateAttr(default=None)
    # What the latest read of the folder found: files per kind, drops, location maps.
    _last_read: Any = PrivateAttr(default=None)

    def cache_conversions(self, folder: Path) -> None:
        """Keep converted files under `folder`, named by the digest of their bytes."""
        self._cache_dir = folder


SourceSpec = Annotated[
    JsonlSource | ParquetSource | HFSource | PythonDocsSource | FilesSource, Field(discriminator="type")
]


class SourceError(RuntimeError):
    pass


_TABLE_TYPES = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


def resolve_auto_sources(data: Any, base_dir: Path | None) -> None:
    """`type: auto` becomes jsonl or parquet for a path with that extension, else files (a
    folder, a glob, a PDF, ...), so one recipe takes a jsonl corpus or a folder of files."""
    sources = data.get("sources") if isinstance(data, dict) else None
    for source in sources if isinstance(sources, list) else []:
        if isinstance(source, dict) and source.get("type") == "auto" and isinstance(source.get("path"), str):
            suffix = resolve_path(source["path"], base_dir).suffix.lower()
            source["type"] = _TABLE_TYPES.get(suffix, "files")


def resolve_path(path: str, base_dir: Path | None) -> Path:
    """A relative path is looked up from the working directory, then the recipe's folder."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists() or base_dir is None:
        return p
    alt = base_dir / p
    return alt if alt.exists() else p


# (where, row): `line:N` (physical line) for JSON lines, `row:N` (0-based) otherwise; the
# row is a dict, or a reason string for an input row that cannot be one.
Located = tuple[str, dict[str, Any] | str]
_PARQUET_BATCH = 1024


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def source_name(spec: _SourceBase) -> str:
    return str(getattr(spec, "path", None) or "python_docs")


def _iter_jsonl(path: Path) -> Iterator[Located]:
    for n, row in read_jsonl(path):
        yield f"line:{n}", row


def _iter_parquet(path: Path) -> Iterator[Located]:
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Batch by batch, so memory follows the batch and not the file; each batch goes through
    # polars so values come out exactly as a whole-file `pl.read_parquet` gives them.
    n = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=_PARQUET_BATCH):
            table = pl.from_arrow(batch)
            assert isinstance(table, pl.DataFrame)  # a record batch always converts to a frame
            for row in table.iter_rows(named=True):
                yield f"row:{n}", row
                n += 1
    except (pa.ArrowException, pl.exceptions.PolarsError, OSError) as exc:
        raise SourceError(f"cannot read parquet source {path}: {_first_line(exc)}") from exc


def _iter_hf(spec: HFSource) -> Iterator[Located]:
    import datasets

    try:
        ds = datasets.load_dataset(
            spec.path,
            spec.name,
            split=spec.split,
            revision=spec.revision,
            data_files=spec.data_files,
            streaming=spec.streaming,
        )
    except Exception as exc:  # noqa: BLE001 - hub, network and format errors alike
        raise SourceError(
            f"could not load Hugging Face dataset {spec.path!r}: {_first_line(exc)}. Offline, "
            "point the source at local files (type: jsonl or parquet, or hf with data_files)."
        ) from exc
    rows = iter(ds)
    n = 0
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - a streamed dataset fails while it is read
            raise SourceError(
                f"could not read Hugging Face dataset {spec.path!r} at row {n}: {_first_line(exc)}"
            ) from exc
        yield f"row:{n}", row
        n += 1


def python_reference_path() -> Path:
    return shipped_dir("recipes") / "examples" / PYTHON_REFERENCE_FILE


def _iter_python_docs() -> Iterator[Located]:
    for n, (_, row) in enumerate(read_jsonl(python_reference_path())):
        yield f"row:{n}", row


def iter_rows(spec: _SourceBase, base_dir: Path | None) -> Iterator[Located]:
    if isinstance(spec, JsonlSource | ParquetSource):
        path = resolve_path(spec.path, base_dir)
        if not path.exists():
            raise SourceError(f"source file not found: {spec.path} (looked in . and {base_dir})")
        return _iter_jsonl(path) if isinstance(spec, JsonlSource) else _iter_parquet(path)
    if isinstance(spec, HFSource):
        return _iter_hf(spec)
    if isinstance(spec, PythonDocsSource):
        return _iter_python_docs()
    # A files source needs the converters: corpus_loader.source_rows reads it.
    raise SourceError(f"source type {getattr(spec, 'type', None)!r} is read with builder.io.corpus_loader.source_rows")
