import re
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from builder.textutil.spans import (
    DocumentIndex,
    Span,
    SpanFailure,
    locate_references,
    merge_spans,
    normalize_text,
)

DOC = (
    "Tidal flooding has doubled since 1990.\n\n"
    "Officials said the seawall  would be\nraised by “two feet” in 2025 — pending funds.\n"
    "Residents were not consulted."
)


def locate(doc: str, reference: str, **kwargs: Any) -> Span | SpanFailure:
    return DocumentIndex(doc).locate(reference, **kwargs)


def span_of(doc: str, text: str) -> tuple[int, int]:
    start = doc.index(text)
    return start, start + len(text)


# --- exact -------------------------------------------------------------------


def test_exact_match() -> None:
    assert locate(DOC, "Residents were not consulted.") == Span(123, 152, "exact", 100.0)
    assert DOC[123:152] == "Residents were not consulted."


def test_exact_ignores_surrounding_whitespace_of_reference() -> None:
    assert locate(DOC, "  Tidal flooding\n") == Span(0, 14, "exact", 100.0)


def test_exact_repeat_is_ambiguous() -> None:
    doc = "Rain fell. Then the sun came out. Rain fell."
    assert locate(doc, "Rain fell.") is SpanFailure.AMBIGUOUS


def test_unique_verbatim_quote_wins_over_normalized_repeats() -> None:
    doc = "The vote passed. Later that day the vote passed. Nobody objected."
    assert locate(doc, "the vote passed.") == Span(32, 48, "exact", 100.0)


# --- normalized --------------------------------------------------------------


def test_whitespace_drift_is_an_exact_regex_match() -> None:
    # PosIR's rule: the quote's words verbatim, any run of whitespace between them.
    found = locate(DOC, "Officials said the seawall would be raised by")
    assert found == Span(40, 86, "exact", 100.0)
    assert DOC[40:86] == "Officials said the seawall  would be\nraised by"


def test_exact_only_accepts_whitespace_drift_and_nothing_else() -> None:
    exact = ("exact",)
    assert locate(DOC, "Officials said  the seawall\nwould be", methods=exact) == Span(40, 76, "exact", 100.0)
    assert locate(DOC, "TIDAL FLOODING HAS DOUBLED", methods=exact) is SpanFailure.NOT_FOUND
    assert locate(DOC, 'raised by "two feet"', methods=exact) is SpanFailure.NOT_FOUND
    assert locate(DOC, "Residents were not consultd.", methods=exact) is SpanFailure.NOT_FOUND
    assert locate("Rain  fell. Sun. Rain fell.", "Rain fell.", methods=exact) is SpanFailure.AMBIGUOUS


def test_methods_choose_the_steps() -> None:
    assert locate(DOC, "TIDAL FLOODING HAS DOUBLED", methods=("exact", "normalized")) == Span(
        0, 26, "normalized", 100.0
    )
    assert locate(DOC, "Residents were not consultd.", methods=("exact", "normalized")) is SpanFailure.NOT_FOUND
    assert locate(DOC, "Residents were not consultd.", methods=("exact", "fuzzy")).method == "fuzzy"
    with pytest.raises(ValueError, match="methods"):
        locate(DOC, "Tidal", methods=())


def test_curly_quotes_and_em_dash_in_document() -> None:
    found = locate(DOC, 'raised by "two feet" in 2025 - pending funds.')
    assert found == Span(77, 122, "normalized", 100.0)
    assert DOC[77:122] == "raised by “two feet” in 2025 — pending funds."


def test_curly_quotes_in_reference() -> None:
    doc = 'He said "it\'s over" -- and left.'
    assert locate(doc, "He said “it’s over”") == Span(0, 19, "normalized", 100.0)


def test_en_dash_in_reference_matches_hyphen() -> None:
    doc = "Pages 10-12 cover the 1990-1995 period."
    assert locate(doc, "the 1990–1995 period") == Span(18, 38, "normalized", 100.0)


def test_case_difference() -> None:
    assert locate(DOC, "TIDAL FLOODING HAS DOUBLED") == Span(0, 26, "normalized", 100.0)


def test_missing_final_punctuation_is_a_verbatim_prefix() -> None:
    assert locate(DOC, "Residents were not consulted") == Span(123, 151, "exact", 100.0)


def test_missing_final_punctuation_with_other_drift() -> None:
    assert locate(DOC, "residents were not consulted") == Span(123, 151, "normalized", 100.0)


def test_changed_final_punctuation() -> None:
    assert locate(DOC, "Residents were not consulted!") == Span(123, 151, "normalized", 100.0)


def test_trimmed_punctuation_must_end_on_a_word_boundary() -> None:
    doc = "See the catalog for details."
    # fuzzy_min_score=100 leaves only the normalized step able to answer.
    assert locate(doc, "see the cat.", fuzzy_min_score=100.0) is SpanFailure.NOT_FOUND


def test_normalized_repeat_is_ambiguous() -> None:
    doc = "Rates rose\nsharply. Then rates  rose sharply again."
    # Upper case: no exact (whitespace-tolerant) match, two normalized ones.
    assert locate(doc, "RATES ROSE SHARPLY") is SpanFailure.AMBIGUOUS
    # One whitespace-tolerant exact match wins over the normalized repeat.
    assert locate(doc, "rates rose sharply") == Span(25, 44, "exact", 100.0)


def test_ligature_in_document() -> None:
    doc = "The ﬁnal report was late."
    assert locate(doc, "final report") == Span(4, 15, "normalized", 100.0)
    assert doc[4:15] == "ﬁnal report"


def test_reference_starting_inside_a_ligature_covers_it() -> None:
    doc = "The ﬁnal report was late."
    assert locate(doc, "inal report") == Span(4, 15, "normalized", 100.0)


def test_sharp_s_expands_under_casefold() -> None:
    doc = "Die Straße ist lang. Sie endet hier."
    assert locate(doc, "STRASSE IST LANG") == Span(4, 19, "normalized", 100.0)
    assert doc[4:19] == "Straße ist lang"


def test_emoji_and_combining_marks_before_the_span() -> None:
    doc = "Cafe\u0301 news 👩\u200d👩\u200d👧 👍🏽 Family day!\nThe park was full."
    assert locate(doc, "the park was full.") == Span(32, 50, "normalized", 100.0)
    assert doc[32:50] == "The park was full."


def test_span_with_combining_mark_keeps_the_mark() -> None:
    doc = "Our cafe\u0301 opens at nine."
    found = locate(doc, "CAFÉ opens")
    assert found == Span(4, 15, "normalized", 100.0)
    assert doc[4:15] == "cafe\u0301 opens"


def test_zwj_sequence_inside_the_span_is_kept_whole() -> None:
    doc = "Tag: 👩\u200d👩\u200d👧 family.  Next line."
    found = locate(doc, "👩\u200d👩\u200d👧 FAMILY")
    assert found == Span(5, 17, "normalized", 100.0)
    assert doc[5:17] == "👩\u200d👩\u200d👧 family"


CJK = "我们今天去公园散步。天气很好，阳光明媚。晚上回家吃饭。"


def test_cjk_sentence_with_full_stop() -> None:
    assert locate(CJK, "天气很好，阳光明媚。") == Span(10, 20, "exact", 100.0)


def test_cjk_sentence_without_full_stop() -> None:
    assert locate(CJK, "天气很好，阳光明媚") == Span(10, 19, "exact", 100.0)


def test_cjk_halfwidth_comma_matches_fullwidth() -> None:
    assert locate(CJK, "天气很好,阳光明媚。") == Span(10, 20, "normalized", 100.0)


def test_cjk_changed_final_punctuation() -> None:
    assert locate(CJK, "天气很好，阳光明媚！") == Span(10, 19, "normalized", 100.0)


def test_cjk_one_character_changed_is_fuzzy() -> None:
    doc = "研究人员发现，城市绿地能够显著降低夏季的地表温度，并改善居民健康。其他结论仍需验证。"
    found = locate(doc, "城市绿地能够明显降低夏季的地表温度，并改善居民健康")
    assert isinstance(found, Span)
    assert found.method == "fuzzy"
    assert found.score >= 90
    assert (found.start, found.end) == span_of(doc, "城市绿地能够显著降低夏季的地表温度，并改善居民健康")


# --- fuzzy -------------------------------------------------------------------

NEWS = (
    "The council met on Tuesday evening. After a long debate, the members agreed to "
    "extend the library opening hours until nine o'clock on weekdays. The decision "
    "takes effect next month. Critics argued that the budget could not sustain it."
)
SENTENCE = "the members agreed to extend the library opening hours until nine o'clock on weekdays"


def test_fuzzy_one_word_changed() -> None:
    reference = SENTENCE.replace("extend", "expand")
    found = locate(NEWS, reference)
    assert isinstance(found, Span)
    assert found.method == "fuzzy"
    assert 90 <= found.score < 100
    assert (found.start, found.end) == span_of(NEWS, SENTENCE)


def test_fuzzy_word_dropped_still_covers_whole_sentence() -> None:
    found = locate(NEWS, SENTENCE.replace("library ", ""))
    assert isinstance(found, Span)
    assert (found.start, found.end) == span_of(NEWS, SENTENCE)


@pytest.mark.parametrize(
    "paraphrase",
    [
        "council members voted to keep the library open later, until 9 pm, Monday to Friday",
        "the members decided to extend the library opening times until nine on weekdays",
    ],
)
def test_paraphrase_is_rejected(paraphrase: str) -> None:
    assert locate(NEWS, paraphrase) is SpanFailure.NOT_FOUND


def test_lower_threshold_is_honoured() -> None:
    reference = "members agreed to lengthen library hours till nine on weekdays"
    assert locate(NEWS, reference) is SpanFailure.NOT_FOUND
    found = locate(NEWS, reference, fuzzy_min_score=75.0)
    assert isinstance(found, Span) and found.method == "fuzzy"


def test_fuzzy_near_duplicate_is_ambiguous() -> None:
    doc = (
        "Version one: the members agreed to extend the library opening hours on weekdays. "
        "Version two: the members agreed to extend the library opening hours at weekends."
    )
    assert locate(doc, "the members agreed to expand the library opening hours") is SpanFailure.AMBIGUOUS


def test_short_reference_is_not_fuzzy_matched() -> None:
    # Even a lax threshold does not let a 7-character quote match fuzzily.
    assert locate("The cat sat on the mat.", "the bat", fuzzy_min_score=50.0) is SpanFailure.NOT_FOUND
    found = locate("The cat sat on the mat.", "the bat sat", fuzzy_min_score=50.0)
    assert isinstance(found, Span) and found.method == "fuzzy"


def test_reference_longer_than_document() -> None:
    assert locate("Short text.", "Short text that goes on and on and on.") is SpanFailure.NOT_FOUND


def test_empty_reference_is_not_found() -> None:
    assert locate(DOC, "  \n") is SpanFailure.NOT_FOUND


def test_threshold_out_of_range() -> None:
    with pytest.raises(ValueError):
        locate(DOC, "Tidal", fuzzy_min_score=101.0)


# --- several references --------------------------------------------------------


def test_touching_references_are_merged() -> None:
    doc = "Alpha beta gamma delta."
    found = locate_references(doc, ["gamma delta", "Alpha beta ", "BETA GAMMA"])
    assert found == [Span(0, 22, "normalized", 100.0)]


def test_references_that_only_touch_are_merged() -> None:
    doc = "Call 555-0100 today."
    assert locate_references(doc, ["555-", "0100 TODAY"]) == [Span(5, 19, "normalized", 100.0)]


def test_merged_span_keeps_weakest_method_and_lowest_score() -> None:
    spans = [Span(10, 20, "exact", 100.0), Span(20, 30, "fuzzy", 93.0), Span(5, 12, "normalized", 100.0)]
    assert merge_spans(spans) == [Span(5, 30, "fuzzy", 93.0)]


def test_separate_references_stay_separate_and_sorted() -> None:
    index = DocumentIndex(DOC)
    found = locate_references(index, ["Residents were not consulted.", "Tidal flooding"])
    assert found == [Span(0, 14, "exact", 100.0), Span(123, 152, "exact", 100.0)]


def test_empty_reference_list_is_unanswerable() -> None:
    assert locate_references(DOC, []) is SpanFailure.UNANSWERABLE
    assert locate_references(DOC, []) == "unanswerable"


def test_any_missing_reference_fails_the_query() -> None:
    assert locate_references(DOC, ["Tidal flooding", "volcanic ash clouds"]) is SpanFailure.NOT_FOUND


def test_any_ambiguous_reference_fails_the_query() -> None:
    doc = "Yes. It rained. Yes."
    assert locate_references(doc, ["It rained", "Yes."]) == "span_ambiguous"


def test_single_string_is_rejected() -> None:
    with pytest.raises(TypeError):
        locate_references(DOC, "Tidal flooding")


def test_failure_prints_as_its_value() -> None:
    assert str(SpanFailure.NOT_FOUND) == "span_not_found"


# --- properties ------------------------------------------------------------------

ANY_TEXT = st.text(
    alphabet=st.sampled_from(
        [*"abcAB .,\n\t", "’", "“", "—", "ﬁ", "ß", "\u0301", "\u200d"]
        + ["👩", "🏽", "中", "。", "\u00ad", "Å", "\u3000"]
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.filter_too_much])
@given(doc=ANY_TEXT, data=st.data())
def test_unique_substring_is_found_exactly(doc: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(doc) - 1))
    end = data.draw(st.integers(start + 1, len(doc)))
    quote = doc[start:end]
    assume(quote == quote.strip())
    first = doc.find(quote)
    assume(doc.find(quote, first + 1) < 0)
    assert locate(doc, quote) == Span(start, end, "exact", 100.0)


@settings(max_examples=300)
@given(doc=ANY_TEXT, data=st.data())
def test_normalized_match_covers_the_reference(doc: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(doc) - 1))
    end = data.draw(st.integers(start + 1, len(doc)))
    quote = doc[start:end].upper()
    found = locate(doc, quote)
    if isinstance(found, Span) and found.method == "normalized":
        assert normalize_text(quote) in normalize_text(doc[found.start : found.end])


WORD = st.text(alphabet="abcdeXY’“”—-", min_size=1, max_size=4)
GAP = st.sampled_from([" ", "  ", "\n", " \n\t"])


def _drift(text: str) -> str:
    """What an LLM copy does to a quote: one space per gap, ASCII quotes, other case."""
    text = re.sub(r"\s+", " ", text).translate(str.maketrans("’“”—", '\'""-'))
    return text.swapcase()


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower().translate(str.maketrans("’“”—", '\'""-')))


@settings(max_examples=300, suppress_health_check=[HealthCheck.filter_too_much])
@given(words=st.lists(WORD, min_size=1, max_size=12), gaps=st.lists(GAP, min_size=12, max_size=12), data=st.data())
def test_unique_drifted_quote_maps_to_original_offsets(words: list[str], gaps: list[str], data: st.DataObject) -> None:
    doc = "".join(word + gap for word, gap in zip(words, gaps)).strip()
    first = data.draw(st.integers(0, len(words) - 1))
    last = data.draw(st.integers(first, len(words) - 1))
    start = sum(len(w) + len(g) for w, g in zip(words[:first], gaps))
    end = sum(len(w) + len(g) for w, g in zip(words[:last], gaps)) + len(words[last])
    needle = _plain(doc[start:end])
    plain_doc = _plain(doc)
    at = plain_doc.find(needle)
    assume(plain_doc.find(needle, at + 1) < 0)
    assert _span_tuple(locate(doc, _drift(doc[start:end]))) == (start, end)


def _span_tuple(found: Span | SpanFailure) -> tuple[int, int] | SpanFailure:
    return (found.start, found.end) if isinstance(found, Span) else found
