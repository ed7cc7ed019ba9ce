"""Stage registry; importing this package registers every stage module in it."""

import importlib
import pkgutil

from builder.stages.base import STAGES, Estimate, Flow, Stage, StageParams, register_stage

# Each module registers its stages on import; new modules need no edit here.
for _mod in pkgutil.iter_modules(__path__):
    if _mod.name != "base":
        importlib.import_module(f"{__name__}.{_mod.name}")

__all__ = ["STAGES", "Estimate", "Flow", "Stage", "StageParams", "register_stage"]
