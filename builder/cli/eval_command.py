"""`build-bench eval DIR --retriever ...`: evaluation computes the figures and writes
eval.json, the publisher puts them into the folder's data card, then the figures are
shown. Above both, so neither imports the other."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from builder.evaluation.cli import RETRIEVER_HELP, EvalOutcome, run_eval, show_eval
from builder.util.consoles import console_for

if TYPE_CHECKING:
    from rich.console import Console


def eval_command(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A build-bench output folder or a BEIR folder.")],
    retrievers: Annotated[list[str], typer.Option("--retriever", "-r", help=RETRIEVER_HELP)],
    json_out: Annotated[bool, typer.Option("--json", help="Print eval.json to stdout instead of tables.")] = False,
    max_length: Annotated[
        int | None,
        typer.Option("--max-length", min=4, help="Tokens a dense model reads (default: the model's own limit)."),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Encoding batch size.")] = 32,
    query_prefix: Annotated[str | None, typer.Option("--query-prefix", help="Text put before every query.")] = None,
    doc_prefix: Annotated[str | None, typer.Option("--doc-prefix", help="Text put before every document.")] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Where eval.json and the plot go (default: DIR/eval).")
    ] = None,
    positions: Annotated[
        str | None,
        typer.Option(
            "--positions",
            help="Position definitions: native (the dataset's own fields) or posir (PosIR's "
            "analysis: span midpoint, right-closed bins, token-count length buckets). Default: posir for a "
            "PosIR-layout folder, native otherwise.",
        ),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option("--cache-dir", help="Retrieval runs, per dataset and retriever (default: DIR/.eval_cache)."),
    ] = None,
    anchor: Annotated[
        str | None,
        typer.Option(
            "--anchor",
            help="The point of the evidence span that sets its position: start or midpoint "
            "(default: midpoint under posir, start under native).",
        ),
    ] = None,
    length_averaging: Annotated[
        str | None,
        typer.Option(
            "--length-averaging",
            help="A length bucket's figure: queries (mean over its queries) or bins (mean "
            "of its position-bin means, PosIR's way; the default under posir).",
        ),
    ] = None,
    resamples: Annotated[
        int, typer.Option("--resamples", min=1, help="Bootstrap resamples for the 95% intervals.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap and the permutation tests.")] = 0,
    min_group: Annotated[
        int,
        typer.Option(
            "--min-group",
            min=1,
            help="Groups with fewer queries are marked small, get no interval and are left out of PSI.",
        ),
    ] = 30,
    permutations: Annotated[
        int,
        typer.Option(
            "--permutations",
            min=1,
            help="Shuffles of the paired tests and of PSI's null (default 9999: the two-sided floor is 2/10000).",
        ),
    ] = 9999,
    psi_small_groups: Annotated[
        bool,
        typer.Option("--psi-small-groups", help="Take groups under --min-group into PSI and its null (named as such)."),
    ] = False,
    runs_dir: Annotated[
        Path | None,
        typer.Option(
            "--runs-dir", help="Where the TREC run files and the per-query table go (default: the report's folder)."
        ),
    ] = None,
) -> None:
    """Score retrievers on a built benchmark: nDCG@10 and Recall@100 by position, PSI, length buckets."""
    err, console = console_for(stderr=True), console_for()
    outcome = run_eval(
        folder,
        retrievers,
        err,
        max_length=max_length,
        batch_size=batch_size,
        query_prefix=query_prefix,
        doc_prefix=doc_prefix,
        out=out,
        positions=positions,
        cache_dir=cache_dir,
        anchor=anchor,
        length_averaging=length_averaging,
        resamples=resamples,
        seed=seed,
        min_group=min_group,
        permutations=permutations,
        psi_small_groups=psi_small_groups,
        runs_dir=runs_dir,
    )
    _into_card(outcome, err)
    show_eval(outcome, json_out, err, console)


def _into_card(outcome: EvalOutcome, err: Console) -> None:
    """The folder's card gets the figures when they went to its own eval/ (the card points
    readers there, and push uploads that eval.json with it)."""
    from rich.markup import escape

    from builder.io.built_folder import CARD_FILE, BuiltFolder  # with polars: not for --help

    folder = outcome.folder
    if outcome.out_dir.resolve() != BuiltFolder.open(folder).eval_dir.resolve():
        return
    if outcome.family is not None:  # a family that evaluated the folder its own way fills in the card its way
        from builder.families import family_named

        into_card = family_named(outcome.family).eval_into_card
        line = into_card(folder, outcome.report, _relative(outcome.picture, folder)) if into_card else None
        if line:
            err.print(escape(line), highlight=False)
        return
    if not BuiltFolder.open(folder).card_path.is_file():
        return
    from builder.publish.eval_card import update_card

    card = update_card(folder, outcome.report)
    if card is None:
        err.print(f"left {escape(str(folder / CARD_FILE))} as it is: build-bench did not write it", highlight=False)
    else:
        err.print(f"put the evaluation into the data card {escape(str(card))}", highlight=False)


def _relative(picture: Path | None, folder: Path) -> str:
    """The picture's path from the folder, as the card links it."""
    assert picture is not None, "a family that fills in the card draws its picture"
    return picture.resolve().relative_to(folder.resolve()).as_posix()
