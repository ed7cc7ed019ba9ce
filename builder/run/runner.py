"""Execute a recipe: load sources, run stages with checkpoints, write the dataset.

Each finished stage leaves `NN_<stage>/` in the run folder with the Bench (parquet),
its stats and a fingerprint chained from every earlier stage's parameters and the
content of its input tables, so a rerun skips a stage exactly when nothing it depends
on changed. LLM answers are cached separately, per call, so a run killed mid-stage pays
for nothing twice. A lock on the run folder and on the output folder keeps a second
build off them while one runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from rich.console import Console

from builder.backends.rerankers import reranker_fingerprint
from builder.bench import Bench
from builder.atomic import recover, recover_folder, replace_dir, temp_path_beside
from builder.stages.context import StageContext
from builder.publish.beir import write_beir
from builder.publish.multilingual import write_multilingual
from builder.run.backends import Backends
from builder.run.load import LOAD_LABEL, load_corpus, load_key
from builder.run.checkpoints import load_checkpoint, save_checkpoint
from builder.run.locks import FileLock, out_lock_path
from builder.run.outcome import check_result
from builder.run.outdir import check_out_dir_contents, check_out_dir_place, write_marker
from builder.run.progress import RichProgress
from builder.prompt_templates import PromptLibrary
from builder.publish.hub import push
from builder.publish.outputs import publish_outputs
from builder.recipe.model import LoadedRecipe
from builder.stages.base import Stage

if TYPE_CHECKING:
    from builder.backends.tokenizers import TokenCounter


class InvariantError(RuntimeError):
    """A stage lost or invented rows without recording why: a bug in that stage."""


@dataclass
class RunOptions:
    run_root: Path = Path("runs")
    out_dir: Path | None = None
    limit: int | None = None
    fresh: bool = False
    overwrite: bool = False  # replace an output folder that build-bench did not write
    wait: bool = False  # wait for another build holding the locks instead of exiting
    allow_empty: bool = False  # write a result with no documents or queries


@dataclass
class RunResult:
    bench: Bench
    out_dir: Path
    run_dir: Path
    stage_stats: list[dict[str, Any]] = field(default_factory=list)


def _hash(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


class Runner:
    def __init__(self, loaded: LoadedRecipe, options: RunOptions, console: Console | None = None):
        self.loaded = loaded
        self.recipe = loaded.recipe
        self.options = options
        self.console = console or Console(stderr=True)
        self.prompts = PromptLibrary(loaded.base_dir)
        self.backends = Backends(self.recipe, self.prompts, options.run_root / "llm_cache.sqlite")
        self._inputs_fp = _hash(self._sources_json(), self.recipe.tokenizer.model_dump(mode="json"), options.limit)
        self.run_dir = options.run_root / self.recipe.name / self._inputs_fp[:12]

    def _sources_json(self) -> list[Any]:
        return [s.model_dump(mode="json") for s in self.recipe.sources]

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
        return _hash(previous, input_digest, stage.name, stage.params.model_dump(mode="json"), prompts, models,
                     rerankers, self.recipe.seed)

    # -- the run --------------------------------------------------------------

    def run(self) -> RunResult:
        out_dir = self.options.out_dir or Path(self.recipe.output.dir or f"out/{self.recipe.name}")
        check_out_dir_place(out_dir, self.options.run_root, self.run_dir)
        with self._locked(out_dir):
            for note in recover(out_dir) + recover_folder(self.run_dir):
                self._notice(note)
            check_out_dir_contents(out_dir, self.options.overwrite)
            try:
                bench, stats = self._stages()
                if not self.options.allow_empty:
                    check_result(bench, stats, self.backends.usage())
                self._write(bench, stats, out_dir)
            finally:
                self.close()
        if self.recipe.push is not None:
            cfg = self.recipe.push
            push(out_dir, cfg.repo, private=cfg.private, tag=cfg.tag, console=self.console)
        return RunResult(bench=bench, out_dir=out_dir, run_dir=self.run_dir, stage_stats=stats)

    @contextmanager
    def _locked(self, out_dir: Path) -> Iterator[None]:
        """Hold the run folder's lock, then the output folder's (always in that order)."""
        with ExitStack() as stack:
            for lock in (FileLock(self.run_dir / ".lock", "run folder"),
                         FileLock(out_lock_path(out_dir), "output folder")):
                lock.acquire(self.options.wait, self._notice)
                stack.callback(lock.release)
            yield

    def _notice(self, text: str) -> None:
        self.console.print(f"[yellow]{text}[/]", highlight=False)

    def _stages(self) -> tuple[Bench, list[dict[str, Any]]]:
        stats: list[dict[str, Any]] = []
        fp = _hash(self._inputs_fp, "load", *load_key(self.recipe))
        bench, st, digest = self._checkpointed(LOAD_LABEL, fp, self._load)
        stats.append(st)
        for i, stage in enumerate(self.recipe.stage_objects(), start=1):
            fp = self._stage_fingerprint(fp, digest, stage)
            label = f"{i:02d}_{stage.name}"
            bench, st, digest = self._checkpointed(
                label, fp, lambda b=bench, s=stage, i=i, lab=label: self._run_stage(b, s, i, lab)
            )
            stats.append(st)
        return bench, stats

    def _write(self, bench: Bench, stats: list[dict[str, Any]], out_dir: Path) -> None:
        """Everything is written into a staging folder that replaces `out_dir` only when
        complete, so a failure never leaves a half-written dataset behind."""
        staging = temp_path_beside(out_dir)
        summary = self._summary(stats)
        try:
            write_beir(bench, staging, stats=summary)
            o = self.recipe.output
            if o.per_language or o.posir_layout or o.cross_lingual:
                write_multilingual(bench, staging, o, stats=summary)
            publish_outputs(bench, staging, summary, self.loaded)
            write_marker(staging, self.recipe.name)
            replace_dir(staging, out_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _checkpointed(self, label: str, fp: str, compute: Callable[[], tuple[Bench, dict[str, Any]]]
                      ) -> tuple[Bench, dict[str, Any], str]:
        stage_dir = self.run_dir / label
        found = None if self.options.fresh else load_checkpoint(stage_dir, fp, self._notice)
        if found is not None:
            self.console.print(f"[dim]{label}: unchanged, loaded from checkpoint[/]")
            return found.bench, {**found.stats, "resumed": True}, found.digest
        failed_before = self.backends.usage().transport_failures
        bench, stats = compute()
        lost = self.backends.usage().transport_failures - failed_before
        if lost:
            # Answers lost to an outage are not the model's: leave the stage unfinished so
            # a rerun asks again for exactly those (answers that came back are cached).
            stats["llm_transport_failures"] = lost
            self._notice(f"{label}: {lost} LLM requests failed to get through (last: "
                         f"{self.backends.usage().last_transport_error}); the stage is not checkpointed, "
                         "run again to retry them")
        return bench, stats, save_checkpoint(stage_dir, bench, stats, None if lost else fp)

    def _load(self) -> tuple[Bench, dict[str, Any]]:
        t0 = time.perf_counter()
        corpus, bad = load_corpus(self.recipe, self.loaded.base_dir, self.options.limit, self.tokenizer,
                                  self.console)
        drops = bad.select(pl.lit(LOAD_LABEL).alias("stage"), pl.lit("doc").alias("kind"), "id", "reason")
        bench = Bench.of(corpus=corpus, drops=drops)
        stats = {
            "stage": LOAD_LABEL, "docs_in": corpus.height + bad.height, "docs_out": corpus.height,
            "queries_in": 0, "queries_out": 0,
            "dropped": dict(Counter(bad["reason"].to_list())),
            "seconds": round(time.perf_counter() - t0, 3), "tokenizer": self.tokenizer.name,
        }
        self.console.print(f"{LOAD_LABEL}: {corpus.height} documents ({bad.height} rows dropped)")
        return bench, stats

    def _run_stage(self, bench: Bench, stage: Stage, index: int, label: str
                   ) -> tuple[Bench, dict[str, Any]]:
        work_dir = self.run_dir / "work" / label
        work_dir.mkdir(parents=True, exist_ok=True)
        ctx = StageContext(
            seed=self.recipe.seed, label=label, index=index, tokenizer=self.tokenizer,
            work_dir=work_dir, prompts=self.prompts,
            progress=RichProgress(self.console, label), llm_factory=self.backends.llm,
            reranker_factory=self.backends.reranker,
            base_dir=self.loaded.base_dir,
        )
        before = self.backends.usage()
        t0 = time.perf_counter()
        out = stage.run(bench, ctx)
        seconds = time.perf_counter() - t0
        stats = check_invariants(bench, out, stage, label)
        usage = self.backends.usage() - before
        stats.update({
            "seconds": round(seconds, 3),
            "llm": usage.__dict__,
            "prompts": {n: self.prompts.get(n).sha256 for n in stage.prompts_used()},
            **ctx.stats,
        })
        self.console.print(
            f"{label}: docs {stats['docs_in']}→{stats['docs_out']}, "
            f"queries {stats['queries_in']}→{stats['queries_out']}"
            + (f", dropped {sum(stats['dropped'].values())}" if stats["dropped"] else "")
        )
        return out, stats

    def _summary(self, stats: list[dict[str, Any]]) -> dict[str, Any]:
        return {"recipe": self.recipe.name, "stages": stats}


def check_invariants(before: Bench, after: Bench, stage: Stage, label: str) -> dict[str, Any]:
    """in == out + dropped, for documents and queries; unique ids; qrels point at live rows."""
    stats: dict[str, Any] = {"stage": label}
    drops = after.drops.filter(pl.col("stage") == label)
    for kind, table, key in (("doc", "corpus", "doc_id"), ("query", "queries", "query_id")):
        ids_in = set(getattr(before, table)[key].to_list())
        out_col = getattr(after, table)[key]
        if out_col.n_unique() != out_col.len():
            raise InvariantError(f"{label}: duplicate {key} values in the output")
        ids_out = set(out_col.to_list())
        dropped = set(drops.filter(pl.col("kind") == kind)["id"].to_list())
        gone = ids_in - ids_out
        if table not in stage.rebuilds and gone != dropped & ids_in:
            lost = sorted(gone - dropped)[:5]
            raise InvariantError(
                f"{label}: {len(gone - dropped)} {table} rows vanished without a drop reason "
                f"(e.g. {lost}); a stage must record every removal"
            )
        name = "docs" if kind == "doc" else "queries"
        stats[f"{name}_in"] = len(ids_in)
        stats[f"{name}_out"] = len(ids_out)
        stats[f"{name}_added"] = len(ids_out - ids_in)
    live_q = set(after.queries["query_id"].to_list())
    live_d = set(after.corpus["doc_id"].to_list())
    bad = after.qrels.filter(~pl.col("query_id").is_in(list(live_q)) | ~pl.col("doc_id").is_in(list(live_d)))
    if bad.height:
        raise InvariantError(f"{label}: {bad.height} qrels point at removed queries or documents")
    stats["dropped"] = dict(Counter(drops["reason"].to_list()))
    return stats
