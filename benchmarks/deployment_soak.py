"""Deployment soak: the real-world failure cases of issues #31 and #44, run and counted.

Each case is a test of the suite against real processes on 127.0.0.1: servers that drip,
hang, answer too much, answer HTML, invalid UTF-8, JSON nested too deeply or of the wrong
shape, lie about Content-Length, send gzip bombs or quote the API key back, or answer
slower than timeout_s; tampered, malformed and empty `--from` releases; secrets in
`base_url` and in the environment; recipes in an impossible stage order or with an output
folder the build refuses; SIGTERM and SIGINT during the start-up imports, at start-up and
mid-stage; a tiny filesystem and a file-size limit under `--out` and `--run-dir`; damaged
tables, checkpoints and recipes; cache clearing while a build holds the run folder; piped
progress, per reranker batch; MTEB exports. One line is printed per case as it finishes,
then the cases tried and passed, per family.

    PYTHONPATH=$PWD python benchmarks/deployment_soak.py [--keep-going] [--quick]

`--quick` leaves out the families that build whole recipes many times over (stage
contracts, damaged recipes and checkpoints, output places, refusing servers, trusted
releases) and those that wait on long stages (signals mid-stage, cache clearing under a
build): under 10 minutes on 2 cores. Signals during start-up stay in.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FAMILIES = {
    "bounded requests (drip, hang, oversized)": "tests/backends/test_llm_bounds.py",
    "failure causes (HTML, UTF-8, nesting, shape, length, gzip, garbage)": "tests/run/test_failure_causes.py",
    "slow servers (timeout_s named, progress per batch)": "tests/run/test_slow_servers.py",
    "servers that refuse schemas": "tests/backends/test_llm_structured.py",
    "trusted releases (--from)": "tests/versions/test_trusted_answers.py",
    "secrets (in URLs, quoted back)": "tests/run/test_secrets_kept.py",
    "stage contracts": "tests/test_stage_contracts.py",
    "signals": "tests/run/test_signals.py",
    "signals during start-up, file-size limit": "tests/run/test_early_signals.py",
    "full disk": "tests/run/test_full_disk.py",
    "refused places (validate, empty --from)": "tests/run/test_refused_places.py",
    "damaged folders (diff, stats, eval, push)": "tests/publish/test_damaged_folders.py",
    "damaged checkpoints": "tests/test_run_damage.py",
    "damaged recipes (aliases, nesting, order)": "tests/test_recipes.py",
    "cache clearing under a build": "tests/run/test_cache_cli.py",
    "output places": "tests/test_run_safety.py",
    "piped progress": "tests/run/test_progress_lines.py",
    "MTEB exports (licence, mock, local)": "tests/mteb_export/test_export_accepted.py",
}
# Left out of --quick: each builds whole recipes many times over, or waits on long stages.
SLOW = {
    "stage contracts",
    "damaged recipes (aliases, nesting, order)",
    "damaged checkpoints",
    "output places",
    "servers that refuse schemas",
    "trusted releases (--from)",
    "signals",
    "cache clearing under a build",
}


def family_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((name for name, file in FAMILIES.items() if file == path), path)


# -- the pytest plugin (this module, loaded in the pytest process with -p) ---------------

_started = time.monotonic()


def pytest_runtest_logreport(report: Any) -> None:
    """One line per case as soon as it is decided: outcome, family, case, seconds."""
    failed_setup = report.when == "setup" and not report.passed
    if report.when != "call" and not failed_setup:
        return
    outcome = "SKIP" if report.skipped else "PASS" if report.passed else "FAIL"
    case = report.nodeid.split("::", 1)[-1]
    line = (
        f"{outcome}  {time.monotonic() - _started:7.1f} s  {family_of(report.nodeid)}: {case} ({report.duration:.1f} s)"
    )
    print(line, file=sys.__stderr__, flush=True)  # the driver keeps pytest's own stdout quiet


# -- the driver ---------------------------------------------------------------------------


def _first_line(child: ET.Element) -> str:
    message = child.get("message")
    return message.splitlines()[0][:300] if message else child.tag


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep-going", action="store_true", help="run every case even after a failure")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="leave out the families that build recipes many times over (under 10 minutes on 2 cores)",
    )
    args = parser.parse_args()
    families = {name: file for name, file in FAMILIES.items() if not (args.quick and name in SLOW)}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "deployment_soak",
            f"--junitxml={report}",
            *([] if args.keep_going else ["-x"]),
            *families.values(),
        ]
        path = os.pathsep.join(p for p in (str(REPO / "benchmarks"), str(REPO), os.environ.get("PYTHONPATH")) if p)
        # The lines come from this module as a pytest plugin, on stderr; what failed is read from the report.
        subprocess.run(cmd, cwd=REPO, check=False, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": path})
        tried, passed, skipped = Counter(), Counter(), Counter()
        failures: list[str] = []
        for case in ET.parse(report).getroot().iter("testcase"):
            # The class name is the test's module, dotted, with its class after it if it has one.
            where = case.get("classname", "")
            family = next(
                (
                    name
                    for name, file in families.items()
                    if f"{where}.".startswith(file.removesuffix(".py").replace("/", ".") + ".")
                ),
                where,
            )
            outcome = {child.tag for child in case}
            if "skipped" in outcome:
                skipped[family] += 1
                continue
            tried[family] += 1
            passed[family] += not outcome & {"failure", "error"}
            failures += [
                f"{family}: {case.get('name')}: {_first_line(child)}"
                for child in case
                if child.tag in ("failure", "error")
            ]
    width = max(map(len, families))
    print()
    for failure in failures:
        print(f"failed: {failure}")
    for family in families:
        note = f" ({skipped[family]} skipped)" if skipped[family] else ""
        print(f"{family:<{width}}  {passed[family]:>3} / {tried[family]:<3} passed{note}")
    total_tried, total_passed = sum(tried.values()), sum(passed.values())
    print(
        f"{'all cases':<{width}}  {total_passed:>3} / {total_tried:<3} passed "
        f"in {time.monotonic() - started:.0f} s{' (--quick)' if args.quick else ''}"
    )
    return 0 if total_tried and total_passed == total_tried else 1


if __name__ == "__main__":
    sys.exit(main())
