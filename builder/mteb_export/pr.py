"""The description of an MTEB dataset pull request, kept under MTEB's 2,000 characters."""

from __future__ import annotations

from typing import Any

from builder.mteb_export.shape import languages

LIMIT = 2000


def pr_description(fields: dict[str, Any], stats: dict[str, Any], module_file: str) -> str:
    splits = [stats[split] for split in fields["eval_splits"]]
    subsets = list(fields["eval_langs"]) if isinstance(fields["eval_langs"], dict) else []
    review = ""
    if "reviewed" in fields["annotations_creators"]:
        review = " People reviewed a stratified sample of the labels with `build-bench review` (figures in the card)."
    text = (
        f"## Add {fields['name']}\n\n"
        f"{fields['description']}\n\n"
        f"- Dataset: `{fields['dataset']['path']}` at revision `{fields['dataset']['revision']}`\n"
        f"- Task: {fields['type']}, main score {fields['main_score']}, "
        f"split{'s' if len(splits) > 1 else ''} {', '.join(fields['eval_splits'])}, "
        f"languages {', '.join(languages(fields['eval_langs']))}"
        + (f", subsets {', '.join(subsets)}" if subsets else "")
        + "\n"
        f"- Size: {sum(s['num_documents'] for s in splits)} documents, {sum(s['num_queries'] for s in splits)} "
        f"queries, {sum(s['relevant_docs_statistics']['num_relevant_docs'] for s in splits)} relevant pairs\n"
        f"- Labels: {fields['annotations_creators']}.{review}\n"
        f"- Task module: `{module_file}`; descriptive statistics computed and included.\n\n"
        "Every query carries the position of its evidence span in its document (the `positions` "
        "config), so results can be broken down by where the answer sits.\n\n"
        "Checked before submission (build-bench export-mteb): no empty split, no text of 3 characters "
        "or fewer, under 1 % duplicate texts, every qrel inside the corpus, every query with a "
        "relevant document, metadata filled, language codes valid.\n"
    )
    return text if len(text) < LIMIT else text[: LIMIT - 2] + "…\n"
