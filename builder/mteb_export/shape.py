"""How a built folder maps onto MTEB's subsets and splits, and which of its Hub configs
each (subset, split) loads from:

- ColDeR-style paired probes (`pairs.parquet`): a Reranking task, one subset per setting
  (split from the root configs by the `pairs` config, as the task module does), each
  query's candidates (`top_ranked`) the documents of its pairs, in pair order;
- a depth x length grid (`grid_depth`, `grid_length` on the queries): one eval split per
  length (`test_<length>`, as LongEmbed's tasks), one subset per depth. A split does not
  pool the depths: each cell holds the same evidence, so a query would meet its own
  evidence, unjudged, at every other depth;
- several languages: one subset per language, over the root `<lang>-*` configs;
- otherwise one subset, `default`, over the root configs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from builder.mteb_export.tables import RetrievalTables, read_tables
from builder.publish.layout import SPLIT, UNSAFE_IN_NAME
from builder.textutil.languages import posir_name

DEFAULT = "default"
_CELL = re.compile(r"^(depth[0-9.]+)_len([0-9]+)$")  # builder/stages/grid/depth_grid.py's cell_name


@dataclass(frozen=True)
class Part:
    subset: str
    split: str
    config: str | None  # the prefix of its `<config>-corpus|queries|qrels` Hub configs; None: the root ones
    tables: RetrievalTables
    top_ranked: dict[str, list[str]] | None = None


@dataclass(frozen=True)
class TaskShape:
    type: str  # MTEB's task type: "Retrieval" or "Reranking"
    parts: list[Part]
    langs: dict[str, list[str]]  # subset -> ISO 639-3 + script codes

    @property
    def splits(self) -> list[str]:
        return list(dict.fromkeys(p.split for p in self.parts))

    @property
    def single(self) -> bool:
        return [p.subset for p in self.parts] == [DEFAULT]

    @property
    def eval_langs(self) -> list[str] | dict[str, list[str]] | None:
        """A list for one subset, a dict per subset for several; None where a subset has no language."""
        if not all(self.langs.values()):
            return None
        return self.langs[DEFAULT] if self.single else self.langs

    @property
    def own_loader(self) -> bool:
        """Whether MTEB's loader can read every part as is (config = subset, split `test`)."""
        return self.type == "Retrieval" and (
            self.single or all(p.config == p.subset and p.split == SPLIT for p in self.parts)
        )


def _candidates(pairs: pl.DataFrame) -> dict[str, list[str]]:
    """Each query's candidates: the documents of its pairs, each once, in pair order."""
    out: dict[str, list[str]] = {}
    for qid, a, b in pairs.select("query_id", "doc_a", "doc_b").iter_rows():
        docs = out.setdefault(qid, [])
        docs += [d for d in (a, b) if d not in docs]
    return out


def _by_probe_setting(folder: Path) -> list[Part]:
    """One subset per setting over the root configs: its queries, their qrels, and the
    documents they judge or rank."""
    tables = read_tables(folder)
    pairs = pl.read_parquet(folder / "pairs.parquet")
    ranked = _candidates(pairs)
    parts = []
    for setting in sorted(pairs["setting"].unique().to_list()):
        qids = pairs.filter(pl.col("setting") == setting)["query_id"].unique().implode()
        qrels = tables.qrels.filter(pl.col("query_id").is_in(qids))
        queries = tables.queries.filter(pl.col("query_id").is_in(qids))
        docs = set(qrels["doc_id"].to_list()) | {d for q in queries["query_id"].to_list() for d in ranked[q]}
        corpus = tables.corpus.filter(pl.col("doc_id").is_in(list(docs)))
        parts.append(
            Part(
                setting,
                SPLIT,
                None,
                RetrievalTables(corpus, queries, qrels),
                {q: ranked[q] for q in queries["query_id"].to_list()},
            )
        )
    return parts


def _by_cell(folder: Path) -> list[Part]:
    """One split per length, one subset per depth; a cell's tables are its settings/
    folder, its Hub configs `<cell>-*` (each cell is a domain of the root layout)."""
    cells = sorted(p for p in (folder / "settings").iterdir() if _CELL.match(p.name))
    parts = []
    for sub in cells:
        depth, length = _CELL.match(sub.name).groups()  # type: ignore[union-attr]
        parts.append(Part(depth, f"{SPLIT}_{length}", sub.name if len(cells) > 1 else None, read_tables(sub)))
    return sorted(parts, key=lambda p: (int(p.split.split("_")[1]), p.subset))


def _by_language(folder: Path, langs: list[str]) -> list[Part]:
    tables = read_tables(folder)
    queries = pl.read_parquet(folder / "queries.parquet").select("query_id", "lang")
    corpus = pl.read_parquet(folder / "corpus.parquet").select("doc_id", "lang")
    parts = []
    for lang in langs:
        qids = queries.filter(pl.col("lang") == lang)["query_id"].implode()
        docs = corpus.filter(pl.col("lang") == lang)["doc_id"].implode()
        part = RetrievalTables(
            tables.corpus.filter(pl.col("doc_id").is_in(docs)),
            tables.queries.filter(pl.col("query_id").is_in(qids)),
            tables.qrels.filter(pl.col("query_id").is_in(qids)),
        )
        parts.append(Part(lang, SPLIT, UNSAFE_IN_NAME.sub("_", lang).strip("._") or "und", part))
    return parts


def task_shape(folder: Path, langs: list[str]) -> TaskShape:
    """`langs`: the folder's languages that hold queries, as its stats.json names them."""
    queries = pl.read_parquet(folder / "queries.parquet")
    if (folder / "pairs.parquet").is_file():
        parts, kind = _by_probe_setting(folder), "Reranking"
    elif {"grid_depth", "grid_length"} <= set(queries.columns) and (folder / "settings").is_dir():
        parts, kind = _by_cell(folder), "Retrieval"
    elif len(langs) > 1:
        return TaskShape("Retrieval", _by_language(folder, langs), {lang: [posir_name(lang)] for lang in langs})
    else:
        parts, kind = [Part(DEFAULT, SPLIT, None, read_tables(folder))], "Retrieval"
    codes = list(dict.fromkeys(posir_name(lang) for lang in langs))
    return TaskShape(kind, parts, {p.subset: codes for p in parts})


def languages(eval_langs: list[str] | dict[str, list[str]]) -> list[str]:
    """Every language code of `eval_langs` (a list, or lists per subset), once each, in order."""
    codes = [c for cs in eval_langs.values() for c in cs] if isinstance(eval_langs, dict) else eval_langs
    return list(dict.fromkeys(codes))
