"""What ColDeR's probes add outside their stages: `eval`'s probe tests (a paired t-test
per probe, builder/evaluation/probes.py) in eval.json, its tables and the data card, and
MTEB's shape of a probe build, a Reranking task with one subset per setting, split from
the root tables by the `pairs` table (as the task module does), each query's candidates
(`top_ranked`) the documents of its pairs, in pair order."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from builder.families import FamilyHooks, MtebPart, MtebShape, register
from builder.io.built_folder import PROBES, BuiltFolder

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from builder.evaluation.data import EvalData

FAMILY = "colder"
_SPLIT = "test"
# The task module's loader: MTEB's own cannot split the root configs by setting.
LOAD_PAIRS = '''
    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        """One subset per probe setting: its queries (the `pairs` config names their setting),
        their qrels, the documents they judge or rank, and as candidates (`top_ranked`) the
        documents of each query's pairs, each once, in pair order."""
        if self.data_loaded:
            return
        path, revision = self.metadata.dataset["path"], self.metadata.dataset["revision"]
        data = RetrievalDatasetLoader(hf_repo=path, revision=revision, split="test").load(num_proc=num_proc)
        settings: dict[str, str] = {}
        candidates: dict[str, list[str]] = {}
        for row in load_dataset(path, "pairs", split="test", revision=revision):
            settings[row["query_id"]] = row["setting"]
            docs = candidates.setdefault(row["query_id"], [])
            docs += [d for d in (row["doc_a"], row["doc_b"]) if d not in docs]
        self.dataset = {}
        for subset in self.hf_subsets:
            queries = data["queries"].select(
                [i for i, q in enumerate(data["queries"]["id"]) if settings.get(q) == subset])
            qrels = {q: data["relevant_docs"][q] for q in queries["id"]}
            judged = {d for q in queries["id"] for d in [*qrels[q], *candidates[q]]}
            corpus = data["corpus"].select([i for i, d in enumerate(data["corpus"]["id"]) if d in judged])
            self.dataset[subset] = {"test": {"corpus": corpus, "queries": queries, "relevant_docs": qrels,
                                             "top_ranked": {q: candidates[q] for q in queries["id"]}}}
        self.dataset_transform(num_proc=num_proc)
        self.data_loaded = True
'''


def _candidates(pairs: pl.DataFrame) -> dict[str, list[str]]:
    """Each query's candidates: the documents of its pairs, each once, in pair order."""
    out: dict[str, list[str]] = {}
    for qid, a, b in pairs.select("query_id", "doc_a", "doc_b").iter_rows():
        docs = out.setdefault(qid, [])
        docs += [d for d in (a, b) if d not in docs]
    return out


def mteb_shape(folder: BuiltFolder) -> MtebShape:
    """One subset per setting over the root tables: its queries, their qrels, and the
    documents they judge or rank."""
    pairs = folder.read("pairs")
    ranked = _candidates(pairs)
    qrels = folder.read("qrels", ["query_id", "doc_id"])
    query_ids = folder.read("queries", ["query_id"])
    parts = []
    for setting in sorted(pairs["setting"].unique().to_list()):
        qids = pairs.filter(pl.col("setting") == setting)["query_id"].unique().to_list()
        judged = qrels.filter(pl.col("query_id").is_in(qids))
        queries = query_ids.filter(pl.col("query_id").is_in(qids))["query_id"].to_list()
        docs = set(judged["doc_id"].to_list()) | {d for q in queries for d in ranked[q]}
        parts.append(MtebPart(setting, _SPLIT, None, folder.root, qids, sorted(docs), {q: ranked[q] for q in queries}))
    return MtebShape("Reranking", parts, LOAD_PAIRS, ("pairs",))


def retriever_figures(data: EvalData) -> Callable[..., dict[str, Any]] | None:
    """The probe tests of each retriever, where the folder has ColDeR's pairs."""
    from builder.evaluation.probes import colder_report, probe_pairs

    pairs = probe_pairs(data)
    if pairs is None:
        return None

    def probes(
        spec: Any, batch_size: int, rerankers: Any, cache_file: Path, log: Callable[[str], None]
    ) -> dict[str, Any]:
        log(f"{spec.label}: scoring {pairs.height} ColDeR probe pairs")
        return {
            "probes": colder_report(spec, data, pairs, batch_size, rerankers, cache_file.with_suffix(".probes.json"))
        }

    return probes


def print_probes(console: Console, report: dict[str, Any]) -> None:
    runs = report["retrievers"]
    if any(r.get("probes") for r in runs.values()):
        console.print(_probes_table(runs))


def card_probes(report: dict[str, Any]) -> dict[str, Any]:
    """The card template's `evaluation.probes` rows."""
    runs = report["retrievers"]
    return {"probes": [_card_row(label, row) for label, run in runs.items() for row in run.get("probes") or []]}


def _two(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _probes_table(runs: dict[str, Any]) -> Table:
    """ColDeR's paired t-tests of retriever scores per probe, in the paper's direction."""
    from rich.table import Table

    from builder.evaluation.multiple import p_text, significance_mark
    from builder.evaluation.report import signed_text

    table = Table(
        title="ColDeR probes: paired t-test of retriever scores (scipy.stats.ttest_rel), Holm-corrected per probe kind",
        title_justify="left",
        caption="positive t: the first document of the difference scores higher",
        caption_justify="left",
    )
    for col in (
        "retriever",
        "probe",
        "difference",
        "pairs",
        "mean diff",
        "t",
        "p",
        "p Holm",
        "tests in family",
        "Cohen's d",
        "first higher",
    ):
        table.add_column(col, justify="left" if col in ("retriever", "probe", "difference") else "right")
    for label, r in runs.items():
        for row in r.get("probes", []):
            table.add_row(
                label,
                row["setting"],
                row["difference"],
                str(row["n"]),
                signed_text(row["mean_difference"]),
                _two(row["t"]),
                p_text(row["p"]),
                p_text(row.get("p_holm")) + significance_mark(row.get("p_holm")),
                str(row.get("family_size", "-")),
                _two(row["cohens_d"]),
                f"{row['share_first_higher']:.0%}",
            )
    return table


def _card_row(label: str, row: dict[str, Any]) -> dict[str, Any]:
    from builder.evaluation.multiple import p_text, significance_mark
    from builder.evaluation.report import signed_text

    return {
        "retriever": label,
        "probe": row["setting"],
        "difference": row["difference"],
        "n": row["n"],
        "mean_difference": signed_text(row["mean_difference"]),
        "t": _two(row["t"]),
        "p": p_text(row["p"]),
        "p_holm": p_text(row.get("p_holm")) + significance_mark(row.get("p_holm")),
        "tests": row.get("family_size", "-"),
        "cohens_d": _two(row["cohens_d"]),
    }


register(
    FamilyHooks(
        family=FAMILY,
        kind=PROBES,
        mteb_shape=mteb_shape,
        retriever_figures=retriever_figures,
        print_eval=print_probes,
        card_eval=card_probes,
    )
)
