"""lexical_overlap: questions that share most of their content words with their evidence go."""

from __future__ import annotations

import json

import pytest

from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from builder.stages.qc.lexical_overlap import LexicalOverlap, LexicalOverlapParams
from tests.conftest import REPO
from tests.helpers import make_ctx
from tests.stages.qc_factories import bench_of, span

DOC = (
    "Chadwick discovered the neutron in Cambridge in 1932. Rutherford scattered alpha particles "
    "from gold foil. Moseley ordered the elements by nuclear charge."
)
EVIDENCE = {
    "beginning": "Chadwick discovered the neutron in Cambridge in 1932.",
    "middle": "Rutherford scattered alpha particles from gold foil.",
    "end": "Moseley ordered the elements by nuclear charge.",
}
# BM25's tokens without stopwords (no stemming; "where", "did" count) and the share found
# in the evidence:
QUERIES = [
    ("copy", "beginning", "Where did Chadwick discover the neutron?"),  # chadwick, neutron: 2 of 5
    ("reworded", "beginning", "Which physicist found the uncharged particle?"),  # 0 of 5
    ("some", "middle", "What did Rutherford fire at thin metal?"),  # rutherford: 1 of 6
    ("all", "end", "Who ordered elements by nuclear charge?"),  # 4 of 5
]


def _bench():
    return bench_of(
        {"d": DOC},
        [
            {"query_id": q, "text": t, "doc_id": "d", "position_tag": tag, "spans": span(EVIDENCE[tag], DOC)}
            for q, tag, t in QUERIES
        ],
    )


def test_questions_above_the_share_go_and_the_overlap_by_third_is_reported(tmp_path):
    ctx = make_ctx(tmp_path)
    out = LexicalOverlap(LexicalOverlapParams(max_overlap=0.3)).run(_bench(), ctx)
    assert sorted(out.drops.select("id", "reason").rows()) == [("all", "lexical_overlap"), ("copy", "lexical_overlap")]
    assert sorted(out.queries["query_id"].to_list()) == ["reworded", "some"]
    figures = ctx.stats["lexical_overlap"]
    assert (figures["dropped"], figures["not_judged"], figures["column"]) == (2, 0, "position_tag")
    assert figures["mean_before"] == {"beginning": 0.2, "middle": 0.1667, "end": 0.8}
    assert figures["mean_after"] == {"beginning": 0.0, "middle": 0.1667, "end": None}


def test_a_share_of_one_keeps_everything(tmp_path):
    ctx = make_ctx(tmp_path)
    out = LexicalOverlap(LexicalOverlapParams(max_overlap=1.0)).run(_bench(), ctx)
    assert out.drops.is_empty() and ctx.stats["lexical_overlap"]["dropped"] == 0


@pytest.mark.timeout(300)
def test_a_build_reports_the_achieved_overlap_by_third_in_stats_and_card(tmp_path, write_recipe, monkeypatch):
    monkeypatch.chdir(REPO)
    text = (REPO / "recipes" / "quickstart.yaml").read_text(encoding="utf-8")
    recipe = write_recipe(text + "  - lexical_overlap:\n      max_overlap: 0.6\n")
    Runner(parse_recipe(recipe), RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    figures = stats["confound_controls"]["04_lexical_overlap"]["lexical_overlap"]
    dropped = [r for r in stats["drop_table"] if r["reason"] == "lexical_overlap"]
    assert (
        dropped
        == [{"stage": "04_lexical_overlap", "kind": "query", "reason": "lexical_overlap", "count": figures["dropped"]}]
        and figures["dropped"] > 0
    )
    # The stats' own overlap per third, on the queries kept, is the stage's "after".
    groups = {g["group"]: round(g["overlap"]["mean"], 4) for g in stats["confounds"]["groups"]}
    assert groups == figures["mean_after"]
    assert all(figures["mean_after"][g] < figures["mean_before"][g] for g in groups)
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert (
        f"`04_lexical_overlap` dropped {figures['dropped']} queries sharing more than 0.6 of their content "
        "words with their evidence span"
    ) in card
