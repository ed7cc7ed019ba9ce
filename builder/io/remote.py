"""Input files that live somewhere public: a Hugging Face dataset repository or a URL.

A stage's `path` may name
- a local file or folder (relative paths: the working directory, then the recipe's folder);
- `hf://datasets/<org>/<name>@<revision>/<file or folder>`, fetched with huggingface_hub
  into its cache (the revision pins the content; without one, `main`);
- an `http(s)://` URL, fetched with `datasets`' download manager into its cache; an archive
  (`.zip`, `.tar.gz`, `.tgz`) is extracted, and `#sub/folder` picks a folder inside it.

Either way the stage reads an ordinary local path, so local copies and public homes go
through the same reader.
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
    rest = ref[len(HF_PREFIX):]
    parts = rest.split("/", 2)
    if len(parts) < 3 or not parts[0] or not parts[1] or not parts[2]:
        raise SourceError(f"{ref}: expected hf://datasets/<org>/<name>@<revision>/<path in the repository>")
    name, _, revision = parts[1].partition("@")
    return HubFile(f"{parts[0]}/{name}", revision or None, parts[2].strip("/"))


def fetch_input(ref: str, base_dir: Path | None) -> Path:
    """A local path holding `ref`'s content, downloading it first when it is remote."""
    if ref.startswith(HF_PREFIX):
        return _fetch_hub(parse_hub_ref(ref))
    if ref.startswith(("http://", "https://")):
        return _fetch_url(ref)
    found = resolve_path(ref, base_dir)
    if not found.exists():
        raise SourceError(
            f"input not found: {ref} (looked in the working directory {Path.cwd()}"
            + (f" and the recipe folder {base_dir}" if base_dir else "") + ")"
        )
    return found


def _fetch_hub(hub: HubFile) -> Path:
    import huggingface_hub
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    where = f"hf://datasets/{hub.repo}@{hub.revision or 'main'}/{hub.path}"
    try:
        if hub.is_file:
            return Path(huggingface_hub.hf_hub_download(
                hub.repo, hub.path, repo_type="dataset", revision=hub.revision))
        folder = huggingface_hub.snapshot_download(
            hub.repo, repo_type="dataset", revision=hub.revision, allow_patterns=[f"{hub.path}/**"])
    except LocalEntryNotFoundError:
        raise SourceError(f"{where} is not in the Hugging Face cache and the Hub cannot be reached"
                          + (" (offline mode is on)" if offline() else "")
                          + "; download it on a machine with network, or point the recipe at a local copy") from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise SourceError(f"could not fetch {where}: {str(exc).splitlines()[0]}") from None
    path = Path(folder) / hub.path
    if not path.exists():
        raise SourceError(f"{where}: no such folder in the repository at that revision")
    return path


def _fetch_url(ref: str) -> Path:
    from datasets import DownloadManager

    url, _, inner = ref.partition("#")
    manager = DownloadManager()
    try:
        if url.lower().split("?")[0].endswith(_ARCHIVES):
            local = Path(manager.download_and_extract(url))
        else:
            local = Path(manager.download(url))
    except (ConnectionError, FileNotFoundError, OSError, ValueError) as exc:
        raise SourceError(f"could not download {url}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                          + ("; offline mode is on and it is not in the datasets cache" if offline() else "")
                          + "; download it on a machine with network, or point the recipe at a local copy"
                          ) from None
    path = local / inner if inner else local
    if not path.exists():
        raise SourceError(f"{ref}: {inner!r} is not inside the downloaded archive")
    return path
