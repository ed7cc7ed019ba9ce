"""Every shipped prompt puts what repeats first (the document, then the fixed
instructions) and what varies per call last, so a prefix cache can serve the repeats."""

from __future__ import annotations

import pytest

from builder.backends.llm.prompt_templates import PromptLibrary
from tests.support.prefix_share import prefix_share, request_text, shared_prefixes

DOC = "The harbour froze in 1709.\nShips stayed in port until March, and the town ran short of grain."
QUESTIONS_A = [{"id": 1, "text": "When did the harbour freeze?"}]
QUESTIONS_B = [{"id": 1, "text": "Why did the town run short of grain?"}, {"id": 2, "text": "What year?"}]
GENERATE = {"document": DOC, "n_questions": 3, "question_types": ["fact lookup"], "styles": ["plain"], "calls": 2}

# (prompt, the variables two calls about one document share, what differs between them)
DOCUMENT_PROMPTS = [
    (
        "posir_generate",
        GENERATE,
        (
            {"region_instruction": "Base every question mainly on the first third of the document.", "call_number": 1},
            {"region_instruction": "Base every question mainly on the final third of the document.", "call_number": 2},
        ),
    ),
    (
        "posir_generate_json",
        GENERATE,
        (
            {"region_instruction": "first third.", "call_number": 1},
            {"region_instruction": "final third.", "call_number": 2},
        ),
    ),
    ("locate_reference", {"document": DOC}, ({"questions": QUESTIONS_A}, {"questions": QUESTIONS_B})),
    ("relevance_grade", {"document": DOC, "one_pair": False}, ({"questions": QUESTIONS_A}, {"questions": QUESTIONS_B})),
    ("relevance_grade", {"document": DOC, "one_pair": True}, ({"questions": QUESTIONS_A}, {"questions": QUESTIONS_B})),
]


def _text(name: str, **variables: object) -> str:
    if name == "relevance_grade":
        variables.setdefault("set_aside", [])
    return request_text(PromptLibrary().get(name).render(**variables))


@pytest.mark.parametrize(("name", "shared", "calls"), DOCUMENT_PROMPTS)
def test_two_calls_about_one_document_share_the_document_and_the_instructions(name, shared, calls):
    first, second = (_text(name, **shared, **call) for call in calls)
    assert first.startswith(f"<user>\n<document>\n{DOC}\n</document>\n\n")
    common = shared_prefixes([first, second])[1]
    # Everything up to the per-call part is shared: the document and the fixed instructions.
    assert common >= len(DOC) + 300
    assert common / len(second) > 0.8


def test_the_document_opens_every_prompt_that_reads_it_so_stages_share_it():
    texts = [
        _text("summarize", text=DOC, title="Frost", max_words=50),
        _text("posir_generate_json", **GENERATE, region_instruction="middle third.", call_number=1),
        _text("locate_reference", document=DOC, questions=QUESTIONS_A),
        _text("relevance_grade", document=DOC, one_pair=False, questions=QUESTIONS_A),
    ]
    opening = len(f"<user>\n<document>\n{DOC}\n</document>\n\n")
    # The instructions that follow differ by stage (all begin with "You ...").
    assert all(opening <= n < opening + 8 for n in shared_prefixes(texts)[1:])


def test_a_text_goes_first_so_its_translations_share_it():
    fr, de = (
        _text(
            "translate",
            text=DOC,
            items=[],
            source_language="English",
            language=lang,
            markers=False,
            example_open="",
            example_close="",
            reminder="",
        )
        for lang in ("French", "German")
    )
    assert fr.startswith(f"<user>\n<text>\n{DOC}\n</text>\n\n")
    assert shared_prefixes([fr, de])[1] > len(DOC)


def test_the_refusal_check_puts_language_and_output_after_its_fixed_instructions():
    one, two = (
        _text("refusal_check", language=lang, output=out)
        for lang, out in (("French", "Bonjour."), ("German", "Guten Tag."))
    )
    assert shared_prefixes([one, two])[1] == one.index("A model was asked to translate a text into ") + len(
        "A model was asked to translate a text into "
    )


def test_prefix_share_counts_the_longest_prefix_shared_with_any_earlier_request():
    texts = ["abcdef", "abcxyz", "zzz", "abcdeq", "abcxyw"]
    assert shared_prefixes(texts) == [0, 3, 0, 5, 5]
    assert prefix_share(texts) == pytest.approx(13 / 27)
    assert prefix_share([]) == 0.0


def test_grading_without_a_span_shares_the_document_and_every_fixed_instruction():
    with_span = _text("relevance_grade", document=DOC, one_pair=False, questions=QUESTIONS_A)
    without = _text(
        "relevance_grade",
        document=DOC,
        one_pair=False,
        questions=QUESTIONS_A,
        set_aside=["Ships stayed in port until March"],
    )
    common = shared_prefixes([with_span, without])[1]
    assert common == with_span.index("<questions>")
    assert without[common:].startswith("Grade as if the passage below had been deleted from the text")
    assert "<set_aside>\nShips stayed in port until March\n</set_aside>" in without[common:]
    one = [
        _text("relevance_grade", document=DOC, one_pair=True, questions=QUESTIONS_A, set_aside=[passage])
        for passage in ("The harbour froze in 1709.", "Ships stayed in port until March")
    ]
    assert shared_prefixes(one)[1] == one[0].index("<set_aside>\n") + len("<set_aside>\n")
