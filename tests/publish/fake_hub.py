"""A tiny in-memory Hugging Face Hub on 127.0.0.1, enough for `build-bench push`.

It answers the endpoints huggingface_hub's HfApi calls for create_repo, list_repo_refs,
list_repo_files, create_commit (validate-yaml, preupload, NDJSON commit), create_tag
and hf_hub_download. The preupload answer is `uploadMode: regular` for every file, so
contents travel base64-encoded inside the commit itself and no LFS or Xet storage
server is needed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

_REPO = r"(?P<kind>datasets|models|spaces)/(?P<repo>[^/]+/[^/]+)"


@dataclass
class FakeRepo:
    private: bool
    commits: list[dict[str, Any]] = field(default_factory=list)  # {"oid", "message", "files"}
    tags: dict[str, str] = field(default_factory=dict)

    def files_at(self, rev: str) -> dict[str, bytes] | None:
        oid = self.tags.get(rev, rev)
        if rev == "main" and self.commits:
            oid = self.commits[-1]["oid"]
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
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
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
        path = unquote(urlparse(req.path).path)
        self.requests.append((method, path))
        self.auth_headers.append(req.headers.get("authorization", ""))
        length = int(req.headers.get("content-length") or 0)
        body = req.rfile.read(length) if length else b""
        routes = [
            ("POST", r"/api/repos/create", self._create),
            ("POST", r"/api/validate-yaml", lambda *_: (200, {"errors": [], "warnings": []})),
            ("GET", rf"/api/{_REPO}/refs", self._refs),
            ("GET", rf"/api/{_REPO}/tree/(?P<rev>[^/]+)", self._tree),
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

    def _send(self, req: BaseHTTPRequestHandler, status: int, payload: Any,
              headers: dict[str, str] | None = None) -> None:
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
        files = repo.files_at(m["rev"]) or {}
        return 200, [{"type": "file", "path": p, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                     for p, b in sorted(files.items())]

    def _preupload(self, m: re.Match, body: bytes) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        if self._repo(m) is None:
            return self._missing()
        # "regular" for everything: contents come inline in the commit, no LFS server needed.
        files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                 for f in json.loads(body)["files"]]
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
        oid = hashlib.sha1(f"{len(repo.commits)}{sorted(files)}".encode()).hexdigest()
        repo.commits.append({"oid": oid, "message": lines[0]["value"]["summary"], "files": files})
        return 200, {"commitUrl": f"{self.url}/datasets/{m['repo']}/commit/{oid}", "commitOid": oid,
                     "pullRequestUrl": None}

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
        req.send_header("X-Repo-Commit", repo.tags.get(m["rev"], repo.head()))
        req.end_headers()
        if method == "GET":
            req.wfile.write(data)
