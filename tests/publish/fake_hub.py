"""A tiny in-memory Hugging Face Hub on 127.0.0.1, enough for `build-bench push` and for
`datasets.load_dataset(repo, revision=tag)` pointed at it by `HF_ENDPOINT`.

It answers the endpoints huggingface_hub's HfApi calls for create_repo, list_repo_refs,
list_repo_files, create_commit (validate-yaml, preupload, NDJSON commit), create_tag
and hf_hub_download, and those `datasets` reads a revision through (its HfFileSystem):
the revision's info (commit sha and files), tree listings of a folder (recursive or
not), paths-info, and resolve URLs by branch, tag or commit. The preupload answer is
`uploadMode: regular` for every file, so contents travel base64-encoded inside the
commit itself and no LFS or Xet storage server is needed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

_REPO = r"(?P<kind>datasets|models|spaces)/(?P<repo>[^/]+/[^/]+)"


@dataclass
class FakeRepo:
    private: bool
    commits: list[dict[str, Any]] = field(default_factory=list)  # {"oid", "message", "files"}
    tags: dict[str, str] = field(default_factory=dict)

    def oid_of(self, rev: str) -> str | None:
        """The commit a branch, tag or commit id names; None when it names none."""
        if rev == "main":
            return self.head()
        oid = self.tags.get(rev, rev)
        return oid if any(c["oid"] == oid for c in self.commits) else None

    def files_at(self, rev: str) -> dict[str, bytes] | None:
        oid = self.oid_of(rev)
        for commit in self.commits:
            if commit["oid"] == oid:
                return commit["files"]
        return {} if rev == "main" else None

    def head(self) -> str:
        return self.commits[-1]["oid"] if self.commits else "0" * 40


class FakeHub:
    """`with FakeHub() as hub:` then point HF_ENDPOINT at `hub.url`."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.fail_commits = False
        self.requests: list[tuple[str, str]] = []
        self.auth_headers: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                hub._route(self, "GET")

            def do_HEAD(self) -> None:
                hub._route(self, "HEAD")

            def do_POST(self) -> None:
                hub._route(self, "POST")

        return Handler

    # -- plumbing ---------------------------------------------------------------

    def _route(self, req: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(req.path)
        path = unquote(url.path)
        self.query = parse_qs(url.query)
        self.requests.append((method, path))
        self.auth_headers.append(req.headers.get("authorization", ""))
        length = int(req.headers.get("content-length") or 0)
        body = req.rfile.read(length) if length else b""
        routes = [
            ("POST", r"/api/repos/create", self._create),
            ("POST", r"/api/validate-yaml", lambda *_: (200, {"errors": [], "warnings": []})),
            ("GET", rf"/api/{_REPO}/refs", self._refs),
            ("GET", rf"/api/{_REPO}/tree/(?P<rev>[^/]+)(?:/(?P<folder>.+))?", self._tree),
            ("GET", rf"/api/{_REPO}/revision/(?P<rev>[^/]+)", self._info),
            ("POST", rf"/api/{_REPO}/paths-info/(?P<rev>[^/]+)", self._paths_info),
            ("POST", rf"/api/{_REPO}/preupload/(?P<rev>[^/]+)", self._preupload),
            ("POST", rf"/api/{_REPO}/commit/(?P<rev>[^/]+)", self._commit),
            ("POST", rf"/api/{_REPO}/tag/(?P<rev>[^/]+)", self._tag),
        ]
        for verb, pattern, handler in routes:
            m = re.fullmatch(pattern, path)
            if m and verb == method:
                return self._send(req, *handler(m, body))
        m = re.fullmatch(rf"/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<file>.+)", path)
        if m and method in ("GET", "HEAD"):
            return self._resolve(req, m, method)
        self._send(req, 404, {"error": f"no route for {method} {path}"})

    def _send(
        self, req: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            req.send_header(key, value)
        req.end_headers()
        req.wfile.write(data)

    def _repo(self, m: re.Match) -> FakeRepo | None:
        return self.repos.get(m["repo"])

    # -- endpoints --------------------------------------------------------------

    def _create(self, _m: re.Match, body: bytes) -> tuple[int, Any]:
        req = json.loads(body)
        repo_id = f"{req['organization']}/{req['name']}"
        if repo_id in self.repos:
            return 409, {"error": "You already created this dataset repo"}
        self.repos[repo_id] = FakeRepo(private=req.get("visibility") == "private")
        return 200, {"url": f"{self.url}/datasets/{repo_id}"}

    def _missing(self) -> tuple[int, Any, dict[str, str]]:
        return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}

    def _refs(self, m: re.Match, _body: bytes) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        repo = self._repo(m)
        if repo is None:
            return self._missing()
        tags = [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": oid} for t, oid in repo.tags.items()]
        main = [{"name": "main", "ref": "refs/heads/main", "targetCommit": repo.head()}]
        return 200, {"branches": main, "converts": [], "tags": tags}

    def _tree(self, m: re.Match, _body: bytes) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        repo = self._repo(m)
        if repo is None:
            return self._missing()
        files = repo.files_at(m["rev"])
        if files is None:
            return 404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"}
        folder = (m["folder"] or "").strip("/")
        prefix = f"{folder}/" if folder else ""
        inside = sorted(p for p in files if p.startswith(prefix))
        if folder and not inside:
            return 404, {"error": "not found"}, {"X-Error-Code": "EntryNotFound"}
        if self.query.get("recursive", ["false"])[0].lower() == "true":
            paths = sorted({*inside, *(d for p in inside for d in _parents(p) if d.startswith(prefix))})
        else:
            paths = sorted({prefix + p[len(prefix) :].split("/")[0] for p in inside})
        return 200, [_entry(p, files) for p in paths]

    def _info(self, m: re.Match, _body: bytes) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        repo = self._repo(m)
        if repo is None:
            return self._missing()
        oid = repo.oid_of(m["rev"])
        if oid is None:
            return 404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"}
        files = repo.files_at(oid) or {}
        return 200, {
            "id": m["repo"],
            "sha": oid,
            "private": repo.private,
            "disabled": False,
            "gated": False,
            "tags": [],
            "siblings": [{"rfilename": p} for p in sorted(files)],
        }

    def _paths_info(self, m: re.Match, body: bytes) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        repo = self._repo(m)
        if repo is None:
            return self._missing()
        files = repo.files_at(m["rev"])
        if files is None:
            return 404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"}
        asked = [p.strip("/") for p in parse_qs(body.decode()).get("paths", [])]
        folders = {d for p in files for d in _parents(p)}
        return 200, [_entry(p, files) for p in asked if p in files or p in folders]

    def _preupload(self, m: re.Match, body: bytes) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        if self._repo(m) is None:
            return self._missing()
        # "regular" for everything: contents come inline in the commit, no LFS server needed.
        files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in json.loads(body)["files"]]
        return 200, {"files": files}

    def _commit(self, m: re.Match, body: bytes) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        repo = self._repo(m)
        if repo is None:
            return self._missing()
        if self.fail_commits:
            return 500, {"error": "Internal Error - We're working hard to fix this as soon as possible!"}
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        files = dict(repo.files_at("main") or {})
        for item in lines:
            value = item["value"]
            if item["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "deletedFile":
                files.pop(value["path"], None)
        # Named by content, as git names commits, so a Hub cache never mistakes one for another.
        content = sorted((p, hashlib.sha1(b).hexdigest()) for p, b in files.items())
        oid = hashlib.sha1(f"{len(repo.commits)}{content}".encode()).hexdigest()
        repo.commits.append({"oid": oid, "message": lines[0]["value"]["summary"], "files": files})
        return 200, {
            "commitUrl": f"{self.url}/datasets/{m['repo']}/commit/{oid}",
            "commitOid": oid,
            "pullRequestUrl": None,
        }

    def _tag(self, m: re.Match, body: bytes) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        repo = self._repo(m)
        if repo is None:
            return self._missing()
        tag = json.loads(body)["tag"]
        if tag in repo.tags:
            return 409, {"error": "Tag already exists"}
        repo.tags[tag] = m["rev"] if m["rev"] != "main" else repo.head()
        return 200, {}

    def _resolve(self, req: BaseHTTPRequestHandler, m: re.Match, method: str) -> None:
        repo = self._repo(m)
        files = repo.files_at(m["rev"]) if repo else None
        if files is None or m["file"] not in files:
            code = "RepoNotFound" if repo is None else ("RevisionNotFound" if files is None else "EntryNotFound")
            return self._send(req, 404, {"error": "not found"}, {"X-Error-Code": code})
        data = files[m["file"]]
        req.send_response(200)
        req.send_header("Content-Length", str(len(data)))
        req.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
        req.send_header("X-Repo-Commit", repo.oid_of(m["rev"]) or repo.head())
        req.end_headers()
        if method == "GET":
            req.wfile.write(data)


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: k + 1]) for k in range(len(parts))]


def _entry(path: str, files: dict[str, bytes]) -> dict[str, Any]:
    if path in files:
        return {"type": "file", "path": path, "size": len(files[path]), "oid": hashlib.sha1(files[path]).hexdigest()}
    return {"type": "directory", "path": path, "oid": hashlib.sha1(path.encode()).hexdigest()}


def load_with_datasets(
    hub_url: str, repo: str, wanted: list[tuple[str, str]], home: Path
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """`datasets.load_dataset(repo, config, revision=revision)` for each (config, revision),
    as a user runs it: a fresh process whose only way to the Hub is `HF_ENDPOINT`."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE") and not k.startswith("HF_")}
    env.update(HF_ENDPOINT=hub_url, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1")
    code = (
        "import datasets, json, sys\n"
        "repo, wanted = sys.argv[1], json.loads(sys.argv[2])\n"
        "rows = [datasets.load_dataset(repo, c, revision=r, split='test').to_list() for c, r in wanted]\n"
        "print(json.dumps(rows, default=str))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, repo, json.dumps(wanted)], env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise AssertionError(f"load_dataset({repo!r}, ...) failed:\n{done.stderr[-3000:]}")
    return dict(zip(wanted, json.loads(done.stdout.strip().splitlines()[-1])))


def hub_fixture(token: str) -> Any:
    """A pytest fixture: a FakeHub, with HF_ENDPOINT and HF_TOKEN pointing at it and a Hub
    cache of the test's own."""
    import huggingface_hub.constants
    import pytest

    @pytest.fixture
    def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
        # Other tests may run with HF_HUB_OFFLINE=1, which huggingface_hub reads once at import.
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub_cache"))
        monkeypatch.setenv("HF_TOKEN", token)
        with FakeHub() as fake:
            monkeypatch.setenv("HF_ENDPOINT", fake.url)
            yield fake

    return hub
