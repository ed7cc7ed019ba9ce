"""Model settings as written in a recipe's ``models:`` section."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag


class _SamplingConfig(BaseModel):
    """Fields every backend shares; they decide what the model is asked to do."""

    model_config = ConfigDict(extra="forbid")

    model: str
    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int = Field(default=1024, ge=1)
    seed: int | None = None
    max_reasks: int = Field(default=2, ge=0)

    def sampling(self, max_tokens: int | None = None) -> dict[str, Any]:
        """Sampling settings that change the answer, so they belong in the cache key."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": max_tokens or self.max_tokens,
            "seed": self.seed,
        }


class OpenAIModelConfig(_SamplingConfig):
    """A model behind an OpenAI-compatible HTTP API (OpenAI itself, vLLM serve, ...)."""

    backend: Literal["openai"] = "openai"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    extra_body: dict[str, Any] = Field(default_factory=dict)
    max_concurrency: int = Field(default=16, ge=1)
    timeout_s: float = Field(default=120.0, gt=0.0)
    max_retries: int = Field(default=6, ge=0)
    backoff_initial_s: float = Field(default=1.0, ge=0.0)
    backoff_max_s: float = Field(default=60.0, ge=0.0)
    structured_output: bool = False

    def sampling(self, max_tokens: int | None = None) -> dict[str, Any]:
        # extra_body can carry sampling knobs (top_k, min_p, ...), so it is keyed too.
        return {**super().sampling(max_tokens), "extra_body": self.extra_body}


class VLLMModelConfig(_SamplingConfig):
    """A model loaded in-process with vLLM (needs the ``gpu`` extra)."""

    backend: Literal["vllm"]
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    structured_output: bool = True


def _backend_tag(value: Any) -> str:
    # Recipes may leave `backend` out; such a model is an OpenAI-compatible one.
    if isinstance(value, dict):
        return str(value.get("backend", "openai"))
    return str(getattr(value, "backend", "openai"))


ModelConfig = Annotated[
    Annotated[OpenAIModelConfig, Tag("openai")] | Annotated[VLLMModelConfig, Tag("vllm")],
    Discriminator(_backend_tag),
]
