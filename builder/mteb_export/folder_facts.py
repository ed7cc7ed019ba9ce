"""What a built folder already says about itself, for MTEB's task metadata: its card's
front matter, the recipe in the card, its citations, its languages and how it was labelled."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from builder.io.built_folder import BuiltFolder

_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.S)
_RECIPE = re.compile(r"^## Recipe\n.*?```yaml\n(.*?)```", re.S | re.M)
_BIBTEX = re.compile(r"```bibtex\n(.*?)```", re.S)


@dataclass(frozen=True)
class FolderFacts:
    recipe: str
    description: str
    license: str | None
    langs: list[str]  # the languages that hold queries, as stats.json names them
    bibtex: str | None
    annotations: str
    stats: dict[str, Any]
    configs: frozenset[str]  # the Hub configs the card lists, which MTEB's loader reads


def reviewed(stats: dict[str, Any]) -> bool:
    """Whether people checked the labels (`build-bench review --report` wrote its figures)."""
    return bool((stats.get("review") or {}).get("n_judgments"))


def annotations_creators(stats: dict[str, Any]) -> str:
    """MTEB's annotator type: LM-written queries, or rule-written ones (no LLM was asked,
    as in the offline extractive generator); 'and reviewed' once people checked a sample."""
    llm = (stats.get("llm") or {}).get("total") or {}
    by_lm = stats.get("mock_llm") or llm.get("calls", 0) + llm.get("cache_hits", 0) > 0
    if by_lm:
        return "LM-generated and reviewed" if reviewed(stats) else "LM-generated"
    return "automatic-and-reviewed" if reviewed(stats) else "algorithmic"


def card_license(front: dict[str, Any]) -> str | None:
    """MTEB takes a licence id from its list or a URL; a Hub `other` licence is its link."""
    found = front.get("license")
    if found == "other":
        return front.get("license_link")
    if isinstance(found, list):
        return None  # several source licences: MTEB wants one, so the flag must say
    return None if found in (None, "unknown") else str(found)


def read_facts(folder: Path) -> FolderFacts:
    built = BuiltFolder.open(folder)
    card = built.card_path.read_text(encoding="utf-8") if built.card_path.is_file() else ""
    front_match = _FRONT.match(card)
    front = yaml.safe_load(front_match.group(1)) if front_match else {}
    recipe_match = _RECIPE.search(card)
    recipe = yaml.safe_load(recipe_match.group(1)) if recipe_match else {}
    stats = json.loads(built.stats_path.read_text(encoding="utf-8"))
    langs = [row["lang"] for row in stats.get("languages", []) if row.get("queries")]
    citations = [block.strip() for block in _BIBTEX.findall(card)]
    return FolderFacts(
        recipe=str(stats.get("recipe") or recipe.get("name") or folder.name),
        description=str((recipe or {}).get("description") or ""),
        license=card_license(front or {}),
        langs=langs,
        bibtex="\n\n".join(citations) or None,
        annotations=annotations_creators(stats),
        stats=stats,
        configs=frozenset(str(c.get("config_name")) for c in (front or {}).get("configs") or []),
    )
