"""Print the test files in which the last pytest run skipped something, one a line (from
pytest's cache, written by tests/conftest.py): `.ci/run` runs those again once the optional
extras are installed.

    python -m tests.support.skipped_files
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import SKIPPED_FILES_KEY


def main() -> None:
    record = Path(".pytest_cache/v") / SKIPPED_FILES_KEY
    if not record.is_file():
        sys.exit(f"{record}: no record of a pytest run here; run the suite first")
    print("\n".join(json.loads(record.read_text(encoding="utf-8"))))


if __name__ == "__main__":
    main()
