"""The load step: read and validate the sources and count every document's tokens.

When the recipe's first stage is `sample_by_length`, the corpus streams: documents are
read, validated and de-duplicated in order, tokenized a block at a time, and reduced to
`(doc_id, title, lang, domain, n_tokens, words)`; only the texts the sampler will keep
are held, so memory follows the sample, not the corpus. Any other recipe loads the
whole corpus as before. Both give the first stage the same choice to make, so the
output is the same. On an executor other than the local one, the reading and counting
run on its workers (`load_spread`), again with the same result.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from rich.console import Console

from builder.executors import Executor, map_blocks
from builder.io.corpus_loader import CORPUS_IN, Doc, Dropped, iter_documents, load_sources
from builder.io.files.read import file_columns
from builder.run.load_key import streamed_sample
from builder.run.load_meter import LoadMeter
from builder.run.load_spread import stream_spread
from builder.run.load_tasks import count_block
from builder.stages.sample_by_length import WORDS, SampleByLength, word_count
from builder.stages.sample_picker import StreamingPicker
from builder.util.stable import derive_seed

if TYPE_CHECKING:
    from builder.backends.tokenizers import TokenCounter
    from builder.recipe.model import RecipeBase

BLOCK = 512  # documents tokenized at a time: enough for the tokenizer's threads, little memory
_DROP_SCHEMA = {"id": pl.Utf8, "reason": pl.Utf8}


def load_corpus(
    recipe: RecipeBase,
    base_dir: Path | None,
    limit: int | None,
    tokenizer: TokenCounter,
    console: Console,
    executor: Executor | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(corpus with n_tokens, drops as id/reason), streamed when the first stage samples.
    A local executor (or none) does it all in this process; any other spreads the reading
    and counting over its workers and gives the same tables."""
    corpus, drops = _load(recipe, base_dir, limit, tokenizer, console, executor)
    # Documents from files carry their path and location map (pages, headings, paragraphs).
    return file_columns(corpus, recipe.sources), drops


def _load(
    recipe: RecipeBase,
    base_dir: Path | None,
    limit: int | None,
    tokenizer: TokenCounter,
    console: Console,
    executor: Executor | None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    spread = executor is not None and executor.kind != "local"
    params = streamed_sample(recipe)
    if params is None:
        corpus, bad = load_sources(recipe.sources, base_dir, limit)
        texts = corpus["text"].to_list()
        if spread:
            assert executor is not None
            counts = [t for t, _ in map_blocks(executor, partial(count_block, recipe.tokenizer), texts, BLOCK)]
        else:
            counts = tokenizer.count_many(texts)
        return corpus.with_columns(pl.Series("n_tokens", counts, dtype=pl.Int64)), bad
    # The runner labels stage i `NN_<name>`; the sampler's seed comes from that label.
    picker = StreamingPicker(params, derive_seed(recipe.seed, f"01_{SampleByLength.name}"))
    if spread:
        assert executor is not None
        with LoadMeter(console) as meter:
            corpus, drops = stream_spread(
                list(recipe.sources), base_dir, limit, picker, executor, recipe.tokenizer, meter
            )
        return corpus, pl.DataFrame(drops, schema=_DROP_SCHEMA, orient="row")
    return stream_corpus(iter_documents(recipe.sources, base_dir, limit), picker, tokenizer, console)


def stream_corpus(
    items: Any, picker: StreamingPicker, tokenizer: TokenCounter, console: Console
) -> tuple[pl.DataFrame, pl.DataFrame]:
    parts: list[pl.DataFrame] = []
    drops: list[Dropped] = []
    block: list[Doc] = []
    with LoadMeter(console) as meter:
        for item in items:
            if isinstance(item, Dropped):
                drops.append(item)
                meter.add(dropped=1)
                continue
            block.append(item)
            if len(block) == BLOCK:
                parts.append(_reduce(block, picker, tokenizer))
                meter.add(kept=len(block))
                block = []
        if block:
            parts.append(_reduce(block, picker, tokenizer))
            meter.add(kept=len(block))
    reduced = pl.concat(parts) if parts else _reduce([], picker, tokenizer)
    texts = picker.texts()
    corpus = reduced.with_columns(
        pl.Series("text", [texts.get(d, "") for d in reduced["doc_id"].to_list()], dtype=pl.Utf8)
    )
    return corpus, pl.DataFrame(drops, schema=_DROP_SCHEMA, orient="row")


def _reduce(block: list[Doc], picker: StreamingPicker, tokenizer: TokenCounter) -> pl.DataFrame:
    """Count a block, let the sampler see it, and keep everything but the texts."""
    frame = pl.DataFrame(block, schema=CORPUS_IN, orient="row").with_columns(
        pl.Series("n_tokens", tokenizer.count_many([d.text for d in block]), dtype=pl.Int64),
        word_count(pl.col("text")).cast(pl.Int64).alias(WORDS),
    )
    picker.offer(frame)
    return frame.drop("text")
