"""A build's budget (`budget:` in the recipe, `--budget` on the command line): the gate its
HTTP models share, the line that says it was spent, and what stats.json records of it.

The budget bounds what one run sends; answers the LLM cache already holds cost nothing,
so a rerun with a higher budget goes on where the last one stopped. A stage whose
requests the gate refused is left unfinished (as after an outage), so the rerun redoes
it, and every answer it did get comes from the cache.
"""

from __future__ import annotations

from typing import Any

from builder.backends.llm.budget import BUDGET_SPENT, SpendGate

_KINDS = {"calls": int, "tokens": int, "usd": float}


def budget_overrides(text: str) -> list[str]:
    """`calls=N,tokens=N,usd=X` (any of them) as recipe settings (`budget.calls=N`, ...);
    ValueError says what is wrong with the text."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name or not value.strip():
            raise ValueError(f"{part!r}: expected name=value, e.g. calls=200,tokens=500000,usd=2.5")
        if name not in _KINDS:
            raise ValueError(f"unknown limit {name!r} ({', '.join(_KINDS)})")
        try:
            _KINDS[name](value)
        except ValueError:
            raise ValueError(f"{name} must be {'a whole number' if _KINDS[name] is int else 'a number'}") from None
        out.append(f"budget.{name}={value.strip()}")
    return out


def make_gate(budget: Any) -> SpendGate:
    """The gate for a recipe's `budget` section; without one it only counts, as answers
    arrive, what the progress line shows."""
    if budget is None:
        return SpendGate()
    return SpendGate(calls=budget.calls, tokens=budget.tokens, usd=budget.usd)


def _spent_text(gate: SpendGate) -> str:
    spent = {"calls": gate.spent.calls, "tokens": gate.spent.tokens, "usd": gate.spent.usd}
    return ", ".join(
        f"{k} {spent[k]:,.4g} of {v:,.4g}" if k == "usd" else f"{k} {spent[k]:,} of {v:,}"
        for k, v in gate.limit.items()
    )


def lost_notice(label: str, lost: int, gate: SpendGate | None, last_error: str | None) -> str | None:
    """What to say about a stage whose `lost` requests got no answer: the budget line at the
    stage where the budget ran out, nothing at the later ones (that line said it), else the
    outage line."""
    if gate is not None and (last_error or "").startswith(BUDGET_SPENT):
        if gate.stopped_at != label:
            return None
        return (
            f"{label}: budget spent ({_spent_text(gate)}): {gate.refused} requests not sent; the stages keep "
            "what they got and the output is marked incomplete; run again with a higher budget to resume "
            "(answers already received are not asked again)"
        )
    return (
        f"{label}: {lost} LLM requests failed to get through (last: {last_error}); the stage is not "
        "checkpointed, run again to retry them"
    )


def budget_summary(gate: SpendGate | None) -> dict[str, Any]:
    """stats.json's `budget` entry (none without a budget): the limits, what this run spent,
    where it stopped (null when it did not) and how many requests it did not send."""
    if gate is None or not gate.limit:
        return {}
    spent = {"calls": gate.spent.calls, "tokens": gate.spent.tokens, "usd": round(gate.spent.usd, 6)}
    return {
        "budget": {
            "limit": dict(gate.limit),
            "spent": spent,
            "stopped_at_stage": gate.stopped_at,
            "not_sent": gate.refused,
        }
    }
