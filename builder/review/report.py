"""`build-bench review OUT --report`: label precision per position group with 95 % Wilson
intervals, agreement between reviewers and between each reviewer and the LLM judge's
grades (where the sample carries them), the groups below a precision threshold; written
into stats.json and the card."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from scipy.stats import binomtest

from builder.io.built_folder import BuiltFolder
from builder.review.store import all_reviewers
from builder.util.atomic import write_text_atomic

START, END = "<!-- review -->", "<!-- /review -->"


# Agreement between reviewers beyond chance: Cohen's kappa for two, Fleiss' kappa for
# any number, each over the items every reviewer in question judged.
def cohens_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """None where chance agreement is total (both always gave the same one answer)."""
    n = len(first)
    categories = sorted(set(first) | set(second))
    observed = sum(a == b for a, b in zip(first, second)) / n
    expected = sum((first.count(c) / n) * (second.count(c) / n) for c in categories)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def fleiss_kappa(ratings: Sequence[Sequence[str]]) -> float | None:
    """`ratings[item]` holds every reviewer's answer for that item (the same number each)."""
    raters = len(ratings[0])
    categories = sorted({answer for row in ratings for answer in row})
    counts = [[row.count(c) for c in categories] for row in ratings]
    total = len(ratings) * raters
    shares = [sum(row[j] for row in counts) / total for j in range(len(categories))]
    per_item = [(sum(x * x for x in row) - raters) / (raters * (raters - 1)) for row in counts]
    observed = sum(per_item) / len(per_item)
    expected = sum(p * p for p in shares)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def item_correct(answers: list[str]) -> bool:
    """A label counts as right when most of its reviewers said the span answers the query."""
    return sum(a == "yes" for a in answers) * 2 > len(answers)


def llm_answer(grade: int) -> str:
    """An LLM judge's 0-4 relevance grade on the reviewers' scale: 3-4 answers the query,
    2 partly, 0-1 not (the grading prompt's 3 is "mostly answers")."""
    return "yes" if grade >= 3 else "partly" if grade == 2 else "no"


def llm_agreement(items: list[dict[str, Any]], reviewers: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per reviewer: Cohen's kappa with the LLM judge over the items both judged."""
    grades = {i["query_id"]: llm_answer(i["llm_grade"]) for i in items if i.get("llm_grade") is not None}
    out = {}
    for name in sorted(reviewers):
        shared = sorted(set(grades) & set(reviewers[name]))
        if shared:
            kappa = cohens_kappa([reviewers[name][q]["span_answers"] for q in shared], [grades[q] for q in shared])
            out[name] = {"n": len(shared), "kappa": None if kappa is None else round(kappa, 4)}
    return out


def review_report(folder: Path, items: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    reviewers = all_reviewers(folder)
    groups: dict[str, list[bool]] = {}
    for item in items:
        answers = [j[item["query_id"]]["span_answers"] for j in reviewers.values() if item["query_id"] in j]
        if answers:
            groups.setdefault(item["group"], []).append(item_correct(answers))
    precision = {}
    for group, verdicts in sorted(groups.items()):
        k, n = sum(verdicts), len(verdicts)
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        precision[group] = {
            "n": n,
            "correct": k,
            "precision": round(k / n, 4),
            "ci95": [round(ci.low, 4), round(ci.high, 4)],
        }
    names = sorted(reviewers)
    pairs = {}
    for a, b in combinations(names, 2):
        shared = sorted(set(reviewers[a]) & set(reviewers[b]))
        if shared:
            kappa = cohens_kappa(
                [reviewers[a][q]["span_answers"] for q in shared], [reviewers[b][q]["span_answers"] for q in shared]
            )
            pairs[f"{a}~{b}"] = {"n": len(shared), "kappa": None if kappa is None else round(kappa, 4)}
    everyone = sorted(set.intersection(*(set(j) for j in reviewers.values()))) if len(names) > 1 else []
    fleiss = fleiss_kappa([[reviewers[r][q]["span_answers"] for r in names] for q in everyone]) if everyone else None
    return {
        "reviewers": names,
        "n_items": len(items),
        "n_judgments": sum(len(j) for j in reviewers.values()),
        "threshold": threshold,
        "precision_by_group": precision,
        "below_threshold": [g for g, row in precision.items() if row["precision"] < threshold],
        "cohens_kappa": pairs,
        "fleiss_kappa": {"n": len(everyone), "kappa": None if fleiss is None else round(fleiss, 4)},
        "llm_kappa": llm_agreement(items, reviewers),
    }


def card_section(report: dict[str, Any]) -> str:
    rows = "\n".join(
        f"| {g} | {r['n']} | {r['precision']:.2f} | {r['ci95'][0]:.2f}–{r['ci95'][1]:.2f} |"
        for g, r in report["precision_by_group"].items()
    )
    kappas = "; ".join(
        f"Cohen's κ {pair} {row['kappa']} (n={row['n']})" for pair, row in report["cohens_kappa"].items()
    )
    fleiss = report["fleiss_kappa"]
    with_llm = "; ".join(f"{name} {row['kappa']} (n={row['n']})" for name, row in report.get("llm_kappa", {}).items())
    below = ", ".join(report["below_threshold"]) or "none"
    return (
        f"{START}\n## Human review\n\n"
        f"{len(report['reviewers'])} reviewers ({', '.join(report['reviewers'])}) judged "
        f"{report['n_judgments']} labels of a sample of {report['n_items']} queries drawn per position group "
        "with `build-bench review`. A label is right when most of its reviewers said its span answers "
        "the query; intervals are 95 % Wilson.\n\n"
        "| group | items | precision | 95 % interval |\n|---|---|---|---|\n" + rows + "\n\n"
        f"Agreement on the span question: {kappas or 'no items judged by two reviewers'}"
        + (f"; Fleiss' κ {fleiss['kappa']} (n={fleiss['n']})" if fleiss["n"] else "")
        + ".\n"
        + (
            f"Agreement with the LLM judge's grades (3-4 yes, 2 partly, 0-1 no): Cohen's κ {with_llm}.\n"
            if with_llm
            else ""
        )
        + f"Groups below precision {report['threshold']}: {below}.\n{END}\n"
    )


def write_report(folder: Path, report: dict[str, Any]) -> None:
    built = BuiltFolder.open(folder)
    stats_path = built.stats_path
    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    stats["review"] = report
    write_text_atomic(stats_path, json.dumps(stats, indent=2, ensure_ascii=False))
    card_path = built.card_path
    card = card_path.read_text(encoding="utf-8") if card_path.is_file() else ""
    section = card_section(report)
    if START in card:
        card = re.sub(re.escape(START) + ".*?" + re.escape(END) + "\n?", lambda _: section, card, flags=re.S)
    elif "\n## Citation" in card:
        card = card.replace("\n## Citation", "\n" + section + "\n## Citation", 1)
    else:
        card = card + "\n" + section
    write_text_atomic(card_path, card)
