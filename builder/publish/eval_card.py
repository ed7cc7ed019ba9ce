"""`build-bench eval`'s figures and warnings in the data card (README.md).

The card template renders an Evaluation section and eval's warnings from the folder's
`eval/eval.json` whenever the card is written, so a card written after an eval carries
them. An eval itself cannot re-render the whole card: the recipe the card shows is not
kept in the folder. It replaces the two marked parts of the card in place instead,
rendered by the same template macros, so both ways give the same text and a second eval
replaces what the first wrote. Only a card build-bench wrote is touched.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from builder.io.built_folder import CARD_FILE, card_is_ours
from builder.publish.card import card_environment
from builder.publish.eval_context import evaluation_context
from builder.util.atomic import write_text_atomic

PARTS_TEMPLATE = "evaluation.md.j2"


def _without(text: str, name: str) -> str:
    """`text` less the marked part `name` and the line break that ends it."""
    return re.sub(rf"<!-- build-bench:{name} -->\n.*?<!-- /build-bench:{name} -->\n", "", text, flags=re.DOTALL)


def _heading_at(text: str, start: int, title: str | None = None) -> int | None:
    """Where the first `## ` heading (with `title`, if given) at or after `start` begins."""
    pattern = rf"^## {re.escape(title)}$" if title else r"^## "
    found = re.compile(pattern, re.MULTILINE).search(text, start)
    return found.start() if found else None


def _insert(text: str, at: int | None, part: str) -> str:
    if at is None:
        return text.rstrip("\n") + "\n\n" + part
    return text[:at] + part + text[at:]


def splice_evaluation(card: str, evaluation: dict[str, Any]) -> str:
    """The card with its evaluation parts replaced by those of `evaluation`, placed where
    the default template renders them."""
    parts = card_environment().get_template(PARTS_TEMPLATE).module
    text = _without(_without(card, "evaluation"), "eval-warnings")
    # A warning the build already lists (a confound of the thirds) is not said twice.
    evaluation = {**evaluation, "warnings": [w for w in evaluation["warnings"] if f"\n- {w}\n" not in text]}
    body = text.find("\n---\n", 4) + 5 if text.startswith("---\n") else 0
    section = parts.section(evaluation)  # type: ignore[attr-defined]
    text = _insert(text, _heading_at(text, body, "Construction"), section)
    if evaluation["warnings"]:
        first = _heading_at(text, body)
        if first is not None and text.startswith("## Warnings\n", first):
            # After the build's own warnings: the blank line before the next heading.
            end = _heading_at(text, first + 1)
            at = None if end is None else end - 1
            text = _insert(text, at, parts.warnings(evaluation, False))  # type: ignore[attr-defined]
        else:
            text = _insert(text, first, parts.warnings(evaluation, True))  # type: ignore[attr-defined]
    return text


def update_card(folder: Path, report: dict[str, Any]) -> Path | None:
    """Put the evaluation into the folder's card; None when build-bench did not write it."""
    folder = Path(folder)
    if not card_is_ours(folder):
        return None
    path = folder / CARD_FILE
    write_text_atomic(path, splice_evaluation(path.read_text(encoding="utf-8"), evaluation_context(report)))
    return path
