"""Modules that load on first use.

A command that ends up with nothing to do (an idle rerun, above all) should not pay for
polars: importing it costs about as much as the rest of the start-up. Modules on that path
bind `pl = lazy_import("polars")`: a stand-in that imports polars the first time one of its
attributes is read, through the ordinary import (so an import cut short by a signal leaves
nothing half-loaded behind, as the standard library's LazyLoader would), and hands every
attribute on from the real module from then on.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any


class LazyModule(ModuleType):
    """Stands for the module of the same name until an attribute is read."""

    def __getattr__(self, attr: str) -> Any:
        # Called only for names the stand-in lacks, which is every name of the real module.
        module = sys.modules.get(self.__name__) or importlib.import_module(self.__name__)
        return getattr(module, attr)


def lazy_import(name: str) -> ModuleType:
    """`name` itself when it is imported already, else a stand-in that imports it when used."""
    return sys.modules.get(name) or LazyModule(name)
