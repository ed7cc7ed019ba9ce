"""Money: what a stage's LLM tokens cost at the prices a recipe sets per model.

A model without a `price` makes its stages' money unknown (None), never zero: a ledger
that silently leaves a model out would understate what a build costs. Answers that came
back through a provider's batch API are priced at the model's batch rates (its
synchronous rates where it names none); `synchronous` prices every answer at the
synchronous rates, what the same answers would have cost asked one by one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from builder.backends.llm.base import LLMUsage


def usage_usd(models: Mapping[str, Any], usage: Mapping[str, LLMUsage], synchronous: bool = False) -> float | None:
    """What each model's share of `usage` cost, summed; None when a model that was called has no price."""
    total = 0.0
    for name, used in usage.items():
        if not (used.prompt_tokens or used.completion_tokens):
            continue
        price = getattr(models.get(name), "price", None)
        if price is None:
            return None
        batch = (
            (0, 0, 0)
            if synchronous
            else (used.batch_prompt_tokens, used.batch_cached_tokens, used.batch_completion_tokens)
        )
        total += price.usd(
            used.prompt_tokens - batch[0], used.cached_tokens - batch[1], used.completion_tokens - batch[2]
        )
        total += price.usd(*batch, batch=True)
    return total


def estimate_usd(
    models: Mapping[str, Any],
    names: Sequence[str],
    prompt_tokens: float,
    cached_tokens: float,
    completion_tokens: float,
    batch: bool = False,
) -> float | None:
    """An estimate's money, its tokens split evenly among the stage's models (as stages
    that ask several judges do), at the batch rates when `batch`; None when one of them
    has no price."""
    prices: list[Any] = [getattr(models.get(n), "price", None) for n in names]
    if not prices or any(p is None for p in prices):
        return None
    share = 1 / len(prices)
    return sum(p.usd(prompt_tokens * share, cached_tokens * share, completion_tokens * share, batch) for p in prices)


def per_kept(total: float | int | None, kept: int) -> float | None:
    return None if total is None or kept <= 0 else total / kept
