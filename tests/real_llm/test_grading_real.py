"""The relevance grade, in the layout that sets the span aside (an opt-in saving since
`cut` became the default again), asked of SmolLM2-135M on llama-server: a 135M model grades poorly, so
what is asserted is that every grade, with and without the span, comes back parseable."""

from __future__ import annotations

import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.stages.qc.llm_relevance import LLMRelevance, RelevanceParams
from tests.stages.qc_factories import qc_ctx
from tests.stages.test_relevance_check import QUERIES, _bench
from tests.support.llama_server import MODEL_ALIAS

pytestmark = pytest.mark.real_llm


@pytest.mark.timeout(900)
def test_grades_with_the_span_set_aside_parse_from_a_real_model(llama, tmp_path):
    config = OpenAIModelConfig(model=MODEL_ALIAS, base_url=llama.base_url, temperature=0.0, timeout_s=600)
    with OpenAIBackend("judge", config, LLMCache.memory()) as backend:
        ctx = qc_ctx(tmp_path, llms={"judge": backend})
        out = LLMRelevance(RelevanceParams(llm="judge", without_span="set_aside")).run(_bench(), ctx)
    reasons = out.drops["reason"].to_list()
    print(
        f"\nkept {out.queries.height} of {len(QUERIES)}; dropped {reasons}; "
        f"grades with span {ctx.stats['llm_grades_with_span']}, without {ctx.stats['llm_grades_without_span']}"
    )
    assert ctx.stats["contrast_layout"] == "set_aside"
    for histogram in (ctx.stats["llm_grades_with_span"], ctx.stats["llm_grades_without_span"]):
        assert sum(histogram.values()) == len(QUERIES)
        assert all(key.isdigit() for key in histogram), histogram
    assert "llm_unparseable" not in reasons
