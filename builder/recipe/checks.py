"""Checks that span several parts of a recipe: models, prompts and their variables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.backends.rerankers import reranker_problems
from builder.prompt_templates import PromptError, PromptLibrary
from builder.recipe.yaml_text import Problem, line_of
from builder.stages.base import did_you_mean

if TYPE_CHECKING:
    from builder.recipe.model import LoadedRecipe


def cross_check(loaded: LoadedRecipe) -> list[Problem]:
    recipe = loaded.recipe
    prompts = PromptLibrary(loaded.base_dir)
    problems: list[Problem] = []

    def add(loc: tuple, message: str) -> None:
        problems.append(Problem(loc, message, line_of(loaded.text, loc)))

    for i, stage in enumerate(recipe.stage_objects()):
        here = ("stages", i, stage.name)
        for model in stage.models_used():
            if model not in recipe.models:
                declared = sorted(recipe.models)
                add((*here, "llm"), f"model {model!r} is not declared under models: "
                    f"(declared: {', '.join(declared) or 'none'}){did_you_mean(model, declared)}")
        for name, provided in stage.prompts_used().items():
            try:
                prompt = prompts.get(name)
            except PromptError as exc:
                add((*here, "prompt"), str(exc))
                continue
            unknown = sorted(prompt.variables - provided)
            if unknown:
                add((*here, "prompt"), f"prompt {name!r} uses variables this stage does not "
                    f"provide: {', '.join(unknown)} (it provides: {', '.join(sorted(provided))})")
        if isinstance(getattr(stage.params, "rerankers", None), list):
            for message in reranker_problems(recipe, stage.params.rerankers):
                add((*here, "rerankers"), message)
        for field, message in stage.problems(recipe):
            add((*here, field), message)
    return problems
