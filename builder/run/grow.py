"""Growing a release: the answers a build used travel with its output, and a build
`--from` an earlier release (a folder, or `hf://datasets/<org>/<name>@<revision>`) reads
them into its cache first, so only what is new reaches the model.

Each stage's checkpoint lists the cache keys it used (`llm_keys.txt`, see checkpoints.py), so a build that
resumes stages from checkpoints still ships every answer its output rests on.

The answers file is bound to its release: stats.json records its sha256, and `--from`
reads it only when the file still has that digest and the shape the cache needs.
Otherwise it stops (or, with `--reask-unverified`, leaves the file out and asks the
model), so answers edited after the release never reach a build unnoticed. The digest
tells a changed or swapped file; it is not a signature (whoever can rewrite both files
can make them agree). A build from a folder never writes into that folder.

A `--mock-llm` build ships the mock's answers too, marked `mock` in that record: a mock
build grows from them offline, and a real build refuses them (they are no model's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.backends.llm.cache_transfer import ANSWERS_FILE, AnswersFileError, read_answers
from builder.io.built_folder import STATS_FILE
from builder.io.sources import SourceError
from builder.run.checkpoints import read_llm_keys
from builder.run.outdir import OutDirError
from builder.util.digests import file_sha256

if TYPE_CHECKING:
    import polars as pl
    from rich.console import Console

    from builder.run.backends import Backends

REASK_FLAG = "--reask-unverified"


class UnverifiedAnswers(RuntimeError):
    """The answers of the `--from` release fail their check; the message says why and what to do."""


def ship_answers(run_dir: Path, labels: list[str], backends: Backends, out_dir: Path) -> dict[str, Any] | None:
    """Write the usable answers behind this output as `llm_answers.parquet`; returns the
    record stats.json keeps of it (file, sha256, answers), None when there are none."""
    from builder.publish.beir import write_parquet

    keys: set[str] = set()
    for label in labels:
        keys |= read_llm_keys(run_dir / label)  # checked when the checkpoint was opened or written
    answers = backends.export_answers(keys)
    if answers is None or not answers.height:
        return None
    write_parquet(answers, out_dir / ANSWERS_FILE)
    record = {"file": ANSWERS_FILE, "sha256": file_sha256(out_dir / ANSWERS_FILE), "answers": answers.height}
    return {**record, "mock": True} if backends.mock_llm else record


def check_out_dir_apart(ref: str, out_dir: Path) -> None:
    """OutDirError when the output folder is the `--from` folder, or holds it, or lies in it:
    writing there would replace the release being grown from."""
    if ref.startswith("hf://"):
        return
    old, new = Path(ref).resolve(), Path(out_dir).resolve()
    if new == old or old in new.parents or new in old.parents:
        raise OutDirError(
            f"--from {ref}: the output folder {out_dir} would overwrite the release this build "
            f"grows from; name a new one, e.g. --out {_next_version(Path(ref))}"
        )


def _next_version(folder: Path) -> Path:
    """`<folder>-v2`, or the first `-vN` not taken yet."""
    n = 2
    while folder.with_name(f"{folder.name}-v{n}").exists():
        n += 1
    return folder.with_name(f"{folder.name}-v{n}")


def seed_from(ref: str, backends: Backends, console: Console, reask_unverified: bool = False) -> None:
    """Read the answers an earlier release shipped into this run's cache, once they pass
    their check; UnverifiedAnswers when they fail it, unless `reask_unverified`."""
    from builder.publish.diff import hub_snapshot

    if ref.startswith("hf://datasets/"):
        folder = hub_snapshot(ref, [ANSWERS_FILE, STATS_FILE])
    else:
        folder = Path(ref)
    if not folder.is_dir():
        raise SourceError(f"--from {ref}: no such folder")
    made_by_mock = release_is_mock(folder)
    if made_by_mock and not backends.mock_llm:
        raise UnverifiedAnswers(mock_refusal(ref))
    if not made_by_mock and backends.mock_llm:
        console.print(
            f"[yellow]--from {ref}: a real release; the mock LLM answers every request itself, "
            "so its answers are not read[/]",
            highlight=False,
        )
        return
    if not (folder / ANSWERS_FILE).is_file():
        console.print(
            f"[yellow]--from {ref}: it ships no LLM answers ({ANSWERS_FILE}), so any LLM request goes to the model[/]",
            highlight=False,
        )
        return
    try:
        answers = verified_answers(folder)
    except AnswersFileError as error:
        if not reask_unverified:
            raise UnverifiedAnswers(
                f"--from {ref}: {error}; nothing was read. Pass {REASK_FLAG} to leave "
                "these answers out and ask the model again"
            ) from None
        console.print(
            f"[yellow]--from {ref}: {error}; the file is ignored ({REASK_FLAG}), so every LLM "
            "request goes to the model[/]",
            highlight=False,
        )
        return
    added = backends.seed_answers(answers, ref)
    made = ", made by the mock LLM" if made_by_mock else ""
    console.print(
        f"--from {ref}: {answers.height} answers (sha256 checked{made}), {added} new to this cache", highlight=False
    )


def release_problem(ref: str, mock_llm: bool) -> str | None:
    """Why the local folder `--from` names cannot seed this build, or None: it must be a
    release a build wrote, and a real one for a real build (checked before the models are)."""
    folder = Path(ref)
    if not folder.is_dir():
        return f"--from {ref}: no such folder (a built folder or hf://datasets/org/name@rev)"
    if not release_files(folder):
        return (
            f"error: --from {ref}: the folder has no stats.json or LLM answers, so it is not a built "
            "release; point --from at a folder a build wrote"
        )
    if not mock_llm and release_is_mock(folder):
        return f"error: {mock_refusal(ref)}"
    return None


def mock_refusal(ref: str) -> str:
    return (
        f"--from {ref}: that release was built with the mock LLM, so its answers are no model's and a "
        "real build cannot grow from them; add --mock-llm to grow it as a mock build, or grow from a "
        "release built without --mock-llm"
    )


def release_files(folder: Path) -> list[str]:
    """The files of a release that `--from` reads which `folder` has (none: not a release)."""
    return [name for name in (STATS_FILE, ANSWERS_FILE) if (folder / name).is_file()]


def release_is_mock(folder: Path) -> bool:
    """Whether the release in `folder` says it was built with the mock LLM (stats.json)."""
    try:
        stats = json.loads((folder / STATS_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    if not isinstance(stats, dict):
        return False
    record = stats.get("llm_answers")
    return stats.get("mock_llm") is True or (isinstance(record, dict) and record.get("mock") is True)


def verified_answers(folder: Path) -> pl.DataFrame:
    """The answers a release folder ships, once their digest matches the one its stats.json
    records and their schema the cache's; AnswersFileError saying which check failed."""
    path, stats_path = folder / ANSWERS_FILE, folder / STATS_FILE
    expected = _recorded_digest(stats_path)
    if expected is None:
        raise AnswersFileError(
            f"{path} cannot be checked: the {STATS_FILE} beside it records no sha256 for "
            "it (missing, unreadable, or written by a build-bench older than the check)"
        )
    actual = file_sha256(path)
    if actual != expected:
        raise AnswersFileError(
            f"{path} is not the file this release shipped: its sha256 is {actual[:16]}…, "
            f"the {STATS_FILE} beside it records {expected[:16]}…"
        )
    return read_answers(path)


def _recorded_digest(stats_path: Path) -> str | None:
    try:
        stats = json.loads(stats_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    record = stats.get("llm_answers") if isinstance(stats, dict) else None
    digest = record.get("sha256") if isinstance(record, dict) else None
    return (
        digest
        if (isinstance(digest, str) and isinstance(record, dict) and record.get("file") == ANSWERS_FILE)
        else None
    )
