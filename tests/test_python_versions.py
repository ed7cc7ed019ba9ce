"""build-bench runs on Python 3.10 through 3.13: no module leans on a standard-library name
that only a newer release has, and what 3.11 added to sqlite3 is not needed to start."""

from __future__ import annotations

import ast
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from builder.backends.llm.cache import _damaged

PACKAGE = Path(__file__).resolve().parent.parent / "builder"

# Standard-library names newer than Python 3.10, by module (3.11 unless said otherwise).
NEWER_THAN_310 = {
    "sqlite3": {
        "SQLITE_CORRUPT",
        "SQLITE_NOTADB",
        "SQLITE_ERROR",
        "SQLITE_BUSY",
        "SQLITE_LOCKED",
        "SQLITE_IOERR",
        "SQLITE_FULL",
        "SQLITE_CANTOPEN",
        "Blob",
    },
    "datetime": {"UTC"},
    "typing": {
        "Self",
        "LiteralString",
        "Never",
        "assert_never",
        "assert_type",
        "reveal_type",
        "Required",
        "NotRequired",
        "TypeVarTuple",
        "Unpack",
        "dataclass_transform",
        "override",
    },  # override: 3.12
    "enum": {"StrEnum", "ReprEnum", "verify", "global_enum", "member", "nonmember"},
    "asyncio": {"TaskGroup", "timeout", "timeout_at", "Runner", "Barrier"},
    "hashlib": {"file_digest"},
    "contextlib": {"chdir"},
    "itertools": {"batched"},  # 3.12
    "operator": {"call"},
    "math": {"cbrt", "exp2", "sumprod"},  # sumprod: 3.12
    "logging": {"getLevelNamesMapping"},
}
NEWER_MODULES = {"tomllib"}
NEWER_BUILTINS = {"ExceptionGroup", "BaseExceptionGroup"}
# Exception attributes sqlite3 sets only from 3.11 on; read them with getattr and a default.
NEWER_ATTRIBUTES = {"sqlite_errorcode", "sqlite_errorname", "add_note"}


def _newer_names(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        line = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{line} import {a.name}" for a in node.names if a.name in NEWER_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in NEWER_MODULES:
                found.append(f"{line} from {node.module}")
            newer = NEWER_THAN_310.get(node.module, set())
            found += [f"{line} {node.module}.{a.name}" for a in node.names if a.name in newer]
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.attr in NEWER_THAN_310.get(node.value.id, set()):
                found.append(f"{line} {node.value.id}.{node.attr}")
            elif node.attr in NEWER_ATTRIBUTES:
                found.append(f"{line} .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in NEWER_BUILTINS:
            found.append(f"{line} {node.id}")
        elif type(node).__name__ == "TryStar":  # except*
            found.append(f"{line} except*")
    return found


def test_no_module_uses_a_standard_library_name_newer_than_python_310():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _newer_names(path)]
    assert not found, "names Python 3.10 lacks:\n" + "\n".join(found)


def test_build_bench_imports_when_sqlite3_lacks_the_311_error_codes():
    """What Python 3.10 does: its sqlite3 has no SQLITE_CORRUPT or SQLITE_NOTADB."""
    script = (
        "import sqlite3\n"
        "for name in ('SQLITE_CORRUPT', 'SQLITE_NOTADB'):\n"
        "    if hasattr(sqlite3, name): delattr(sqlite3, name)\n"
        "import builder.cli, builder.backends.llm.cache\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _error(kind: type[sqlite3.DatabaseError], message: str, code: int | None) -> sqlite3.DatabaseError:
    error = kind(message)
    if code is not None:
        error.sqlite_errorcode = code  # what 3.11+ sets; 3.10's errors carry only the message
    return error


@pytest.mark.parametrize("code", [None, 11, 26], ids=["3.10", "corrupt", "notadb"])
def test_damage_is_recognised_with_or_without_the_error_code(code):
    """SQLite's own messages for SQLITE_CORRUPT (11) and SQLITE_NOTADB (26)."""
    message = "file is not a database" if code in (None, 26) else "database disk image is malformed"
    assert _damaged(_error(sqlite3.DatabaseError, message, code))
    assert _damaged(_error(sqlite3.DatabaseError, "database disk image is malformed", code and 11))
    assert _damaged(_error(sqlite3.DatabaseError, "malformed database schema (answers)", code and 11))


@pytest.mark.parametrize("code", [None, 5], ids=["3.10", "busy"])
def test_a_busy_or_other_error_is_not_damage(code):
    assert not _damaged(_error(sqlite3.OperationalError, "database is locked", code))
    assert not _damaged(_error(sqlite3.OperationalError, "no such table: answers", code and 1))
