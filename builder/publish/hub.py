"""Release a built folder to a Hugging Face dataset repository.

One push is one commit: every file goes in a single `create_commit`, which the Hub
applies whole or not at all, so a failed upload leaves the repository as it was. Only
after the commit lands is the release tagged. The token is whatever huggingface_hub
finds (the HF_TOKEN variable or `hf auth login`); this module never reads, prints or
stores it. `HF_ENDPOINT` is read at call time, so a private Hub (or a test server)
can be targeted without re-importing huggingface_hub.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from builder.io.built_folder import CARD_FILE, BuiltFolder
from builder.publish.hub_plan import PushError, PushPlan, RemoteState, make_plan, remote_state
from builder.publish.outputs import built_with_mock, publish_folder, read_run_stats
from builder.recipe.sections import UNKNOWN

__all__ = ["PushError", "PushResult", "mock_refusal", "push"]


@dataclass
class PushResult:
    repo_id: str
    commit: str | None
    commit_url: str | None
    tag: str | None
    files: list[str]
    dry_run: bool


def _api() -> Any:
    from huggingface_hub import HfApi

    return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)


def _ready(folder: Path, console: Console) -> None:
    """A folder built before publishing existed gets its card, stats and configs now."""
    built = BuiltFolder.open(folder)
    if not built.has("corpus"):
        raise PushError(
            f"{folder} is not a built benchmark folder (no corpus.parquet); "
            "build it first with `build-bench RECIPE --out DIR`"
        )
    if not (folder / CARD_FILE).exists() or not built.partitions("corpus"):
        console.print(
            f"[yellow]{folder} has no data card or parquet configs yet: writing them "
            "(without the recipe, which a folder does not keep)[/]"
        )
        publish_folder(folder)


def _license_problem(folder: Path) -> str | None:
    """A release says under what terms the data may be used: the card must name a licence."""
    import yaml

    text = (folder / CARD_FILE).read_text(encoding="utf-8")
    head = text[4:].partition("\n---\n")[0] if text.startswith("---\n") else ""
    try:
        meta = yaml.safe_load(head) or {}
    except yaml.YAMLError:
        meta = {}
    found = meta.get("license") if isinstance(meta, dict) else None
    if found and found != UNKNOWN:
        return None
    return (
        f"{folder / CARD_FILE} declares no licence (license: {found or 'missing'}); set card.license "
        "in the recipe (a Hub licence id such as cc-by-sa-4.0) and build again, or edit the license: "
        "line of the card's front matter"
    )


def _lookup(api: Any, repo_id: str, tag: str | None, dry_run: bool) -> RemoteState:
    try:
        return remote_state(api, repo_id, tag)
    except Exception as exc:  # noqa: BLE001 - network, auth and server errors alike
        if not dry_run:
            raise PushError(
                f"could not read {repo_id} on the Hub ({exc}); nothing was uploaded. "
                "Check the network and your token, then run the same command again."
            ) from exc
        return RemoteState(problem=str(exc))


def _show(console: Console, plan: PushPlan, private: bool) -> None:
    remote = plan.remote
    if remote.problem:
        status = f"unknown (the Hub could not be read: {remote.problem})"
    else:
        status = "exists" if remote.exists else f"will be created ({'private' if private else 'public'})"
    console.print(f"repository [bold]{plan.repo_id}[/] (dataset): {status}")
    console.print(f"tag: {plan.tag or '(none)'}; CHANGELOG compares with: {remote.previous or '(no earlier release)'}")
    console.print(f"one commit, {len(plan.uploads)} files to add, {len(plan.deletes)} to delete:")
    for line in plan.lines():
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def mock_refusal(folder: Path) -> str | None:
    """Why `folder` must not be pushed as it is (it was built with the mock LLM), or None."""
    if not built_with_mock(read_run_stats(Path(folder))):
        return None
    return (
        f"{folder} was built with the mock LLM (--mock-llm): its questions, passages and grades "
        "are not a real model's. Rebuild it without --mock-llm, or push it anyway with --allow-mock."
    )


def budget_refusal(folder: Path) -> str | None:
    """Why `folder` must not be pushed as a whole benchmark (its build stopped at its budget), or None."""
    budget = read_run_stats(Path(folder)).get("budget") or {}
    if not budget.get("stopped_at_stage"):
        return None
    return (
        f"{folder} is incomplete: its build stopped at its budget in {budget['stopped_at_stage']} "
        f"({budget.get('not_sent', '?')} LLM requests not sent). Rebuild it with a higher budget "
        "(answers already received are not asked again), then push."
    )


def push(
    folder: Path,
    repo_id: str,
    private: bool = False,
    tag: str | None = None,
    dry_run: bool = False,
    console: Console | None = None,
    allow_mock: bool = False,
) -> PushResult:
    """Upload `folder` to `repo_id` in one commit and tag it; `dry_run` only prints the plan.
    A folder built with the mock LLM is refused unless `allow_mock`."""
    console = console or Console(stderr=True)
    folder = Path(folder)
    refusal = (None if allow_mock else mock_refusal(folder)) or budget_refusal(folder)
    if refusal:
        raise PushError(refusal)
    _ready(folder, console)
    unlicensed = _license_problem(folder)
    if unlicensed and not dry_run:
        raise PushError(unlicensed)
    if unlicensed:
        console.print(f"[yellow]a real push would stop here: {escape(unlicensed)}[/]", highlight=False)
    api = _api()
    if not dry_run:
        _require_token()
    remote = _lookup(api, repo_id, tag, dry_run)
    if tag and tag in remote.tags:
        raise PushError(
            f"{repo_id} already has a tag {tag}; a release tag names one version, "
            "so choose a new one (for example the next patch version)"
        )
    plan = make_plan(folder, repo_id, tag, remote)
    _show(console, plan, private)
    paths = [p for p, _ in plan.uploads]
    if dry_run:
        console.print("[dim]dry run: nothing was uploaded[/]")
        return PushResult(repo_id, None, None, tag, paths, dry_run=True)
    _create_repo(api, repo_id, private, remote.exists)
    info = _commit(api, plan)
    if tag:
        _tag(api, repo_id, tag, info.oid)
    console.print(f"[green]published[/] {info.commit_url}" + (f" as {tag}" if tag else ""))
    return PushResult(repo_id, info.oid, info.commit_url, tag, paths, dry_run=False)


def _require_token() -> None:
    from huggingface_hub import get_token

    if not get_token():
        raise PushError(
            "no Hugging Face token found: run `hf auth login` or set HF_TOKEN "
            "(it is read from there and never written anywhere)"
        )


def _create_repo(api: Any, repo_id: str, private: bool, exists: bool) -> None:
    if exists:
        return
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    except Exception as exc:  # noqa: BLE001 - any failure here means nothing was uploaded
        raise PushError(
            f"could not create the dataset repository {repo_id} ({exc}); nothing was "
            "uploaded. Check that your token may create repositories in that "
            "namespace, then run the same command again."
        ) from exc


def _commit(api: Any, plan: PushPlan) -> Any:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    operations: list[Any] = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=src) for p, src in plan.uploads]
    operations += [CommitOperationDelete(path_in_repo=p) for p in plan.deletes]
    message = f"Release {plan.tag}" if plan.tag else "Update benchmark"
    try:
        return api.create_commit(
            plan.repo_id,
            operations,
            commit_message=message,
            repo_type="dataset",
            commit_description="Built and pushed with build-bench.",
        )
    except Exception as exc:  # noqa: BLE001 - the commit is all-or-nothing whatever the cause
        untagged = f" and the tag {plan.tag} was not created" if plan.tag else ""
        raise PushError(
            f"the upload to {plan.repo_id} failed ({exc}). Nothing was published: the Hub applies a "
            f"commit whole or not at all, so the repository is unchanged{untagged}. Fix the cause "
            "(network, token write access, Hub status) and run the same command again; files "
            "already uploaded to large-file storage are not sent twice."
        ) from exc


def _tag(api: Any, repo_id: str, tag: str, oid: str) -> None:
    try:
        api.create_tag(repo_id, tag=tag, revision=oid, repo_type="dataset", tag_message=f"Release {tag}")
    except Exception as exc:  # noqa: BLE001 - the files are in; only the tag is missing
        raise PushError(
            f"the files were committed to {repo_id} as {oid}, but creating the tag {tag} failed "
            f"({exc}). Tag that commit yourself (`hf repos tag create {repo_id} {tag} "
            f"--revision {oid} --repo-type dataset`) or run the same push again."
        ) from exc
