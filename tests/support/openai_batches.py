"""The files and batches endpoints of the local OpenAI-compatible server (`openai_server`).

`POST /v1/files` stores an upload, `GET /v1/files/{id}/content` returns it; `POST
/v1/batches` creates a batch from an uploaded JSONL file, `GET /v1/batches/{id}` polls it
and `POST /v1/batches/{id}/cancel` cancels it. Each line is answered as the chat endpoint
would answer its body (the server's responder and fault plan), at the first poll after
the batch's scripted number of `in_progress` polls. A test scripts what the next batches
do (`BatchScript`, consumed in order; a batch with none completes):

- `complete`: every line answered in the output file;
- `partial`: every `every`-th line gets an HTTP `status` in the error file instead;
- `expire`: the first half of the lines answered, the rest `batch_expired` in the error file;
- `fail`: the batch fails as a whole (a token limit), with no files and no line answered;
- `refuse`: creating the batch is refused with HTTP 429 (a daily token cap), no retry;
- `poll_errors`: the first polls fail with HTTP 500 (a provider error mid-batch).

`lines` counts each answered line's body (its JSON digest): a test asserts nothing was
asked twice.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web


@dataclass(frozen=True)
class BatchScript:
    outcome: Literal["complete", "partial", "expire", "fail", "refuse"] = "complete"
    polls: int = 0  # polls answered `in_progress` before the batch ends
    every: int = 2  # with `partial`: which lines fail
    status: int = 500  # with `partial`: how they fail
    poll_errors: int = 0  # polls answered HTTP 500 (no retry) before the ones above


@dataclass
class _Batch:
    id: str
    input_file_id: str
    script: BatchScript
    created_at: int
    metadata: dict[str, Any]
    status: str = "in_progress"
    polls_left: int = 0
    poll_errors_left: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    errors: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "created_at": self.created_at,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "request_counts": dict(self.counts),
            "errors": self.errors,
            "metadata": self.metadata,
        }


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class BatchDesk:
    """Holds the server's files and batches; `add_routes` mounts the endpoints. `answer`
    turns a line's body into its `response` (status_code and body), as the chat endpoint would."""

    def __init__(self, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self._answer_body = answer
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.scripts: list[BatchScript] = []
        self.lines: Counter[str] = Counter()
        self.created = 0
        self.cancelled = 0

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}/content", self._content)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches/{id}", self._retrieve)
        app.router.add_post("/v1/batches/{id}/cancel", self._cancel)

    def _store(self, data: bytes, name: str, purpose: str) -> dict[str, Any]:
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = data
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return web.json_response({"error": {"message": "no file in the upload"}}, status=400)
        return web.json_response(self._store(upload.file.read(), upload.filename, str(form.get("purpose", ""))))

    async def _content(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["id"])
        if data is None:
            return web.json_response({"error": {"message": "no such file"}}, status=404)
        return web.Response(body=data, content_type="application/jsonl")

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        script = self.scripts.pop(0) if self.scripts else BatchScript()
        if script.outcome == "refuse":
            error = {"error": {"message": "Enqueued token limit reached for this organization", "code": "429"}}
            return web.json_response(error, status=429, headers={"x-should-retry": "false"})
        if body.get("input_file_id") not in self.files:
            return web.json_response({"error": {"message": "no such input file"}}, status=400)
        self.created += 1
        batch = _Batch(
            id=f"batch_{self.created}",
            input_file_id=body["input_file_id"],
            script=script,
            created_at=int(time.time()),
            metadata=body.get("metadata") or {},
            polls_left=script.polls,
            poll_errors_left=script.poll_errors,
        )
        self.batches[batch.id] = batch
        return web.json_response(batch.as_json())

    async def _retrieve(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return web.json_response({"error": {"message": "no such batch"}}, status=404)
        if batch.poll_errors_left > 0:
            batch.poll_errors_left -= 1
            return web.json_response(_error_body(500), status=500, headers={"x-should-retry": "false"})
        if batch.status == "in_progress":
            if batch.polls_left > 0:
                batch.polls_left -= 1
            else:
                self._run(batch)
        return web.json_response(batch.as_json())

    async def _cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return web.json_response({"error": {"message": "no such batch"}}, status=404)
        if batch.status == "in_progress":
            batch.status = "cancelled"
            self.cancelled += 1
        return web.json_response(batch.as_json())

    def _run(self, batch: _Batch) -> None:
        """Answer the batch's lines as its script says."""
        lines = [json.loads(raw) for raw in self.files[batch.input_file_id].decode().splitlines() if raw.strip()]
        batch.counts["total"] = len(lines)
        if batch.script.outcome == "fail":
            batch.status = "failed"
            batch.errors = {"object": "list", "data": [{"code": "token_limit_exceeded", "message": "token limit"}]}
            return
        out, err = [], []
        for i, line in enumerate(lines):
            custom = line.get("custom_id")
            if batch.script.outcome == "expire" and i >= len(lines) // 2:
                error = {"code": "batch_expired", "message": "not answered within the window"}
                err.append({"id": f"req_{i}", "custom_id": custom, "response": None, "error": error})
                continue
            if batch.script.outcome == "partial" and i % batch.script.every == 1:
                status = batch.script.status
                response = {"status_code": status, "request_id": f"req_{i}", "body": _error_body(status)}
                err.append({"id": f"req_{i}", "custom_id": custom, "response": response, "error": None})
                continue
            out.append({"id": f"req_{i}", "custom_id": custom, "response": self._answer(line["body"]), "error": None})
        batch.status = "expired" if batch.script.outcome == "expire" else "completed"
        batch.counts.update(completed=len(out), failed=len(err))
        if out:
            batch.output_file_id = self._store(_jsonl(out), "output.jsonl", "batch_output")["id"]
        if err:
            batch.error_file_id = self._store(_jsonl(err), "errors.jsonl", "batch_output")["id"]

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        self.lines[_digest(body)] += 1
        return self._answer_body(body)


def _error_body(status: int) -> dict[str, Any]:
    return {"error": {"message": f"injected HTTP {status}", "type": "fake_error", "code": status}}


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)
