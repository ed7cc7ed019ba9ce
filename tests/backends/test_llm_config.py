from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from builder.backends.llm import (
    BackendUnavailable,
    LLMCache,
    ModelConfig,
    OpenAIModelConfig,
    VLLMModelConfig,
    make_llm,
)
from builder.backends.llm.openai_backend import resolve_api_key

MODELS = TypeAdapter(dict[str, ModelConfig])
UNSET_VAR = "BUILD_BENCH_TEST_SURELY_UNSET_KEY"


def test_backend_defaults_to_openai() -> None:
    models = MODELS.validate_python({"gen": {"model": "gpt-x"}, "local": {"backend": "vllm", "model": "q"}})
    assert isinstance(models["gen"], OpenAIModelConfig)
    assert isinstance(models["local"], VLLMModelConfig)
    assert models["gen"].max_concurrency == 16 and models["gen"].structured_output is True
    assert models["local"].structured_output is True


def test_unknown_fields_and_backends_are_rejected() -> None:
    with pytest.raises(ValidationError):
        MODELS.validate_python({"gen": {"model": "m", "api_key": "sk-leaked"}})
    with pytest.raises(ValidationError):
        MODELS.validate_python({"gen": {"backend": "carrier-pigeon", "model": "m"}})
    with pytest.raises(ValidationError):
        OpenAIModelConfig(model="m", max_concurrency=0)


def test_missing_key_without_base_url_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSET_VAR, raising=False)
    config = OpenAIModelConfig(model="m", api_key_env=UNSET_VAR)
    with pytest.raises(BackendUnavailable, match=UNSET_VAR):
        make_llm("gen", config, LLMCache.memory())


def test_key_comes_from_the_environment_or_a_local_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSET_VAR, raising=False)
    local = OpenAIModelConfig(model="m", base_url="http://127.0.0.1:1/v1", api_key_env=UNSET_VAR)
    assert resolve_api_key(local)
    monkeypatch.setenv(UNSET_VAR, "sk-from-env")
    assert resolve_api_key(local) == "sk-from-env"


def test_sampling_covers_everything_that_changes_answers() -> None:
    config = OpenAIModelConfig(model="m", top_p=0.9, seed=3, extra_body={"top_k": 5})
    assert config.sampling(max_tokens=7) == {
        "temperature": 0.0,
        "top_p": 0.9,
        "max_tokens": 7,
        "seed": 3,
        "extra_body": {"top_k": 5},
    }
