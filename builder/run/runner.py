"""Execute a recipe: load sources, run stages with checkpoints, write the dataset.

Each finished stage leaves `NN_<stage>/` in the run folder with the Bench (parquet),
its stats and a fingerprint chained from every earlier stage's parameters and the
content of its input tables, so a rerun skips a stage exactly when nothing it depends
on changed. LLM answers are cached separately, per call, so a run killed mid-stage pays
for nothing twice. A lock on the run folder and on the output folder keeps a second
build off them while one runs.
"""

# cohesive: one build's life (locks, stage loop, checkpoints, the final write) reads top to bottom here.

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console

from builder import __version__
from builder.backends.llm.base import LLMUsage
from builder.backends.llm.batch_book import BOOK_NAME
from builder.backends.llm.mock_backend import MOCK_CACHE
from builder.backends.llm.prompt_templates import PromptLibrary
from builder.backends.rerankers import reranker_fingerprint
from builder.backends.tokenizers import TokenCounter
from builder.recipe.model import LoadedRecipe
from builder.recipe.yaml_text import Problem, RecipeError, line_of
from builder.records.marker import output_is_current, write_marker
from builder.records.run_warnings import LARGE_REMOVAL, THRESHOLD_FIGURE
from builder.records.stage_record import StageRecord
from builder.run.backends import Backends
from builder.run.budget import budget_summary, lost_notice
from builder.run.checkpoints import Checkpoint, open_checkpoint, save_checkpoint
from builder.run.disk_full import disk_full
from builder.run.ledger import usage_usd
from builder.run.load_key import load_key
from builder.run.load_meter import LOAD_LABEL
from builder.run.locks import RUN_LOCK, FileLock, out_lock_path
from builder.run.outdir import check_out_dir_contents, check_out_dir_place
from builder.run.run_folder import digest as _hash
from builder.run.run_folder import inputs_fingerprint
from builder.stages.base import StageParamError
from builder.util.atomic import recover, recover_folder, replace_dir, temp_path_beside

# What only a build with work to do needs (polars, the tables, the stages' helpers) is imported
# where that work starts, so a rerun with nothing to do starts light.
if TYPE_CHECKING:
    from builder.bench import Bench
    from builder.stages.base import Stage


@dataclass
class RunOptions:
    run_root: Path = Path("runs")
    out_dir: Path | None = None
    limit: int | None = None
    fresh: bool = False
    reask_failed: bool = False  # rerun the stages whose cached answers were rejected, asking those again
    overwrite: bool = False  # replace an output folder that build-bench did not write
    wait: bool = False  # wait for another build holding the locks instead of exiting
    allow_empty: bool = False  # write a result with no documents or queries
    mock_llm: bool = False  # answer every LLM with the in-process mock (the output says so)
    from_ref: str | None = None  # an earlier release whose LLM answers seed the cache
    reask_unverified: bool = False  # with from_ref: answers that fail their check are left out, not refused
    batch: bool = False  # ask every HTTP model through provider batches (see docs/batch.md)


class RunResult:
    """What a build made. When nothing was left to do, the final tables stay in the last
    stage's checkpoint until `bench` is first read, and the counts come from the output
    folder's stats.json: an idle rerun never loads a table."""

    def __init__(
        self,
        bench: Bench | None,
        out_dir: Path,
        run_dir: Path,
        stage_stats: list[StageRecord] | None = None,
        written: bool = True,  # False when the output folder already held this exact output
        last: Checkpoint | None = None,  # where `bench` is read from when it is None
    ):
        self._bench, self._last = bench, last
        self.out_dir, self.run_dir = out_dir, run_dir
        self.stage_stats = stage_stats if stage_stats is not None else []
        self.written = written

    @property
    def bench(self) -> Bench:
        if self._bench is None:
            if self._last is None or (bench := self._last.load(lambda _: None)) is None:
                raise RuntimeError(f"{self.run_dir}: the last stage's checkpoint could not be read; build again")
            self._bench = bench
        return self._bench

    def counts(self) -> dict[str, int]:
        """Documents, queries and qrels in the output folder, as its stats.json counts them
        (a split build's root holds the test split), whether this run wrote it or found it
        current; the result's own tables when there is no such file."""
        from builder.io.built_folder import BuiltFolder

        written = BuiltFolder.open(self.out_dir).stats().get("counts", {})
        if all(isinstance(written.get(k), int) for k in ("docs", "queries", "qrels")):
            return {k: written[k] for k in ("docs", "queries", "qrels")}
        return self.bench.counts()


class Runner:
    def __init__(self, loaded: LoadedRecipe, options: RunOptions, console: Console | None = None):
        self.loaded = loaded
        self.recipe = loaded.recipe
        self.options = options
        self.console = console or Console(stderr=True)
        self.prompts = PromptLibrary(loaded.base_dir)
        self._inputs_fp = inputs_fingerprint(self.recipe, options.limit, options.mock_llm)
        self.run_dir = options.run_root / self.recipe.name / self._inputs_fp[:12]
        # The mock's answers stay in its run folder, out of the LLM cache real builds share.
        cache_path = self.run_dir / MOCK_CACHE if options.mock_llm else options.run_root / "llm_cache.sqlite"
        self.backends = Backends(
            self.recipe,
            self.prompts,
            cache_path,
            reask_failed=options.reask_failed,
            mock_llm=options.mock_llm,
            batch_book=self.run_dir / BOOK_NAME,
            batch=options.batch,
            build=f"{self.recipe.name}/{self._inputs_fp[:12]}",
        )
        self._failed_stages: set[str | None] | None = None  # read from the cache on first need
        for source in self.recipe.sources:
            if source.type == "files":  # converted files are kept, so a rebuild reads them back
                from builder.io.files.read import FILE_CACHE

                source.cache_conversions(options.run_root / FILE_CACHE)

    @property
    def tokenizer(self) -> TokenCounter:
        return self.backends.tokenizer

    def close(self) -> None:
        self.backends.close()

    # -- fingerprints ---------------------------------------------------------

    def _stage_fingerprint(self, previous: str, input_digest: str, stage: Stage) -> str:
        prompts = {name: self.prompts.get(name).sha256 for name in stage.prompts_used()}
        models = {m: self.recipe.models[m].model_dump(mode="json") for m in stage.models_used()}
        rerankers = reranker_fingerprint(self.recipe, stage.rerankers_used())
        return _hash(
            previous,
            input_digest,
            stage.name,
            stage.params.model_dump(mode="json"),
            prompts,
            models,
            rerankers,
            self.recipe.seed,
        )

    # -- the run --------------------------------------------------------------

    def run(self) -> RunResult:
        out_dir = self.options.out_dir or Path(self.recipe.output.dir or f"out/{self.recipe.name}")
        if self.options.mock_llm and self.options.out_dir is None and out_dir.name:
            # Never over a real build's output. A path with no name (`/`, `.`) has no
            # sibling to use: the place check below refuses it.
            out_dir = out_dir.with_name(f"{out_dir.name}-mock")
        if self.options.from_ref:
            from builder.run.grow import check_out_dir_apart

            check_out_dir_apart(self.options.from_ref, out_dir)
        check_out_dir_place(out_dir, self.options.run_root, self.run_dir)
        try:
            bench, last, stats, written = self._build(out_dir)
        except Exception as exc:
            full = disk_full(exc, {"--out": out_dir, "--run-dir": self.options.run_root})
            if full is None:
                raise
            raise full from exc
        if self.options.mock_llm:
            self._notice(
                f"{out_dir}: built with the mock LLM (answers made from the documents' own sentences), "
                "to try the recipe; rebuild without --mock-llm for a real benchmark"
            )
            if self.recipe.push is not None:
                self._notice(f"not pushed to {self.recipe.push.repo}: built with the mock LLM")
        elif self.recipe.push is not None:
            from builder.publish.hub import push

            cfg = self.recipe.push
            push(out_dir, cfg.repo, private=cfg.private, tag=cfg.tag, console=self.console)
        return RunResult(bench, out_dir, self.run_dir, stats, written, last)

    def _build(self, out_dir: Path) -> tuple[Bench | None, Checkpoint | None, list[StageRecord], bool]:
        """Under the locks: resume or run the stages and write the output when it changed.
        The Bench is None (and the last checkpoint given instead) when the output folder
        already held this output: its tables were checked when they were written."""
        with self._locked(out_dir):
            for note in recover(out_dir) + recover_folder(self.run_dir):
                self._notice(note)
            check_out_dir_contents(out_dir, self.options.overwrite)
            try:
                if self.options.from_ref:
                    from builder.run.grow import seed_from

                    seed_from(self.options.from_ref, self.backends, self.console, self.options.reask_unverified)
                bench, last, stats, bench_fp = self._stages(out_dir)
                out_fp = self._output_fingerprint(bench_fp)
                if bench is not None and not self.options.allow_empty:
                    from builder.run.outcome import check_result

                    check_result(bench, stats, self.backends.usage(), getattr(self.backends.gate, "stopped_at", None))
                written = bench is not None and (self.options.fresh or not output_is_current(out_dir, out_fp))
                if bench is not None and written:
                    self._write(bench, stats, out_dir, out_fp)
                else:
                    self.console.print(
                        f"{out_dir}: already holds this output (fingerprint {out_fp[:12]}); nothing written",
                        highlight=False,
                    )
            finally:
                self.close()
        return bench, last, stats, written

    @contextmanager
    def _locked(self, out_dir: Path) -> Iterator[None]:
        """Hold the run folder's lock, then the output folder's (always in that order)."""
        with ExitStack() as stack:
            for lock in (
                FileLock(self.run_dir / RUN_LOCK, "run folder"),
                FileLock(out_lock_path(out_dir), "output folder"),
            ):
                lock.acquire(self.options.wait, self._notice)
                stack.callback(lock.release)
            yield

    def _notice(self, text: str) -> None:
        self.console.print(f"[yellow]{text}[/]", highlight=False)

    def _stages(self, out_dir: Path) -> tuple[Bench | None, Checkpoint | None, list[StageRecord], str]:
        """The Bench after the last stage, the stats of every stage, and a fingerprint of
        that Bench (the last stage's fingerprint and content digest). When the last stage was
        reused and `out_dir` already holds its output, the Bench is not read: its checkpoint
        comes back instead (unless the result looks empty, which check_result must see)."""
        while True:
            walked = self._walk()
            if walked is None:
                continue  # a checkpoint whose tables would not parse was moved aside: walk again to redo it
            bench, last, stats, bench_fp = walked
            if last is None:
                return bench, None, stats, bench_fp
            final = last.stats
            idle = not self.options.fresh and output_is_current(out_dir, self._output_fingerprint(bench_fp))
            if idle and (self.options.allow_empty or (final.docs_out and final.queries_out)):
                return None, last, stats, bench_fp
            if (bench := last.load(self._notice)) is not None:
                return bench, None, stats, bench_fp

    def _walk(self) -> tuple[Bench | None, Checkpoint | None, list[StageRecord], str] | None:
        """Reuse what is unchanged, run the rest. A reused checkpoint is only checked; its
        tables are read when the next stage has to run on them. When the last stage is
        reused, its checkpoint comes back unread, in place of the Bench."""
        stats: list[StageRecord] = []
        fp, digest = _hash(self._inputs_fp, "load", *load_key(self.recipe, self.loaded.base_dir)), ""
        bench: Bench | None = None
        reused: Checkpoint | None = None
        steps: list[tuple[str, Stage | None]] = [(LOAD_LABEL, None)]
        steps += [(f"{i:02d}_{s.name}", s) for i, s in enumerate(self.recipe.stage_objects(), start=1)]
        for index, (label, stage) in enumerate(steps):
            if stage is not None:
                fp = self._stage_fingerprint(fp, digest, stage)
            found = None if self._rerun(label) else open_checkpoint(self.run_dir / label, fp, self._notice)
            if found is not None:
                self.console.print(f"[dim]{label}: unchanged, loaded from checkpoint[/]")
                stats.append(found.stats.model_copy(update={"resumed": True}))
                digest, reused = found.digest, found
                continue
            # From here on stages run: their models' client libraries load meanwhile.
            self.backends.warm(m for _, s in steps[index:] if s is not None for m in s.models_used())
            if reused is not None:
                if (bench := reused.load(self._notice)) is None:
                    return None
                reused = None
            compute = (
                self._load if stage is None else partial(self._run_stage, cast("Bench", bench), stage, index, label)
            )
            bench, st, digest = self._computed(label, fp, compute)
            stats.append(st)
        if reused is not None:
            return None, reused, stats, _hash(fp, digest)
        return bench, None, stats, _hash(fp, digest)

    def _rerun(self, label: str) -> bool:
        """Whether to run a stage even with a current checkpoint: every one with --fresh;
        with --reask-failed, those whose cached answers are marked unusable (every one when
        such an answer predates the cache's stage records)."""
        if self.options.fresh:
            return True
        if not self.options.reask_failed:
            return False
        if self._failed_stages is None:
            self._failed_stages = self.backends.failed_stages()
        return label in self._failed_stages or None in self._failed_stages

    def _output_fingerprint(self, bench_fp: str) -> str:
        """What the output folder depends on: the final tables, the whole recipe (the card
        embeds it) and the writers' version."""
        return _hash(bench_fp, self.loaded.text, self.recipe.model_dump(mode="json"), __version__)

    def _write(self, bench: Bench, stats: list[StageRecord], out_dir: Path, out_fp: str) -> None:
        """Everything is written into a staging folder that replaces `out_dir` only when
        complete, so a failure never leaves a half-written dataset behind."""
        # The writers (statistics, plots, the card) load only when there is something to write.
        from builder.publish.beir import write_beir
        from builder.publish.multilingual import write_multilingual
        from builder.publish.outputs import publish_outputs
        from builder.publish.training import split_off, write_splits
        from builder.run.grow import ship_answers

        staging = temp_path_beside(out_dir)
        summary = self._summary(stats)
        # A split build: the test split is the benchmark every writer below sees.
        bench, other_splits = split_off(bench)
        try:
            write_beir(bench, staging, stats=summary)
            write_splits(other_splits, staging)
            o = self.recipe.output
            if o.per_language or o.posir_layout or o.cross_lingual:
                write_multilingual(bench, staging, o, stats=summary)
            # stats.json and the card record the answers file's digest: `--from` checks it.
            answers = ship_answers(self.run_dir, [st.stage for st in stats], self.backends, staging)
            publish_outputs(bench, staging, {**summary, **({"llm_answers": answers} if answers else {})}, self.loaded)
            write_marker(staging, self.recipe.name, out_fp)
            replace_dir(staging, out_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _computed(
        self, label: str, fp: str, compute: Callable[[], tuple[Bench, StageRecord]]
    ) -> tuple[Bench, StageRecord, str]:
        """Run one stage and checkpoint it; returns its Bench, record and content digest."""
        stage_dir = self.run_dir / label
        failed_before = self.backends.usage().transport_failures
        bench, record = compute()
        lost = self.backends.usage().transport_failures - failed_before
        if lost:
            # Answers lost to an outage or not sent for the budget are not the model's: leave the
            # stage unfinished so a rerun asks exactly those (answers that came back are cached).
            record.llm_transport_failures = lost
            if line := lost_notice(label, lost, self.backends.gate, self.backends.usage().last_transport_error):
                self._notice(line)
        digest = save_checkpoint(stage_dir, bench, record, None if lost else fp, self.backends.used_keys(label))
        if not lost:
            self.backends.settle_batches()
        return bench, record, digest

    def _load(self) -> tuple[Bench, StageRecord]:
        import polars as pl

        from builder.bench import Bench
        from builder.io.files.read import empty_page_warnings, files_figures
        from builder.run.load import load_corpus

        t0 = time.perf_counter()
        corpus, bad = load_corpus(
            self.recipe, self.loaded.base_dir, self.options.limit, self.tokenizer, self.console, self.backends.executor
        )
        drops = bad.select(pl.lit(LOAD_LABEL).alias("stage"), pl.lit("doc").alias("kind"), "id", "reason")
        bench = Bench.of(corpus=corpus, drops=drops)
        record = StageRecord(
            stage=LOAD_LABEL,
            docs_in=corpus.height + bad.height,
            docs_out=corpus.height,
            docs_dropped=bad.height,
            queries_in=0,
            queries_out=0,
            dropped=dict(Counter(bad["reason"].to_list())),
            seconds=round(time.perf_counter() - t0, 3),
            tokenizer=self.tokenizer.name,
            figures=files_figures(self.recipe.sources),
            warnings=empty_page_warnings(self.recipe.sources),
        )
        self.console.print(f"{LOAD_LABEL}: {corpus.height} documents ({bad.height} rows dropped)")
        return bench, record

    def _run_stage(self, bench: Bench, stage: Stage, index: int, label: str) -> tuple[Bench, StageRecord]:
        from builder.records.group_ledger import asked_by_group
        from builder.records.qc_scorers import qc_scorers
        from builder.run.invariants import check_invariants
        from builder.run.progress import RichProgress
        from builder.run.spend_meter import spend_meter
        from builder.stages.context import StageContext

        work_dir = self.run_dir / "work" / label
        work_dir.mkdir(parents=True, exist_ok=True)
        ctx = StageContext(
            seed=self.recipe.seed,
            label=label,
            index=index,
            tokenizer=self.tokenizer,
            work_dir=work_dir,
            prompts=self.prompts,
            progress=RichProgress(self.console, label, meter=spend_meter(stage, bench, self.backends)),
            llm_factory=self.backends.llm,
            reranker_factory=self.backends.reranker,
            executor_factory=lambda: self.backends.executor,
            base_dir=self.loaded.base_dir,
            flag_answers=self.backends.flag_answers,
        )
        before = self.backends.usage()
        by_model_before = self.backends.usage_by_model()
        refused_before = self.backends.schema_refusals()
        self.backends.enter_stage(label)
        t0 = time.perf_counter()
        try:
            out = stage.run(bench, ctx)
        except StageParamError as exc:
            loc = ("stages", index - 1, stage.name, exc.param)
            raise RecipeError(self.loaded.path, [Problem(loc, str(exc), line_of(self.loaded.text, loc))]) from None
        seconds = time.perf_counter() - t0
        record = check_invariants(bench, out, stage, label)
        # Answers an earlier run of this build paid for (before a budget stop, a kill or an
        # outage) count as paid here too, so the ledger is that of the build made in one go.
        carried = self.backends.paid_earlier(label, stage.models_used())
        usage = sum(carried.values(), self.backends.usage() - before)
        record.seconds = round(seconds, 3)
        record.llm = usage.as_record()
        spent = {
            name: after - by_model_before.get(name, LLMUsage()) + carried.get(name, LLMUsage())
            for name, after in self.backends.usage_by_model().items()
        }
        if usage.calls and (usd := usage_usd(self.recipe.models, spent)) is not None:
            record.llm["usd"] = round(usd, 6)
            if usage.batch_calls:  # what the same answers would have cost asked one by one
                record.llm["usd_synchronous"] = round(cast(float, usage_usd(self.recipe.models, spent, True)), 6)
        record.prompts = {n: self.prompts.get(n).sha256 for n in stage.prompts_used()}
        record.figures = dict(ctx.stats)
        # What the stage's LLM usage served, per position group: the ledger shares it out so.
        asked = asked_by_group(bench, out) if usage.calls or usage.cache_hits or usage.failures else {}
        if any(asked.values()):
            record.figures["asked_by_group"] = asked
        record.warnings = list(ctx.warnings)
        for line in self.backends.new_schema_refusals(refused_before):
            self._notice(f"{label}: {line}")
            record.warnings.append(line)
        if self.recipe.warn_removed_above != LARGE_REMOVAL:
            record.figures[THRESHOLD_FIGURE] = self.recipe.warn_removed_above
        scorers = qc_scorers(stage, self.recipe, self.options.mock_llm)
        if scorers:
            record.figures["qc_scorers"] = scorers
        new = "".join(
            f", {n} new {kind}" for kind, n in (("docs", record.docs_added), ("queries", record.queries_added)) if n
        )
        self.console.print(
            f"{label}: docs {record.docs_in}→{record.docs_out}, "
            f"queries {record.queries_in}→{record.queries_out}{new}"
            + (f", dropped {record.n_dropped}" if record.dropped else "")
        )
        return out, record

    def _summary(self, stats: list[StageRecord]) -> dict[str, Any]:
        """The run summary as the writers store it in stats.json."""
        summary: dict[str, Any] = {
            "recipe": self.recipe.name,
            "stages": [record.to_json() for record in stats],
            **budget_summary(self.backends.gate),
        }
        if self.options.mock_llm:
            summary["mock_llm"] = True
        if self.options.limit is not None:
            summary["limit"] = self.options.limit
        return summary
