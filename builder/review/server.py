"""The review page's server: stdlib, bound to 127.0.0.1, no resource from outside."""

from __future__ import annotations

import json
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path
from typing import Any

from builder.review.store import JudgmentError, judgments_file, latest_judgments, save_judgment

HOST = "127.0.0.1"
MAX_BODY = 64 * 1024


class ReviewHandler(BaseHTTPRequestHandler):
    def __init__(self, *args: Any, folder: Path, reviewer: str, items: list[dict[str, Any]], **kwargs: Any) -> None:
        self.folder, self.reviewer, self.items = folder, reviewer, items
        super().__init__(*args, **kwargs)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # the terminal shows progress, not every request

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        # The page loads nothing from elsewhere and may send nothing elsewhere.
        self.send_header(
            "Content-Security-Policy",
            "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'",
        )
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        if self.path in ("/", "/index.html"):
            page = files("builder.review").joinpath("page.html").read_bytes()
            self._send(200, page, "text/html; charset=utf-8")
        elif self.path == "/api/items":
            done = latest_judgments(judgments_file(self.folder, self.reviewer))
            self._json(200, {"reviewer": self.reviewer, "items": self.items, "judgments": done})
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        if self.path != "/api/judgments":
            self._json(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._json(413, {"error": "too large"})
            return
        try:
            judgment = json.loads(self.rfile.read(length) or b"{}")
            saved = save_judgment(self.folder, self.reviewer, judgment, {i["query_id"] for i in self.items})
        except (ValueError, JudgmentError) as exc:
            self._json(400, {"error": str(exc)})
            return
        self._json(200, saved)


def make_server(folder: Path, reviewer: str, items: list[dict[str, Any]], port: int = 0) -> ThreadingHTTPServer:
    handler = partial(ReviewHandler, folder=folder, reviewer=reviewer, items=items)
    return ThreadingHTTPServer((HOST, port), handler)
