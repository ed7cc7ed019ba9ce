"""The mock LLM answers every shipped prompt, rendered as the stages render it, with an
answer the stage's own parser accepts and that is grounded in the text it was given."""

from __future__ import annotations

import json

import pytest

from builder.backends.llm import ChatRequest, OpenAIModelConfig, chat_json
from builder.backends.llm.mock_backend import MockLLMBackend
from builder.backends.llm.mock_prompts import fingerprints, identify
from builder.backends.llm.prompt_templates import PromptLibrary
from builder.backends.rerankers.llm_judge import _validator as grade_validator
from builder.stages.generate import chunked, whole_document
from builder.stages.localize_spans import REFERENCES
from builder.stages.translate.refusals import _validate as refusal_value
from builder.stages.translate.short_texts import TRANSLATIONS
from builder.util.resources import shipped_dir

FIRST = (
    "The Riverside library opened a new reading room for children in 2019. "
    "Volunteers from Maplewood College run weekly storytelling sessions there. "
)
MIDDLE = (
    "The council approved funding for solar panels on the library roof last March. "
    "Engineers expect the panels to cover half of the building's electricity. "
)
FINAL = (
    "Visitors can borrow telescopes from the Astronomy Society every Friday evening. "
    "Borrowers must return each telescope within seven days of collection."
)
DOC = FIRST + MIDDLE + FINAL
PROMPTS = PromptLibrary()


def mock(seed: int = 1) -> MockLLMBackend:
    return MockLLMBackend("gen", OpenAIModelConfig(model="any-model"), seed)


def ask(prompt: str, seed: int = 1, **variables: object) -> str:
    (answer,) = mock(seed).chat_many([ChatRequest.of(PROMPTS.get(prompt).render(**variables))])
    assert answer.ok, answer.error
    return answer.text


def generation(prompt: str, region: str, seed: int = 1, n: int = 2, document: str = DOC) -> dict:
    request = ChatRequest.of(
        PROMPTS.get(prompt).render(
            document=document,
            n_questions=n,
            region_instruction=whole_document.REGION_INSTRUCTIONS[region],
            question_types=["fact lookup"],
            styles=["plain"],
            call_number=1,
            calls=1,
        )
    )
    (answer,) = chat_json(mock(seed), [request], whole_document.validate_answer)
    assert answer.error is None, answer.raw
    return answer.value


def test_every_shipped_prompt_has_fingerprints_of_its_own():
    names = {p.stem for p in shipped_dir("prompts").glob("*.j2")}
    assert set(fingerprints()) == names
    assert all(len(lines) >= 2 for lines in fingerprints().values())


@pytest.mark.parametrize("prompt", ["posir_generate", "posir_generate_json"])
@pytest.mark.parametrize("region,third", [("beginning", FIRST), ("middle", MIDDLE), ("end", FINAL)])
def test_generated_questions_come_from_sentences_of_the_requested_third(prompt, region, third):
    value = generation(prompt, region)
    assert value["usable"] is True and len(value["questions"]) == 2
    for item in value["questions"]:
        assert item["answer"] in third  # verbatim, and from the requested third
        assert item["question"].endswith("?")
        assert "document" not in item["question"] and "text" not in item["question"]


def test_posir_generate_writes_notes_before_the_json_block():
    raw = ask(
        "posir_generate",
        document=DOC,
        n_questions=1,
        region_instruction=whole_document.REGION_INSTRUCTIONS["beginning"],
        question_types=["fact lookup"],
        styles=["plain"],
        call_number=1,
        calls=1,
    )
    assert raw.startswith("1. Searchers:") and raw.rstrip().endswith("```")


def test_a_document_without_sentences_is_unusable():
    assert generation("posir_generate_json", "beginning", document="404 | home | login") == {
        "usable": False,
        "questions": [],
    }


def test_chunk_qa_asks_about_the_excerpt_only():
    request = ChatRequest.of(PROMPTS.get("chunk_qa").render(summary="A library.", chunk=MIDDLE, max_questions=5))
    (answer,) = chat_json(mock(), [request], chunked.validate_answer)
    assert answer.error is None, answer.raw
    assert [item["answer"] in MIDDLE for item in answer.value] == [True, True]
    assert {item["type"] for item in answer.value} == {"simple", "complicated"}


def test_references_are_copied_verbatim_and_unanswerable_questions_get_none():
    questions = [q["question"] for q in generation("posir_generate_json", "end")["questions"]]
    listed = [{"id": i + 1, "text": q} for i, q in enumerate([*questions, "Who won the 1998 chess olympiad?"])]
    request = ChatRequest.of(PROMPTS.get("locate_reference").render(document=DOC, questions=listed))
    (answer,) = chat_json(mock(), [request], REFERENCES.validator(3))
    assert answer.error is None, answer.raw
    *found, unanswerable = answer.value
    assert unanswerable == []
    for refs in found:
        (ref,) = refs
        assert ref in FINAL and DOC.count(ref) == 1


@pytest.mark.parametrize("one_pair", [True, False])
def test_grades_fall_when_the_answering_sentence_is_cut_out_or_set_aside(one_pair):
    question = generation("posir_generate_json", "middle", n=1)["questions"][0]
    without = DOC.replace(question["answer"], "")

    def grade(text: str, set_aside: tuple[str, ...] = ()) -> int:
        listed = [{"id": 1, "text": question["question"]}]
        request = ChatRequest.of(
            PROMPTS.get("relevance_grade").render(
                document=text, questions=listed, one_pair=one_pair, set_aside=list(set_aside)
            )
        )
        (answer,) = chat_json(mock(), [request], grade_validator(1))
        assert answer.error is None, answer.raw
        return answer.value[0]

    assert grade(DOC) == 4
    assert grade(without) == grade(DOC, set_aside=(question["answer"],)) < 3
    assert grade("Cats sleep most of the day.") == 0


def test_summary_is_lead_sentences_within_the_word_budget():
    summary = ask("summarize", title="Library news", text=DOC, max_words=30)
    assert summary.startswith("The Riverside library opened")
    assert len(summary.split()) <= 30
    assert all(s.strip(". ") in DOC for s in summary.split(". "))


def test_document_translation_keeps_every_marker():
    marked = "Intro. [[1]]The council approved funding.[[/1]] More [[2]]text here[[/2]]."
    out = ask(
        "translate",
        source_language="English",
        language="German",
        text=marked,
        items=None,
        markers=True,
        example_open="[[1]]",
        example_close="[[/1]]",
        reminder="",
    )
    for marker in ("[[1]]", "[[/1]]", "[[2]]", "[[/2]]"):
        assert out.count(marker) == 1
    assert out == marked


def test_short_text_translations_answer_every_id():
    items = [{"id": 1, "text": "Where is the library?"}, {"id": 2, "text": "Opening hours"}]
    request = ChatRequest.of(
        PROMPTS.get("translate").render(
            source_language="English",
            language="German",
            items=items,
            markers=False,
            example_open="",
            example_close="",
            reminder="",
        )
    )
    (answer,) = chat_json(mock(), [request], TRANSLATIONS.validator(2))
    assert answer.error is None, answer.raw
    assert answer.value == ["Where is the library?", "Opening hours"]


@pytest.mark.parametrize(
    "output,refusal", [("Die Bibliothek öffnet um neun.", False), ("I'm sorry, but I cannot translate this.", True)]
)
def test_refusal_check(output, refusal):
    raw = ask("refusal_check", language="German", output=output)
    assert refusal_value(json.loads(raw)) is refusal


def test_answers_depend_on_the_seed_only():
    long_doc = " ".join(f"Station {i} of the Northern railway opened in {1900 + i} near Lake Arden." for i in range(30))
    runs = {
        seed: [generation("posir_generate_json", "middle", seed=seed, n=3, document=long_doc) for _ in range(2)]
        for seed in (1, 2)
    }
    assert runs[1][0] == runs[1][1] and runs[2][0] == runs[2][1]
    assert runs[1][0] != runs[2][0]


def test_a_prompt_of_someone_elses_is_refused_not_guessed():
    request = ChatRequest.of([{"role": "user", "content": "Write a haiku about <document>tea</document>."}])
    assert identify(request.messages) is None
    (answer,) = mock().chat_many([request])
    assert answer.reason == "llm_failed" and "own prompts" in answer.error
    assert mock().usage.calls == 0


def test_a_reask_is_still_recognised_by_its_first_user_message():
    messages = list(PROMPTS.get("refusal_check").render(language="German", output="Hallo."))
    messages += [{"role": "assistant", "content": "yes"}, {"role": "user", "content": "Answer with JSON only."}]
    assert identify(messages) == "refusal_check"
