"""How a built folder maps onto MTEB's subsets and splits, and which of its Hub configs
each (subset, split) loads from:

- a folder whose stage family registered its own shape (builder.families): the parts it
  names, e.g. ColDeR's probes (builder/stages/colder/hooks.py: a Reranking task, one subset
  per setting) or a depth x length grid (builder/stages/grid/hooks.py: one split per length,
  one subset per depth);
- several languages: one subset per language, over the root `<lang>-*` configs;
- otherwise one subset, `default`, over the root configs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from builder.families import MtebPart, family_for
from builder.io.built_folder import BuiltFolder
from builder.mteb_export.tables import RetrievalTables, read_tables
from builder.publish.layout import SPLIT, UNSAFE_IN_NAME
from builder.textutil.languages import posir_name

DEFAULT = "default"


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
    load_data: str | None = None  # a stage family's own loader (task module source)
    configs: tuple[str, ...] = ()  # the Hub configs that loader reads besides the parts'

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


def _part(part: MtebPart) -> Part:
    """A family's part with its tables read, kept to its queries and documents where it names them."""
    tables = read_tables(part.folder)
    if part.query_ids is not None:
        qids = pl.Series(part.query_ids, dtype=pl.Utf8).implode()
        tables = RetrievalTables(
            tables.corpus.filter(pl.col("doc_id").is_in(pl.Series(part.doc_ids or [], dtype=pl.Utf8).implode())),
            tables.queries.filter(pl.col("query_id").is_in(qids)),
            tables.qrels.filter(pl.col("query_id").is_in(qids)),
        )
    return Part(part.subset, part.split, part.config, tables, part.top_ranked)


def _by_language(folder: BuiltFolder, langs: list[str]) -> list[Part]:
    tables = read_tables(folder.root)
    queries = folder.read("queries", ["query_id", "lang"])
    corpus = folder.read("corpus", ["doc_id", "lang"])
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
    built = BuiltFolder.open(folder)
    family = family_for(built.kind)
    codes = list(dict.fromkeys(posir_name(lang) for lang in langs))
    if family is not None and family.mteb_shape is not None:  # e.g. a grid's cells, a probe build's settings
        own = family.mteb_shape(built)
        parts = [_part(p) for p in own.parts]
        return TaskShape(own.type, parts, {p.subset: codes for p in parts}, own.load_data, own.configs)
    if len(langs) > 1:
        return TaskShape("Retrieval", _by_language(built, langs), {lang: [posir_name(lang)] for lang in langs})
    parts = [Part(DEFAULT, SPLIT, None, read_tables(folder))]
    return TaskShape("Retrieval", parts, {p.subset: codes for p in parts})


def languages(eval_langs: list[str] | dict[str, list[str]]) -> list[str]:
    """Every language code of `eval_langs` (a list, or lists per subset), once each, in order."""
    codes = [c for cs in eval_langs.values() for c in cs] if isinstance(eval_langs, dict) else eval_langs
    return list(dict.fromkeys(codes))
