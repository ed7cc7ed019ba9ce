"""Start-up time of `build-bench`, this checkout beside an earlier release, on one machine.

Two figures, each the median of --repeat fresh processes (the slowest beside it, since a
shared machine adds noise): `build-bench --help` (target <= 0.3 s) and a rerun of a recipe
with nothing to do (the quickstart by default; every stage checkpointed, the output
current; target <= 1.0 s). The two checkouts' runs alternate, so a change in the machine's
load falls on both alike. Then, from one `python -X importtime` run of each, what the
imports cost: modules loaded, the sum of their own import times and the packages that
weigh most. That sum moves with the load too, but the list of modules does not.

The earlier release (a git ref, default a2b52c2) is unpacked with `git archive` into a
temporary folder and run with this interpreter through PYTHONPATH; the folder is removed
at the end. Both write and reuse their bytecode (PYTHONDONTWRITEBYTECODE is dropped from the
runs' environment), as an installed copy does. Run it with the interpreter of a virtual
environment that has build-bench's dependencies (PYTHONPATH shadows the installed copy):

    .venv/bin/python benchmarks/startup.py [--ref a2b52c2] [--repeat 7] [--recipe quickstart]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLI = "import sys\nfrom builder.cli import main\nmain(sys.argv[1:])"
HELP_TARGET = 0.3
RERUN_TARGET = 1.0


def _env(checkout: Path) -> dict[str, str]:
    # Bytecode is cached as on any installed copy: without it every run compiles builder's
    # ~500 modules again, which is not what a user's start-up costs.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(checkout)}


def _run(checkout: Path, args: list[str], cwd: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *flags, "-c", CLI, *args], cwd=cwd, env=_env(checkout), capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: build-bench {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done


def _timed(command: list[str], **popen: Any) -> tuple[float, float]:
    """Wall seconds of one process, and the CPU seconds (user + system) it used: on a
    loaded machine the wall time includes waiting for a core, the CPU time hardly does."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, **popen)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[3:])} failed:\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _seconds(checkout: Path, args: list[str], cwd: Path) -> tuple[float, float]:
    return _timed([sys.executable, "-c", CLI, *args], cwd=cwd, env=_env(checkout))


def _imports(checkout: Path, args: list[str], cwd: Path) -> tuple[int, float, Counter[str]]:
    """Modules imported, the sum of their own import times (s) and that sum per top-level
    package (builder's modules by their second level: builder.stages, builder.run, ...)."""
    stderr = _run(checkout, args, cwd, "-X", "importtime").stderr
    by_package: Counter[str] = Counter()
    count = 0
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        parts = name.strip().split(".")
        by_package[".".join(parts[:2]) if parts[0] == "builder" else parts[0]] += int(own) / 1e6
        count += 1
    return count, sum(by_package.values()), by_package


def _loaded_from(checkout: Path, cwd: Path) -> Path:
    code = "import builder; print(builder.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=_env(checkout), capture_output=True, text=True, check=True
    )
    return Path(done.stdout.strip()).parent.parent


def _unpack(ref: str, into: Path) -> Path:
    """The tree of `ref` in `into` (no worktree: nothing is added to the repository)."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _floor() -> tuple[float, float]:
    return _timed([sys.executable, "-c", "pass"])


def _describe(times: list[tuple[float, float]]) -> str:
    wall = statistics.median(t for t, _ in times)
    cpu = statistics.median(c for _, c in times)
    return f"{wall:.3f} s ({cpu:.3f} s CPU)"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", default="a2b52c2", help="the earlier release: a git ref of this repository")
    parser.add_argument("--recipe", default="quickstart", help="recipe file or shipped recipe name for the rerun")
    parser.add_argument("--repeat", type=int, default=7, help="fresh processes per figure")
    parser.add_argument("--top", type=int, default=8, help="packages listed in the import breakdown")
    args = parser.parse_args()
    recipe = str(Path(args.recipe).resolve()) if Path(args.recipe).is_file() else args.recipe

    with tempfile.TemporaryDirectory(prefix="startup-") as tmp:
        checkouts = {"this checkout": ROOT, args.ref: _unpack(args.ref, Path(tmp) / "release")}
        for name, checkout in checkouts.items():  # the copy PYTHONPATH names, not an installed one
            if (found := _loaded_from(checkout, Path(tmp))) != checkout.resolve():
                raise SystemExit(f"{name}: builder is imported from {found}, not {checkout}")
        build = ["build", recipe, "--run-dir", "runs", "--out", "out"]
        work: dict[str, Path] = {}
        for name, checkout in checkouts.items():
            work[name] = Path(tmp) / f"work-{len(work)}"
            work[name].mkdir()
            first, _ = _seconds(checkout, build, work[name])
            print(f"{name}: first build of {args.recipe} {first:.1f} s")
        marks = {name: (work[name] / "out" / ".build-bench").stat().st_mtime_ns for name in checkouts}

        print(f"before: {_load()}")
        floor: list[tuple[float, float]] = []
        helps: dict[str, list[tuple[float, float]]] = {name: [] for name in checkouts}
        reruns: dict[str, list[tuple[float, float]]] = {name: [] for name in checkouts}
        for _ in range(args.repeat):
            floor.append(_floor())
            for name, checkout in checkouts.items():
                helps[name].append(_seconds(checkout, ["--help"], work[name]))
                reruns[name].append(_seconds(checkout, build, work[name]))
        print(f"after:  {_load()}")
        for name in checkouts:
            if (work[name] / "out" / ".build-bench").stat().st_mtime_ns != marks[name]:
                raise SystemExit(f"{name}: a rerun rewrote the output folder, so it was not idle")

        names = list(checkouts)
        print(f"\nmedian of {args.repeat} fresh processes: wall (CPU)" + "".join(f"{n:>32}" for n in names))
        print(f"{'python -c pass (the floor)':<44}{_describe(floor):>32}")
        print(f"{f'--help (target <= {HELP_TARGET} s)':<44}" + "".join(f"{_describe(helps[n]):>32}" for n in names))
        print(
            f"{f'idle rerun (target <= {RERUN_TARGET} s)':<44}" + "".join(f"{_describe(reruns[n]):>32}" for n in names)
        )

        print("\nimports (python -X importtime, one run each): modules, sum of own import times")
        for label, command in (("--help", ["--help"]), ("idle rerun", build)):
            for name, checkout in checkouts.items():
                count, total, by_package = _imports(checkout, command, work[name])
                heaviest = ", ".join(f"{p} {s:.2f}" for p, s in by_package.most_common(args.top))
                print(f"  {label:<11} {name:<14} {count:4d} modules {total:6.2f} s: {heaviest}")


if __name__ == "__main__":
    main()
