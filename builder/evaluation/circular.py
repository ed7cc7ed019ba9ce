"""Circular quality control: a retriever that also judged the build's QC.

A build records, per QC stage, the scorers it judged with (`qc_scorers` in stats.json).
QC that keeps only the queries a scorer ranks well makes that scorer look good on the
result, so eval names every retriever that is one of them: BM25 for a BM25 scorer, the
same model id (or local path ending in it) for a neural one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builder.evaluation.retrievers import RetrieverSpec
from builder.io.built_folder import STATS_FILE

_LEVELS_UP = 3  # posir/<lang>/<domain>/ sits three levels below the build's stats.json


def recorded_scorers(folder: Path) -> list[dict[str, Any]]:
    """The QC scorers a build recorded in the nearest stats.json at or above `folder`
    (a per-language folder keeps the stage records; the build's root also lists them)."""
    folder = Path(folder).resolve()
    for place in [folder, *folder.parents][: _LEVELS_UP + 1]:
        try:
            data = json.loads((place / STATS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            return []
        if "qc_scorers" in data:
            found = data["qc_scorers"] or []
        else:
            found = [
                {"stage": s.get("stage"), **q}
                for s in data.get("stages") or []
                if isinstance(s, dict)
                for q in s.get("qc_scorers") or []
                if isinstance(q, dict)
            ]
        return [s for s in found if isinstance(s, dict)]
    return []


def _model_key(model: str) -> str:
    return model.strip().rstrip("/").lower()


def _same_model(a: str, b: str) -> bool:
    a, b = _model_key(a), _model_key(b)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _coincides(kind: str, model: str | None, scorer: dict[str, Any]) -> bool:
    if kind == "bm25":
        return scorer.get("backend") == "bm25"
    theirs = scorer.get("model")
    return bool(model) and isinstance(theirs, str) and _same_model(str(model), theirs)


def _matches(spec: RetrieverSpec, scorer: dict[str, Any]) -> bool:
    """A rerank spec matches through either stage (its reranker is `<backend>[:<model>]`)."""
    if spec.kind == "rerank":
        backend, _, model = (spec.reranker or "").partition(":")
        return (spec.first is not None and _matches(spec.first, scorer)) or _coincides(backend, model, scorer)
    return _coincides(spec.kind, spec.model, scorer)


def circular_notes(specs: list[RetrieverSpec], scorers: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per retriever label, one note per QC scorer it coincides with."""
    out: dict[str, list[str]] = {}
    for spec in specs:
        for s in scorers:
            if _matches(spec, s):
                model = f" ({s['model']})" if s.get("model") else ""
                out.setdefault(spec.label, []).append(
                    f"circular QC: {s.get('stage', 'a QC stage')} judged with {s.get('name')} "
                    f"[{s.get('backend')}]{model}, which is this retriever; its figures are biased in its favour"
                )
    return out


def add_circular_notes(report: dict[str, Any], specs: list[RetrieverSpec], folder: Path) -> dict[str, list[str]]:
    """Put each retriever's notes beside its figures in the report (`circular_qc`)."""
    notes = circular_notes(specs, recorded_scorers(folder))
    for label, section in report["retrievers"].items():
        section["circular_qc"] = notes.get(label, [])
        section.setdefault("notes", []).extend(section["circular_qc"])
    return notes
