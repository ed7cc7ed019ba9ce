"""Recipes: YAML -> validated pydantic models, with errors that name the line at fault."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Union, get_args

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, create_model, field_validator
from pydantic_core import ErrorDetails

from builder.backends.llm.config import ModelConfig, OpenAIModelConfig, VLLMModelConfig
from builder.backends.rerankers.config import BACKENDS as RERANKER_BACKENDS
from builder.backends.rerankers.config import RERANKER_TYPES, RerankerConfig
from builder.backends.tokenizers import TokenizerConfig
from builder.executors.config import ExecutorConfig
from builder.io.sources import (
    FilesSource,
    HFSource,
    JsonlSource,
    ParquetSource,
    PythonDocsSource,
    SourceSpec,
    resolve_auto_sources,
)
from builder.recipe.checks import cross_check, did_you_mean
from builder.recipe.sections import CardConfig, MultilingualOutput, PushConfig
from builder.recipe.values import number_problems, url_problems
from builder.recipe.yaml_text import BadYaml, Problem, RecipeError, apply_overrides, expand_env, line_of, read_yaml
from builder.stages import STAGES, Stage
from builder.util.secrets import remember_recipe_secrets

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
_SOURCE_TYPES = (JsonlSource, ParquetSource, HFSource, PythonDocsSource, FilesSource)


class OutputConfig(MultilingualOutput):
    dir: str | None = None


class Budget(BaseModel):
    """Limits on what one build run may send to OpenAI-compatible servers (cached answers are free)."""

    model_config = ConfigDict(extra="forbid")
    calls: int | None = Field(default=None, ge=1, description="requests sent")
    tokens: int | None = Field(default=None, ge=1, description="prompt plus completion tokens")
    usd: float | None = Field(default=None, gt=0, description="money, at the models' prices")


class RecipeBase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    seed: int = 0
    sources: list[SourceSpec] = Field(default_factory=list)
    tokenizer: TokenizerConfig = TokenizerConfig()
    models: dict[str, ModelConfig] = {}
    rerankers: dict[str, RerankerConfig] = {}
    output: OutputConfig = OutputConfig()
    push: PushConfig | None = None
    card: CardConfig = CardConfig()
    executor: ExecutorConfig = ExecutorConfig()
    budget: Budget | None = None
    warn_removed_above: float = Field(
        default=0.3,
        gt=0,
        le=1,
        description=("a stage that removes more than this share of its documents or queries gets a warning"),
    )

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        # The name becomes a folder under runs/ and out/, so it must not climb out of them.
        if not _NAME.match(name) or ".." in name:
            raise ValueError(
                "must start with a letter, digit or '_', use only letters, digits, "
                "'_', '-' and '.', and contain no '..' (it names folders)"
            )
        return name

    def stage_objects(self) -> list[Stage]:
        out = []
        # `stages` is added by create_model once the stage types are known.
        for item in getattr(self, "stages"):  # noqa: B009
            (name,) = type(item).model_fields
            out.append(STAGES[name](getattr(item, name)))
        return out


def _stage_tag(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        return next(iter(value))
    if isinstance(value, BaseModel):
        return next(iter(type(value).model_fields))
    return None


@functools.cache
def _recipe_model(stage_names: tuple[str, ...]) -> type[RecipeBase]:
    specs = []
    for name in stage_names:
        field: dict[str, Any] = {name: (STAGES[name].Params, ...)}
        specs.append(Annotated[create_model(f"{name}_spec", __config__=ConfigDict(extra="forbid"), **field), Tag(name)])
    # Types built at run time from the registry: values to mypy, hence Any and no list[item].
    item: Any = Annotated[Union[tuple(specs)], Discriminator(_stage_tag)]  # noqa: UP007
    stages: Any = types.GenericAlias(list, (item,))
    return create_model("Recipe", __base__=RecipeBase, stages=(stages, Field(min_length=1)))


def recipe_model(stage_names: Iterable[str] | None = None) -> type[RecipeBase]:
    """The recipe model knowing the params of `stage_names` (every stage when None). A
    recipe is checked against the stages it names, so only their modules are imported; a
    name no stage has is refused the same way either way (see `_message`)."""
    names = set(STAGES) if stage_names is None else {n for n in stage_names if n in STAGES}
    return _recipe_model(tuple(sorted(names or STAGES)))


def _stage_names(data: dict[str, Any]) -> list[str]:
    """The stage names a recipe's (normalised) `stages:` list uses."""
    stages = data.get("stages")
    return [name for item in stages if isinstance(item, dict) for name in item] if isinstance(stages, list) else []


def _normalise_stages(data: Any) -> None:
    """`- summarize` and `- summarize:` mean the stage with default params."""
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, list):
        return
    for i, item in enumerate(stages):
        if isinstance(item, str):
            stages[i] = {item: {}}
        elif isinstance(item, dict) and len(item) == 1:
            key = next(iter(item))
            if item[key] is None:
                item[key] = {}


def _message(err: ErrorDetails) -> str:
    if err["type"] == "union_tag_invalid":
        tag = err["ctx"]["tag"]
        if err["loc"][:1] == ("stages",):
            return f"unknown stage {tag!r}{did_you_mean(tag, sorted(STAGES))}"
        expected = [t.strip("'\" ") for t in err["ctx"]["expected_tags"].split(",")]
        field = err["ctx"]["discriminator"].strip("'")
        return f"unknown {field} {tag!r} (expected one of: {', '.join(expected)}){did_you_mean(tag, expected)}"
    if err["type"] == "union_tag_not_found":
        return "a stage must be a mapping with exactly one key: the stage name"
    if err["type"] == "extra_forbidden":
        return f"unknown key {err['loc'][-1]!r}"
    return err["msg"].removeprefix("Value error, ")


def _loc(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop the union tags pydantic puts in error locations (stage names, source types,
    model backends) where the YAML itself has no such key, so locations match the file."""
    out: list[Any] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part not in node and isinstance(part, str) and part in _tags():
            continue
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _tags() -> set[str]:
    sources = {get_args(s.model_fields["type"].annotation)[0] for s in _SOURCE_TYPES}
    return set(STAGES) | {"openai", "vllm"} | sources | set(RERANKER_BACKENDS)


class LoadedRecipe(BaseModel):
    """A validated recipe with the text it came from, for hashing and the data card."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    recipe: RecipeBase
    path: Path
    text: str
    data: dict[str, Any]

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.data, sort_keys=True, default=str).encode()).hexdigest()


def _read_text(path: Path) -> str:
    if path.is_dir():
        raise RecipeError(path, [Problem((), "is a directory, not a recipe file")])
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RecipeError(path, [Problem((), f"cannot be read: {exc.strerror or exc}")]) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        problem = Problem((), f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", line)
        raise RecipeError(path, [problem]) from None


def _value_problems(found: list[tuple[tuple[Any, ...], str]], text: str) -> list[Problem]:
    return [Problem(loc, message, line_of(text, loc)) for loc, message in found]


def parse_recipe(path: Path, overrides: list[str] | None = None) -> LoadedRecipe:
    text = _read_text(path)
    try:
        data = read_yaml(text)
    except BadYaml as exc:
        raise RecipeError(path, exc.problems) from None
    if not isinstance(data, dict):
        raise RecipeError(path, [Problem((), "a recipe must be a YAML mapping", 1)])
    problems = expand_env(data, text) + apply_overrides(data, overrides or [])
    remember_recipe_secrets(data)  # from here on no message or file shows them
    problems += _value_problems(number_problems(data), text)
    if problems:
        raise RecipeError(path, problems)
    _normalise_stages(data)
    resolve_auto_sources(data, path.parent)
    model = recipe_model(_stage_names(data))
    try:
        recipe = model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = _loc(data, err["loc"])
            problems.append(Problem(loc, _message(err) + _key_hint(err, loc), line_of(text, loc)))
        raise RecipeError(path, problems) from None
    # pydantic turns strings such as "inf" or "1e400" into numbers; check what it made.
    problems = _value_problems(number_problems(recipe) + url_problems(recipe), text)
    if problems:
        raise RecipeError(path, problems)
    problems = cross_check(recipe, text, path.parent)
    if problems:
        raise RecipeError(path, problems)
    return LoadedRecipe(recipe=recipe, path=path, text=text, data=data)


def _key_hint(err: ErrorDetails, loc: tuple[Any, ...]) -> str:
    """For an unknown key, suggest the closest known one of that model."""
    if err["type"] != "extra_forbidden" or not loc:
        return ""
    known = _known_keys(loc[:-1])
    return did_you_mean(str(loc[-1]), known) if known else ""


def _known_keys(parent: tuple[Any, ...]) -> list[str]:
    if len(parent) == 3 and parent[0] == "stages" and parent[2] in STAGES:
        return list(STAGES[parent[2]].Params.model_fields)
    if len(parent) == 0:
        return [*RecipeBase.model_fields, "stages"]
    if len(parent) == 2 and parent[0] == "rerankers":
        return sorted({f for t in RERANKER_TYPES for f in t.model_fields})
    if len(parent) == 2 and parent[0] == "models":
        return sorted({*OpenAIModelConfig.model_fields, *VLLMModelConfig.model_fields})
    if len(parent) == 2 and parent[0] == "sources":
        return sorted({f for s in _SOURCE_TYPES for f in s.model_fields})
    top: dict[str, type[BaseModel]] = {
        "tokenizer": TokenizerConfig,
        "output": OutputConfig,
        "push": PushConfig,
        "card": CardConfig,
    }
    if len(parent) == 1 and parent[0] in top:
        return list(top[parent[0]].model_fields)
    return []
