"""benchmarks/without_span_agreement.py end to end against the local server: a judge that
follows the set-aside instruction agrees with cut; a literal one does not."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from tests.conftest import REPO
from tests.fixtures.scripted_grader import with_grades


def _script():
    spec = importlib.util.spec_from_file_location(
        "without_span_agreement", REPO / "benchmarks" / "without_span_agreement.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_kappa_matches_a_hand_worked_table():
    # 10 pairs: 4 keep/keep, 1 keep/drop, 1 drop/keep, 4 drop/drop. p_o = 0.8, p_e = 0.5,
    # kappa = (0.8 - 0.5) / (1 - 0.5) = 0.6.
    first = [True] * 5 + [False] * 5
    second = [True] * 4 + [False] + [True] + [False] * 4
    found = _script().kappa(first, second, [True, False])
    assert (found.n, found.agreement) == (10, 0.8)
    assert found.kappa == pytest.approx(0.6)
    assert found.low < 0.6 < found.high
    one = _script().kappa([True] * 3, [True] * 3, [True, False])
    assert (one.agreement, one.kappa) == (1.0, None)


@pytest.mark.timeout(300)
def test_a_literal_judge_disagrees_where_an_obedient_one_agrees(tmp_path, fake_openai, monkeypatch):
    monkeypatch.chdir(REPO)
    script = _script()
    obedient, literal = (
        fake_openai(responder=with_grades()),
        fake_openai(responder=with_grades(follows_set_aside=False)),
    )
    out = tmp_path / "agreement.json"
    first = script.main(
        [
            "--base-url",
            obedient.base_url,
            "--model",
            "scripted",
            "--recipe",
            "quickstart",
            "--pairs",
            "24",
            "--seed",
            "1",
            "--json",
            str(out),
        ]
    )
    assert first.asked == 24 and first.failed == 0
    assert first.verdict_kappa.agreement == 1.0 and first.disagreements == []
    assert first.verdicts["cut"] == first.verdicts["set_aside"]
    assert json.loads(out.read_text())["asked"] == 24
    assert any("<set_aside>" in b["messages"][-1]["content"] for b in obedient.requests)
    second = script.main(
        [
            "--base-url",
            literal.base_url,
            "--model",
            "scripted",
            "--recipe",
            "quickstart",
            "--pairs",
            "24",
            "--seed",
            "1",
        ]
    )
    assert second.verdicts["cut"] == first.verdicts["cut"]
    # Shown the whole document, the literal judge gives the span's credit back: every query cut
    # keeps, set_aside drops as llm_not_higher.
    assert second.verdicts["set_aside"].get("kept", 0) == 0
    assert second.verdicts["set_aside"]["llm_not_higher"] >= first.verdicts["cut"]["kept"] > 0
    assert second.verdict_kappa.agreement < 1.0 and len(second.disagreements) == first.verdicts["cut"]["kept"]
    # set_aside keeps none: kappa is 0 with no spread, so no interval is printed.
    assert (second.verdict_kappa.kappa, second.verdict_kappa.low) == (0.0, None)
