"""`build-bench stats` and `build-bench push`, ready to register on the typer app:

    app.command("stats")(stats_command)
    app.command("push")(push_command)

Heavy imports stay inside the functions so `build-bench --help` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from builder.util.consoles import console_for

if TYPE_CHECKING:
    from rich.console import Console

FolderArg = Annotated[Path, typer.Argument(help="A folder written by a build (corpus.parquet, queries.parquet, ...).")]


def _check_folder(folder: Path, err: Console) -> None:
    """Exit 2 with one line unless `folder` holds a built benchmark's readable tables."""
    from rich.markup import escape

    from builder.io.built_folder import BuiltFolder
    from builder.io.table_check import TableError, check_built_folder

    if not BuiltFolder.open(folder).has("corpus"):
        err.print(f"[red]{escape(str(folder))} is not a built benchmark folder (no corpus.parquet)[/]")
        raise typer.Exit(2)
    try:
        check_built_folder(folder)
    except TableError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def stats_command(folder: FolderArg) -> None:
    """Print the statistics of a built folder and (re)write its stats.json and plots."""
    from builder.io.built_folder import BuiltFolder
    from builder.publish.outputs import refresh_stats
    from builder.publish.tables import print_stats

    out, err = console_for(), console_for(stderr=True)
    _check_folder(folder, err)
    stats, plots = refresh_stats(folder)
    print_stats(out, stats)
    for path in plots["files"].values():
        out.print(f"wrote {folder / path}")
    for name, why in plots["skipped"].items():
        out.print(f"[dim]skipped {name}: {why}[/]")
    out.print(f"wrote {BuiltFolder.open(folder).stats_path}")


def push_command(
    folder: FolderArg,
    repo: Annotated[str, typer.Option("--repo", help="Dataset repository on the Hub, org/name.")],
    private: Annotated[bool, typer.Option("--private", help="Create the repository as private.")] = False,
    tag: Annotated[str | None, typer.Option("--tag", help="Release tag, vX.Y.Z.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the file plan; upload nothing.")] = False,
    allow_mock: Annotated[
        bool, typer.Option("--allow-mock", help="Push even a folder built with the mock LLM (--mock-llm).")
    ] = False,
) -> None:
    """Publish a built folder to the Hugging Face Hub: one commit, then a release tag.

    The token comes from HF_TOKEN or `hf auth login` and is never written anywhere.
    """
    from pydantic import ValidationError
    from rich.markup import escape

    from builder.publish.hub import PushError, mock_refusal, push
    from builder.recipe.sections import PushConfig

    err = console_for(stderr=True)
    _check_folder(folder, err)
    refusal = None if allow_mock else mock_refusal(folder)
    if refusal:
        err.print(f"[red]push refused:[/] {escape(refusal)}", highlight=False)
        raise typer.Exit(2)
    try:
        config = PushConfig(repo=repo, private=private, tag=tag)
    except ValidationError as exc:
        for e in exc.errors():
            err.print(f"[red]--{e['loc'][0]} {e['input']!r}: expected {_expected(str(e['loc'][0]))}[/]")
        raise typer.Exit(2) from None
    try:
        push(
            folder,
            config.repo,
            private=config.private,
            tag=config.tag,
            dry_run=dry_run,
            console=err,
            allow_mock=allow_mock,
        )
    except PushError as exc:
        err.print(f"[red]push failed:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None


def _expected(option: str) -> str:
    return {"repo": "org/name", "tag": "a version like v1.2.0"}.get(option, "a valid value")


def diff_command(
    old: Annotated[str, typer.Argument(help="The earlier version: a built folder or hf://datasets/org/name@rev.")],
    new: Annotated[str, typer.Argument(help="The later version: a built folder or hf://datasets/org/name@rev.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Documents and queries added, removed and changed between two versions."""
    import json

    from rich.markup import escape

    from builder.io.sources import SourceError
    from builder.publish.diff import diff_versions, fetch_version
    from builder.publish.diff_report import print_diff

    out, err = console_for(), console_for(stderr=True)
    try:
        result = diff_versions(fetch_version(old), fetch_version(new))
    except SourceError as exc:
        err.print(f"[red]{escape(str(exc))}[/]", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(result, indent=1, ensure_ascii=False))
    else:
        print_diff(out, result)
