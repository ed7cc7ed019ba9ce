"""Read a benchmark folder for evaluation: a `write_beir` build, a PosIR-layout folder
(`posir/<lang>/<domain>/`) or a plain BEIR folder.

Only what evaluation needs is kept: the texts, the judged pairs and the position
metadata a query carries. Two columns are derived here: `evidence_start` (the first
character of the evidence in the positive document, for the truncation check) and,
where the dataset has spans but no `rel_pos`, the relative position itself. Under
PosIR's position definitions (the default for PosIR-layout folders, see positions.py)
`rel_pos`, `position_bin` and `length_bucket` are recomputed as PosIR's analysis does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from builder.evaluation.corpus import Corpus
from builder.evaluation.errors import EvalError
from builder.evaluation.positions import DEFAULT_ANCHOR, Anchor, Definition, apply_native, apply_posir
from builder.io.built_folder import BEIR_FILES, POSIR_FILES, TABLE_FILES
from builder.io.table_check import TableError, check_built_folder, read_table

# Position groupings a dataset may carry, in the order the report shows them.
GROUPINGS = ("setting", "variant", "char_bucket", "position_tag", "position_bin")
_KEEP = (
    "query_id",
    "text",
    "doc_id",
    "spans",
    "rel_pos",
    "length_bucket",
    "pos_char_span",
    "pos_token_length",
    *GROUPINGS,
)
_ROLES = ("corpus", "queries", "qrels")
_BUILT = tuple(TABLE_FILES[t] for t in _ROLES)
_POSIR = tuple(POSIR_FILES[t] for t in _ROLES)
_PLAIN = tuple(BEIR_FILES[t] for t in _ROLES)


@dataclass(frozen=True)
class EvalData:
    folder: Path
    fingerprint: str
    corpus: Corpus  # doc_id, title, text, read in blocks (a DataFrame given here is wrapped)
    queries: pl.DataFrame  # query_id, text, doc_id, evidence_start, + position metadata
    qrels: dict[str, dict[str, int]]
    unjudged_queries: int  # queries with no relevant document, left out of every figure
    positions: Definition = "native"  # how rel_pos, bins and length buckets were defined
    anchor: Anchor = "start"  # the point of a span that rel_pos places

    def __post_init__(self) -> None:
        if isinstance(self.corpus, pl.DataFrame):
            object.__setattr__(self, "corpus", Corpus.from_frame(self.corpus))

    def groupings(self) -> list[str]:
        return [
            g for g in GROUPINGS if g in self.queries.columns and self.queries[g].null_count() < self.queries.height
        ]


def load_eval_data(folder: Path, positions: Definition | None = None, anchor: Anchor | None = None) -> EvalData:
    """`positions` picks the position definitions; by default PosIR's for a PosIR-layout
    folder and the dataset's own otherwise. `anchor` defaults to that definition's."""
    folder = Path(folder)
    if not folder.is_dir():
        raise EvalError(f"{folder} is not a folder")
    layout = "native"
    posir = all((folder / name).is_file() for name in _POSIR)
    if any((folder / name).is_file() for name in _BUILT[1:]) and not posir:
        # A built folder: all three tables must be usable (never fall back to its BEIR copies).
        try:
            check_built_folder(folder)
            files = [folder / name for name in _BUILT]
            corpus, metadata = _read_corpus(files[0], {})
            queries, qrels = (read_table(f) for f in files[1:])
        except TableError as exc:
            raise EvalError(str(exc)) from None
    elif posir:
        files = [folder / name for name in _POSIR]
        corpus, metadata, queries, qrels = _read_posir(files)
        layout = "posir"
    elif all((folder / name).is_file() for name in _PLAIN):
        files = [folder / name for name in _PLAIN]
        corpus, queries, qrels = _read_plain(folder)
        metadata = pl.DataFrame()
    else:
        raise EvalError(
            f"{folder} is neither a build-bench output (corpus/queries/qrels.parquet) nor a BEIR "
            "folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)"
        )
    definition: Definition = positions or layout
    variants = (
        metadata.select(pl.col("doc_id").cast(pl.Utf8), pl.col("variant").cast(pl.Utf8).alias("_variant"))
        if "variant" in metadata.columns
        else None
    )
    doc_tokens = (
        metadata.select(pl.col("doc_id").cast(pl.Utf8), pl.col("n_tokens").alias("_doc_tokens"))
        if "n_tokens" in metadata.columns
        else None
    )
    _check_ids(corpus.lengths, "doc_id", "corpus")
    _check_ids(queries, "query_id", "queries")
    judged = _judgements(qrels, corpus)
    queries = _prepare_queries(queries, judged, corpus, definition, doc_tokens, anchor)
    if variants is not None:
        queries = _with_variant(queries, variants)
    kept = queries.filter(pl.col("query_id").is_in(list(judged)))
    if corpus.height == 0 or kept.is_empty():
        raise EvalError(
            f"{folder}: nothing to evaluate ({corpus.height} documents, {kept.height} queries with a relevant document)"
        )
    return EvalData(
        folder=folder,
        fingerprint=_fingerprint(files),
        corpus=corpus,
        queries=kept,
        qrels={q: judged[q] for q in kept["query_id"]},
        unjudged_queries=queries.height - kept.height,
        positions=definition,
        anchor=anchor or DEFAULT_ANCHOR[definition],
    )


def _with_variant(queries: pl.DataFrame, variants: pl.DataFrame) -> pl.DataFrame:
    """ColDeR's evidence-position group: the variant of the query's positive document
    (`pos01`, `evidence_first`, ...), under its setting where the query has one."""
    joined = queries.join(variants, on="doc_id", how="left")
    label = pl.col("_variant")
    if "setting" in joined.columns:
        label = pl.concat_str(pl.col("setting"), pl.lit("/"), label)
    return joined.with_columns(label.alias("variant")).drop("_variant")


def _read_corpus(path: Path, renames: dict[str, str]) -> tuple[Corpus, pl.DataFrame]:
    """The corpus, to be read in blocks, and the per-document metadata evaluation keeps
    (variant, n_tokens), read whole since they are small."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
        keep = [c for c in names if renames.get(c, c) in ("doc_id", "variant", "n_tokens")]
        metadata = pl.read_parquet(path, columns=keep).rename(renames, strict=False)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise EvalError(f"cannot read {path}: {exc}") from exc
    return Corpus.from_parquet(path, renames), metadata


def _read_posir(files: list[Path]) -> tuple[Corpus, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    corpus, metadata = _read_corpus(files[0], {"_id": "doc_id"})
    try:
        queries, qrels = (pl.read_parquet(f) for f in files[1:])
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise EvalError(f"cannot read the PosIR files in {files[0].parent}: {exc}") from exc
    return (
        corpus,
        metadata,
        queries.rename({"_id": "query_id"}, strict=False),
        qrels.rename({"query-id": "query_id", "corpus-id": "doc_id"}, strict=False),
    )


def _read_plain(folder: Path) -> tuple[Corpus, pl.DataFrame, pl.DataFrame]:
    try:
        queries = pl.read_ndjson(folder / BEIR_FILES["queries"], infer_schema_length=None)
        qrels = pl.read_csv(
            folder / BEIR_FILES["qrels"],
            separator="\t",
            schema_overrides={"query-id": pl.Utf8, "corpus-id": pl.Utf8, "score": pl.Int64},
        )
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise EvalError(f"cannot read the BEIR files in {folder}: {exc}") from exc
    missing = {
        BEIR_FILES["queries"]: {"_id", "text"} - set(queries.columns),
        BEIR_FILES["qrels"]: {"query-id", "corpus-id", "score"} - set(qrels.columns),
    }
    problems = [f"{name} lacks {sorted(cols)}" for name, cols in missing.items() if cols]
    if problems:
        raise EvalError(f"{folder}: " + "; ".join(problems))
    return (
        Corpus.from_jsonl(folder / BEIR_FILES["corpus"]),
        queries.rename({"_id": "query_id"}).with_columns(pl.col("query_id").cast(pl.Utf8)),
        qrels.rename({"query-id": "query_id", "corpus-id": "doc_id"}),
    )


def _check_ids(table: pl.DataFrame, column: str, name: str) -> None:
    ids = table[column]
    if ids.null_count():
        raise EvalError(f"{name}: {ids.null_count()} rows have no id")
    if ids.n_unique() < ids.len():
        dupes = ids.filter(ids.is_duplicated()).unique().sort().head(3).to_list()
        raise EvalError(f"{name}: duplicate ids, e.g. {dupes}")


def _judgements(qrels: pl.DataFrame, corpus: Corpus) -> dict[str, dict[str, int]]:
    """Relevant pairs whose document exists; a query with none cannot be scored."""
    live = qrels.select(
        pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8), pl.col("score").cast(pl.Int64)
    ).filter((pl.col("score") > 0) & pl.col("doc_id").is_in(corpus.doc_ids.implode()))
    judged: dict[str, dict[str, int]] = {}
    for qid, did, score in live.iter_rows():
        judged.setdefault(qid, {})[did] = score
    return judged


def _prepare_queries(
    queries: pl.DataFrame,
    judged: dict[str, dict[str, int]],
    corpus: Corpus,
    definition: Definition = "native",
    doc_tokens: pl.DataFrame | None = None,
    anchor: Anchor | None = None,
) -> pl.DataFrame:
    queries = queries.select([c for c in _KEEP if c in queries.columns])
    best = {q: max(docs, key=docs.__getitem__) for q, docs in judged.items()}
    fallback = pl.col("query_id").replace_strict(best, default=None, return_dtype=pl.Utf8)
    doc = pl.coalesce(pl.col("doc_id").cast(pl.Utf8), fallback) if "doc_id" in queries.columns else fallback
    queries = queries.with_columns(pl.col("text").cast(pl.Utf8).fill_null(""), doc.alias("doc_id"))
    queries = queries.join(corpus.lengths, on="doc_id", how="left")
    starts = _span_starts(queries)
    if starts is not None:
        first = starts.list.min()
    elif "rel_pos" in queries.columns:
        first = (pl.col("rel_pos") * pl.col("_doc_chars")).floor()
    else:
        first = pl.lit(None)
    queries = queries.with_columns(first.cast(pl.Int64).alias("evidence_start"))
    if definition == "native":
        queries = apply_native(queries, pl.col("_doc_chars"), anchor or DEFAULT_ANCHOR["native"], anchor is not None)
    else:
        tokens = None
        if "pos_token_length" in queries.columns:
            tokens = pl.col("pos_token_length")
        if doc_tokens is not None:
            queries = queries.join(doc_tokens, on="doc_id", how="left")
            tokens = pl.col("_doc_tokens") if tokens is None else pl.coalesce(tokens, pl.col("_doc_tokens"))
        queries = apply_posir(queries, pl.col("_doc_chars"), tokens, anchor or DEFAULT_ANCHOR["posir"])
    return queries.drop("_doc_chars", "_doc_tokens", "spans", "pos_char_span", "pos_token_length", strict=False)


def _span_starts(queries: pl.DataFrame) -> pl.Expr | None:
    """The start offsets of a query's spans, where the spans column has them."""
    dtype = queries.schema.get("spans")
    if not (isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct)):
        return None
    if "start" not in {f.name for f in dtype.inner.fields}:
        return None
    return pl.col("spans").list.eval(pl.element().struct.field("start"))


def _fingerprint(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()
