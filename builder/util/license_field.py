"""The `license:` field that sources and the stages that read data themselves carry: the
licence their data comes under. Low in the house because readers (io), stages and the
recipe's card section all declare it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

LICENSE_HELP = "a Hub licence id (e.g. cc-by-sa-4.0, mit, odc-by), or other with license_name"


def license_field() -> Any:
    """`license:` on a source or a stage that reads data: the licence that data comes under."""
    return Field(default=None, min_length=1, description=f"licence of this data: {LICENSE_HELP}")
