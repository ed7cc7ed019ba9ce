"""Deployment soak: every real-world failure case of issue #31, run and counted.

Each case is a test of the suite against real processes on 127.0.0.1: servers that drip,
hang, answer too much or refuse schemas; tampered and malformed `--from` releases; secrets
in `base_url`; recipes in an impossible stage order; SIGTERM and SIGINT at start-up and
mid-stage; a tiny filesystem under `--out` and `--run-dir`; damaged tables, checkpoints and
recipes; cache clearing while a build holds the run folder; piped progress. This script
runs them in one pytest process and prints the cases tried and passed, per family.

    PYTHONPATH=$PWD python benchmarks/deployment_soak.py [--keep-going]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FAMILIES = {
    "bounded requests (drip, hang, oversized)": "tests/backends/test_llm_bounds.py",
    "servers that refuse schemas": "tests/backends/test_llm_structured.py",
    "trusted releases (--from)": "tests/versions/test_trusted_answers.py",
    "secrets": "tests/run/test_secrets_kept.py",
    "stage contracts": "tests/test_stage_contracts.py",
    "signals": "tests/run/test_signals.py",
    "full disk": "tests/run/test_full_disk.py",
    "damaged folders (diff, stats, eval, push)": "tests/publish/test_damaged_folders.py",
    "damaged checkpoints": "tests/test_run_damage.py",
    "damaged recipes (aliases, nesting, order)": "tests/test_recipes.py",
    "cache clearing under a build": "tests/run/test_cache_cli.py",
    "output places": "tests/test_run_safety.py",
    "piped progress": "tests/run/test_progress_lines.py",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep-going", action="store_true", help="run every case even after a failure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
               *([] if args.keep_going else ["-x"]), *FAMILIES.values()]
        subprocess.run(cmd, cwd=REPO, check=False)
        cases = ET.parse(report).getroot().iter("testcase")
        tried, passed, skipped = Counter(), Counter(), Counter()
        for case in cases:
            # The class name is the test's module, dotted, with its class after it if it has one.
            where = case.get("classname", "")
            family = next((name for name, file in FAMILIES.items()
                           if f"{where}.".startswith(file.removesuffix(".py").replace("/", ".") + ".")), where)
            outcome = {child.tag for child in case}
            if "skipped" in outcome:
                skipped[family] += 1
                continue
            tried[family] += 1
            passed[family] += not outcome & {"failure", "error"}
    width = max(map(len, FAMILIES))
    for family in FAMILIES:
        note = f" ({skipped[family]} skipped)" if skipped[family] else ""
        print(f"{family:<{width}}  {passed[family]:>3} / {tried[family]:<3} passed{note}")
    total_tried, total_passed = sum(tried.values()), sum(passed.values())
    print(f"{'all cases':<{width}}  {total_passed:>3} / {total_tried:<3} passed")
    return 0 if total_tried and total_passed == total_tried else 1


if __name__ == "__main__":
    sys.exit(main())
