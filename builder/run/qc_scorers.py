"""Which scorers a quality-control stage judged with (backend and model), recorded with
the stage so `build-bench eval` can tell when a QC scorer is also a retriever it scores:
QC that keeps only what a model already ranks first makes that model look perfect."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from builder.run.stage_record import StageRecord
    from builder.stages.base import Stage


def qc_scorers(stage: Stage, recipe: Any) -> list[dict[str, Any]]:
    """One entry per scorer a QueryFilter stage names: {name, backend, model}; an LLM
    (as judge or behind an llm_judge reranker) has backend `llm` and its model id."""
    from builder.backends.rerankers import reranker_configs
    from builder.stages.base import QueryFilter

    if not isinstance(stage, QueryFilter):
        return []
    configs = reranker_configs(recipe)
    models = getattr(recipe, "models", {}) or {}
    out: list[dict[str, Any]] = []
    for name in stage.rerankers_used():
        config = configs.get(name)
        backend = getattr(config, "backend", name)
        if backend == "llm_judge":
            llm = models.get(getattr(config, "llm", ""))
            out.append({"name": name, "backend": "llm", "model": getattr(llm, "model", None)})
        else:
            out.append({"name": name, "backend": backend, "model": getattr(config, "model", None)})
    for name in stage.models_used():
        out.append({"name": name, "backend": "llm", "model": getattr(models.get(name), "model", None)})
    return out


def recorded_qc_scorers(records: Iterable[StageRecord]) -> list[dict[str, Any]]:
    """Every scorer the run's QC stages recorded, with the stage's label."""
    return [{"stage": r.stage, **scorer} for r in records for scorer in r.figures.get("qc_scorers", [])]
