"""Stage order: every stage's needs (builder.stages.contracts) must be provided by the
recipe's sources or an earlier stage, so an impossible order is refused before anything
runs, naming the stage that would provide the need."""

from __future__ import annotations

from typing import Any

from builder.recipe.yaml_text import line_of
from builder.stages import STAGES
from builder.stages.contracts import DOCUMENTS, VOCABULARY


def order_problems(recipe: Any, text: str) -> list[tuple[int, str]]:
    """(stage index, message) for every need no source or earlier stage provides."""
    stages = recipe.stage_objects()
    have: set[str] = {DOCUMENTS} if recipe.sources else set()
    out: list[tuple[int, str]] = []
    for i, stage in enumerate(stages):
        for word in sorted(stage.needed() - have):
            later = next((j for j in range(i + 1, len(stages)) if word in stages[j].provided()), None)
            if later is not None:
                line = line_of(text, ("stages", later, stages[later].name))
                fix = f"{stages[later].name} (stage {later + 1}, line {line}) provides them: move it before this stage"
            else:
                able = sorted(name for name, cls in STAGES.items() if word in cls.provides)
                fix = f"no stage of this recipe provides them: add one of {', '.join(able)} before it" + (
                    ", or list sources:" if word == DOCUMENTS else ""
                )
            out.append((i, f"needs {word} ({VOCABULARY[word]}), which no earlier stage provides; {fix}"))
        have |= stage.provided()
    return out
