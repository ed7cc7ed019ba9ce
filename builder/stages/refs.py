"""Typed references from a stage's parameters to other parts of the recipe.

A parameter typed `ModelRef`, `RerankerRef`, `RetrieverRef` or `PromptRef` (alone, optional,
or in a list) names an entry under `models:`, `rerankers:` or a prompt file; one typed
`DataPath` names an input file the stage reads. The recipe
checks and the resume fingerprint find every such name by its type, so a field cannot
escape either by being named differently.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin

from pydantic import BaseModel, GetCoreSchemaHandler
from pydantic_core import core_schema

from builder.backends.rerankers.config import BACKENDS


class Ref(str):
    """A name of something declared elsewhere in the recipe."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema())


class ModelRef(Ref):
    """A model declared under `models:`."""


class RerankerRef(Ref):
    """An entry under `rerankers:` (or the built-in `bm25`)."""

    need: ClassVar[str] = "reranker"
    allowed: ClassVar[tuple[str, ...]] = BACKENDS


class RetrieverRef(RerankerRef):
    """A `rerankers:` entry that can also retrieve: bm25 or a bi-encoder."""

    need: ClassVar[str] = "retriever"
    allowed: ClassVar[tuple[str, ...]] = ("bm25", "bi_encoder")


class PromptRef(Ref):
    """A prompt template by name (a file under prompts/ or beside the recipe)."""


class DataPath(Ref):
    """An input file or folder a stage reads: a local path, `hf://datasets/...` or a URL
    (builder.io.remote); checked to exist before anything is spent."""


def _ref_type(annotation: Any) -> type[Ref] | None:
    """The Ref class inside an annotation such as `X`, `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, Ref):
        return annotation
    origin = get_origin(annotation)
    if origin is Annotated:
        return _ref_type(get_args(annotation)[0])
    if origin in (Union, types.UnionType, list, tuple, set, frozenset):
        for arg in get_args(annotation):
            found = _ref_type(arg)
            if found is not None:
                return found
    return None


def refs_of(params: BaseModel) -> list[tuple[str, type[Ref], str]]:
    """(field name, reference kind, name) for every reference a params model holds, in field order."""
    out: list[tuple[str, type[Ref], str]] = []
    for field, info in type(params).model_fields.items():
        kind = _ref_type(info.annotation)
        if kind is None:
            continue
        value = getattr(params, field)
        values = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
        out += [(field, kind, str(v)) for v in values if v is not None]
    return out
