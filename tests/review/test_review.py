"""`build-bench review`: the stratified sample, the page's server over real HTTP (saved as
made, resumable, per reviewer), and `--report` on a fixture of two reviewers."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import app
from builder.review.report import cohens_kappa, fleiss_kappa
from builder.review.sample import group_size, load_or_draw
from builder.review.server import make_server
from tests.mteb_export.conftest import FLAGS, built_quickstart, quickstart  # noqa: F401 - fixtures

runner = CliRunner()
A = ["yes", "yes", "no", "yes", "partly", "yes"]
B = ["yes", "no", "no", "yes", "yes", "yes"]


def test_group_size_follows_the_interval_width():
    assert group_size(10_000, 0.2) == 96  # ±0.1 at p = 0.5
    assert group_size(10_000, 0.3) == 43
    assert group_size(34, 0.3) == 20  # finite-population correction
    assert group_size(5, 0.1) == 5  # a small group is reviewed whole


def test_the_sample_is_stratified_by_position_and_kept(quickstart):
    items = load_or_draw(quickstart, 0.3, 0)
    groups = {}
    for item in items:
        groups[item["group"]] = groups.get(item["group"], 0) + 1
        assert item["document"][item["spans"][0][0] : item["spans"][0][1]]
    assert groups == {"beginning": 20, "middle": 21, "end": 19}  # of 34, 38 and 32 queries
    assert load_or_draw(quickstart, 0.1, 7) == items  # drawn once: every reviewer sees the same items


def _post(url, body):
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_judgments_save_as_made_and_resume_per_reviewer(quickstart):
    items = load_or_draw(quickstart, 0.3, 0)
    server = make_server(quickstart, "ada", items, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(base + "/", timeout=10) as page:
            html = page.read().decode()
            assert "scrollIntoView" in html
            assert "http://" not in html and "https://" not in html  # nothing loads from elsewhere
        first = items[0]["query_id"]
        _post(
            base + "/api/judgments",
            {"query_id": first, "span_answers": "partly", "understandable": "yes", "better_elsewhere": "no"},
        )
        _post(
            base + "/api/judgments",
            {"query_id": first, "span_answers": "yes", "understandable": "yes", "better_elsewhere": "no"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(
                base + "/api/judgments",
                {"query_id": first, "span_answers": "maybe", "understandable": "yes", "better_elsewhere": "no"},
            )
        assert refused.value.code == 400
        with urllib.request.urlopen(base + "/api/items", timeout=10) as response:
            state = json.load(response)
        assert state["reviewer"] == "ada" and len(state["items"]) == 60
        assert {q: j["span_answers"] for q, j in state["judgments"].items()} == {first: "yes"}
    finally:
        server.shutdown()
        server.server_close()
    lines = (quickstart / "review" / "judgments-ada.jsonl").read_text().splitlines()
    assert [json.loads(line)["span_answers"] for line in lines] == ["partly", "yes"]


def test_llm_grades_map_onto_the_reviewers_answers():
    from builder.review.report import llm_answer

    assert [llm_answer(g) for g in (4, 3, 2, 1, 0)] == ["yes", "yes", "partly", "no", "no"]
    # ada: yes yes no yes partly | LLM: yes no no yes partly -> 4 of 5 agree
    assert cohens_kappa(A[:5], [llm_answer(g) for g in LLM_GRADES[:5]]) == pytest.approx(0.6875)


def test_the_sample_carries_the_llm_grade_where_queries_have_one(quickstart):
    import polars as pl

    queries = pl.read_parquet(quickstart / "queries.parquet")
    queries.with_columns(pl.lit(3).alias("llm_grade")).write_parquet(quickstart / "queries.parquet")
    items = load_or_draw(quickstart, 0.3, 0)
    assert {item["llm_grade"] for item in items} == {3}


def test_kappas_match_the_textbook_values():
    assert cohens_kappa(A, B) == pytest.approx(1 / 3)
    assert fleiss_kappa(list(zip(A, B))) == pytest.approx(0.15278 / 0.48611, abs=1e-4)
    statsmodels = pytest.importorskip("statsmodels.stats.inter_rater", reason="statsmodels cross-check")
    table, _ = statsmodels.aggregate_raters([[c for c in row] for row in zip(A, B)])
    assert fleiss_kappa(list(zip(A, B))) == pytest.approx(statsmodels.fleiss_kappa(table))
    cats = ["no", "partly", "yes"]
    square = [[sum(1 for a, b in zip(A, B) if (a, b) == (x, y)) for y in cats] for x in cats]
    assert cohens_kappa(A, B) == pytest.approx(statsmodels.cohens_kappa(square).kappa)


LLM_GRADES = [4, 1, 0, 3, 2, None]  # the LLM judge's 0-4 grade per item; None: not graded


def _two_reviewers(folder: Path) -> None:
    review = folder / "review"
    review.mkdir()
    items = [
        {
            "query_id": f"q{i}",
            "text": f"query {i}",
            "doc_id": "d",
            "group": "beginning" if i < 3 else "end",
            "lang": "en",
            "spans": [[0, 4]],
            "document": "text of d",
            "llm_grade": LLM_GRADES[i],
        }
        for i in range(6)
    ]
    (review / "sample.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    for name, answers in (("ada", A), ("bo", B)):
        (review / f"judgments-{name}.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "query_id": f"q{i}",
                        "reviewer": name,
                        "span_answers": a,
                        "understandable": "yes",
                        "better_elsewhere": "no",
                        "at": "2026-01-01T00:00:00",
                    }
                )
                + "\n"
                for i, a in enumerate(answers)
            )
        )


def test_report_gives_precision_with_intervals_and_kappa_into_stats_and_card(quickstart):
    _two_reviewers(quickstart)
    result = runner.invoke(app, ["review", str(quickstart), "--report", "--threshold", "0.5"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[:7] == [
        "beginning: precision 0.33 [0.06, 0.79] n=3",
        "end: precision 0.67 [0.21, 0.94] n=3",
        "Cohen's kappa ada~bo: 0.3333 (n=6)",
        "Fleiss' kappa: 0.3143 (n=6)",
        "Cohen's kappa ada~LLM judge: 0.6875 (n=5)",
        "Cohen's kappa bo~LLM judge: 0.6667 (n=5)",
        "below 0.5: beginning",
    ]
    review = json.loads((quickstart / "stats.json").read_text())["review"]
    assert review["precision_by_group"]["beginning"] == {
        "n": 3,
        "correct": 1,
        "precision": 0.3333,
        "ci95": [0.0615, 0.7923],
    }
    assert review["n_judgments"] == 12 and review["below_threshold"] == ["beginning"]
    assert review["llm_kappa"] == {"ada": {"n": 5, "kappa": 0.6875}, "bo": {"n": 5, "kappa": 0.6667}}
    card = (quickstart / "README.md").read_text()
    assert (
        "with the LLM judge's grades (3-4 yes, 2 partly, 0-1 no): Cohen's κ ada 0.6875 (n=5); bo 0.6667 (n=5)" in card
    )
    assert card.count("## Human review") == 1 and "| beginning | 3 | 0.33 | 0.06–0.79 |" in card
    assert card.index("## Human review") < card.index("## Citation")
    runner.invoke(app, ["review", str(quickstart), "--report"])
    assert (quickstart / "README.md").read_text().count("## Human review") == 1  # replaced, not repeated
    exported = runner.invoke(app, ["export-mteb", str(quickstart), *FLAGS])
    assert exported.exit_code == 0, exported.output
    # The quickstart's questions come from templates, not an LLM: MTEB's word for that, reviewed.
    assert (
        "annotations_creators='automatic-and-reviewed'" in (quickstart / "mteb" / "quickstart_retrieval.py").read_text()
    )


def test_review_needs_a_reviewer_name_and_report_needs_judgments(quickstart):
    result = runner.invoke(app, ["review", str(quickstart)])
    assert result.exit_code == 2
    assert result.output.strip() == "review: give your name with --reviewer NAME (letters, digits, . _ -; up to 40)"
    result = runner.invoke(app, ["review", str(quickstart), "--report"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
