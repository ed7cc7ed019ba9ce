"""The filter base of the QC stages: first reason wins, drops in the order found,
document drops cascade, and the kept share by position third is recorded."""

from __future__ import annotations

from typing import ClassVar

from builder.stages.base import QueryFilter, StageParams, Verdicts
from tests.helpers import make_ctx
from tests.stages.qc_factories import bench_of

DOCS = {"d1": "one", "d2": "two"}
QUERIES = [
    {"query_id": "q1", "text": "a", "doc_id": "d1", "position_tag": "beginning"},
    {"query_id": "q2", "text": "b", "doc_id": "d1", "position_tag": "end"},
    {"query_id": "q3", "text": "c", "doc_id": "d2", "position_tag": "end"},
    {"query_id": "q4", "text": "d", "doc_id": "d2", "position_tag": "middle"},
]


class Scripted(QueryFilter):
    """Drops as told, in the order told."""

    name: ClassVar[str] = "scripted_filter"  # not registered: a test double

    def __init__(self, script: list[tuple[str, str, str | None]]) -> None:
        super().__init__(StageParams())
        self.script = script

    def judge(self, bench, ctx, verdicts: Verdicts) -> None:
        for kind, item_id, reason in self.script:
            if kind == "doc":
                verdicts.drop_doc(item_id, reason)
            else:
                verdicts.drop(item_id, reason)


class Evening(Scripted):
    reports_thirds = False


def _drops(bench) -> list[tuple[str, str, str]]:
    return [(k, i, r) for _, k, i, r in bench.drops.iter_rows()]


def test_first_reason_wins_and_drops_keep_the_order_found(tmp_path):
    ctx = make_ctx(tmp_path)
    stage = Scripted(
        [
            ("query", "q3", "too_short"),
            ("query", "q1", None),
            ("query", "q1", "off_topic"),
            ("query", "q3", "off_topic"),
        ]
    )
    out = stage.run(bench_of(DOCS, QUERIES), ctx)
    assert out.queries["query_id"].to_list() == ["q2", "q4"]
    assert out.qrels["query_id"].to_list() == ["q2", "q4"]
    assert _drops(out) == [("query", "q3", "too_short"), ("query", "q1", "off_topic")]
    assert ctx.stats["kept_by_third"] == {
        "beginning": {"in": 1, "kept": 0, "share": 0.0},
        "middle": {"in": 1, "kept": 1, "share": 1.0},
        "end": {"in": 2, "kept": 1, "share": 0.5},
    }


def test_query_drops_come_before_document_drops_and_their_cascade(tmp_path):
    ctx = make_ctx(tmp_path)
    out = Scripted([("doc", "d2", "false_negative"), ("query", "q4", "unread")]).run(bench_of(DOCS, QUERIES), ctx)
    assert out.corpus["doc_id"].to_list() == ["d1"]
    assert _drops(out) == [
        ("query", "q4", "unread"),
        ("doc", "d2", "false_negative"),
        ("query", "q3", "doc_removed:false_negative"),
    ]


def test_a_filter_that_evens_categories_reports_no_thirds(tmp_path):
    ctx = make_ctx(tmp_path)
    Evening([("query", "q1", "balanced_out")]).run(bench_of(DOCS, QUERIES), ctx)
    assert ctx.stats == {}


def test_undecided_rows_leave_out_dropped_queries():
    verdicts = Verdicts()
    verdicts.drop_all(["q2", "q9"], "gone")
    verdicts.update({"q1": None, "q3": "late"})
    assert verdicts.undecided([("q1", 1), ("q2", 2), ("q3", 3), ("q4", 4)]) == [("q1", 1), ("q4", 4)]
    assert verdicts.queries == {"q2": "gone", "q9": "gone", "q3": "late"}
