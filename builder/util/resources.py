"""Where the shipped prompts, recipes and data-card templates live.

In a source checkout they are the top-level folders; after `pip install` they are
package data (`builder.prompts`, `builder.recipes`, `builder.data_cards`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Kind = Literal["prompts", "recipes", "data_cards"]


def shipped_dir(kind: Kind) -> Path:
    package = Path(__file__).resolve().parent.parent  # builder/
    installed = package / kind
    return installed if installed.is_dir() else package.parent / kind


def find_recipe(name_or_path: str) -> Path:
    """A path that exists wins; otherwise a shipped recipe by name (with or without .yaml)."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    stem = Path(name_or_path).name.removesuffix(".yaml").removesuffix(".yml")
    shipped = shipped_dir("recipes") / f"{stem}.yaml"
    if shipped.exists():
        return shipped
    raise FileNotFoundError(name_or_path)


def shipped_recipes() -> list[Path]:
    return sorted(shipped_dir("recipes").glob("*.yaml"))
