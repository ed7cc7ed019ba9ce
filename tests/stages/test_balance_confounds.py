"""balance_confounds: greedy trimming until every confound's SMD between thirds is small."""

from __future__ import annotations

import json

import pytest

from builder.publish.stats import compute_stats
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from builder.stages.qc.confound_balance import BalanceConfounds, BalanceConfoundsParams
from tests.conftest import REPO
from tests.helpers import make_ctx
from tests.stages.qc_factories import bench_of, span


def _doc(words: int) -> str:
    return "The kettle boils water quickly. " + " ".join(f"w{k}" for k in range(words - 5))


def _bench(lengths: dict[str, list[int]], questions: dict[str, list[str]] | None = None):
    """One query per document; `lengths` gives each third's document lengths in words."""
    docs, queries = {}, []
    for tag, sizes in lengths.items():
        for k, words in enumerate(sizes):
            doc_id = f"{tag}{k}"
            docs[doc_id] = _doc(words)
            text = (questions or {}).get(tag, ["What boils water quickly?"] * len(sizes))[k]
            queries.append(
                {
                    "query_id": doc_id,
                    "text": text,
                    "doc_id": doc_id,
                    "position_tag": tag,
                    "spans": span("The kettle boils water quickly.", docs[doc_id]),
                }
            )
    return bench_of(docs, queries)


def test_trimming_removes_the_query_behind_the_largest_difference(tmp_path):
    # Document words 10 / 12 / 14 in the first two thirds, 10 / 12 / 14 / 40 in the last:
    # SMD (12 - 19) / sqrt((4 + 596/3) / 2) = -0.6954 against each; without the 40, 0.
    bench = _bench({"beginning": [10, 12, 14], "middle": [10, 12, 14], "end": [10, 12, 14, 40]})
    ctx = make_ctx(tmp_path)
    out = BalanceConfounds(BalanceConfoundsParams(confounds=["doc_words"], min_group=2)).run(bench, ctx)
    assert out.drops.select("id", "reason").rows() == [("end3", "confound_smd:doc_words")]
    figures = ctx.stats["confounds_balanced"]
    assert figures["largest_smd_before"] == {"doc_words": 0.6954}
    assert figures["largest_smd_after"] == {"doc_words": 0.0}
    assert (figures["removed"], figures["reached"], figures["group_sizes"]) == (
        1,
        True,
        {"beginning": 3, "middle": 3, "end": 3},
    )
    assert not ctx.warnings


def test_question_types_are_balanced_as_shares(tmp_path):
    what, which = "What boils water quickly?", "Which kettle boils water quickly?"
    bench = _bench(
        {"beginning": [10] * 4, "middle": [10] * 4, "end": [10] * 4},
        {
            "beginning": [what, what, which, which],
            "middle": [what, what, which, which],
            "end": [what, what, what, which],
        },
    )
    ctx = make_ctx(tmp_path)
    out = BalanceConfounds(BalanceConfoundsParams(confounds=["question_type"], min_group=3)).run(bench, ctx)
    # 'what' shares 2/4, 2/4, 3/4: SMD 0.25 / sqrt((1/3 + 1/4) / 2) = 0.4629. The end third
    # can lose only one query (min_group 3); the others then each lose a 'which'.
    assert out.drops["reason"].to_list() == ["confound_smd:question_type"] * 3
    for tag in ("beginning", "middle", "end"):
        assert sorted(out.queries.filter(out.queries["position_tag"] == tag)["text"].to_list()) == [what, what, which]
    assert ctx.stats["confounds_balanced"]["largest_smd_before"] == {"question_type": 0.4629}
    assert ctx.stats["confounds_balanced"]["largest_smd_after"] == {"question_type": 0.0}


def test_a_third_is_never_trimmed_below_min_group_and_the_shortfall_is_a_warning(tmp_path):
    # (40 - 12) / sqrt((4 + 100) / 2) = 3.883, and every third is at min_group already.
    bench = _bench({"beginning": [10, 12, 14], "middle": [10, 12, 14], "end": [30, 40, 50]})
    ctx = make_ctx(tmp_path)
    out = BalanceConfounds(BalanceConfoundsParams(confounds=["doc_words"], min_group=3)).run(bench, ctx)
    assert out.queries.height == 9 and out.drops.height == 0
    assert ctx.stats["confounds_balanced"]["reached"] is False
    assert ctx.warnings == [
        "balance_confounds: position_tag groups still differ by more than SMD 0.1 in "
        "doc_words 3.883: no removal improves it without trimming a group below 3"
    ]


def test_the_same_seed_removes_the_same_queries(tmp_path):
    lengths = {"beginning": [10, 11, 12, 13, 30], "middle": [10, 12, 14, 16, 18], "end": [9, 10, 25, 26, 27]}
    runs = [
        BalanceConfounds(BalanceConfoundsParams(min_group=3))
        .run(_bench(lengths), make_ctx(tmp_path, seed=7))
        .drops.select("id", "reason")
        .rows()
        for _ in range(2)
    ]
    assert runs[0] == runs[1] and runs[0]


@pytest.mark.timeout(300)
def test_the_matched_quickstart_has_every_confound_within_a_tenth(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    loaded = parse_recipe(REPO / "recipes" / "quickstart_matched.yaml")
    result = Runner(loaded, RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    confounds = stats["confounds"]
    assert confounds["compared_groups"] == ["beginning", "middle", "end"]
    assert all(abs(d["smd"]) <= 0.1 for d in confounds["smd"] if d["smd"] is not None)
    assert not [w for w in stats["warnings"] if w.startswith("confound")]
    # The stage's own figure is the one the stats report, taken on the same queries.
    assert compute_stats(result.bench)["confounds"] == confounds
    dropped = {r["reason"]: r["count"] for r in stats["drop_table"] if r["stage"] == "04_balance_confounds"}
    assert dropped and all(r.startswith("confound_smd:") for r in dropped)
    balanced = stats["confound_controls"]["04_balance_confounds"]["confounds_balanced"]
    assert balanced["removed"] == sum(dropped.values()) and balanced["reached"]
    assert max(balanced["largest_smd_before"].values()) > 0.2 >= 0.1 >= max(balanced["largest_smd_after"].values())
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert f"`04_balance_confounds` removed {balanced['removed']} queries by greedy trimming" in card
