"""Stage registry: importing this package registers every stage module under it,
sub-packages (one per stage family) included."""

import importlib
import pkgutil

from builder.stages.base import STAGES, Estimate, Flow, Stage, StageParams, register_stage

# Each module registers its stages on import; new modules need no edit here.
for _mod in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
    importlib.import_module(_mod.name)

__all__ = ["STAGES", "Estimate", "Flow", "Stage", "StageParams", "register_stage"]
