"""Growing a release: the answers a build used travel with its output, and a build
`--from` an earlier release (a folder, or `hf://datasets/<org>/<name>@<revision>`) reads
them into its cache first, so only what is new reaches the model.

Each stage's checkpoint lists the cache keys it used (`llm_keys.txt`, see checkpoints.py), so a build that
resumes stages from checkpoints still ships every answer its output rests on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from builder.backends.llm.cache_transfer import ANSWERS_FILE, read_answers
from builder.io.sources import SourceError
from builder.run.checkpoints import read_llm_keys

if TYPE_CHECKING:
    from rich.console import Console

    from builder.run.backends import Backends



def ship_answers(run_dir: Path, labels: list[str], backends: Backends, out_dir: Path) -> None:
    """Write the usable answers behind this output as `llm_answers.parquet` (none: no file)."""
    from builder.publish.beir import write_parquet

    keys: set[str] = set()
    for label in labels:
        keys |= read_llm_keys(run_dir / label)  # checked when the checkpoint was opened or written
    answers = backends.export_answers(keys)
    if answers is not None and answers.height:
        write_parquet(answers, out_dir / ANSWERS_FILE)


def seed_from(ref: str, backends: Backends, console: Console) -> None:
    """Read the answers an earlier release shipped into this run's cache."""
    from builder.publish.diff import hub_snapshot

    folder = hub_snapshot(ref, [ANSWERS_FILE]) if ref.startswith("hf://datasets/") else Path(ref)
    if not folder.is_dir():
        raise SourceError(f"--from {ref}: no such folder")
    answers = read_answers(folder)
    if answers is None:
        console.print(f"[yellow]--from {ref}: it ships no LLM answers ({ANSWERS_FILE}), so any LLM request "
                      "goes to the model[/]", highlight=False)
        return
    added = backends.seed_answers(answers, ref)
    console.print(f"--from {ref}: {answers.height} answers, {added} new to this cache", highlight=False)
