import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder.textutil.positions import (
    char_bucket,
    length_bucket,
    position_bin,
    region_of_requested,
    rel_pos,
    requested_of_region,
    tag_chunk,
    third_of,
)

# --- rel_pos ---------------------------------------------------------------------


def test_rel_pos_start_anchor() -> None:
    assert rel_pos([(250, 300)], 1000) == 0.25


def test_rel_pos_midpoint_anchor() -> None:
    assert rel_pos([(250, 350)], 1000, anchor="midpoint") == 0.3


def test_rel_pos_averages_several_spans() -> None:
    spans = [(100, 200), (500, 700)]
    assert rel_pos(spans, 1000) == 0.3
    assert rel_pos(spans, 1000, anchor="midpoint") == 0.375


def test_rel_pos_bounds() -> None:
    assert rel_pos([(0, 10)], 10) == 0.0
    assert rel_pos([(10, 10)], 10) == 1.0


def test_rel_pos_clamps_offsets_past_the_end() -> None:
    assert rel_pos([(15, 20)], 10) == 1.0


@pytest.mark.parametrize(
    "spans, doc_len, anchor",
    [
        ([(0, 1)], 0, "start"),
        ([(0, 1)], -5, "start"),
        ([], 10, "start"),
        ([(5, 4)], 10, "start"),
        ([(0, 1)], 10, "end"),
    ],
)
def test_rel_pos_rejects_bad_input(spans: list[tuple[int, int]], doc_len: int, anchor: str) -> None:
    with pytest.raises(ValueError):
        rel_pos(spans, doc_len, anchor)  # type: ignore[arg-type]


# --- position_bin ----------------------------------------------------------------


@pytest.mark.parametrize(
    "rel, expected",
    [(0.0, 0), (0.0499, 0), (0.05, 1), (0.5, 10), (0.95, 19), (0.9999, 19), (1.0, 19)],
)
def test_position_bin_twenty_bins(rel: float, expected: int) -> None:
    assert position_bin(rel) == expected


def test_position_bin_custom_count() -> None:
    assert position_bin(0.5, n_bins=2) == 1
    assert position_bin(0.49, n_bins=2) == 0
    assert position_bin(1.0, n_bins=1) == 0


@given(n_bins=st.integers(1, 500), data=st.data())
def test_position_bin_boundaries_belong_to_upper_bin(n_bins: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, n_bins - 1))
    assert position_bin(k / n_bins, n_bins) == k


@given(rel=st.floats(0.0, 1.0), n_bins=st.integers(1, 100))
def test_position_bin_in_range_and_monotone(rel: float, n_bins: int) -> None:
    index = position_bin(rel, n_bins)
    assert 0 <= index < n_bins
    assert index <= position_bin(min(1.0, rel + 1e-9), n_bins)


@pytest.mark.parametrize("rel, n_bins", [(-0.01, 20), (1.01, 20), (math.nan, 20), (0.5, 0)])
def test_position_bin_rejects_bad_input(rel: float, n_bins: int) -> None:
    with pytest.raises(ValueError):
        position_bin(rel, n_bins)


# --- thirds ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel, expected",
    [
        (0.0, "beginning"),
        (0.333, "beginning"),
        (1 / 3, "middle"),
        (0.5, "middle"),
        (2 / 3, "middle"),
        (0.667, "end"),
        (1.0, "end"),
    ],
)
def test_third_of(rel: float, expected: str) -> None:
    assert third_of(rel) == expected


def test_third_of_rejects_out_of_range() -> None:
    with pytest.raises(ValueError):
        third_of(1.5)


# doc_len 900 -> third = 300, so the end test is chunk_start > 600.
@pytest.mark.parametrize(
    "start, end, expected",
    [
        (0, 299, "beginning"),
        (0, 300, "middle"),  # ends exactly at the first boundary: strict < fails
        (250, 350, "middle"),  # crosses beginning/middle
        (300, 600, "middle"),
        (550, 650, "middle"),  # crosses middle/end
        (600, 700, "middle"),  # starts exactly at 2 * third: strict > fails
        (601, 900, "end"),
        (0, 900, "middle"),  # the whole document
    ],
)
def test_tag_chunk_algorithm_one(start: int, end: int, expected: str) -> None:
    assert tag_chunk(start, end, 900) == expected


def test_tag_chunk_floors_the_third() -> None:
    # doc_len 10 -> third = 3: the "end" region starts after offset 6.
    assert tag_chunk(0, 2, 10) == "beginning"
    assert tag_chunk(6, 10, 10) == "middle"
    assert tag_chunk(7, 10, 10) == "end"


def test_tag_chunk_tiny_document() -> None:
    # doc_len 2 -> third = 0: nothing can be beginning; any start > 0 is end.
    assert tag_chunk(0, 1, 2) == "middle"
    assert tag_chunk(1, 2, 2) == "end"


@pytest.mark.parametrize("start, end, doc_len", [(5, 4, 10), (-1, 4, 10), (0, 11, 10), (0, 0, 0)])
def test_tag_chunk_rejects_bad_input(start: int, end: int, doc_len: int) -> None:
    with pytest.raises(ValueError):
        tag_chunk(start, end, doc_len)


def test_requested_region_round_trip() -> None:
    assert region_of_requested("first") == "beginning"
    assert region_of_requested("final") == "end"
    for requested in ("first", "middle", "final"):
        assert requested_of_region(region_of_requested(requested)) == requested
    with pytest.raises(ValueError):
        region_of_requested("last")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        requested_of_region("start")  # type: ignore[arg-type]


# --- buckets ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_tokens, expected",
    [(0, "Q1"), (512, "Q1"), (513, "Q2"), (1024, "Q2"), (1025, "Q3"), (1536, "Q3"), (1537, "Q4"), (10_000, "Q4")],
)
def test_length_bucket_upper_edges_inclusive(n_tokens: int, expected: str) -> None:
    assert length_bucket(n_tokens) == expected


def test_length_bucket_custom_edges() -> None:
    assert length_bucket(100, edges=(100,)) == "Q1"
    assert length_bucket(101, edges=(100,)) == "Q2"


@pytest.mark.parametrize("n_tokens, edges", [(-1, (512,)), (5, ()), (5, (10, 10)), (5, (20, 10))])
def test_length_bucket_rejects_bad_input(n_tokens: int, edges: tuple[int, ...]) -> None:
    with pytest.raises(ValueError):
        length_bucket(n_tokens, edges)


@pytest.mark.parametrize(
    "offset, expected",
    [
        (0, "0-100"),
        (99, "0-100"),
        (100, "100-200"),
        (199, "100-200"),
        (200, "200-300"),
        (499, "400-500"),
        (500, "500+"),
        (3120, "500+"),
    ],
)
def test_char_bucket_half_open(offset: int, expected: str) -> None:
    assert char_bucket(offset) == expected


def test_char_bucket_custom_edges() -> None:
    assert char_bucket(5, edges=(10, 20)) == "0-10"
    assert char_bucket(20, edges=(10, 20)) == "20+"


@pytest.mark.parametrize("offset, edges", [(-1, (100,)), (5, ()), (5, (100, 50))])
def test_char_bucket_rejects_bad_input(offset: int, edges: tuple[int, ...]) -> None:
    with pytest.raises(ValueError):
        char_bucket(offset, edges)
