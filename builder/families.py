"""What a stage family adds outside its stages, registered by the family itself.

A family (the stages under one `builder/stages/<family>/` folder) whose builds are a kind
of folder of their own (builder.io.built_folder's kinds) may add to the data card, to
`eval` and to the MTEB export. It says so in a `hooks.py` beside its stages, which calls
`register`; the card, `eval` and the export ask `family_for` and run what the family gave,
so none of them names a family. `FAMILY_HOOKS` lists the hooks modules, one line a
family; they are imported on the first question, so the registry stands below every
rung of the import ladder while the hooks, above it, may use evaluation and io.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# One line per family that registers hooks.
FAMILY_HOOKS = (
    "builder.stages.grid.hooks",
    "builder.stages.colder.hooks",
)


@dataclass(frozen=True)
class EvalRequest:
    """What `build-bench eval` was asked, for a family that evaluates its folders itself."""

    folder: Path
    retrievers: list[str]
    defaults: dict[str, Any]  # max_length, query_prefix, doc_prefix for every retriever
    out: Path | None
    cache_dir: Path | None
    batch_size: int
    bootstrap: Any  # builder.evaluation.intervals.BootstrapSettings
    err: Any  # rich.console.Console for progress and errors


@dataclass(frozen=True)
class MtebPart:
    """One (subset, split) of an MTEB task: the tables of `folder`, kept to `query_ids`
    and `doc_ids` where given, and each query's candidates for a reranking task."""

    subset: str
    split: str
    config: str | None  # prefix of its `<config>-corpus|queries|qrels` Hub configs; None: the root ones
    folder: Path
    query_ids: list[str] | None = None
    doc_ids: list[str] | None = None
    top_ranked: dict[str, list[str]] | None = None


@dataclass(frozen=True)
class MtebShape:
    """A family's MTEB task: its type, its parts, and where MTEB's own loader cannot read
    them, the `load_data` method of the task module (Python source) with the extra Hub
    configs it reads."""

    type: str  # "Retrieval" or "Reranking"
    parts: list[MtebPart]
    load_data: str | None = None  # None: each part from its own `<config>-*` configs
    configs: tuple[str, ...] = ()


@dataclass(frozen=True)
class FamilyHooks:
    """A family's additions; each is optional.

    - `card_step`: fields of a construction step in the data card, from the step's
      figures (every family's fields are given to every step, empty where they do not apply);
    - `card_template`: a Jinja2 file (beside the family's stages, its name unique) the
      card's construction section includes, with the card's context (`steps` and all);
    - `evaluate`: `eval` of a folder of `kind`, in place of the default (returns an
      EvalOutcome), with `show_eval` to print it and `eval_into_card` to put its figures
      into the card (returns the line to tell the user, None where the card is not
      build-bench's);
    - `mteb_shape`: the MTEB task (type, parts, loader) for a folder of `kind`;
    - `retriever_figures`: given eval's data, None where the family has nothing to add,
      else a function of (retriever spec, batch size, rerankers, the retriever's cache
      file, log) giving the figures to add to that retriever's part of eval.json;
      `print_eval` prints them after eval's tables, `card_eval` gives the fields the card
      template's evaluation part shows of them (given for every report, empty where
      there are none).
    """

    family: str
    kind: str | None = None  # the folder kind its builds are, where they are one of their own
    card_step: Callable[[Mapping[str, Any]], dict[str, str]] | None = None
    evaluate: Callable[[EvalRequest], Any] | None = None
    show_eval: Callable[[Any, bool, Any], None] | None = None
    eval_into_card: Callable[[Path, dict[str, Any], str], str | None] | None = None
    card_template: Path | None = None
    mteb_shape: Callable[[Any], MtebShape] | None = None
    retriever_figures: Callable[[Any], Callable[..., dict[str, Any]] | None] | None = None
    print_eval: Callable[[Any, dict[str, Any]], None] | None = None
    card_eval: Callable[[dict[str, Any]], dict[str, Any]] | None = None


_REGISTERED: dict[str, FamilyHooks] = {}


def register(hooks: FamilyHooks) -> FamilyHooks:
    """Called by a family's hooks module when it is imported."""
    _REGISTERED[hooks.family] = hooks
    return hooks


def families() -> list[FamilyHooks]:
    """Every registered family, by name (the order their additions appear in)."""
    for module in FAMILY_HOOKS:
        importlib.import_module(module)
    return [_REGISTERED[name] for name in sorted(_REGISTERED)]


def family_for(kind: str) -> FamilyHooks | None:
    """The family whose builds are folders of `kind`, if one registered it."""
    return next((f for f in families() if f.kind == kind), None)


def family_named(name: str) -> FamilyHooks:
    """A registered family by its name."""
    families()
    return _REGISTERED[name]


def card_step_fields(figures: Mapping[str, Any]) -> dict[str, str]:
    """Every family's fields for one construction step of the card."""
    fields: dict[str, str] = {}
    for family in families():
        if family.card_step is not None:
            fields.update(family.card_step(figures))
    return fields
