"""Model settings as written in a recipe's ``models:`` section."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    model_serializer,
    model_validator,
)

# Settings that only say where and how widely a model runs, with their defaults.
_SCALING_DEFAULTS: dict[str, Any] = {"base_urls": None, "engines": 1, "batch_size": 64, "max_reply_bytes": 4 * 2**20}


class Price(BaseModel):
    """What a model's tokens cost, in USD per million tokens (the ledger and the budget read it).

    The `batch_*` rates are what a provider's batch API charges for the same tokens; one
    left unset is the synchronous rate, never zero, so a ledger without a batch price
    never shows a batch build cheaper than it was.
    """

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0.0)
    cached_input: float | None = Field(default=None, ge=0.0)  # prompt tokens the server's cache served; default: input
    output: float = Field(ge=0.0)
    batch_input: float | None = Field(default=None, ge=0.0)  # default: input
    batch_cached_input: float | None = Field(default=None, ge=0.0)  # default: min(cached_input, batch_input)
    batch_output: float | None = Field(default=None, ge=0.0)  # default: output

    def usd(self, prompt_tokens: float, cached_tokens: float, completion_tokens: float, batch: bool = False) -> float:
        """What these tokens cost, at the batch rates when `batch`."""
        cached = min(cached_tokens, prompt_tokens)
        rate_in, rate_cached, rate_out = self.rates(batch)
        return ((prompt_tokens - cached) * rate_in + cached * rate_cached + completion_tokens * rate_out) / 1_000_000

    def rates(self, batch: bool = False) -> tuple[float, float, float]:
        """USD per million input, cached input and output tokens, synchronous or batch."""
        cached = self.input if self.cached_input is None else self.cached_input
        if not batch:
            return self.input, cached, self.output
        rate_in = self.input if self.batch_input is None else self.batch_input
        # Unset: the cheaper of the synchronous cached rate and the batch input rate.
        batch_cached = min(cached, rate_in) if self.batch_cached_input is None else self.batch_cached_input
        return rate_in, batch_cached, self.output if self.batch_output is None else self.batch_output

    @property
    def has_batch(self) -> bool:
        """Whether any batch rate is set (else batch tokens cost the synchronous rates)."""
        return any(r is not None for r in (self.batch_input, self.batch_cached_input, self.batch_output))


class _SamplingConfig(BaseModel):
    """Fields every backend shares; they decide what the model is asked to do."""

    model_config = ConfigDict(extra="forbid")

    model: str
    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int = Field(default=1024, ge=1)
    seed: int | None = None
    max_reasks: int = Field(default=2, ge=0)
    # Never part of a fingerprint: a new price changes no answer.
    price: Price | None = Field(default=None, exclude=True)

    @model_serializer(mode="wrap")
    def _omit_unset_scaling(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Scaling knobs added later are left out while unset, so the stage fingerprints
        # of recipes that never use them stay what they were.
        data: dict[str, Any] = handler(self)
        for name, default in _SCALING_DEFAULTS.items():
            if name in data and data[name] == default:
                del data[name]
        return data

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
    # Several servers of the same model: each request goes to the least busy one. The
    # answer does not depend on which one answered, so the cache key leaves it out.
    base_urls: list[str] | None = Field(default=None, min_length=1)
    api_key_env: str = "OPENAI_API_KEY"
    extra_body: dict[str, Any] = Field(default_factory=dict)
    max_concurrency: int = Field(default=16, ge=1)
    # The deadline of one attempt, from connecting to the reply's last byte.
    timeout_s: float = Field(default=120.0, gt=0.0)
    # A chat answer is a few KB; a longer reply is a broken or hostile server.
    max_reply_bytes: int = Field(default=4 * 2**20, ge=1024)
    max_retries: int = Field(default=6, ge=0)
    backoff_initial_s: float = Field(default=1.0, ge=0.0)
    backoff_max_s: float = Field(default=60.0, ge=0.0)
    # Every server build-bench names accepts a JSON schema; one that refuses it is
    # noticed on the first refusal and asked by the prompt alone from then on.
    structured_output: bool = True
    # Send the requests through the provider's batch API (about half the price, answered
    # within a day; see docs/batch.md). Never part of a fingerprint: the answers are the same.
    batch: bool = Field(default=False, exclude=True)

    def worst_case_s(self) -> float:
        """How long one request can take against a server that accepts and never answers:
        every attempt runs to its deadline, with the longest backoff between them."""
        backoff = sum(min(self.backoff_max_s, self.backoff_initial_s * 2**a) for a in range(self.max_retries))
        return (self.max_retries + 1) * self.timeout_s + backoff

    @model_validator(mode="after")
    def _one_way_to_name_servers(self) -> OpenAIModelConfig:
        if self.base_url is not None and self.base_urls is not None:
            raise ValueError("set base_url or base_urls, not both")
        if self.base_urls is not None and len(set(self.base_urls)) < len(self.base_urls):
            raise ValueError("base_urls lists a server twice")
        return self

    @property
    def endpoints(self) -> list[str | None]:
        """The servers to send to; None is the OpenAI API itself."""
        return list(self.base_urls) if self.base_urls is not None else [self.base_url]

    @property
    def local(self) -> bool:
        """True when the recipe names its own server(s) rather than the OpenAI API."""
        return self.base_url is not None or self.base_urls is not None

    def sampling(self, max_tokens: int | None = None) -> dict[str, Any]:
        # extra_body can carry sampling knobs (top_k, min_p, ...), so it is keyed too.
        return {**super().sampling(max_tokens), "extra_body": self.extra_body}


class VLLMModelConfig(_SamplingConfig):
    """A model loaded in-process with vLLM (needs the ``gpu`` extra)."""

    backend: Literal["vllm"]
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    structured_output: bool = True
    # With the Ray executor: data-parallel engines (one per GPU with the default
    # engine_kwargs) and the rows Ray Data hands an engine at a time.
    engines: int = Field(default=1, ge=1, le=4096)
    batch_size: int = Field(default=64, ge=1, le=1_000_000)


def _backend_tag(value: Any) -> str:
    # Recipes may leave `backend` out; such a model is an OpenAI-compatible one.
    if isinstance(value, dict):
        return str(value.get("backend", "openai"))
    return str(getattr(value, "backend", "openai"))


ModelConfig = Annotated[
    Annotated[OpenAIModelConfig, Tag("openai")] | Annotated[VLLMModelConfig, Tag("vllm")],
    Discriminator(_backend_tag),
]
