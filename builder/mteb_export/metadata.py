"""MTEB's `TaskMetadata` for a built folder: what the folder knows, plus what only the
person exporting it can say (given by flag, never guessed), and the task module's source."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from builder.mteb_export.folder_facts import FolderFacts
from builder.mteb_export.licenses import mteb_license
from builder.mteb_export.shape import TaskShape

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_REPO = re.compile(r"^[\w.-]+/[\w.-]+$")
# dataset.revision of a task that loads a local folder (`--local`): `datasets` reads a
# folder as it is, whatever revision it is given, and MTEB wants one.
LOCAL_REVISION = "local"


@dataclass(frozen=True)
class ExportFlags:
    """The fields a folder cannot know. None means not given."""

    repo: str | None = None
    revision: str | None = None
    domains: list[str] = field(default_factory=list)
    date: str | None = None  # START,END as YYYY-MM-DD,YYYY-MM-DD: when the source texts were written
    subtypes: list[str] = field(default_factory=list)
    sample_creation: str | None = None
    license: str | None = None
    reference: str | None = None
    adapted_from: list[str] = field(default_factory=list)


def missing_flags(facts: FolderFacts, flags: ExportFlags) -> list[str]:
    """The flags still needed, in the order `--help` lists them."""
    wanted = {
        "--repo": flags.repo,
        "--revision": flags.revision,
        "--domain": flags.domains,
        "--date": flags.date,
        "--subtype": flags.subtypes,
        "--sample-creation": flags.sample_creation,
        "--license": flags.license or facts.license,
        "--reference": reference_url(flags),
    }
    return [flag for flag, value in wanted.items() if not value]


def reference_url(flags: ExportFlags) -> str | None:
    """The given URL, or the Hub page of a repository named org/name."""
    if flags.reference or not flags.repo or not _REPO.match(flags.repo):
        return flags.reference
    return f"https://huggingface.co/datasets/{flags.repo}"


def date_range(text: str) -> tuple[str, str]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(_DATE.match(p) for p in parts) or parts[0] > parts[1]:
        raise ValueError(f"--date {text!r}: expected START,END as YYYY-MM-DD,YYYY-MM-DD")
    return parts[0], parts[1]


def default_name(recipe: str, kind: str = "Retrieval") -> str:
    """`squad_posq` -> `SquadPosqRetrieval`; a Reranking task ends in `Reranking`."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", recipe) if part) + kind


def task_fields(name: str, facts: FolderFacts, flags: ExportFlags, shape: TaskShape) -> dict[str, Any]:
    """Every `TaskMetadata` field, in the order MTEB's own task modules write them."""
    return {
        "name": name,
        "dataset": {"path": flags.repo, "revision": flags.revision},
        "description": facts.description
        or f"Position-aware retrieval benchmark built by build-bench ({facts.recipe}).",
        "reference": reference_url(flags),
        "type": shape.type,
        "category": "t2t",
        "modalities": ["text"],
        "eval_splits": shape.splits,
        "eval_langs": shape.eval_langs or None,
        "main_score": "ndcg_at_10",
        "date": date_range(flags.date) if flags.date else None,
        "domains": flags.domains or None,
        "task_subtypes": flags.subtypes or None,
        "license": mteb_license(flags.license or facts.license) if flags.license or facts.license else None,
        "annotations_creators": facts.annotations,
        "dialect": [],
        "sample_creation": flags.sample_creation,
        "bibtex_citation": facts.bibtex or "",
        "adapted_from": flags.adapted_from or None,
    }
