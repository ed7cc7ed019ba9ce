"""Input files that live somewhere public: a Hugging Face dataset repository or a URL.

A stage's `path` may name
- a local file or folder (relative paths: the working directory, then the recipe's folder);
- `hf://datasets/<org>/<name>@<revision>/<file or folder>`, fetched with huggingface_hub
  into its cache (the revision pins the content; without one, `main`);
- an `http(s)://` URL, fetched with `datasets`' download manager into its cache; an archive
  (`.zip`, `.tar.gz`, `.tgz`) is extracted, and `#sub/folder` picks a folder inside it.

Either way the stage reads an ordinary local path, so local copies and public homes go
through the same reader. `plan` opens no such input, but asks whether each is cached or
can be reached (`reach_problem`), so an input no build could fetch stops it at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from builder.io.sources import SourceError, resolve_path

HF_PREFIX = "hf://datasets/"
_ARCHIVES = (".zip", ".tar.gz", ".tgz", ".tar")
_FILE_SUFFIXES = (".json", ".jsonl", ".parquet", ".tsv", ".csv", ".txt", ".gz", ".zip", ".tar")


def is_remote(ref: str) -> bool:
    return ref.startswith((HF_PREFIX, "http://", "https://"))


def offline() -> bool:
    """True when the user asked the Hugging Face libraries to stay off the network."""
    flags = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    return any(os.environ.get(f, "").strip().lower() in {"1", "true", "yes", "on"} for f in flags)


@dataclass(frozen=True)
class HubFile:
    repo: str
    revision: str | None
    path: str

    @property
    def is_file(self) -> bool:
        return self.path.lower().endswith(_FILE_SUFFIXES)


def parse_hub_ref(ref: str) -> HubFile:
    rest = ref[len(HF_PREFIX) :]
    parts = rest.split("/", 2)
    if len(parts) < 3 or not parts[0] or not parts[1] or not parts[2]:
        raise SourceError(f"{ref}: expected hf://datasets/<org>/<name>@<revision>/<path in the repository>")
    name, _, revision = parts[1].partition("@")
    return HubFile(f"{parts[0]}/{name}", revision or None, parts[2].strip("/"))


WHAT_TO_DO = "download it on a machine with network, or point the recipe at a local copy"


def fetch_input(ref: str, base_dir: Path | None, cached_only: bool = False) -> Path:
    """A local path holding `ref`'s content, downloading it first when it is remote
    (never, with `cached_only`: then an input not in the caches is a SourceError)."""
    if ref.startswith(HF_PREFIX):
        return _fetch_hub(parse_hub_ref(ref), cached_only)
    if ref.startswith(("http://", "https://")):
        return _fetch_url(ref, cached_only)
    found = resolve_path(ref, base_dir)
    if not found.exists():
        raise SourceError(
            f"input not found: {ref} (looked in the working directory {Path.cwd()}"
            + (f" and the recipe folder {base_dir}" if base_dir else "")
            + ")"
        )
    return found


def is_cached(ref: str) -> bool:
    """Whether a remote input is in the Hugging Face or datasets cache already."""
    try:
        fetch_input(ref, None, cached_only=True)
    except SourceError:
        return False
    return True


def reach_problem(ref: str, timeout_s: float = 10.0) -> str | None:
    """Why a remote input that is not cached cannot be fetched from here, or None: one HEAD
    request (a URL's server, or the Hub's file or folder listing), nothing downloaded."""
    import urllib.error
    import urllib.request

    if ref.startswith(HF_PREFIX):
        hub = parse_hub_ref(ref)
        endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
        revision = hub.revision or "main"
        url = (
            f"{endpoint}/datasets/{hub.repo}/resolve/{revision}/{hub.path}"
            if hub.is_file
            else f"{endpoint}/api/datasets/{hub.repo}/tree/{revision}/{hub.path}"
        )
    else:
        url = ref.partition("#")[0]
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s).close()
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 410):
            return f"{ref} is not there ({url} answers {exc.code}); correct the path, or {WHAT_TO_DO}"
        return None  # it answers: a server that refuses HEAD (or asks for a login) is the build's to meet
    except (OSError, ValueError) as exc:
        why = getattr(exc, "reason", exc)
        return f"could not reach {url} ({why}), and it is not in the cache; {WHAT_TO_DO}"
    return None


def _fetch_hub(hub: HubFile, cached_only: bool = False) -> Path:
    import huggingface_hub
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    where = f"hf://datasets/{hub.repo}@{hub.revision or 'main'}/{hub.path}"
    try:
        if hub.is_file:
            return Path(
                huggingface_hub.hf_hub_download(
                    hub.repo, hub.path, repo_type="dataset", revision=hub.revision, local_files_only=cached_only
                )
            )
        folder = huggingface_hub.snapshot_download(
            hub.repo,
            repo_type="dataset",
            revision=hub.revision,
            allow_patterns=[f"{hub.path}/**"],
            local_files_only=cached_only,
        )
    except LocalEntryNotFoundError:
        raise SourceError(
            f"{where} is not in the Hugging Face cache and the Hub cannot be reached"
            + (" (offline mode is on)" if offline() else "")
            + f"; {WHAT_TO_DO}"
        ) from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise SourceError(f"could not fetch {where}: {str(exc).splitlines()[0]}") from None
    path = Path(folder) / hub.path
    if not path.exists():
        raise SourceError(f"{where}: no such folder in the repository at that revision")
    return path


def _fetch_url(ref: str, cached_only: bool = False) -> Path:
    from datasets import DownloadConfig, DownloadManager

    url, _, inner = ref.partition("#")
    manager = DownloadManager(download_config=DownloadConfig(local_files_only=cached_only))
    try:
        if url.lower().split("?")[0].endswith(_ARCHIVES):
            local = Path(manager.download_and_extract(url))
        else:
            local = Path(manager.download(url))
    except (ConnectionError, FileNotFoundError, OSError, ValueError) as exc:
        raise SourceError(
            f"could not download {url}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            + ("; offline mode is on and it is not in the datasets cache" if offline() else "")
            + f"; {WHAT_TO_DO}"
        ) from None
    path = local / inner if inner else local
    if not path.exists():
        raise SourceError(f"{ref}: {inner!r} is not inside the downloaded archive")
    return path
