"""summarize against the local server: answers become summaries, failures become drops."""

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.stages.generate.summarize import Summarize, SummarizeParams
from tests.helpers import make_ctx
from tests.stages.qc_factories import bench_of
from tests.support.openai_server import Reply


def test_summaries_cut_off_at_max_tokens_are_dropped_as_truncated(tmp_path, fake_openai):
    def respond(body):
        long_doc = "Volcanoes" in body["messages"][-1]["content"]
        return Reply(text="Volcanoes erupt when", finish_reason="length") if long_doc else "Cats sleep a lot."

    srv = fake_openai(responder=respond)
    config = OpenAIModelConfig(model="m", base_url=srv.base_url, backoff_initial_s=0.01, max_tokens=64)
    with OpenAIBackend("gen", config, LLMCache.memory()) as backend:
        bench = bench_of({"cats": "Cats sleep most of the day.", "lava": "Volcanoes erupt when magma rises."}, [])
        out = Summarize(SummarizeParams(llm="gen")).run(bench, make_ctx(tmp_path, llms={"gen": backend}))
    assert out.corpus.select("doc_id", "summary").rows() == [("cats", "Cats sleep a lot.")]
    assert out.drops.select("kind", "id", "reason").rows() == [("doc", "lava", "llm_truncated")]
    assert sorted(r["max_tokens"] for r in srv.requests) == [64, 64, 128]


def test_a_chatty_lead_in_is_cut_and_an_answer_that_is_only_chatter_is_dropped(tmp_path, fake_openai):
    answers = {
        "Cats": "Sure! Here is a concise summary of the document:\n\nCats sleep a lot.",
        "Volcanoes": "Summary: Magma rises and volcanoes erupt.",
        "Tides": "Here is the summary:",
        "Bees": "   ",
    }

    def respond(body):
        content = body["messages"][-1]["content"]
        return next(text for key, text in answers.items() if key in content)

    srv = fake_openai(responder=respond)
    config = OpenAIModelConfig(model="m", base_url=srv.base_url, backoff_initial_s=0.01)
    docs = {
        "cats": "Cats sleep most of the day.",
        "lava": "Volcanoes erupt when magma rises.",
        "tide": "Tides follow the moon.",
        "bees": "Bees make honey.",
    }
    ctx = make_ctx(tmp_path)
    with OpenAIBackend("gen", config, LLMCache.memory()) as backend:
        ctx.llm_factory = {"gen": backend}.__getitem__
        out = Summarize(SummarizeParams(llm="gen")).run(bench_of(docs, []), ctx)
    assert out.corpus.select("doc_id", "summary").rows() == [
        ("cats", "Cats sleep a lot."),
        ("lava", "Magma rises and volcanoes erupt."),
    ]
    assert sorted(out.drops.select("id", "reason").rows()) == [("bees", "empty_summary"), ("tide", "empty_summary")]
    assert ctx.stats["summary_lead_in_cut"] == 3  # the chatter-only answer too
