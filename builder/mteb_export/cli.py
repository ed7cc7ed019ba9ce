"""`build-bench export-mteb`, ready to register on the typer app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from builder.util.consoles import console_for

ListOpt = list[str] | None


def export_mteb_command(
    folder: Annotated[Path, typer.Argument(metavar="OUT", help="A folder written by a build.")],
    name: Annotated[
        str | None,
        typer.Option("--name", help="The task's class and MTEB name (default: the recipe's name + Retrieval)."),
    ] = None,
    to: Annotated[Path | None, typer.Option("--to", help="Where the files go (default: OUT/mteb).")] = None,
    repo: Annotated[
        str | None, typer.Option("--repo", help="dataset.path: the pushed release on the Hub (org/name).")
    ] = None,
    revision: Annotated[
        str | None, typer.Option("--revision", help="dataset.revision: the release's commit or tag.")
    ] = None,
    domains: Annotated[
        ListOpt,
        typer.Option("--domain", help="MTEB domain of the texts, e.g. Programming, Encyclopaedic, Web (repeatable)."),
    ] = None,
    date: Annotated[
        str | None,
        typer.Option("--date", help="When the source texts were written: START,END as YYYY-MM-DD,YYYY-MM-DD."),
    ] = None,
    subtypes: Annotated[
        ListOpt, typer.Option("--subtype", help="MTEB task subtype, e.g. 'Question answering' (repeatable).")
    ] = None,
    sample_creation: Annotated[
        str | None,
        typer.Option("--sample-creation", help="How the texts came to be, in MTEB's words: found, created, ..."),
    ] = None,
    license: Annotated[
        str | None,
        typer.Option("--license", help="Licence id or URL, where the card's licence is not one MTEB takes."),
    ] = None,
    reference: Annotated[
        str | None, typer.Option("--reference", help="URL describing the dataset (default: its Hub page).")
    ] = None,
    adapted_from: Annotated[
        ListOpt, typer.Option("--adapted-from", help="MTEB task whose data this reuses (repeatable).")
    ] = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help=(
                "Load the data from OUT itself (dataset.path is its absolute path), to evaluate the folder with "
                "MTEB before it is pushed; --repo and --revision are then not needed."
            ),
        ),
    ] = False,
    allow_mock: Annotated[
        bool,
        typer.Option(
            "--allow-mock", help="Export even a folder built with the mock LLM (--mock-llm), as push --allow-mock."
        ),
    ] = False,
) -> None:
    """Write an MTEB task module, its descriptive statistics and a PR description, after MTEB's checks."""
    from rich.markup import escape

    from builder.mteb_export.export import ExportError, export_mteb
    from builder.mteb_export.metadata import LOCAL_REVISION, ExportFlags
    from builder.publish.cli import _check_folder
    from builder.publish.outputs import built_with_mock, read_run_stats

    out, err = console_for(), console_for(stderr=True)
    _check_folder(folder, err)
    if built_with_mock(read_run_stats(folder)):
        # Its annotations would read LM-generated, yet no model wrote them: push refuses it too.
        if not allow_mock:
            err.print(
                f"[red]export-mteb:[/] {escape(str(folder))} was built with the mock LLM (--mock-llm): its "
                "questions, passages and grades are no model's. Rebuild it without --mock-llm, or export it "
                "anyway with --allow-mock.",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(2)
        err.print(
            "[yellow]warning:[/] exporting a folder built with the mock LLM: its annotations_creators "
            "says LM-generated, but no model wrote them; do not submit it to MTEB",
            highlight=False,
        )
    if local:
        repo, revision = str(folder.resolve()), LOCAL_REVISION
    flags = ExportFlags(
        repo=repo,
        revision=revision,
        domains=domains or [],
        date=date,
        subtypes=subtypes or [],
        sample_creation=sample_creation,
        license=license,
        reference=reference,
        adapted_from=adapted_from or [],
    )
    try:
        done = export_mteb(folder, flags, name=name, to=to)
    except ExportError as exc:
        for line in exc.lines:
            err.print(f"[red]export-mteb:[/] {escape(line)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    for path in (done.module, done.statistics, done.pr):
        out.print(f"wrote {escape(str(path))}", highlight=False)
    out.print(f"annotations_creators: {done.fields['annotations_creators']}", highlight=False)
