"""`validate` and `plan`: warn when a QC scorer reads less than the documents hold.

For every reranker with a `max_length` that a stage scores with, the sampled documents
are counted in that scorer's tokens: with its own tokenizer where it is on disk (a local
folder or `pkg:`), else approximated as 1.3 tokens per whitespace word (marked `~`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from builder.backends.rerankers import BiEncoderConfig, CrossEncoderConfig, FlagConfig, reranker_configs

WORD_TOKENS = 1.3  # subword tokens per English word, for scorers whose tokenizer is not on disk
VALIDATE_SAMPLE = 200


def _counter(model: str) -> tuple[Any, bool]:
    """A token counter for the scorer's model and whether it is exact."""
    from builder.backends.tokenizers import HFCounter, TokenizerLoadError, resolve_local

    try:
        if resolve_local(model) is not None:
            return HFCounter(model), True
    except TokenizerLoadError:
        pass
    return None, False


def window_warnings(recipe: Any, texts: Sequence[str]) -> list[str]:
    """One line per (stage, scorer) whose max_length is below the longest sampled document."""
    if not texts:
        return []
    configs = reranker_configs(recipe)
    out: list[str] = []
    counts: dict[str, tuple[list[int], bool]] = {}
    for i, stage in enumerate(recipe.stage_objects(), start=1):
        for name in stage.rerankers_used():
            limit = getattr(configs.get(name), "max_length", None)
            if limit is None:
                continue
            if name not in counts:
                config = configs[name]
                # Only the neural scorers have a max_length, and they all name a model.
                assert isinstance(config, FlagConfig | CrossEncoderConfig | BiEncoderConfig)
                counter, exact = _counter(config.model)
                n = counter.count_many(list(texts)) if counter else [round(len(t.split()) * WORD_TOKENS) for t in texts]
                counts[name] = (n, exact)
            n, exact = counts[name]
            longer = sum(c > limit for c in n)
            if longer:
                mode = getattr(stage.params, "beyond_window", "window")
                what = (
                    "scored in overlapping windows"
                    if mode == "window"
                    else "dropped where the span lies past the window (beyond_window: drop)"
                )
                out.append(
                    f"{i:02d}_{stage.name}: reranker {name!r} reads {limit} tokens; "
                    f"{longer / len(n):.0%} of {len(n)} sampled documents are longer "
                    f"(longest {'' if exact else '~'}{max(n)} tokens): {what}"
                )
    return out


def sample_texts(loaded: Any) -> list[str] | None:
    """Up to VALIDATE_SAMPLE documents per source, when every source is a local file (validate
    reads nothing from the network); None otherwise."""
    from builder.io.corpus_loader import load_sources

    sources = loaded.recipe.sources
    if not sources or any(s.type == "hf" for s in sources):
        return None
    corpus, _ = load_sources(sources, loaded.base_dir, VALIDATE_SAMPLE)
    return corpus["text"].to_list()
