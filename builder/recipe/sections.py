"""The recipe's sections on what a build puts out: `output:` (the multilingual folders),
`card:` (what the data card declares: the licence) and `push:` (where it is released).
The publisher reads them; it never defines them.

The licence a build's data card declares is `card.license`, or else the `license:` every
source (and every stage that reads data itself) declares. One licence is written as it
is, several as the Hub's list; none known is `unknown`, which `push` refuses."""

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


UNKNOWN = "unknown"


def declared_licenses(recipe: Any) -> list[str] | None:
    """The licences the data's origins declare, in order; None when one of them declares none."""
    origins = [*recipe.sources, *(s.params for s in recipe.stage_objects() if "license" in type(s.params).model_fields)]
    found = [getattr(o, "license", None) for o in origins]
    declared = [f for f in found if f is not None]
    if not found or len(declared) < len(found):
        return None
    return list(dict.fromkeys(declared))


def card_license(recipe: Any | None) -> dict[str, Any]:
    """The front-matter fields: license, and license_name / license_link where set."""
    card = getattr(recipe, "card", None)
    if card is not None and card.license is not None:
        fields = {"license": card.license, "license_name": card.license_name, "license_link": card.license_link}
        return {k: v for k, v in fields.items() if v is not None}
    found = declared_licenses(recipe) if recipe is not None else None
    if not found:
        return {"license": UNKNOWN}
    return {"license": found[0] if len(found) == 1 else found}


def license_problem(recipe: Any) -> str | None:
    """Why this recipe cannot be pushed for want of a licence, or None."""
    if getattr(recipe, "push", None) is None or card_license(recipe)["license"] != UNKNOWN:
        return None
    return (
        "a build that is pushed needs a licence: set card.license (a Hub licence id such as "
        "cc-by-sa-4.0) or license: on every source"
    )
