"""The `build-bench` commands. Heavy imports (rich included) live inside the commands, so
`--help` loads typer and little else (tests/test_startup.py keeps it so); the entry point is
`builder.cli.main`."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from builder.util.consoles import console_for

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    # Plain help: typer's rich help imports rich, markdown-it and pygments, which took most
    # of `build-bench --help`'s time.
    rich_markup_mode=None,
    help="Build position-aware retrieval benchmarks from a YAML recipe.\n\n"
    "build-bench RECIPE builds (same as build-bench build RECIPE).",
)


@functools.cache
def _err() -> Console:
    return console_for(stderr=True)


@functools.cache
def _out() -> Console:
    return console_for()


def __getattr__(name: str) -> Console:
    """`err` and `out`, the commands' consoles, made on first use (tests widen them)."""
    consoles = {"err": _err, "out": _out}
    if name not in consoles:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return consoles[name]()


def _version(show: bool) -> None:
    if show:
        from importlib.metadata import version

        _out().print(f"build-bench {version('build-bench')}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Build position-aware retrieval benchmarks from a YAML recipe."""


SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a recipe value: path.to.key=value (repeatable)."),
]
ExecutorOpt = Annotated[
    str | None,
    typer.Option("--executor", help="Where row-parallel work runs: local or ray (same as --set executor.kind=...)."),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="Read at most N documents per source.")]


def _load(recipe: str, overrides: list[str] | None):
    """Load and validate a recipe, or print what is wrong and exit 2."""
    from builder.recipe.model import parse_recipe
    from builder.recipe.yaml_text import RecipeError
    from builder.util.resources import find_recipe

    try:
        path = find_recipe(recipe)
    except FileNotFoundError:
        from builder.recipe.checks import did_you_mean
        from builder.util.resources import shipped_recipes

        hint = did_you_mean(Path(recipe).stem, [p.stem for p in shipped_recipes()])
        _err().print(f"no recipe file or shipped recipe named {recipe!r}{hint}", style="red", markup=False)
        raise typer.Exit(2) from None
    except OSError as exc:  # a name too long for the file system, a loop of links, ...
        _err().print(
            f"cannot open recipe {recipe!r}: {exc.strerror or exc}", markup=False, highlight=False, soft_wrap=True
        )
        raise typer.Exit(2) from None
    try:
        return parse_recipe(path, overrides)
    except RecipeError as exc:
        _err().print(exc.render(), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _preflight(loaded, *, network: bool, llm_models: bool = True) -> None:
    """Exit 2, one line per problem, when an input or a model of the recipe cannot be had here."""
    from builder.recipe.preflight import preflight
    from builder.recipe.yaml_text import RecipeError

    problems = preflight(loaded, network=network, llm_models=llm_models)
    if problems:
        _err().print(RecipeError(loaded.path, problems).render(), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2)


def _check_output_dir(loaded) -> None:
    """Exit 2, naming the recipe line, when `output.dir` is a place the build would refuse."""
    from builder.recipe.yaml_text import Problem, RecipeError, line_of
    from builder.run.outdir import out_dir_problem

    where = loaded.recipe.output.dir
    problem = out_dir_problem(Path(where)) if where else None
    if problem is not None:
        loc = ("output", "dir")
        _err().print(
            RecipeError(loaded.path, [Problem(loc, problem, line_of(loaded.text, loc))]).render(),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)


def _with_executor(overrides: list[str] | None, executor: str | None) -> list[str]:
    if executor is None:
        return list(overrides or [])
    return [*(overrides or []), f"executor.kind={executor}"]


def _budget(text: str | None) -> list[str]:
    """`--budget` as recipe settings, or exit 2 saying what is wrong with it."""
    from builder.run.budget import budget_overrides

    try:
        return budget_overrides(text) if text is not None else []
    except ValueError as exc:
        _err().print(f"--budget {text!r}: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def build(
    recipe: Annotated[str, typer.Argument(help="Recipe file, or the name of a shipped recipe.")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output folder.")] = None,
    run_dir: Annotated[Path, typer.Option("--run-dir", help="Checkpoints and LLM cache.")] = Path("runs"),
    limit: LimitOpt = None,
    overrides: SetOpt = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Ignore checkpoints (keeps the LLM cache).")] = False,
    reask_failed: Annotated[
        bool,
        typer.Option(
            "--reask-failed",
            help=(
                "Rerun the stages whose cached LLM answers could not be used (unparseable, refused) "
                "and ask those again; new answers replace them."
            ),
        ),
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace the output folder even if build-bench did not write it.")
    ] = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="If another build uses the run or output folder, wait for it instead of exiting."),
    ] = False,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty", help="Write the result even with 0 documents or 0 queries, or no query positions."
        ),
    ] = False,
    executor: ExecutorOpt = None,
    mock_llm: Annotated[
        bool,
        typer.Option(
            "--mock-llm",
            help=(
                "Answer every LLM of the recipe with an offline, in-process mock (grounded in the documents), "
                "to try a recipe without a server; the output is marked as mock-built and push refuses it."
            ),
        ),
    ] = False,
    from_ref: Annotated[
        str | None,
        typer.Option(
            "--from",
            help=(
                "An earlier release (a built folder or hf://datasets/org/name@rev): its LLM answers seed the "
                "cache, so only new requests reach the model. They are used only if llm_answers.parquet still "
                "has the sha256 its stats.json records and the expected columns; otherwise the build stops. "
                "The output must go to another folder (--out)."
            ),
        ),
    ] = None,
    reask_unverified: Annotated[
        bool,
        typer.Option(
            "--reask-unverified",
            help=(
                "With --from: when the release's LLM answers fail that check (edited, damaged, no digest "
                "recorded), leave them out and ask the model again instead of stopping."
            ),
        ),
    ] = False,
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            help=(
                "Stop asking the LLM servers before a limit: calls=N,tokens=N,usd=X (any of them; each "
                "replaces the recipe's budget.<name>). Cached answers cost nothing, so a rerun with a "
                "higher budget resumes where this one stopped."
            ),
        ),
    ] = None,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help=(
                "Ask every HTTP model through the provider's batch API (about half the price, answered within "
                "a day): the build submits what is missing, exits with status 75, and the same command run "
                "again collects and goes on."
            ),
        ),
    ] = False,
) -> None:
    """Build the dataset a recipe describes."""
    from builder.run.errors import friendly_errors
    from builder.run.report import print_run_summary
    from builder.run.runner import Runner, RunOptions

    loaded = _load(recipe, _with_executor(overrides, executor) + _budget(budget))
    _preflight(loaded, network=True, llm_models=not mock_llm)
    if from_ref and not from_ref.startswith("hf://"):
        from builder.run.grow import release_problem

        if problem := release_problem(from_ref, mock_llm):
            _err().print(problem, markup=False, highlight=False)
            raise typer.Exit(2)
    if reask_unverified and not from_ref:
        _err().print(
            "--reask-unverified applies to the answers of a --from release; there is none",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(2)
    options = RunOptions(
        run_root=run_dir,
        out_dir=out_dir,
        limit=limit,
        fresh=fresh,
        reask_failed=reask_failed,
        overwrite=overwrite,
        wait=wait,
        allow_empty=allow_empty,
        mock_llm=mock_llm,
        from_ref=from_ref,
        reask_unverified=reask_unverified,
        batch=batch,
    )
    with friendly_errors(_err()):
        result = Runner(loaded, options, _err()).run()
    print_run_summary(_out(), result)


@app.command()
def validate(
    recipes: Annotated[list[str], typer.Argument(help="Recipe files or shipped recipe names.")],
    overrides: SetOpt = None,
) -> None:
    """Check recipes without running anything."""
    from builder.io.sources import SourceError
    from builder.recipe.preflight import needs_network
    from builder.run.window_check import sample_texts, window_warnings

    failed = False
    for recipe in recipes:
        try:
            loaded = _load(recipe, overrides)
            _preflight(loaded, network=False)
            _check_output_dir(loaded)
        except typer.Exit:
            failed = True  # said why; the other recipes are still checked
            continue
        _out().print(
            f"[green]ok[/] {loaded.path} ({len(loaded.recipe.stage_objects())} stages; its form and local inputs)",
            highlight=False,
        )
        left = needs_network(loaded)
        if left:
            _err().print(
                "note: `build-bench plan` and `build-bench build` need the network for what validate could "
                f"not check offline: {'; '.join(left)}",
                markup=False,
                highlight=False,
            )
        try:
            texts = sample_texts(loaded)
        except SourceError as exc:  # the data may live elsewhere until the build runs
            _err().print(f"note: scorer window check skipped: {str(exc).splitlines()[0]}", highlight=False)
            texts = None
        for line in window_warnings(loaded.recipe, texts or []):
            _err().print(f"[yellow]warning:[/] {line}", markup=True, highlight=False)
    if failed:
        raise typer.Exit(2)


@app.command()
def plan(
    recipe: Annotated[str, typer.Argument(help="Recipe file or shipped recipe name.")],
    limit: LimitOpt = None,
    overrides: SetOpt = None,
    executor: ExecutorOpt = None,
    run_dir: Annotated[
        Path, typer.Option("--run-dir", help="Where builds keep checkpoints: a previous run's yields are used.")
    ] = Path("runs"),
) -> None:
    """Show the stages, the models they use and the LLM calls and tokens they will cost."""
    from builder.run.errors import friendly_errors
    from builder.run.plan import make_plan, print_plan

    loaded = _load(recipe, _with_executor(overrides, executor))
    _preflight(loaded, network=True)
    from builder.run.window_check import window_warnings

    with friendly_errors(_err()):
        rows = make_plan(loaded, limit, run_dir)
    print_plan(_out(), loaded, rows)
    for line in window_warnings(loaded.recipe, rows[0].texts):
        _err().print(f"[yellow]warning:[/] {line}", markup=True, highlight=False)


@app.command()
def stages(
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the stage reference as Markdown (the docs site's stages page).")
    ] = False,
) -> None:
    """List every registered stage with its parameters."""
    if markdown:
        from builder.run.stage_reference import stage_reference_markdown

        sys.stdout.write(stage_reference_markdown())
        return
    from builder.run.report import print_stages

    print_stages(_out())


def _register_subcommands() -> None:
    from builder.cli.eval_command import eval_command
    from builder.mteb_export.cli import export_mteb_command
    from builder.publish.cli import diff_command, push_command, stats_command
    from builder.review.cli import review_command
    from builder.run.cache_cli import cache_command

    app.command("cache")(cache_command)
    app.command("eval")(eval_command)
    app.command("stats")(stats_command)
    app.command("push")(push_command)
    app.command("diff")(diff_command)
    app.command("export-mteb")(export_mteb_command)
    app.command("review")(review_command)


_register_subcommands()

_COMMANDS = {"build", "validate", "plan", "stages", "stats", "eval", "push", "cache", "diff", "export-mteb", "review"}


def run(argv: list[str] | None = None) -> None:
    """Run the command line (the stop handlers are the caller's: see `builder.cli.main`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    # `build-bench RECIPE ...` is shorthand for `build-bench build RECIPE ...`.
    if args and not args[0].startswith("-") and args[0] not in _COMMANDS:
        args.insert(0, "build")
    app(args=args, prog_name="build-bench")
