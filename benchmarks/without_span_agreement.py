"""Do `cut` and `set_aside` give the same verdicts? Ask one judge both layouts and count.

Grading a query "without its span" (llm_relevance, span_contrast's LLM check) has two
layouts: `cut`, PosIR's, sends the document with the span cut out; `set_aside`, an opt-in
saving, sends the whole document and names the span, after the instructions, as a passage
to treat as deleted (a prefix cache then serves the document). `set_aside` is only as good
as the judge's obedience: a judge that grades the text it reads keeps the span's credit.

This script takes queries with evidence spans (a built folder, or a recipe it builds
first), samples `--pairs` of them with `--seed`, and asks the judge at `--base-url` three
grades per query in one pool: with the span, without it cut out, without it set aside.
Each layout's verdict is the stage's own (builder.stages.grading.contrast_verdict):
kept, `llm_grade_below:<n>` or `llm_not_higher`. It prints, over the queries where every
grade parsed, the verdicts' agreement and Cohen's kappa (keep vs drop, statsmodels'
`cohens_kappa` on the 2 x 2 table, with its asymptotic 95 % interval), the same for the
0-4 grades without the span, and the count behind each. A kappa near 1 is what would let
`set_aside` stand for `cut`.

    python benchmarks/without_span_agreement.py --base-url http://127.0.0.1:8080/v1 --model M \\
        [--api-key-env OPENAI_API_KEY] (--folder OUT | --recipe quickstart) [--pairs 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from statsmodels.stats.inter_rater import cohens_kappa

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.backends.llm.prompt_templates import PromptLibrary
from builder.backends.rerankers import SetAside, grade_pair_sets
from builder.bench import Bench
from builder.io.built_folder import read_beir
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from builder.stages.grading import ContrastRow, contrast_rows, contrast_verdict

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "relevance_grade"


@dataclass
class Kappa:
    """Agreement between two raters over `n` items: the share equal, and Cohen's kappa with
    its 95 % interval (kappa None where it is undefined: one category only; the interval
    None where its standard error is 0)."""

    n: int
    agreement: float | None
    kappa: float | None
    low: float | None
    high: float | None

    def text(self) -> str:
        if not self.n:
            return "n 0"
        if self.kappa is None:
            return f"n {self.n}, agreement {self.agreement:.3f}, kappa undefined (one category only)"
        if self.low is None:
            return f"n {self.n}, agreement {self.agreement:.3f}, kappa {self.kappa:.3f} (no spread: no interval)"
        return f"n {self.n}, agreement {self.agreement:.3f}, kappa {self.kappa:.3f} [{self.low:.3f}, {self.high:.3f}]"


def kappa(first: Sequence[Any], second: Sequence[Any], categories: Sequence[Any]) -> Kappa:
    """Cohen's kappa of two paired ratings over `categories` (statsmodels)."""
    n = len(first)
    if not n:
        return Kappa(0, None, None, None, None)
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)))
    for a, b in zip(first, second):
        table[index[a], index[b]] += 1
    agreement = float(np.trace(table) / n)
    used = table.sum(0) + table.sum(1) > 0
    if used.sum() < 2:
        return Kappa(n, agreement, None, None, None)
    with np.errstate(invalid="ignore", divide="ignore"):  # its z-test divides by 0 where the table is one-sided
        result = cohens_kappa(table[np.ix_(used, used)])
    if not result.std_kappa > 0:  # no spread (e.g. one rater used one category): no interval
        return Kappa(n, agreement, float(result.kappa), None, None)
    return Kappa(n, agreement, float(result.kappa), float(result.kappa_low), float(result.kappa_upp))


@dataclass
class AgreementReport:
    asked: int
    failed: int  # queries with a grade that did not parse, or a failed request
    verdicts: dict[str, dict[str, int]]  # per layout: verdict -> count
    verdict_kappa: Kappa  # keep vs drop
    grade_kappa: Kappa  # the 0-4 grade without the span
    disagreements: list[dict[str, Any]]

    def lines(self) -> list[str]:
        return [
            f"queries asked: {self.asked}; with a grade that failed: {self.failed}",
            *(f"verdicts, {layout}: {dict(sorted(counts.items()))}" for layout, counts in self.verdicts.items()),
            f"verdict (keep / drop) cut vs set_aside: {self.verdict_kappa.text()}",
            f"grade without the span (0-4) cut vs set_aside: {self.grade_kappa.text()}",
        ]


def sample(rows: Sequence[ContrastRow], n: int, seed: int) -> list[ContrastRow]:
    """`n` rows drawn with `seed` (all where there are fewer), in query-id order."""
    ordered = sorted(rows)
    picked = ordered if n >= len(ordered) else random.Random(seed).sample(ordered, n)
    return sorted(picked)


def measure(
    backend: OpenAIBackend,
    rows: Sequence[ContrastRow],
    min_grade: int = 3,
    questions_per_call: int = 8,
    raw_log: Path | None = None,
) -> AgreementReport:
    """Grade every row with its span, cut and set aside, and compare the two layouts."""
    prompts = PromptLibrary()
    sets = [
        [(q, doc) for _, q, doc, _, _ in rows],
        [(q, cut) for _, q, _, cut, _ in rows],
        [(q, SetAside(doc, passages)) for _, q, doc, _, passages in rows],
    ]
    with_span, cut, set_aside = grade_pair_sets(
        backend,
        lambda **v: prompts.get(PROMPT).render(**v),
        sets,
        questions_per_call=questions_per_call,
        raw_log=raw_log,
    )
    verdicts: dict[str, dict[str, int]] = {"cut": {}, "set_aside": {}}
    kept: list[tuple[bool, bool]] = []
    grades: list[tuple[int, int]] = []
    disagreements = []
    failed = 0
    for (qid, query, *_), w, c, s in zip(rows, with_span, cut, set_aside):
        verdict = {"cut": contrast_verdict(w, c, min_grade), "set_aside": contrast_verdict(w, s, min_grade)}
        for layout, v in verdict.items():
            verdicts[layout][v or "kept"] = verdicts[layout].get(v or "kept", 0) + 1
        if any(g.error for g in (w, c, s)):
            failed += 1
            continue
        kept.append((verdict["cut"] is None, verdict["set_aside"] is None))
        grades.append((int(c.value), int(s.value)))  # type: ignore[arg-type]
        if kept[-1][0] != kept[-1][1]:
            disagreements.append(
                {"query_id": qid, "query": query, "with_span": w.value, "cut": c.value, "set_aside": s.value}
            )
    return AgreementReport(
        asked=len(rows),
        failed=failed,
        verdicts=verdicts,
        verdict_kappa=kappa([a for a, _ in kept], [b for _, b in kept], [True, False]),
        grade_kappa=kappa([a for a, _ in grades], [b for _, b in grades], [0, 1, 2, 3, 4]),
        disagreements=disagreements,
    )


def load(folder: Path | None, recipe: str | None, work: Path) -> Bench:
    """The queries of a built folder, or of the recipe built into `work`."""
    if folder is not None:
        return read_beir(folder)
    path = Path(str(recipe))
    if not path.is_file():
        path = ROOT / "recipes" / f"{recipe}.yaml"
    return Runner(parse_recipe(path), RunOptions(run_root=work / "runs", out_dir=work / "out")).run().bench


def main(argv: Sequence[str] | None = None) -> AgreementReport:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True, help="the judge's OpenAI-compatible endpoint")
    parser.add_argument("--model", required=True, help="the judge's model name")
    parser.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="variable holding the key (a local server takes any; unset: 'local')",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--folder", type=Path, help="a build-bench output folder whose queries carry spans")
    source.add_argument("--recipe", help="a recipe file or shipped recipe name, built offline first")
    parser.add_argument("--pairs", type=int, default=100, help="queries sampled (each graded three times)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    parser.add_argument("--min-grade", type=int, default=3, help="lowest grade with the span that keeps a query")
    parser.add_argument("--questions-per-call", type=int, default=8, help="questions graded per request")
    parser.add_argument("--max-concurrency", type=int, default=4)
    parser.add_argument("--json", type=Path, help="also write the report, disagreements included, here")
    args = parser.parse_args(argv)
    os.environ.setdefault(args.api_key_env, "local")
    with tempfile.TemporaryDirectory() as tmp:
        bench = load(args.folder, args.recipe, Path(tmp))
        rows, _ = contrast_rows(bench)
        picked = sample(rows, args.pairs, args.seed)
        config = OpenAIModelConfig(
            model=args.model,
            base_url=args.base_url,
            api_key_env=args.api_key_env,
            temperature=0.0,
            max_concurrency=args.max_concurrency,
        )
        with OpenAIBackend("judge", config, LLMCache.memory()) as backend:
            report = measure(backend, picked, args.min_grade, args.questions_per_call, Path(tmp) / "unparseable.jsonl")
    print(
        f"judge {args.model} at {args.base_url}; {len(rows)} queries with spans, {len(picked)} sampled "
        f"(seed {args.seed}), min grade {args.min_grade}"
    )
    for line in report.lines():
        print(line)
    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
