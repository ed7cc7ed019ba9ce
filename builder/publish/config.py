"""The optional `push:` section of a recipe: where and how a build is released."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

REPO_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$"
# Release tags are semantic versions so the previous release can be found by ordering.
TAG_PATTERN = r"^v\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$"


class PushConfig(BaseModel):
    """Release the built folder to a Hugging Face dataset repository after the build."""

    model_config = ConfigDict(extra="forbid")
    repo: str = Field(pattern=REPO_PATTERN, description="dataset repository, org/name")
    private: bool = Field(False, description="create the repository as private (ignored if it exists)")
    tag: str | None = Field(None, pattern=TAG_PATTERN, description="release tag, vX.Y.Z")
    license: str = Field("unknown", description="license id for the data card front matter")
