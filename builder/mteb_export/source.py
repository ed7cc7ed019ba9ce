"""The Python source of the exported task, as a file under mteb/tasks/<type>/<lang>/ would
read: the filled `TaskMetadata`; a `load_data` where MTEB's own loader cannot find the
parts by itself (grid cells, each from its own configs; or the loader a stage family gives,
e.g. ColDeR's probe settings with their candidates from the `pairs` config);
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
    with_parts = not own_loader and shape.load_data is None
    imports = ["from typing import Any\n\n"] if not own_loader else []
    if position_groups or "load_dataset(" in (shape.load_data or ""):
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
        body += shape.load_data or LOAD_PARTS
    if position_groups:
        body += SCORES
    return (
        '"""MTEB task for a position-aware retrieval benchmark built by build-bench."""\n\n'
        + "".join(imports)
        + parts
        + f"\n\nclass {fields['name']}(AbsTaskRetrieval):\n"
        + body
    )
