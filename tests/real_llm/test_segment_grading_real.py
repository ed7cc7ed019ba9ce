"""FineWeb-PosQ's grading of the three thirds, one pair per call, asked of SmolLM2-135M
on llama-server: the labelled third goes first and the other two only where it reached
min_grade. A 135M model grades poorly, so what is asserted is that every grade sent comes
back parseable and the pairs not sent are exactly those of queries already failed."""

from __future__ import annotations

import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.stages.qc.segment_agreement import SegmentAgreement, SegmentParams
from tests.stages.qc_factories import qc_ctx
from tests.stages.test_segment_agreement import _bench
from tests.support.llama_server import MODEL_ALIAS

pytestmark = pytest.mark.real_llm


@pytest.mark.timeout(900)
def test_thirds_graded_one_pair_per_call_parse_from_a_real_model(llama, tmp_path):
    config = OpenAIModelConfig(model=MODEL_ALIAS, base_url=llama.base_url, temperature=0.0, timeout_s=600)
    with OpenAIBackend("judge", config, LLMCache.memory()) as backend:
        ctx = qc_ctx(tmp_path, llms={"judge": backend})
        out = SegmentAgreement(SegmentParams(rerankers=[], llm="judge", questions_per_call=1)).run(_bench(), ctx)
    reasons = dict(out.drops.select("id", "reason").rows())
    print(f"\nkept {out.queries['query_id'].to_list()}; dropped {reasons}; grades {ctx.stats['llm_grades']}")
    labelled = 5  # the bench's queries with a third
    failed_first = sum(r.startswith("llm_grade_below") for q, r in reasons.items())
    assert all(key.isdigit() for key in ctx.stats["llm_grades"]), ctx.stats["llm_grades"]
    assert "llm_unparseable" not in reasons.values()
    assert ctx.stats["grading_pairs_not_sent"] == 2 * failed_first
    assert sum(ctx.stats["llm_grades"].values()) == 3 * labelled - 2 * failed_first
