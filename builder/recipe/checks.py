"""Checks that span several parts of a recipe: every name a stage refers to (models,
rerankers, prompts) is declared, runnable here, and given the variables it needs; and
every stage comes after what it needs (its needs, in builder.stages.contracts' words,
provided by the sources or an earlier stage), so an impossible order is refused before
anything runs, naming the stage that would provide the need; and "did you mean" hints for
names a recipe gets wrong."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from builder.backends.llm.prompt_templates import PromptError, PromptLibrary
from builder.backends.rerankers.config import BACKENDS, GRADE_VARIABLES, LLMJudgeConfig, missing_extra, reranker_configs
from builder.executors.config import missing_ray
from builder.recipe.sections import license_problem
from builder.recipe.yaml_text import Problem, line_of
from builder.stages import STAGES
from builder.stages.contracts import DOCUMENTS, VOCABULARY
from builder.stages.refs import ModelRef, PromptRef, RerankerRef, refs_of


def cross_check(recipe: Any, text: str, base_dir: Path) -> list[Problem]:
    prompts = PromptLibrary(base_dir)
    problems: list[Problem] = []

    def add(loc: tuple, message: str) -> None:
        problems.append(Problem(loc, message, line_of(text, loc)))

    hint = missing_ray(recipe.executor)
    if hint:
        add(("executor", "kind"), hint)
    budget = getattr(recipe, "budget", None)
    if budget is not None and budget.usd is not None:
        for name in sorted(n for n, m in recipe.models.items() if m.price is None):
            add(
                ("budget", "usd"),
                f"model {name!r} has no price, so its money cannot be counted: "
                f"set models.{name}.price (USD per million tokens)",
            )
    unlicensed = license_problem(recipe)
    if unlicensed:
        add(("push",), unlicensed)
    for i, stage in enumerate(recipe.stage_objects()):
        here = ("stages", i, stage.name)
        for field, kind, name in refs_of(stage.params):
            if issubclass(kind, ModelRef) and name not in recipe.models:
                declared = sorted(recipe.models)
                add(
                    (*here, field),
                    f"model {name!r} is not declared under models: "
                    f"(declared: {', '.join(declared) or 'none'}){did_you_mean(name, declared)}",
                )
            elif issubclass(kind, RerankerRef):
                for message in reranker_problems(recipe, [name], need=kind.need, allowed=kind.allowed):
                    add((*here, field), message)
        prompt_fields = {name: field for field, kind, name in refs_of(stage.params) if issubclass(kind, PromptRef)}
        for name, provided in stage.prompts_used().items():
            loc = (*here, prompt_fields.get(name, "prompt"))
            try:
                prompt = prompts.get(name)
            except PromptError as exc:
                add(loc, str(exc))
                continue
            unknown = sorted(prompt.variables - provided)
            if unknown:
                add(
                    loc,
                    f"prompt {name!r} uses variables this stage does not "
                    f"provide: {', '.join(unknown)} (it provides: {', '.join(sorted(provided))})",
                )
        for field, message in stage.problems(recipe):
            add((*here, field), message)
    stages = recipe.stage_objects()
    for i, message in order_problems(recipe, text):
        add(("stages", i, stages[i].name), message)
    return problems


def reranker_problems(
    recipe: Any, names: Iterable[str], *, need: str = "reranker", allowed: tuple[str, ...] = BACKENDS
) -> list[str]:
    """Messages for names that are undeclared, of a backend not `allowed`, unrunnable here,
    or (llm_judge) pointing at an undeclared model."""
    configs = reranker_configs(recipe)
    models = getattr(recipe, "models", {}) or {}
    out: list[str] = []
    for name in names:
        config = configs.get(name)
        if config is None:
            known = sorted(configs)
            out.append(
                f"{need} {name!r} is not declared under rerankers: "
                f"(declared: {', '.join(known)}){did_you_mean(name, known)}"
            )
            continue
        if config.backend not in allowed:
            out.append(f"{need} {name!r} is a {config.backend} entry; this needs one of: {', '.join(allowed)}")
        hint = missing_extra(config)
        if hint:
            out.append(f"{need} {name!r}: {hint}")
        if isinstance(config, LLMJudgeConfig):
            out += [f"{need} {name!r}: {m}" for m in _judge_problems(config, models)]
    return out


def _judge_problems(config: LLMJudgeConfig, models: dict[str, Any]) -> list[str]:
    out = []
    if config.llm not in models:
        out.append(f"model {config.llm!r} is not declared under models:")
    try:
        unknown = PromptLibrary().get(config.prompt).variables - GRADE_VARIABLES
    except PromptError as exc:
        return [*out, str(exc)]
    if unknown:
        out.append(f"prompt {config.prompt!r} uses variables a judge does not provide: {', '.join(sorted(unknown))}")
    return out


def order_problems(recipe: Any, text: str) -> list[tuple[int, str]]:
    """(stage index, message) for every need no source or earlier stage provides."""
    stages = recipe.stage_objects()
    have: set[str] = {DOCUMENTS} if recipe.sources else set()
    out: list[tuple[int, str]] = []
    for i, stage in enumerate(stages):
        for word in sorted(stage.needed() - have):
            later = next((j for j in range(i + 1, len(stages)) if word in stages[j].provided()), None)
            if later is not None:
                line = line_of(text, ("stages", later, stages[later].name))
                fix = f"{stages[later].name} (stage {later + 1}, line {line}) provides them: move it before this stage"
            else:
                able = sorted(name for name, cls in STAGES.items() if word in cls.provides)
                fix = f"no stage of this recipe provides them: add one of {', '.join(able)} before it" + (
                    ", or list sources:" if word == DOCUMENTS else ""
                )
            out.append((i, f"needs {word} ({VOCABULARY[word]}), which no earlier stage provides; {fix}"))
        have |= stage.provided()
    return out


def did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
