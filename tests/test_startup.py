"""Start-up that does not grow with the package: importing the command line and printing
its help load typer and builder's own light modules, none of the libraries the commands and
stages use (their time is measured by benchmarks/startup.py; here only what is imported)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Libraries a command or a stage needs, never the help: data frames, numerics, clients,
# models, plots, templates, the rich console, the pydantic models of recipes and stages.
HEAVY = (
    "polars",
    "pyarrow",
    "numpy",
    "scipy",
    "statsmodels",
    "pandas",
    "openai",
    "httpx",
    "datasets",
    "huggingface_hub",
    "torch",
    "transformers",
    "sentence_transformers",
    "rapidfuzz",
    "matplotlib",
    "jinja2",
    "yaml",
    "rich",
    "pydantic",
    "asyncio",
    "builder.stages",
    "builder.recipe",
    "builder.run.runner",
)


def _imported(code: str) -> list[str]:
    """The HEAVY modules (or packages) a fresh interpreter has loaded after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return sorted({h for h in HEAVY for m in loaded if m == h or m.startswith(h + ".")})


def test_the_probe_sees_a_heavy_import():
    assert _imported("import yaml") == ["yaml"]
    assert {"polars", "builder.stages"} <= set(_imported("import polars, builder.stages"))


def test_a_lazy_module_loads_on_first_use():
    bind = "from builder.util.lazy import lazy_import\npl = lazy_import('polars')"
    assert _imported(bind) == []
    assert _imported(f"{bind}\nassert pl.DataFrame({{'a': [1]}}).height == 1") == ["polars"]
    assert _imported(f"{bind}\nimport polars\nassert pl.DataFrame is polars.DataFrame") == ["polars"]


def test_importing_the_command_line_loads_nothing_heavy():
    assert _imported("import builder.cli") == []


def _help(args: list[str]) -> str:
    return (
        "import contextlib, io\nfrom builder.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    try:\n        main({args!r})\n    except SystemExit as stop:\n"
        "        assert stop.code in (0, 2, None), stop.code"
    )


@pytest.mark.parametrize("args", [["--help"], []])
def test_help_loads_nothing_heavy(args):
    assert _imported(_help(args)) == []


@pytest.mark.parametrize("command", ["build", "eval", "cache", "stats", "export-mteb", "review"])
def test_a_commands_help_loads_none_of_what_it_runs(command):
    # typer itself builds a command's option converters with pydantic (as typer 0.29 does).
    assert [m for m in _imported(_help([command, "--help"])) if m != "pydantic"] == []


@pytest.mark.parametrize("package", ["builder.backends.llm", "builder.backends.rerankers"])
def test_a_lazy_package_gives_every_name_it_lists(package):
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(module._HOMES)
    for name in module.__all__:
        home = importlib.import_module(f"{package}.{module._HOMES[name]}")
        assert getattr(module, name) is vars(home)[name]
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018
