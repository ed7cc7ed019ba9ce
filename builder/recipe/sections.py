"""The recipe's sections on what a build puts out: `output:` (the multilingual folders),
`card:` (what the data card declares: the licence) and `push:` (where it is released).
The publisher reads them; it never defines them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from builder.util.license_field import LICENSE_HELP

REPO_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$"
# Release tags are semantic versions so the previous release can be found by ordering.
TAG_PATTERN = r"^v\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$"


class MultilingualOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    per_language: bool = Field(default=False, description="a BEIR folder per language: <out>/<lang>/")
    posir_layout: bool = Field(
        default=False, description="<out>/posir/<lang>/<domain>/{corpus,queries,qrels/test}.parquet"
    )
    cross_lingual: bool = Field(default=False, description="<out>/cross/<X>-<source>/: queries in X, source corpus")


class PushConfig(BaseModel):
    """Release the built folder to a Hugging Face dataset repository after the build."""

    model_config = ConfigDict(extra="forbid")
    repo: str = Field(pattern=REPO_PATTERN, description="dataset repository, org/name")
    private: bool = Field(False, description="create the repository as private (ignored if it exists)")
    tag: str | None = Field(None, pattern=TAG_PATTERN, description="release tag, vX.Y.Z")

    @model_validator(mode="before")
    @classmethod
    def _license_moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "license" in data:
            raise ValueError("the licence is set under card.license now, not push.license")
        return data


class CardConfig(BaseModel):
    """What the data card declares beyond the figures."""

    model_config = ConfigDict(extra="forbid")
    license: str | list[str] | None = Field(
        None, description=f"{LICENSE_HELP}; default: the license: of the sources, when every one declares it"
    )
    license_name: str | None = Field(None, description="with license: other, an id for the licence (e.g. psf-2.0)")
    license_link: str | None = Field(None, description="with license: other, a URL to the licence text")

    @model_validator(mode="after")
    def _other_is_named(self) -> CardConfig:
        if self.license == "other" and not self.license_name:
            raise ValueError("license: other needs license_name (and preferably license_link)")
        return self
