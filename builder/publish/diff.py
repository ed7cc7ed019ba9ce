"""What changed between two versions of a benchmark: documents and queries added, removed
and changed, counted per language and position group, with examples.

Removed queries come with the reason the newer version's drop log gives, and whether
documents the older version lacks caused it (builder/publish/removals.py). Examples are
whole values; the terminal view shortens them.

Either side is a built folder (its root `*.parquet` tables) or a published one (the
`corpus/`, `documents/`, `queries/`, `positions/` and `qrels/` partitions a Hub revision
holds). Only the columns compared are read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from builder.io.built_folder import EVAL_DIR, EVAL_FILE, STATS_FILE, TABLE_FILES, BuiltFolder
from builder.io.sources import SourceError
from builder.io.table_check import read_table, table_columns

EXAMPLES = 3
QUERY_FIELDS = ("text", "span", "label", "position_bin")
_DOC_COLUMNS = ("doc_id", "text", "lang", "domain")
_QUERY_COLUMNS = ("query_id", "text", "doc_id", "lang", "spans", "position_bin", "position_tag")
_PARTS = ("corpus", "documents", "queries", "positions", "qrels")


@dataclass(frozen=True)
class Version:
    """The compared columns of one version: documents, queries (with their span, label and
    position bin) and where it was read from."""

    where: str
    docs: pl.DataFrame
    queries: pl.DataFrame
    inputs: dict[str, Any] | None = None  # stats.json's pinned inputs
    evaluation: dict[str, Any] | None = None  # eval/eval.json
    drops: pl.DataFrame | None = None  # drops.parquet, the drop log, where the folder has it


def _read(
    paths: list[Path], wanted: tuple[str, ...], rename: dict[str, str], required: tuple[str, ...]
) -> pl.DataFrame:
    """The wanted columns (after renaming) of every file, missing ones as nulls; a file
    lacking a `required` column (named as in the file) is a TableError."""
    frames = []
    for path in paths:
        have = table_columns(path, required)
        columns = [c for c in have if rename.get(c, c) in wanted]
        frames.append(read_table(path, columns).rename({c: rename[c] for c in columns if c in rename}))
    if not frames:
        return pl.DataFrame(schema={c: pl.Utf8 for c in wanted})
    frame = pl.concat(frames, how="diagonal_relaxed")
    return frame.with_columns(pl.lit(None, pl.Utf8).alias(c) for c in wanted if c not in frame.columns)


def _span_key(spans: Any) -> str:
    return ";".join(f"{s['start']}-{s['end']}" for s in spans or []) or "-"


def _with_keys(queries: pl.DataFrame, qrels: pl.DataFrame) -> pl.DataFrame:
    """Queries with a comparable `span` string and `label` (their qrels, sorted)."""
    labels = qrels.group_by("query_id").agg(
        pl.concat_str(pl.col("doc_id"), pl.lit("="), pl.col("score").cast(pl.Utf8)).sort().str.join(",").alias("label")
    )
    spans = [_span_key(s) for s in queries["spans"].to_list()] if queries.height else []
    return (
        queries.with_columns(pl.Series("span", spans, dtype=pl.Utf8))
        .join(labels, on="query_id", how="left", maintain_order="left")
        .with_columns(
            pl.col("label").fill_null("-"),
            pl.col("position_tag").cast(pl.Utf8).fill_null("-"),
            pl.col("position_bin").cast(pl.Utf8).fill_null("-"),
            pl.col("lang").cast(pl.Utf8).fill_null("-"),
        )
    )


def read_version(folder: Path, where: str | None = None) -> Version:
    """The compared columns of a built or published folder."""
    folder = Path(folder)
    where = where or str(folder)
    built = BuiltFolder.open(folder)
    if built.has("corpus"):
        docs = _read([built.path("corpus")], _DOC_COLUMNS, {}, ("doc_id", "text"))
        queries = _read([built.path("queries")], _QUERY_COLUMNS, {}, ("query_id", "text"))
        qrels = _read([built.path("qrels")], ("query_id", "doc_id", "score"), {}, ("query_id", "doc_id", "score"))
    elif built.partitions("corpus"):
        files = {t: built.partitions(t) for t in _PARTS}
        docs = (
            _read(files["corpus"], _DOC_COLUMNS, {"_id": "doc_id"}, ("_id", "text"))
            .drop("lang", "domain")
            .join(
                _read(files["documents"], _DOC_COLUMNS, {"corpus-id": "doc_id"}, ("corpus-id",)).drop("text"),
                on="doc_id",
                how="left",
            )
        )
        queries = (
            _read(files["queries"], _QUERY_COLUMNS, {"_id": "query_id"}, ("_id", "text"))
            .select("query_id", "text")
            .join(
                _read(files["positions"], _QUERY_COLUMNS, {"query-id": "query_id"}, ("query-id",)).drop("text"),
                on="query_id",
                how="left",
            )
        )
        qrels = _read(
            files["qrels"],
            ("query_id", "doc_id", "score"),
            {"query-id": "query_id", "corpus-id": "doc_id"},
            ("query-id", "corpus-id", "score"),
        )
    else:
        raise SourceError(f"{where} is not a built benchmark folder (no corpus.parquet and no corpus/ partitions)")
    docs = docs.with_columns(pl.col("lang").cast(pl.Utf8).fill_null("-"))
    stats, evaluation = _json(built.stats_path), _json(built.eval_dir / EVAL_FILE)
    return Version(
        where,
        docs,
        _with_keys(queries, qrels),
        (stats or {}).get("inputs"),
        evaluation,
        _drop_log(built.path("drops")),
    )


def _drop_log(path: Path) -> pl.DataFrame | None:
    if not path.is_file():
        return None
    have = table_columns(path, ("stage", "kind", "id", "reason"))
    return read_table(path, [c for c in ("stage", "kind", "id", "reason", "rivals") if c in have])


def _json(path: Path) -> dict[str, Any] | None:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None


def fetch_version(ref: str) -> Version:
    """A local folder, or `hf://datasets/<org>/<name>@<revision>`: only the tables are fetched."""
    if not ref.startswith("hf://datasets/"):
        folder = Path(ref)
        if not folder.is_dir():
            raise SourceError(f"{ref}: no such folder")
        return read_version(folder)
    return read_version(
        hub_snapshot(ref, [*(f"{t}/**" for t in _PARTS), STATS_FILE, f"{EVAL_DIR}/{EVAL_FILE}", TABLE_FILES["drops"]]),
        ref,
    )


def hub_snapshot(ref: str, patterns: list[str]) -> Path:
    """The files of a Hub revision matching `patterns`, downloaded into the Hub cache."""
    import os

    import huggingface_hub
    from huggingface_hub.errors import HfHubHTTPError

    repo, _, revision = ref[len("hf://datasets/") :].strip("/").partition("@")
    if repo.count("/") != 1:
        raise SourceError(f"{ref}: expected hf://datasets/<org>/<name>@<revision>")
    try:
        return Path(
            huggingface_hub.snapshot_download(
                repo,
                repo_type="dataset",
                revision=revision or None,
                allow_patterns=patterns,
                endpoint=os.environ.get("HF_ENDPOINT") or None,
            )
        )
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise SourceError(f"could not fetch {ref}: {str(exc).splitlines()[0]}") from None


def _examples(ids: list[str]) -> list[str]:
    return sorted(ids)[:EXAMPLES]


def _grouped(frame: pl.DataFrame, keys: tuple[str, ...]) -> dict[str, int]:
    counts: Counter[str] = Counter("/".join(str(v) for v in row) for row in frame.select(keys).iter_rows())
    return dict(sorted(counts.items()))


def _side_by_side(old: pl.DataFrame, new: pl.DataFrame, key: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """Added, removed and changed rows by `key`; a changed row differs in any of `fields`."""
    old_ids, new_ids = set(old[key]), set(new[key])
    both = old.join(new, on=key, how="inner", suffix="_new")
    changed: dict[str, pl.DataFrame] = {f: both.filter(pl.col(f).ne_missing(pl.col(f"{f}_new"))) for f in fields}
    any_change = (
        pl.any_horizontal([pl.col(f).ne_missing(pl.col(f"{f}_new")) for f in fields]) if fields else pl.lit(False)
    )
    return {
        "added": new.filter(pl.col(key).is_in(list(new_ids - old_ids))),
        "removed": old.filter(pl.col(key).is_in(list(old_ids - new_ids))),
        "changed": both.filter(any_change),
        "by_field": changed,
        "unchanged": both.height - both.filter(any_change).height,
    }


def _change_examples(frame: pl.DataFrame, key: str, field: str) -> list[dict[str, Any]]:
    rows = frame.sort(key).head(EXAMPLES).select(key, field, f"{field}_new").rows()
    return [{"id": k, "old": a, "new": b} for k, a, b in rows]


def diff_versions(old: Version, new: Version) -> dict[str, Any]:
    """The whole comparison as plain data (what `--json` prints)."""
    docs = _side_by_side(
        old.docs.select("doc_id", "text", "lang"), new.docs.select("doc_id", "text", "lang"), "doc_id", ("text",)
    )
    q_cols = ("query_id", "text", "span", "label", "position_bin", "lang", "position_tag")
    queries = _side_by_side(old.queries.select(q_cols), new.queries.select(q_cols), "query_id", QUERY_FIELDS)
    group = ("lang", "position_tag")
    from builder.publish.inputs import input_changes
    from builder.publish.release_notes import eval_figures
    from builder.publish.removals import removal_reasons

    removed_why = removal_reasons(
        queries["removed"]["query_id"].to_list(), new.drops, set(old.docs["doc_id"]), docs["added"].height
    )
    return {
        "old": old.where,
        "new": new.where,
        "inputs": [{"input": k, "old": a, "new": b} for k, a, b in input_changes(old.inputs, new.inputs)],
        "evaluation": {"old": eval_figures(old.evaluation), "new": eval_figures(new.evaluation)},
        "documents": {
            "old": old.docs.height,
            "new": new.docs.height,
            "unchanged": docs["unchanged"],
            **{
                kind: {
                    "count": docs[kind].height,
                    "by_language": _grouped(docs[kind], ("lang",)),
                    "examples": _examples(docs[kind]["doc_id"].to_list()),
                }
                for kind in ("added", "removed")
            },
            "changed": {
                "count": docs["changed"].height,
                "by_language": _grouped(docs["changed"], ("lang_new",)),
                "examples": _examples(docs["changed"]["doc_id"].to_list()),
            },
        },
        "queries": {
            "old": old.queries.height,
            "new": new.queries.height,
            "unchanged": queries["unchanged"],
            "added": {
                "count": queries["added"].height,
                "by_language_and_position": _grouped(queries["added"], group),
                "examples": _query_examples(queries["added"]),
            },
            "removed": {
                "count": queries["removed"].height,
                "by_language_and_position": _grouped(queries["removed"], group),
                "examples": _query_examples(queries["removed"]),
                **removed_why,
            },
            "changed": {
                "count": queries["changed"].height,
                # a changed query counts in the group it is in now
                "by_language_and_position": _grouped(queries["changed"], ("lang_new", "position_tag_new")),
                "by_field": {
                    f: {"count": frame.height, "examples": _change_examples(frame, "query_id", f)}
                    for f, frame in queries["by_field"].items()
                },
            },
        },
    }


def _query_examples(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return [{"id": k, "text": t} for k, t in frame.sort("query_id").head(EXAMPLES).select("query_id", "text").rows()]
