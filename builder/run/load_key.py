"""What a build's load step depends on beyond the sources' settings, worked out without
loading anything: the runner chains it into every stage's fingerprint, so an idle rerun
needs it before (and instead of) any table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from builder.io.files.listing import files_listing

if TYPE_CHECKING:
    from builder.recipe.model import RecipeBase
    from builder.stages.sample_by_length import SampleParams


def streamed_sample(recipe: RecipeBase) -> SampleParams | None:
    """The first stage's parameters when it is `sample_by_length` (the load then streams),
    else None."""
    stages = recipe.stage_objects()
    if stages and stages[0].name == "sample_by_length":
        return cast("SampleParams", stages[0].params)
    return None


def load_key(recipe: RecipeBase, base_dir: Path | None) -> list[Any]:
    """The files a files source lists (names, sizes, times), so adding or changing one
    loads again; and for a streamed load, which keeps only the texts the first stage will
    sample, that stage and the seed."""
    key = [listing for spec in recipe.sources if (listing := files_listing(spec, base_dir))]
    params = streamed_sample(recipe)
    if params is None:
        return key
    return [*key, "streamed", json.dumps(params.model_dump(mode="json"), sort_keys=True), recipe.seed]
