import json
import re
import time

import polars as pl
import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.bench import Bench
from builder.stages.generate.checks import BackgroundDetector
from builder.stages.generate.extractive import sentences
from builder.stages.generate.generate_queries import GenerateParams, GenerateQueries
from builder.stages.generate.whole_document import generate_whole_document
from builder.textutil.languages import detect_base
from builder.textutil.positions import requested_of_region
from builder.util.stable import query_id
from tests.helpers import make_ctx
from tests.support.openai_server import Reply

DOC = (
    "Alpha particles were studied by Rutherford in Manchester. They scatter strongly from gold foil. "
    "Many later experiments confirmed the nuclear model of atoms. The middle part talks about "
    "quantum numbers and orbitals in considerable detail here. Spectroscopy measures emitted light "
    "frequencies very precisely. Finally the neutron was discovered by Chadwick in Cambridge laboratory."
)


def _bench(*docs: str) -> Bench:
    return Bench.of(
        pl.DataFrame(
            {
                "doc_id": [f"d{i}" for i in range(len(docs))],
                "text": list(docs),
                "lang": ["en"] * len(docs),
                "summary": ["about atoms"] * len(docs),
            }
        )
    )


def _backend(srv) -> OpenAIBackend:
    return OpenAIBackend(
        "gen",
        OpenAIModelConfig(model="m", base_url=srv.base_url, backoff_initial_s=0.01, max_retries=1, max_reasks=1),
        LLMCache.memory(),
    )


def test_sentences_are_trimmed_spans():
    text = "  One two three.  Four five?\nSix"
    assert [text[s:e] for s, e in sentences(text)] == ["One two three.", "Four five?", "Six"]


def test_extractive_questions_sit_in_the_requested_third(tmp_path):
    params = GenerateParams(mode="extractive", questions_per_call=3)
    out = GenerateQueries(params).run(_bench(DOC), make_ctx(tmp_path, seed=4))
    q = out.queries
    assert q.height >= 2 and out.qrels.height == q.height
    for row in q.iter_rows(named=True):
        (ref,) = row["reference_texts"]
        start = DOC.index(ref)
        third = {"beginning": 0, "middle": 1, "end": 2}[row["requested_position"]]
        assert third * len(DOC) / 3 <= start and start + len(ref) <= (third + 1) * len(DOC) / 3
        assert "____" in row["text"] and row["answer"] in ref and row["answer"] not in row["text"]
    again = GenerateQueries(params).run(_bench(DOC), make_ctx(tmp_path, seed=4))
    assert again.queries.equals(q)


def test_whole_document_mode_over_http(tmp_path, fake_openai):
    def reply(body):
        user = body["messages"][0]["content"]  # the original prompt, also on a re-ask
        if "broken doc" in user:
            return json.dumps({"usable": False})
        if "garbage doc" in user:
            return "no json at all"
        region = next(r for r in ("first", "middle", "final") if f"the {r} third" in user)
        return (
            "```json\n"
            + json.dumps(
                {
                    "usable": True,
                    "questions": [{"question": f"Q about {region}?", "answer": "A", "type": "fact lookup"}],
                }
            )
            + "\n```"
        )

    srv = fake_openai(responder=reply)
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    params = GenerateParams(llm="gen", calls_per_doc=2, questions_per_call=1)
    out = GenerateQueries(params).run(_bench(DOC, "broken doc", "garbage doc"), ctx)
    assert out.corpus["doc_id"].to_list() == ["d0", "d2"]
    rows = out.queries.select("query_id", "text", "requested_position").rows()
    # requested_position is canonical; the prompt and the ids keep the prompt's words.
    assert len(rows) == 2 and all(t == f"Q about {requested_of_region(r)}?" for _, t, r in rows)
    assert [qid for qid, *_ in rows] == [
        query_id("d0", f"generate_queries:whole_document:{requested_of_region(r)}", t) for _, t, r in rows
    ]
    assert sorted(out.drops.select("kind", "id", "reason").rows()) == [
        ("doc", "d1", "doc_unusable"),
        ("query", "d2/g0", "llm_unparseable"),
        ("query", "d2/g1", "llm_unparseable"),
    ]
    assert (tmp_path / "unparseable.jsonl").exists()
    (prompt,) = (m["content"] for m in srv.requests[0]["messages"])
    # The document first, then the fixed instructions, then the region of this call.
    assert prompt.startswith(f"<document>\n{DOC}\n</document>")
    assert prompt.index(DOC) < prompt.index("search engine") < prompt.index("third of the document.")


def _reasoning_reply(final_block: str):
    """A model that follows posir_generate's steps: notes in prose, then the JSON."""

    def reply(body):
        user = body["messages"][0]["content"]
        region = next(r for r in ("first", "middle", "final") if f"the {r} third" in user)
        answer = json.dumps(
            {"usable": True, "questions": [{"question": f"Q about {region}?", "answer": "A", "type": "fact lookup"}]}
        )
        return (
            "1. Searchers: physics students revising [exam season] for the atomic model.\n"
            "2. Question types: fact lookup and cause and reason, e.g. types [1, 3].\n"
            "3. Register: short and casual.\n4. Questions:\n" + final_block.format(answer=answer)
        )

    return reply


def _generate_with(tmp_path, fake_openai, reply):
    srv = fake_openai(responder=reply)
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    out = GenerateQueries(GenerateParams(llm="gen", questions_per_call=1)).run(_bench(DOC), ctx)
    return out, srv


def test_posir_prompt_offers_the_reasoning_steps_and_reads_the_fenced_json_after_them(tmp_path, fake_openai):
    out, srv = _generate_with(tmp_path, fake_openai, _reasoning_reply("```json\n{answer}\n```"))
    (region,) = out.queries["requested_position"].to_list()
    assert out.queries["text"].to_list() == [f"Q about {requested_of_region(region)}?"]
    assert out.drops.is_empty() and srv.request_count == 1  # no re-ask was needed
    user = srv.requests[0]["messages"][0]["content"]
    assert "Searchers" in user and "Question types" in user and "```json" in user


def test_posir_reasoning_then_bare_json_is_read(tmp_path, fake_openai):
    # No fence, and the notes hold a list that decodes as JSON: the answer is the JSON
    # that comes after the reasoning, not the first bracket in it.
    out, srv = _generate_with(tmp_path, fake_openai, _reasoning_reply("{answer}"))
    assert out.queries.height == 1 and out.drops.is_empty() and srv.request_count == 1


def test_posir_json_only_prompt_stays_available(tmp_path, fake_openai):
    srv = fake_openai(
        responder=lambda body: json.dumps(
            {"usable": True, "questions": [{"question": "Q?", "answer": "A", "type": "yes/no"}]}
        )
    )
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    params = GenerateParams(llm="gen", questions_per_call=1, prompt="posir_generate_json")
    out = GenerateQueries(params).run(_bench(DOC), ctx)
    assert out.queries["text"].to_list() == ["Q?"]
    user = srv.requests[0]["messages"][0]["content"]
    assert "Searchers" not in user and "JSON only" in user


def test_chunked_mode_tags_chunks_with_algorithm_1(tmp_path, fake_openai):
    def reply(body):  # one question per chunk, naming the chunk's first word
        first = re.search(r"<excerpt>\s*(\S+)", body["messages"][-1]["content"]).group(1)
        return json.dumps([{"question": f"What happens at {first}?", "answer": "x", "type": "simple"}])

    srv = fake_openai(responder=reply)
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    doc = " ".join(f"w{i}" for i in range(100, 220))  # 120 words -> four chunks of 30
    params = GenerateParams(mode="chunked", llm="gen", chunk_size=30, questions_per_call=1)
    out = GenerateQueries(params).run(_bench(doc), ctx)
    rows = out.queries.select("chunk_start", "chunk_end", "chunk_tag", "requested_position").rows()
    # A chunk across a third boundary is middle (Algorithm 1).
    assert [r[2] for r in rows] == ["beginning", "middle", "middle", "end"]
    assert [r[3] for r in rows] == ["beginning", "middle", "middle", "end"]
    for start, end, *_ in rows:
        assert len(doc[start:end].split()) == 30
    assert "<summary>\nabout atoms\n</summary>" in srv.requests[0]["messages"][-1]["content"]


def test_chunked_mode_takes_the_models_list_up_to_the_cap(tmp_path, fake_openai):
    # FineWeb-PosQ asks for a free list of FAQs per chunk; the cap bounds it and the
    # questions past the cap are counted, not silently lost.
    # Each chunk gets its own questions: repeats within a document would drop as duplicate_query.
    def chunk(body: dict) -> str:
        return "the start" if "<excerpt>\nw0 " in body["messages"][-1]["content"] else "the end"

    srv = fake_openai(
        responder=lambda body: json.dumps(
            [{"question": f"Question {k} on {chunk(body)}?", "answer": "x", "type": "complicated"} for k in range(5)]
        )
    )
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    doc = " ".join(f"w{i}" for i in range(60))  # two chunks of 30 words
    params = GenerateParams(mode="chunked", llm="gen", chunk_size=30, questions_per_call=3)
    out = GenerateQueries(params).run(_bench(doc), ctx)
    rows = out.queries.select("query_id", "text", "chunk_start", "chunk_end").rows()
    assert [qid for qid, *_ in rows] == [query_id("d0", f"generate_queries:chunk:{s}-{e}", t) for _, t, s, e in rows]
    assert len({qid for qid, *_ in rows}) == 6
    assert ctx.stats["questions_over_cap"] == 4
    prompt = srv.requests[0]["messages"][-1]["content"]
    assert "as many" in prompt and "at most 3" in prompt


def test_summary_prompt_asks_for_up_to_400_words_by_default(tmp_path, fake_openai):
    from builder.stages.generate.summarize import Summarize, SummarizeParams

    srv = fake_openai(responder=lambda body: "A paraphrase.")
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    out = Summarize(SummarizeParams(llm="gen")).run(_bench(DOC), ctx)
    assert out.corpus["summary"].to_list() == ["A paraphrase."]
    prompt = srv.requests[0]["messages"][-1]["content"]
    assert "400 words" in prompt and "key information" in prompt


@pytest.mark.parametrize(
    "bad",
    [
        {"mode": "whole_document"},
        {"mode": "extractive", "llm": "gen"},
        {"mode": "extractive", "region_weights": {"first": 0}},
        {"mode": "extractive", "avoid_overlap": True},
    ],
)
def test_invalid_params(bad):
    with pytest.raises(ValueError):
        GenerateParams(**bad)


def test_calls_on_one_document_are_distinct_requests_and_repeated_questions_drop(tmp_path, fake_openai):
    # Both calls draw the same third; before, their prompts were identical, the second answer
    # came from the cache, and the question was kept twice.
    def reply(body):
        return json.dumps(
            {
                "usable": True,
                "questions": [
                    {"question": "Who studied alpha particles?", "answer": "Rutherford"},
                    {"question": "who studied  ALPHA particles?", "answer": "Rutherford"},
                ],
            }
        )

    srv = fake_openai(responder=reply)
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    params = GenerateParams(llm="gen", calls_per_doc=2, questions_per_call=2, region_weights={"first": 1})
    out = GenerateQueries(params).run(_bench(DOC), ctx)
    prompts = [r["messages"][-1]["content"] for r in srv.requests]
    assert len(prompts) == 2 and prompts[0] != prompts[1]
    # The second call asks for the same third and gets the same questions: their ids repeat,
    # and the repeats are told apart by a suffix before they drop.
    first = query_id("d0", "generate_queries:whole_document:first", "Who studied alpha particles?")
    second = query_id("d0", "generate_queries:whole_document:first", "who studied  ALPHA particles?")
    assert out.queries["query_id"].to_list() == [first]
    assert sorted(out.drops.select("id", "reason").rows()) == sorted(
        [(second, "duplicate_query"), (f"{first}-2", "duplicate_query"), (f"{second}-2", "duplicate_query")]
    )


def test_questions_in_another_language_than_their_document_drop(tmp_path, fake_openai):
    questions = {
        "en": "Who discovered the neutron in Cambridge?",
        "de": "Wer entdeckte das Neutron in Cambridge?",
        "zh": "谁在剑桥发现了中子？",
        "short": "Wer denn?",
    }
    srv = fake_openai(
        responder=lambda body: json.dumps(
            {"usable": True, "questions": [{"question": q, "answer": "Chadwick"} for q in questions.values()]}
        )
    )
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    out = GenerateQueries(GenerateParams(llm="gen", questions_per_call=4)).run(_bench(DOC), ctx)
    # Too short to tell ("Wer denn?") is not judged, so it stays.
    assert out.queries["text"].to_list() == [questions["en"], questions["short"]]
    (region,) = set(out.queries["requested_position"])
    assert sorted(out.drops.select("id", "reason").rows()) == sorted(
        (
            query_id("d0", f"generate_queries:whole_document:{requested_of_region(region)}", questions[lang]),
            "query_wrong_language",
        )
        for lang in ("de", "zh")
    )
    assert ctx.stats["query_language"] == {"checked": 3, "too_short": 1, "wrong": 2}


def test_questions_are_handed_on_before_the_last_answer_arrives(tmp_path, fake_openai):
    # The second document's answer leaves a second after the first one's: its questions
    # must be heard in between, not once every answer is in.
    def reply(body):
        if "late doc" in body["messages"][0]["content"]:
            return Reply(
                text=json.dumps(
                    {"usable": True, "questions": [{"question": "Late question about the text?", "answer": "A"}]}
                ),
                delay_s=1.0,
            )
        return json.dumps({"usable": True, "questions": [{"question": " Who found the neutron? ", "answer": "A"}]})

    srv = fake_openai(responder=reply)
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    told: list[tuple[float, list[str]]] = []
    outcome = generate_whole_document(
        _bench(DOC, "late doc").corpus,
        ctx,
        GenerateParams(llm="gen", questions_per_call=1),
        lambda texts: told.append((time.perf_counter(), texts)),
    )
    assert [texts for _, texts in told] == [["Who found the neutron?"], ["Late question about the text?"]]
    assert told[0][0] < max(srv.answered) - 0.5
    assert [d.text for d in outcome.drafts] == ["Who found the neutron?", "Late question about the text?"]


def test_the_background_detector_agrees_with_detect_base():
    texts = [
        "Who discovered the neutron in Cambridge?",
        "Wer entdeckte das Neutron in Cambridge?",
        "谁在剑桥发现了中子？",
        "Qui a découvert le neutron à Cambridge ?",
        "Wer denn?",
    ]
    detector = BackgroundDetector()
    try:
        detector.submit(texts[:3])  # the rest are first asked for by `detect`
        assert [detector.detect(t) for t in texts] == [detect_base(t) for t in texts]
    finally:
        detector.close()


def test_region_weights_take_the_position_tag_names_as_well():
    # beginning/middle/end, as position_tag says; first/middle/final stay readable in older recipes.
    assert GenerateParams(mode="extractive", region_weights={"beginning": 2, "end": 0.5}).region_weights == {
        "beginning": 2.0,
        "end": 0.5,
    }
    assert GenerateParams(mode="extractive", region_weights={"first": 1, "middle": 1}).region_weights == {
        "beginning": 1.0,
        "middle": 1.0,
    }
    with pytest.raises(ValueError, match="names the beginning twice"):
        GenerateParams(mode="extractive", region_weights={"beginning": 1, "first": 1})


def test_a_chunk_that_supports_no_question_is_an_answer_not_a_failure(tmp_path, fake_openai):
    # The chunk prompt asks for as many questions as the excerpt supports: an empty list
    # is a model saying "none", so it is neither retried nor dropped as unparseable.
    def reply(body):
        if "<excerpt>\nw0 " in body["messages"][-1]["content"]:
            return json.dumps({"questions": [{"question": "What is w0?", "answer": "x", "type": "simple"}]})
        return json.dumps({"questions": []})

    srv = fake_openai(responder=reply)
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    doc = " ".join(f"w{i}" for i in range(60))  # two chunks of 30 words
    out = GenerateQueries(GenerateParams(mode="chunked", llm="gen", chunk_size=30)).run(_bench(doc), ctx)
    assert out.queries["text"].to_list() == ["What is w0?"]
    assert out.drops.height == 0 and len(srv.requests) == 2
    assert (ctx.stats["chunks"], ctx.stats["chunks_without_questions"]) == (2, 1)
    assert srv.requests[0]["response_format"]["json_schema"]["schema"]["properties"]["questions"]["minItems"] == 0


@pytest.mark.parametrize("mode", ["whole_document", "chunked"])
def test_avoid_overlap_asks_for_questions_worded_apart_from_their_evidence(tmp_path, fake_openai, mode):
    from builder.backends.llm.prompt_templates import PromptLibrary
    from builder.stages.generate.params import AVOID_OVERLAP

    def reply(body):
        if mode == "chunked":
            return json.dumps([{"question": "Who found the neutron?", "answer": "x", "type": "simple"}])
        return json.dumps({"usable": True, "questions": [{"question": "Who found the neutron?", "answer": "x"}]})

    sent = {}
    for avoid in (False, True):
        srv = fake_openai(responder=reply)
        ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
        params = GenerateParams(
            mode=mode,
            llm="gen",
            questions_per_call=1,
            avoid_overlap=avoid,
            chunk_size=200,
            prompt="posir_generate_json" if mode == "whole_document" else None,
        )
        GenerateQueries(params).run(_bench(DOC), ctx)
        sent[avoid] = srv.requests[0]["messages"][-1]["content"]
    assert AVOID_OVERLAP in sent[True] and AVOID_OVERLAP not in sent[False]
    assert sent[True].replace(f"\n\n{AVOID_OVERLAP}", "") == sent[False]
    # Off, the prompt renders as it did before the option (cached answers stay valid).
    name = "posir_generate_json" if mode == "whole_document" else "chunk_qa"
    variables = (
        {"summary": "about atoms", "chunk": DOC, "max_questions": 1}
        if mode == "chunked"
        else {
            "document": DOC,
            "n_questions": 1,
            "region_instruction": "first third.",
            "question_types": [],
            "styles": [],
            "call_number": 1,
            "calls": 1,
        }
    )
    template = PromptLibrary().get(name)
    assert template.render(**variables) == template.render(**variables, wording="")
