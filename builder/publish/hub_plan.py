"""What a push will upload: the file plan, the previous release and the CHANGELOG.

On the Hub a release holds the whole output folder: the card, the statistics and plots,
the parquet configs (`corpus/`, `queries/`, `qrels/`, `positions/`, `documents/`), the
BEIR files, the drop log, per-language folders, `posir/`, `cross/`, ColDeR's `settings/`
and `pairs.parquet`, and CHANGELOG.md. Three things stay local: the root
`corpus.parquet`/`queries.parquet`/`qrels.parquet` (the configs hold the same columns),
`eval/` (results of `build-bench eval`, not the benchmark; only its `eval.json` figures
travel, for the next release's changelog) and hidden entries such as `.eval_cache/`.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from builder.io.built_folder import CARD_FILE, EVAL_DIR, STATS_FILE, TABLE_FILES
from builder.io.built_folder import EVAL_FILE as EVAL_JSON
from builder.publish.changelog import changelog, entry, previous_tag

# `mteb/` is a pull request to MTEB and `review/` holds reviewers' names: neither is part of a release.
LOCAL_ONLY = (*(TABLE_FILES[t] for t in ("corpus", "queries", "qrels")), EVAL_DIR, "mteb", "review")
# The figures of `build-bench eval` travel, so the next release's changelog can compare them.
EVAL_FILE = f"{EVAL_DIR}/{EVAL_JSON}"
_TABLES = ["corpus/**", "documents/**", "queries/**", "positions/**", "qrels/**"]
# Remote files under these folders (and under every folder the release has) that the new
# release lacks are deleted in the same commit.
MANAGED_DIRS = ("plots/", "corpus/", "queries/", "qrels/", "positions/", "documents/", "posir/", "cross/", "settings/")
CHANGELOG_FILE = "CHANGELOG.md"


class PushError(RuntimeError):
    """A push that cannot go ahead or did not finish; the message says what to do."""


@dataclass
class RemoteState:
    exists: bool = False
    tags: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    previous: str | None = None
    previous_stats: dict[str, Any] | None = None
    previous_changelog: str | None = None
    previous_eval: dict[str, Any] | None = None
    previous_tables: Path | None = None  # a local copy of the previous release's tables
    problem: str | None = None


@dataclass
class PushPlan:
    repo_id: str
    tag: str | None
    uploads: list[tuple[str, Path | bytes]]
    deletes: list[str]
    remote: RemoteState

    def lines(self) -> list[str]:
        rows = []
        for path, source in self.uploads:
            size = len(source) if isinstance(source, bytes) else source.stat().st_size
            origin = "generated" if isinstance(source, bytes) else str(source)
            rows.append(f"  add     {path}  ({size:,} bytes, {origin})")
        rows += [f"  delete  {path}  (not in this release)" for path in self.deletes]
        return rows


def local_files(folder: Path) -> list[tuple[str, Path]]:
    """(path in repo, local path) for every file the release carries, sorted."""
    found = []
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if rel.as_posix() != EVAL_FILE and (
            not path.is_file() or rel.parts[0] in LOCAL_ONLY or any(p.startswith(".") for p in rel.parts)
        ):
            continue
        found.append((rel.as_posix(), path))
    return sorted(found)


def _download_json(api: Any, repo_id: str, name: str, revision: str) -> Any:
    from huggingface_hub.errors import EntryNotFoundError

    with tempfile.TemporaryDirectory(prefix="build-bench-hub-") as cache:
        try:
            path = api.hf_hub_download(repo_id, name, repo_type="dataset", revision=revision, cache_dir=cache)
        except EntryNotFoundError:
            return None
        text = Path(path).read_text(encoding="utf-8")
    return json.loads(text) if name.endswith(".json") else text


def remote_state(api: Any, repo_id: str, tag: str | None) -> RemoteState:
    """Tags, files and the previous release's statistics; a repo that is not there is new."""
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        refs = api.list_repo_refs(repo_id, repo_type="dataset")
    except RepositoryNotFoundError:
        return RemoteState(exists=False)
    state = RemoteState(exists=True, tags=[t.name for t in refs.tags])
    state.files = list(api.list_repo_files(repo_id, repo_type="dataset"))
    state.previous = previous_tag(state.tags, tag)
    if state.previous:
        state.previous_stats = _download_json(api, repo_id, STATS_FILE, state.previous)
        state.previous_changelog = _download_json(api, repo_id, CHANGELOG_FILE, state.previous)
        state.previous_eval = _download_json(api, repo_id, EVAL_FILE, state.previous)
        state.previous_tables = _download_tables(api, repo_id, state.previous)
    return state


def _download_tables(api: Any, repo_id: str, revision: str) -> Path | None:
    """The previous release's parquet tables (into the Hub cache), or None if unreadable."""
    try:
        return Path(api.snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=_TABLES))
    except Exception:  # noqa: BLE001 - the changelog then says the rows could not be compared
        return None


def _changes(folder: Path, version: str, stats: dict[str, Any], remote: RemoteState) -> list[str]:
    from builder.io.sources import SourceError
    from builder.publish.diff import diff_versions, read_version
    from builder.publish.release_notes import release_sections

    diff = None
    if remote.previous_tables is not None:
        try:
            diff = diff_versions(read_version(remote.previous_tables, remote.previous), read_version(folder, version))
        except SourceError:
            diff = None
    new_eval = json.loads((folder / EVAL_FILE).read_text(encoding="utf-8")) if (folder / EVAL_FILE).is_file() else None
    return release_sections(
        diff, (remote.previous_stats or {}).get("inputs"), stats.get("inputs"), remote.previous_eval, new_eval
    )


def _card(folder: Path, repo_id: str, remote: RemoteState) -> bytes:
    """The data card as uploaded: with a link to the release before this one."""
    import os

    text = (folder / CARD_FILE).read_text(encoding="utf-8")
    if remote.previous:
        hub = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
        text = (
            text.rstrip("\n") + f"\n\n## Previous release\n\n[{remote.previous}]({hub}/datasets/{repo_id}/tree/"
            f"{remote.previous}): what changed since is in `CHANGELOG.md`.\n"
        )
    return text.encode("utf-8")


def make_plan(folder: Path, repo_id: str, tag: str | None, remote: RemoteState) -> PushPlan:
    files = local_files(folder)
    stats = json.loads((folder / STATS_FILE).read_text(encoding="utf-8"))
    version = tag or "unreleased"
    changes = _changes(folder, version, stats, remote) if remote.previous_stats is not None else None
    text = changelog(
        entry(stats, remote.previous_stats, version, remote.previous, date.today().isoformat(), changes),
        remote.previous_changelog,
    )
    uploads: list[tuple[str, Path | bytes]] = [
        (p, _card(folder, repo_id, remote) if p == CARD_FILE else src) for p, src in files
    ]
    uploads.append((CHANGELOG_FILE, text.encode("utf-8")))
    uploads.sort(key=lambda u: u[0])
    wanted = {path for path, _ in uploads}
    managed = MANAGED_DIRS + tuple(sorted({p.split("/")[0] + "/" for p in wanted if "/" in p}))
    deletes = sorted(p for p in remote.files if p.startswith(managed) and p not in wanted)
    return PushPlan(repo_id=repo_id, tag=tag, uploads=uploads, deletes=deletes, remote=remote)
