"""The comparison table: marks from Holm-adjusted tests, PSI with its p, Markdown and LaTeX."""

from __future__ import annotations

from pathlib import Path

from builder.evaluation.comparison import comparison_table, latex, markdown, write_comparison


def _run(overall: float, groups: list[float], psi: float, p: float) -> dict:
    tags = ["beginning", "middle", "end"]
    return {
        "overall": {"ndcg@10": {"value": overall}},
        "groupings": {
            "position_tag": {
                "groups": [{"group": t, "n": 40, "ndcg@10": {"value": v}} for t, v in zip(tags, groups)],
                "psi": {"null": {"value": psi, "p": p, "above_null_median": 0.0}},
            }
        },
    }


def test_marks_follow_the_holm_adjusted_p_against_the_first_retriever(tmp_path: Path):
    test = {
        "a": "bm25",
        "b": "dense",
        "overall": {"p_holm": 0.004},
        "groupings": {
            "position_tag": [
                {"group": "beginning", "p_holm": 0.03},
                {"group": "middle", "p_holm": 0.2},
                {"group": "end", "p_holm": None},
            ]
        },
    }
    report = {
        "dataset": {"groupings": ["char_bucket", "position_tag"]},
        "comparisons": [test],
        "retrievers": {
            "bm25": _run(0.8, [0.9, 0.7, 0.8], 0.222, 0.3),
            "dense": _run(0.5, [0.6, 0.4, 0.5], 0.333, 0.004),
        },
    }
    table = comparison_table(report)
    assert table["columns"] == ["overall", "beginning", "middle", "end", "PSI"]
    assert markdown(table).splitlines()[:4] == [
        "| retriever | overall | beginning | middle | end | PSI |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        "| bm25 | 0.800 | 0.900 | 0.700 | 0.800 | 0.222 |",
        "| dense | 0.500** | 0.600* | 0.400 | 0.500 | 0.333** |",
    ]
    assert "dense & 0.500$^{**}$ & 0.600$^{*}$ & 0.400 & 0.500 & 0.333$^{**}$ \\\\" in latex(table)
    md, tex = write_comparison(table, tmp_path)
    assert md.read_text() == markdown(table) and tex.name == "comparison.tex"
