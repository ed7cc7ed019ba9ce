"""The licence a build's data card declares: `card.license` in the recipe, or else the
`license:` every source (and every stage that reads data itself) declares. One licence
is written as it is, several as the Hub's list; none known is `unknown`, which `push`
refuses."""

from __future__ import annotations

from typing import Any

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
