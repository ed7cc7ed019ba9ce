"""End to end: the FarRelevant recipes through the real runner, on SciFact (30 queries).

The shuffled recipe runs from_beir and far_relevant exactly as msmarco_farrelevant.yaml
does and then shuffles, so one run checks both: the far_relevant checkpoint holds what
the plain recipe passes to position_metadata.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

from builder.backends.tokenizers import HFCounter
from builder.bench import Bench
from builder.io.built_folder import read_beir
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions
from tests.conftest import REPO, SHARED_INPUTS

LIMIT = ["stages.from_beir.limit_queries=30"]


def _check_far_relevant(bench: Bench, tok: HFCounter) -> list[int]:
    starts = []
    for q in bench.queries.iter_rows(named=True):
        text = bench.corpus.filter(bench.corpus["doc_id"] == q["doc_id"])["text"][0]
        (span,) = q["spans"]
        token_starts = [s for s, _ in tok.offsets(text)]
        start = bisect_left(token_starts, span["start"])
        assert len(token_starts) <= 1431 and start >= 512 and start == q["span_token_start"]
        starts.append(start)
    return starts


def test_plain_recipe_is_the_shuffled_recipes_prefix():
    plain = parse_recipe(REPO / "recipes" / "msmarco_farrelevant.yaml").recipe
    shuffled = parse_recipe(REPO / "recipes" / "msmarco_farrelevant_shuffled.yaml").recipe
    # Each recipe's stage list is a model made for the stages it names, so compare settings.
    assert [s.model_dump() for s in plain.stages[:2]] == [s.model_dump() for s in shuffled.stages[:2]]
    assert plain.tokenizer == shuffled.tokenizer and plain.seed == shuffled.seed


def test_every_farrelevant_recipe_ends_with_position_metadata():
    """Their queries carry rel_pos and the pos_* fields like every other recipe's."""
    for name in ("msmarco_farrelevant", "msmarco_farrelevant_shuffled"):
        stages = parse_recipe(REPO / "recipes" / f"{name}.yaml").recipe.stage_objects()
        assert stages[-1].name == "position_metadata", name


def test_farrelevant_then_shuffle_recipe_builds(tmp_path, shared_data, minilm_tokenizer, monkeypatch):
    monkeypatch.chdir(REPO)
    loaded = parse_recipe(
        REPO / "recipes" / "msmarco_farrelevant_shuffled.yaml", LIMIT + SHARED_INPUTS["msmarco_farrelevant_shuffled"]
    )
    result = Runner(loaded, RunOptions(run_root=tmp_path / "runs", out_dir=tmp_path / "out")).run()
    tok = HFCounter(loaded.recipe.tokenizer.name)
    far = Bench.load(result.run_dir / "02_far_relevant")
    assert far.queries.height + far.drops.filter(far.drops["stage"] == "02_far_relevant").height == 30
    starts = _check_far_relevant(far, tok)
    print("FarRelevant relevant-passage start tokens:", sorted(starts))
    out = read_beir(result.out_dir)
    assert out.queries["query_id"].to_list() == far.queries["query_id"].to_list()
    before = dict(far.corpus.select("doc_id", "text").iter_rows())
    after = dict(out.corpus.select("doc_id", "text").iter_rows())
    for q in out.queries.iter_rows(named=True):
        old, new = far.queries.filter(far.queries["query_id"] == q["query_id"])["spans"][0][0], q["spans"][0]
        assert new["end"] - new["start"] == old["end"] - old["start"]
        assert after[q["doc_id"]][new["start"] : new["end"]] == before[q["doc_id"]][old["start"] : old["end"]]
        assert Counter(after[q["doc_id"]].split()) == Counter(before[q["doc_id"]].split())
        assert q["pos_char_span"] == [[new["start"], new["end"]]]  # position_metadata refilled
        assert q["span_token_start"] == bisect_left([s for s, _ in tok.offsets(after[q["doc_id"]])], new["start"])
