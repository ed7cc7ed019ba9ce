"""One vocabulary in outputs: beginning / middle / end, with query ids still derived from
the prompt's words (first / middle / final) so releases grown from older ones keep them."""

import json

import polars as pl
import pytest

from builder.bench import Bench
from builder.io.built_folder import read_beir
from builder.stages.generate.generate_queries import GenerateParams, GenerateQueries
from builder.stages.generate.whole_document import region_calls
from tests.helpers import make_ctx
from tests.stages.test_generate import DOC, _backend, _bench

# Ids the code produced before the vocabulary changed, written out literally.
_WHOLE_DOCUMENT_IDS = {"first": "d0-q2d1f31c8", "middle": "d0-q7c3645cd", "final": "d0-q3c80a7c9"}
_CANONICAL = {"first": "beginning", "middle": "middle", "final": "end"}


def test_extractive_writes_canonical_names_and_keeps_its_ids(tmp_path):
    out = GenerateQueries(GenerateParams(mode="extractive", questions_per_call=3)).run(
        _bench(DOC), make_ctx(tmp_path, seed=4)
    )
    assert out.queries.select("query_id", "requested_position").rows() == [
        ("d0-qd1f50abb", "beginning"),
        ("d0-q2e0559d5", "end"),
        ("d0-q5652bb4e", "beginning"),
    ]


def test_whole_document_writes_canonical_names_and_keeps_its_ids(tmp_path, fake_openai):
    def reply(body):
        user = body["messages"][0]["content"]  # the prompt still names the first / middle / final third
        word = next(w for w in _WHOLE_DOCUMENT_IDS if f"the {w} third" in user)
        return json.dumps(
            {"usable": True, "questions": [{"question": f"Q about {word}?", "answer": "A", "type": "fact lookup"}]}
        )

    srv = fake_openai(responder=reply)
    ctx = make_ctx(tmp_path, llms={"gen": _backend(srv)}, models={"gen": {"model": "m", "base_url": srv.base_url}})
    out = GenerateQueries(GenerateParams(llm="gen", calls_per_doc=3, questions_per_call=1)).run(_bench(DOC), ctx)
    rows = out.queries.select("query_id", "text", "requested_position").rows()
    assert rows
    for qid, text, position in rows:
        word = text.removeprefix("Q about ").removesuffix("?")
        assert (qid, position) == (_WHOLE_DOCUMENT_IDS[word], _CANONICAL[word])


def test_steered_call_ids_keep_the_prompts_words():
    corpus = _bench(DOC).corpus
    assert region_calls(corpus, GenerateParams(mode="extractive")) == [
        ("d0", "d0/first", "beginning"),
        ("d0", "d0/middle", "middle"),
        ("d0", "d0/final", "end"),
    ]


def test_region_weights_are_kept_in_the_canonical_names():
    assert GenerateParams(mode="extractive", region_weights={"first": 2, "final": 0.5}).region_weights == {
        "beginning": 2,
        "end": 0.5,
    }
    assert GenerateParams(mode="extractive").region_weights == {"beginning": 1.0, "middle": 1.0, "end": 1.0}
    with pytest.raises(ValueError, match="beginning twice"):
        GenerateParams(mode="extractive", region_weights={"beginning": 1, "first": 1})


def _old_style(tmp_path):
    Bench.of(
        corpus=pl.DataFrame({"doc_id": ["d0"], "text": ["some text"], "lang": ["en"]}),
        queries=pl.DataFrame(
            {
                "query_id": ["q1", "q2", "q3", "q4"],
                "doc_id": ["d0"] * 4,
                "text": ["a", "b", "c", "d"],
                "requested_position": ["first", "middle", "final", None],
            }
        ),
        qrels=pl.DataFrame({"query_id": ["q1", "q2", "q3", "q4"], "doc_id": ["d0"] * 4, "score": [1] * 4}),
    ).save(tmp_path)
    return tmp_path


def test_an_old_folder_reads_with_canonical_names(tmp_path):
    bench = read_beir(_old_style(tmp_path))
    assert bench.queries["requested_position"].to_list() == ["beginning", "middle", "end", None]


def test_an_old_checkpoint_loads_with_canonical_names(tmp_path):
    bench = Bench.load(_old_style(tmp_path))
    assert bench.queries["requested_position"].to_list() == ["beginning", "middle", "end", None]
