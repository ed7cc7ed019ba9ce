"""Wall time of a rerun with nothing to do, and of `build-bench --help`.

Builds a recipe (the quickstart by default) once in a temporary folder, then times
fresh `build-bench` processes: the rerun (every stage cached, output current; target
<= 2.0 s on the quickstart) and `--help`. Each figure is the median of --repeat runs,
with the slowest beside it, since a shared machine adds noise.

    python benchmarks/idle_rerun.py [--recipe quickstart] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cli(args: list[str], cwd: Path) -> float:
    """Seconds one `build-bench` process takes, from start to exit."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    code = "import sys\nfrom builder.cli import main\nmain(sys.argv[1:])"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"build-bench {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def _report(name: str, times: list[float], target: float | None = None) -> None:
    goal = f" (target <= {target:.1f} s)" if target is not None else ""
    print(f"{name:<8} median {statistics.median(times):.3f} s, slowest {max(times):.3f} s over {len(times)} runs{goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default="quickstart", help="recipe file or shipped recipe name")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    recipe = str(Path(args.recipe).resolve()) if Path(args.recipe).is_file() else args.recipe
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        build = ["build", recipe, "--run-dir", "runs", "--out", "out"]
        first = _cli(build, work)
        print(f"first build {first:.3f} s")
        out = work / "out"
        marker = (out / ".build-bench").stat().st_mtime_ns
        reruns = [_cli(build, work) for _ in range(args.repeat)]
        untouched = (out / ".build-bench").stat().st_mtime_ns == marker
        helps = [_cli(["--help"], work) for _ in range(args.repeat)]
    _report("rerun", reruns, 2.0)
    print(f"         output folder left untouched: {untouched}")
    _report("--help", helps)


if __name__ == "__main__":
    main()
