"""The data card (README.md): Hub front matter plus a body rendered from `data_cards/`.

The front matter is built as data and dumped with PyYAML, never templated as text, so
it always parses. The body template runs in a sandboxed Jinja2 environment with
StrictUndefined: a template naming a missing figure fails loudly instead of rendering
an empty section.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from jinja2 import FileSystemLoader, StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from builder.families import card_step_fields, families
from builder.publish.citations import papers_for
from builder.publish.masking import mask_recipe_text
from builder.publish.training_card import training_context
from builder.records.stage_record import StageRecord, stage_base_name
from builder.textutil.languages import iso_639_1
from builder.util.resources import shipped_dir
from builder.util.secrets import mask_mapping, mask_string

if TYPE_CHECKING:
    from builder.publish.layout import HubLayout
    from builder.recipe.model import LoadedRecipe

DEFAULT_TEMPLATE = "default.md.j2"
_SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
)


def size_category(n: int) -> str:
    for limit, name in _SIZE_CATEGORIES:
        if n < limit:
            return name
    return "100M<n<1B"


def front_matter(stats: dict[str, Any], layout: HubLayout, name: str, license: dict[str, Any]) -> dict[str, Any]:
    counts = stats["counts"]
    tags = sorted({str(row["lang"]) for row in stats["languages"]} - {"unknown", "und", "", "None"})
    codes = sorted({c for c in map(iso_639_1, tags) if c})
    meta: dict[str, Any] = {"pretty_name": name, **license}
    if codes:
        # The Hub's `language` takes ISO 639 codes; the script-qualified tags the build
        # uses (and names its per-language configs by) are kept in `language_details`.
        meta["language"] = codes
    if tags and tags != codes:
        meta["language_details"] = ", ".join(tags)
    meta.update(
        {
            "task_categories": ["text-retrieval"],
            "task_ids": ["document-retrieval"],
            "size_categories": [size_category(max(counts["docs"], counts["queries"]))],
            "tags": ["position-bias", "retrieval", "mteb", "build-bench"],
            "configs": layout.configs,
            "dataset_info": layout.dataset_info,
        }
    )
    return meta


def _stage_params(loaded: LoadedRecipe | None) -> dict[int, dict[str, Any]]:
    if loaded is None:
        return {}
    objects = loaded.recipe.stage_objects()
    return {i: mask_mapping(s.params.model_dump(mode="json")) for i, s in enumerate(objects, start=1)}


def _sources(loaded: LoadedRecipe | None) -> list[str]:
    if loaded is None:
        return []
    out = []
    for src in loaded.recipe.sources:
        where = "CPython reference topics" if src.type == "python_docs" else src.path
        out.append(mask_string(f"{src.type}: {where} (lang {src.lang}, domain {src.domain})"))
    return out


def effective_recipe(loaded: LoadedRecipe) -> str:
    """The recipe as it ran (environment expanded, --set applied), secrets masked, as YAML."""
    return yaml.safe_dump(
        mask_mapping(loaded.data), sort_keys=False, allow_unicode=True, width=100, default_flow_style=None
    )


def _index(label: str) -> int:
    """`03_localize_spans` -> 3; -1 for a label without a stage number."""
    head = label.split("_")[0]
    return int(head) if head.isdigit() else -1


def construction(run_stages: list[StageRecord], loaded: LoadedRecipe | None) -> list[dict[str, Any]]:
    """One entry per stage that actually ran, with its parameters and its effect."""
    from builder.records.stage_record import format_kept_by_third
    from builder.stages import STAGES

    params = _stage_params(loaded)
    steps = []
    for st in run_stages:
        label = st.stage
        name = stage_base_name(label)
        index = _index(label)
        cls = STAGES.get(name)
        summary = cls.summary() if cls else ("read and tokenise the sources" if index == 0 else "")
        steps.append(
            {
                "label": label,
                "name": name,
                "summary": summary,
                "params": json.dumps(params[index], ensure_ascii=False) if index in params else "",
                "docs": f"{_count(st.docs_in)} → {_count(st.docs_out)}",
                "queries": f"{_count(st.queries_in)} → {_count(st.queries_out)}",
                "dropped": ", ".join(f"{r} {n}" for r, n in sorted(st.dropped.items(), key=lambda kv: -kv[1])),
                "llm_calls": int((st.llm or {}).get("calls", 0)),
                "kept_by_third": format_kept_by_third(st.kept_by_third),
                **card_step_fields(st.figures),
                "resumed": st.resumed,
            }
        )
    return steps


def _count(n: int | None) -> str:
    return "?" if n is None else str(n)


def _prompts(run_stages: list[StageRecord]) -> list[dict[str, str]]:
    return [
        {"stage": st.stage, "name": name, "sha256": sha}
        for st in run_stages
        for name, sha in sorted((st.prompts or {}).items())
    ]


def card_context(
    stats: dict[str, Any],
    run_stages: list[StageRecord],
    layout: HubLayout,
    plots: dict[str, Any],
    loaded: LoadedRecipe | None,
    license: dict[str, Any],
    evaluation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the card template shows; `evaluation` is `build-bench eval`'s report made ready
    for it (`eval_context.evaluation_context`), None before any eval."""
    name = loaded.recipe.name if loaded else str(stats.get("recipe") or "benchmark")
    if evaluation is not None:  # a warning the build already lists is not said twice
        said = set(stats.get("warnings", []))
        evaluation = {**evaluation, "warnings": [w for w in evaluation["warnings"] if w not in said]}
    params = _stage_params(loaded)
    used = [(stage_base_name(s.stage), params.get(_index(s.stage), {})) for s in run_stages]
    return {
        "front_matter": yaml.safe_dump(
            front_matter(stats, layout, name, license), sort_keys=False, allow_unicode=True, width=100
        ).rstrip(),
        "name": name,
        "mock_llm": stats.get("mock_llm") is True,
        "description": loaded.recipe.description if loaded else "",
        "seed": loaded.recipe.seed if loaded else None,
        "tokenizer": stats["doc_lengths"].get("tokenizer") or "unknown",
        "sources": _sources(loaded),
        "stats": stats,
        "steps": construction(run_stages, loaded),
        "prompts": _prompts(run_stages),
        "contrast_layouts": {
            st.stage: st.figures["contrast_layout"] for st in run_stages if "contrast_layout" in st.figures
        },
        "inputs": stats.get("inputs"),
        "llm_answers": stats.get("llm_answers"),
        "recipe_effective": effective_recipe(loaded) if loaded else None,
        "recipe_text": mask_recipe_text(loaded.text) if loaded else None,
        "plots": plots,
        "configs": [c["config_name"] for c in layout.configs],
        "base_configs": [
            c["config_name"]
            for c in layout.configs
            if "data_files" in c
            and not str(c["config_name"]).startswith(("beir_", "cross_", "setting_", "posir_", "pairs"))
        ],
        "posir": any(str(c["config_name"]).startswith("posir_") for c in layout.configs),
        "papers": papers_for(used),
        "license": {"license_name": None, "license_link": None, **license},
        "evaluation": evaluation,
        "training": training_context(run_stages),
        # The card's parts stage families add (builder.families), by template name.
        "family_parts": [f.card_template.name for f in families() if f.card_template is not None],
    }


def _cell(value: Any) -> str:
    """Text safe inside a markdown table cell."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def card_environment(template_dir: Path | None = None) -> SandboxedEnvironment:
    """The card's Jinja2 environment; templates load from `template_dir`, then from the
    shipped ones (so a custom card can import the shipped evaluation parts)."""
    shipped = shipped_dir("data_cards")
    parts = [f.card_template.parent for f in families() if f.card_template is not None]
    folders = [str(p) for p in (template_dir, shipped, *parts) if p is not None]
    env = SandboxedEnvironment(
        loader=FileSystemLoader(folders),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = _cell
    return env


def render_card(context: dict[str, Any], template: Path | None = None) -> str:
    path = template or shipped_dir("data_cards") / DEFAULT_TEMPLATE
    env = card_environment(path.parent)
    return env.from_string(path.read_text(encoding="utf-8")).render(**context)
