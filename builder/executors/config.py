"""The recipe's `executor:` section: where the row-parallel part of each stage runs."""

from __future__ import annotations

import importlib.util
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from builder.util.install_hint import missing_modules_message

RAY_MISSING = "executor kind 'ray'"


class ExecutorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "ray"] = Field(
        default="local", description="local: one process (default); ray: blocks of rows run on a Ray cluster"
    )
    address: str | None = Field(
        default=None, description="ray only: 'auto', 'ray://host:port', or none to start a private local instance"
    )
    num_cpus: int | None = Field(
        default=None, ge=1, le=4096, description="ray only: CPUs of a private local instance (default: all)"
    )
    block_size: int = Field(default=256, ge=1, le=1_000_000, description="rows per task sent to a worker")
    max_retries: int = Field(default=3, ge=0, le=100, description="times Ray re-runs a task whose worker died")


def missing_ray(config: ExecutorConfig) -> str | None:
    """Why this config cannot run here, or None."""
    if config.kind != "ray":
        return None
    if importlib.util.find_spec("ray") is None:
        return missing_modules_message(RAY_MISSING, ["ray"], "ray")
    return None
