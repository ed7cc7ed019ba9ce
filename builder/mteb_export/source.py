"""The Python source of the exported task, as a file under mteb/tasks/<type>/<lang>/ would
read: the filled `TaskMetadata`; a `load_data` where MTEB's own loader cannot find the
parts by itself (grid cells; probe settings with their candidates from the `pairs` config);
and, where queries carry a position group, `task_specific_scores`: nDCG@10 per group and
PSI, as `build-bench eval` reports them."""

from __future__ import annotations

from typing import Any

from builder.mteb_export.shape import TaskShape

LOAD_PARTS = '''
    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        """Each (subset, split) from its own `<config>-corpus`, `-queries` and `-qrels` configs."""
        if self.data_loaded:
            return
        path, revision = self.metadata.dataset["path"], self.metadata.dataset["revision"]
        self.dataset = {}
        for (subset, split), config in PARTS.items():
            self.dataset.setdefault(subset, {})[split] = RetrievalDatasetLoader(
                hf_repo=path, revision=revision, split="test", config=config).load(num_proc=num_proc)
        self.dataset_transform(num_proc=num_proc)
        self.data_loaded = True
'''

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

SCORES = '''
    def task_specific_scores(
        self,
        scores: dict[str, dict[str, float]],
        qrels: dict[str, dict[str, int]],
        results: dict[str, dict[str, float]],
        hf_split: str,
        hf_subset: str,
    ) -> dict[str, float]:
        """nDCG@10 per position group (`position_tag` in the `positions` config) and
        PSI = 1 - min/max of the groups' nDCG@10."""
        if not hasattr(self, "_position_tags"):
            rows = load_dataset(self.metadata.dataset["path"], "positions", split="test",
                                revision=self.metadata.dataset["revision"])
            self._position_tags = dict(zip(rows["query-id"], rows["position_tag"]))
        groups: dict[str, list[float]] = {}
        for query_id, figures in scores.items():
            tag = self._position_tags.get(query_id)
            if tag is not None:
                groups.setdefault(tag, []).append(figures["ndcg_cut_10"])
        means = {tag: sum(values) / len(values) for tag, values in groups.items()}
        out = {f"ndcg_at_10_{tag}": mean for tag, mean in means.items()}
        if means and max(means.values()) > 0:
            out["psi_ndcg_at_10"] = 1 - min(means.values()) / max(means.values())
        return out
'''


def metadata_lines(fields: dict[str, Any]) -> list[str]:
    lines = [f"        {key}={value!r}," for key, value in fields.items() if key != "adapted_from" or value]
    if fields["bibtex_citation"]:
        lines = [line for line in lines if not line.lstrip().startswith("bibtex_citation=")]
        lines.append(f'        bibtex_citation=r"""\n{fields["bibtex_citation"]}\n""",')
    return lines


def task_module(fields: dict[str, Any], shape: TaskShape, position_groups: bool) -> str:
    own_loader = shape.own_loader
    reranking = shape.type == "Reranking"
    with_parts = not own_loader and not reranking
    imports = ["from typing import Any\n\n"] if not own_loader else []
    if position_groups or reranking:
        imports.append("from datasets import load_dataset\n\n")
    imports.append("from mteb.abstasks.retrieval import AbsTaskRetrieval\n")
    if not own_loader:
        imports.append("from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader\n")
    imports.append("from mteb.abstasks.task_metadata import TaskMetadata\n")
    parts = ""
    if with_parts:
        rows = "".join(f"    ({p.subset!r}, {p.split!r}): {p.config!r},\n" for p in shape.parts)
        parts = f"\n# (subset, split) -> the prefix of the dataset configs it loads from\nPARTS = {{\n{rows}}}\n"
    body = "    metadata = TaskMetadata(\n" + "\n".join(metadata_lines(fields)) + "\n    )\n"
    if not own_loader:
        body += LOAD_PAIRS if reranking else LOAD_PARTS
    if position_groups:
        body += SCORES
    return (
        '"""MTEB task for a position-aware retrieval benchmark built by build-bench."""\n\n'
        + "".join(imports)
        + parts
        + f"\n\nclass {fields['name']}(AbsTaskRetrieval):\n"
        + body
    )
