"""The two ways a document is searched (direct for a few references, indexed for many)
against each other and against the matcher as it was (tests/textutil/legacy)."""

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.textutil.direct_spans import INDEX_FROM_REFERENCES, DirectMatcher, matcher_for
from builder.textutil.normalize import normalize_text, normalize_with_map
from builder.textutil.spans import DocumentIndex, Span, SpanFailure
from tests.textutil.legacy import normalize as legacy_normalize
from tests.textutil.legacy import spans as legacy_spans

NOT_FUZZY = ("exact", "normalized")


def _plain(found: Any) -> tuple[int, int, str, float] | str:
    """A span or failure of either implementation, comparable."""
    return (found.start, found.end, found.method, found.score) if hasattr(found, "start") else str(found)


def _all_three(doc: str, reference: str, **kwargs: Any) -> tuple[Any, Any, Any]:
    return (
        _plain(DirectMatcher(doc).locate(reference, **kwargs)),
        _plain(DocumentIndex(doc).locate(reference, **kwargs)),
        _plain(legacy_spans.DocumentIndex(doc).locate(reference, **kwargs)),
    )


# --- routing -------------------------------------------------------------------------


def test_few_references_go_direct_many_go_to_the_index() -> None:
    assert type(matcher_for("text", 1)) is DirectMatcher
    assert type(matcher_for("text", INDEX_FROM_REFERENCES - 1)) is DirectMatcher
    assert type(matcher_for("text", INDEX_FROM_REFERENCES)) is DocumentIndex


DOC = (
    "Tidal flooding has doubled since 1990.\n\n"
    "Officials said the seawall  would be\nraised by “two feet” in 2025 — pending funds.\n"
    "The ﬁnancial report (Ａ-grade) was late; Straße closures hit café owners.\n"
    "Residents were not consulted."
)


@pytest.mark.parametrize(
    "reference, expected",
    [
        ("Tidal flooding has doubled", (0, 26, "exact", 100.0)),
        ("Officials said the seawall would be raised by", (40, 86, "exact", 100.0)),
        ("TIDAL FLOODING HAS DOUBLED", (0, 26, "normalized", 100.0)),
        ('raised by "two feet" in 2025 - pending funds.', (77, 122, "normalized", 100.0)),
        ("FINANCIAL report (a-grade)", (127, 152, "normalized", 100.0)),
        ("inancial REPORT", (127, 142, "normalized", 100.0)),
        ("strasse closures hit CAFÉ", (163, 187, "normalized", 100.0)),
        ("residents were not consulted!", (196, 224, "normalized", 100.0)),
        ("Residents were not consultd.", (196, 225, "fuzzy", 98.24561403508771)),
        ("Volcanic ash grounded every flight", "span_not_found"),
    ],
)
def test_direct_and_indexed_give_the_same_spans(reference: str, expected: Any) -> None:
    assert _all_three(DOC, reference) == (expected, expected, expected)


def test_anchor_inside_a_ligature_or_before_a_mark_matches_like_the_view() -> None:
    doc = "A ﬁnancial plan. A cafe\u0301 plan. Then financial plans, and a cafe plan."
    for reference in ["FINANCIAL PLAN.", "financial plans", "CAFE PLAN", "cafe\u0301 plan", "caf"]:
        direct, indexed, legacy = _all_three(doc, reference, methods=NOT_FUZZY)
        assert direct == indexed == legacy, reference


def test_a_word_that_folds_to_nothing_falls_back_to_the_view() -> None:
    doc = "Alpha \u200b beta gamma. Alpha beta gamma."
    direct, indexed, legacy = _all_three(doc, "ALPHA BETA GAMMA", methods=NOT_FUZZY)
    assert direct == indexed == legacy == (20, 36, "normalized", 100.0)


def test_repeat_found_case_blind_is_ambiguous() -> None:
    doc = "Rates rose sharply. RATES ROSE SHARPLY again."
    assert _all_three(doc, "rates Rose sharply", methods=NOT_FUZZY) == ("span_ambiguous",) * 3


# --- equivalence with the matcher as it was --------------------------------------------

CHARS = [
    *"abcAB .,\n\t-'\"",
    "’",
    "“",
    "—",
    "ﬁ",
    "ß",
    "\u0301",
    "\u200d",
    "👩",
    "🏽",
    "中",
    "。",
    "\u00ad",
    "Å",
    "\u3000",
    "\xa0",
    "Ａ",
    "\u1100",
    "\u1161",
    "é",
    "İ",
    "\u00a8",
    "\u200b",
]
ANY_TEXT = st.text(alphabet=st.sampled_from(CHARS), min_size=0, max_size=80)


@settings(max_examples=400, deadline=None)
@given(text=ANY_TEXT)
def test_normalized_view_and_offset_map_are_unchanged(text: str) -> None:
    norm, offsets = normalize_with_map(text)
    legacy_norm, legacy_offsets = legacy_normalize.normalize_with_map(text)
    assert norm == legacy_norm
    for at in range(len(norm)):
        for end in (at + 1, len(norm)):
            assert offsets.to_original(at, end) == legacy_offsets.to_original(at, end)
    assert normalize_text(text) == legacy_normalize.normalize_text(text)


def test_offset_map_across_quotes_whitespace_runs_and_case() -> None:
    text = "Say  “HI”\n\tto ﬁve—now"
    norm, offsets = normalize_with_map(text)
    assert norm == 'say "hi" to five-now'
    assert offsets.to_original(0, 3) == (0, 3)
    assert offsets.to_original(3, 4) == (3, 5)  # the whole run of two spaces
    assert offsets.to_original(4, 8) == (5, 9)  # curly quotes map one for one
    assert offsets.to_original(8, 9) == (9, 11)  # newline and tab
    assert offsets.to_original(12, 13) == (14, 15)  # the "f" of the ligature: all of it
    assert offsets.to_original(13, 16) == (14, 17)
    assert text[slice(*offsets.to_original(0, len(norm)))] == text


WORD = st.text(
    alphabet=st.sampled_from([*"abcdeXY’“”—-.é", "ﬁ", "ß", "\u0301", "👩", "…", "™", "Ａ"]), min_size=1, max_size=5
)
GAP = st.sampled_from([" ", "  ", "\n", " \n\t", "\xa0"])


def _drift(text: str, how: int) -> str:
    text = re.sub(r"\s+", " ", text)
    if how == 1:
        text = text.translate(str.maketrans("’“”—", '\'""-'))
    return [text, text, text.upper(), text.swapcase(), text.rstrip(".") + "!"][how]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(words=st.lists(WORD, min_size=1, max_size=14), gaps=st.lists(GAP, min_size=14, max_size=14), data=st.data())
def test_direct_exact_and_normalized_spans_equal_the_old_matcher(
    words: list[str], gaps: list[str], data: st.DataObject
) -> None:
    doc = "".join(word + gap for word, gap in zip(words, gaps))
    first = data.draw(st.integers(0, len(words) - 1))
    last = data.draw(st.integers(first, len(words) - 1))
    start = sum(len(w) + len(g) for w, g in zip(words[:first], gaps))
    cut = data.draw(st.integers(0, len(words[first]) - 1))
    quote = _drift(
        doc[start + cut : start + sum(len(w) + len(g) for w, g in zip(words[first:last], gaps)) + len(words[last])],
        data.draw(st.integers(0, 4)),
    )
    direct, indexed, legacy = _all_three(doc, quote, methods=NOT_FUZZY)
    assert direct == indexed == legacy


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(
    words=st.lists(
        st.sampled_from(
            ["the", "members", "agreed", "to", "extend", "library", "hours", "“late”", "Monday", "—", "ﬁnal", "Straße"]
        ),
        min_size=10,
        max_size=40,
    ),
    data=st.data(),
)
def test_indexed_spans_equal_the_old_matcher_for_every_method(words: list[str], data: st.DataObject) -> None:
    doc = " ".join(words)
    first = data.draw(st.integers(0, len(words) - 4))
    chosen = words[first : first + data.draw(st.integers(3, 8))]
    edit = data.draw(st.integers(0, len(chosen) - 1))
    quote = " ".join(chosen[:edit] + [chosen[edit][::-1]] + chosen[edit + 1 :])
    assert _plain(DocumentIndex(doc).locate(quote)) == _plain(legacy_spans.DocumentIndex(doc).locate(quote))


def test_direct_fuzzy_finds_an_edited_quote_and_its_repeat() -> None:
    doc = (
        "The council met on Tuesday. After a long debate, the members agreed to extend the "
        "library opening hours until nine o'clock on weekdays. Critics objected."
    )
    sentence = "the members agreed to extend the library opening hours until nine o'clock on weekdays"
    found = DirectMatcher(doc).locate(sentence.replace("extend", "expand"))
    assert isinstance(found, Span) and found.method == "fuzzy"
    assert (found.start, found.end) == (doc.index(sentence), doc.index(sentence) + len(sentence))
    twice = doc + " Later: " + sentence + "."
    assert DirectMatcher(twice).locate(sentence.replace("extend", "expand")) is SpanFailure.AMBIGUOUS
