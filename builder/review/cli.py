"""`build-bench review`, ready to register on the typer app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from builder.util.consoles import console_for


def review_command(
    folder: Annotated[Path, typer.Argument(metavar="OUT", help="A folder written by a build.")],
    reviewer: Annotated[
        str | None,
        typer.Option(
            "--reviewer", help="Your name (letters, digits, . _ -): judgments go to OUT/review/judgments-NAME.jsonl."
        ),
    ] = None,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0: any free one).")] = 8765,
    width: Annotated[
        float,
        typer.Option(
            "--width",
            min=0.02,
            max=1.0,
            help="Target width of each group's 95 % precision interval; sets the sample size.",
        ),
    ] = 0.3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample (drawn once, then kept in OUT/review/).")] = 0,
    report: Annotated[
        bool,
        typer.Option(
            "--report",
            help="Instead of serving: precision per group, reviewer agreement, into stats.json and the card.",
        ),
    ] = False,
    threshold: Annotated[
        float,
        typer.Option("--threshold", min=0.0, max=1.0, help="With --report: flag groups whose precision is below this."),
    ] = 0.8,
) -> None:
    """Check a sample of the labels by hand in a local page, or (--report) sum the judgments up."""
    from rich.markup import escape

    from builder.publish.cli import _check_folder
    from builder.review.sample import load_or_draw
    from builder.review.store import valid_reviewer

    out, err = console_for(), console_for(stderr=True)
    _check_folder(folder, err)
    items = load_or_draw(folder, width, seed)
    if report:
        from builder.review.report import review_report, write_report

        summary = review_report(folder, items, threshold)
        if not summary["n_judgments"]:
            err.print(
                f"[red]review:[/] no judgments in {escape(str(folder / 'review'))}; run build-bench review "
                f"{escape(str(folder))} --reviewer NAME first",
                highlight=False,
            )
            raise typer.Exit(2)
        write_report(folder, summary)
        for group, row in summary["precision_by_group"].items():
            out.print(
                f"{group}: precision {row['precision']:.2f} [{row['ci95'][0]:.2f}, {row['ci95'][1]:.2f}] n={row['n']}",
                highlight=False,
            )
        for pair, row in summary["cohens_kappa"].items():
            out.print(f"Cohen's kappa {pair}: {row['kappa']} (n={row['n']})", highlight=False)
        if summary["fleiss_kappa"]["n"]:
            out.print(f"Fleiss' kappa: {summary['fleiss_kappa']['kappa']} (n={summary['fleiss_kappa']['n']})")
        for name, row in summary["llm_kappa"].items():
            out.print(f"Cohen's kappa {escape(name)}~LLM judge: {row['kappa']} (n={row['n']})", highlight=False)
        out.print(f"below {threshold}: {', '.join(summary['below_threshold']) or 'none'}")
        from builder.io.built_folder import BuiltFolder

        built = BuiltFolder.open(folder)
        out.print(f"wrote {built.stats_path} and {built.card_path}")
        return
    if reviewer is None or not valid_reviewer(reviewer):
        err.print(
            "[red]review:[/] give your name with --reviewer NAME (letters, digits, . _ -; up to 40)", highlight=False
        )
        raise typer.Exit(2)
    from builder.review.server import make_server

    server = make_server(folder, reviewer, items, port)
    out.print(
        f"reviewing {len(items)} items as {escape(reviewer)}: open http://127.0.0.1:{server.server_address[1]}/ "
        "(Ctrl+C to stop; every answer is already saved)",
        highlight=False,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
