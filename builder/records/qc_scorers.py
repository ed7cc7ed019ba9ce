"""Which scorers a quality-control stage judged with (backend and model), recorded with
the stage so `build-bench eval` can tell when a QC scorer is also a retriever it scores:
QC that keeps only what a model already ranks first makes that model look perfect."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from builder.records.stage_record import StageRecord
    from builder.stages.base import Stage


def qc_scorers(stage: Stage, recipe: Any, mock_llm: bool = False) -> list[dict[str, Any]]:
    """One entry per scorer a QueryFilter stage names: {name, backend, model}; an LLM
    (as judge or behind an llm_judge reranker) has backend `llm` and its model id, or
    the mock's name when `mock_llm` (the build answered every LLM with it)."""
    from builder.backends.llm.mock_backend import mock_stand_in
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
            model = getattr(llm, "model", None)
            out.append({"name": name, "backend": "llm", "model": mock_stand_in(model) if mock_llm else model})
        else:
            out.append({"name": name, "backend": backend, "model": getattr(config, "model", None)})
    for name in stage.models_used():
        model = getattr(models.get(name), "model", None)
        out.append({"name": name, "backend": "llm", "model": mock_stand_in(model) if mock_llm else model})
    return out


def recorded_qc_scorers(records: Iterable[StageRecord]) -> list[dict[str, Any]]:
    """Every scorer the run's QC stages recorded, with the stage's label."""
    return [{"stage": r.stage, **scorer} for r in records for scorer in r.figures.get("qc_scorers", [])]
