"""builder.util.lazy: a stand-in module that imports the real one on first use, and an
import cut short (a signal arriving in the middle of it) leaves nothing half-loaded."""

from __future__ import annotations

import sys

import pytest

from builder.util.lazy import LazyModule, lazy_import

FLAKY = """
import builtins
if not getattr(builtins, "_flaky_seen", False):
    builtins._flaky_seen = True
    raise KeyboardInterrupt  # as a stop signal's handler would, halfway through the import
ANSWER = 42
"""


@pytest.fixture
def flaky_module(tmp_path, monkeypatch):
    (tmp_path / "flaky_mod.py").write_text(FLAKY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "flaky_mod"
    sys.modules.pop("flaky_mod", None)
    import builtins

    if hasattr(builtins, "_flaky_seen"):
        del builtins._flaky_seen


def test_nothing_loads_until_an_attribute_is_read(flaky_module):
    import builtins

    builtins._flaky_seen = True  # this time the import goes through
    mod = lazy_import(flaky_module)
    assert isinstance(mod, LazyModule) and flaky_module not in sys.modules
    assert mod.ANSWER == 42
    assert flaky_module in sys.modules
    assert lazy_import(flaky_module) is sys.modules[flaky_module]  # once loaded, the module itself


def test_an_interrupted_import_is_tried_again_whole(flaky_module):
    mod = lazy_import(flaky_module)
    with pytest.raises(KeyboardInterrupt):
        mod.ANSWER  # noqa: B018
    assert flaky_module not in sys.modules  # nothing half-loaded is left to be found
    assert mod.ANSWER == 42


def test_a_missing_module_fails_when_used():
    mod = lazy_import("no_such_module_for_build_bench")
    with pytest.raises(ModuleNotFoundError):
        mod.anything  # noqa: B018
