"""The stage table in builder/stages/__init__.py names every stage a module under
builder/stages registers, with that module; a stage's module is imported only when asked for."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import builder.stages
from builder.stages import STAGES, Stage, StageParams
from builder.stages.base import StageRegistry


def _registered_by_modules() -> dict[str, str]:
    for mod in pkgutil.walk_packages(builder.stages.__path__, prefix="builder.stages."):
        importlib.import_module(mod.name)
    return {name: STAGES[name].__module__ for name in STAGES if STAGES[name].__module__.startswith("builder.")}


def test_the_table_names_every_registered_stage_with_its_module():
    assert _registered_by_modules() == STAGES.declared()


def test_listing_the_names_imports_no_stage_module():
    code = (
        "import sys\nfrom builder.stages import STAGES\nnames = sorted(STAGES)\n"
        "assert 'localize_spans' in STAGES and 'no_such_stage' not in STAGES\n"
        "print(len(names), sorted(m for m in sys.modules if m in set(STAGES.declared().values())))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [str(len(STAGES.declared())), "[]"]


def test_asking_for_a_stage_imports_its_module_only():
    code = (
        "import sys\nfrom builder.stages import STAGES\ncls = STAGES['localize_spans']\n"
        "print(cls.__module__, sorted(m for m in sys.modules if m in set(STAGES.declared().values())))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["builder.stages.localize_spans", "['builder.stages.localize_spans']"]


class _Listed(Stage):
    name = "listed"
    Params = StageParams

    def run(self, bench, ctx):
        return bench


def test_a_name_the_table_gives_to_another_module_cannot_be_registered():
    registry = StageRegistry()
    registry.declare({"listed": "somewhere.else"})
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(_Listed)


def test_a_stage_outside_the_table_is_known_once_registered():
    registry = StageRegistry()
    assert "listed" not in registry
    registry.register(_Listed)
    assert registry["listed"] is _Listed and list(registry) == ["listed"] and len(registry) == 1
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(_Listed)


def test_a_module_that_does_not_register_its_listed_stage_is_named():
    registry = StageRegistry()
    registry.declare({"ghost": "builder.stages.refs"})
    with pytest.raises(LookupError, match="builder.stages.refs does not register the stage 'ghost'"):
        registry["ghost"]
