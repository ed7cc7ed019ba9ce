"""Publishing a built benchmark: statistics, plots, the data card and Hub releases.

Kept import-light: the recipe model imports `PushConfig` from here, so heavy
dependencies (matplotlib, huggingface_hub, datasets) load only inside the modules
that need them.
"""

from builder.publish.config import CardConfig, PushConfig

__all__ = ["CardConfig", "PushConfig"]
