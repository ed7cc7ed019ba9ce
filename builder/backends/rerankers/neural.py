"""Neural rerankers: FlagEmbedding, sentence-transformers cross-encoders, bi-encoders.

Heavy libraries (torch, FlagEmbedding, sentence_transformers) are imported when a model
is first used, so recipes validate and `--help` answers without them. Models load from
a hub id, a local folder, or `pkg:<package>/<folder>` (resolved offline).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from builder.backends.llm import BackendUnavailable
from builder.backends.rerankers.base import Pair, RerankerBase, as_floats
from builder.backends.rerankers.config import BiEncoderConfig, CrossEncoderConfig, FlagConfig
from builder.backends.tokenizers import resolve_local

# BGE-M3 reads up to 8192 tokens; FlagEmbedding's own default for passages is only 512.
_M3_MAX_LENGTH = 8192


class RerankerLoadError(BackendUnavailable):
    """The model could not be loaded (not downloaded, offline, wrong path)."""


def _where(model: str) -> str:
    local = resolve_local(model)
    return str(local) if local is not None else model


def _load(model: str, build: Any) -> Any:
    try:
        return build(_where(model))
    except Exception as exc:  # noqa: BLE001 - any load failure gets the same advice
        raise RerankerLoadError(
            f"could not load reranker model {model!r}: {exc}. Offline, give a local folder "
            "(or pkg:<package>/<folder>) and set HF_HUB_OFFLINE=1."
        ) from exc


def _model_kwargs(precision: str) -> dict[str, Any]:
    """Weights in half precision when asked; fp32 passes nothing, so older libraries cope."""
    if precision == "fp32":
        return {}
    import torch

    return {"dtype": {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]}


class _Lazy(RerankerBase):
    """Holds a model that is built on first use and dropped by `close`."""

    def __init__(self, name: str, config: Any) -> None:
        self.name = name
        self.config = config
        self.normalized = bool(config.normalize)
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = self._build()
        return self._model

    def _build(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        self._model = None

    @property
    def max_length(self) -> int:  # type: ignore[override]
        return int(self.config.max_length)

    # Room for special tokens, and the instruction template of LLM-based rerankers.
    _RESERVED = 8

    def text_budget(self, query: str) -> int | None:
        return max(16, self.max_length - len(self.token_ends(query)) - self._RESERVED)

    def token_ends(self, text: str) -> list[int]:
        """The model tokenizer's token ends; with a slow tokenizer (no offsets), each word
        counts as the text's mean tokens per word."""
        tokenizer = self.model.tokenizer
        try:
            offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
            return [end for _, end in offsets]
        except (NotImplementedError, TypeError, KeyError):
            words = super().token_ends(text)
            ratio = len(tokenizer.tokenize(text)) / max(len(words), 1)
            return [end for k, end in enumerate(words) for _ in range(int((k + 1) * ratio) - int(k * ratio))]


class FlagScorer(_Lazy):
    config: FlagConfig

    @property
    def _RESERVED(self) -> int:  # type: ignore[override]
        return 8 if self.config.kind == "encoder" else 64

    def _build(self) -> Any:
        import FlagEmbedding

        c = self.config
        cls = {"encoder": FlagEmbedding.FlagReranker, "llm": FlagEmbedding.FlagLLMReranker,
               "layerwise": FlagEmbedding.LayerWiseFlagLLMReranker}[c.kind]
        kwargs: dict[str, Any] = {
            "use_fp16": c.precision == "fp16", "devices": c.device, "batch_size": c.batch_size,
            "max_length": c.max_length, "normalize": c.normalize, "trust_remote_code": c.trust_remote_code,
        }
        if c.kind != "encoder":
            kwargs["use_bf16"] = c.precision == "bf16"
        if c.kind == "layerwise":
            kwargs["cutoff_layers"] = [c.cutoff_layer]
        return _load(c.model, lambda where: cls(where, **kwargs))

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        if not pairs:
            return []
        scores = self.model.compute_score([list(p) for p in pairs])
        if self.config.kind == "layerwise" and scores and isinstance(scores[0], list):
            scores = scores[0]  # one list per cutoff layer; we ask for one layer
        return as_floats(scores, len(pairs))


class CrossEncoderScorer(_Lazy):
    config: CrossEncoderConfig

    def _build(self) -> Any:
        import torch
        from sentence_transformers import CrossEncoder

        c = self.config
        # Without normalize the raw logit is kept; with it, the model's own activation
        # (a sigmoid for one-label models) maps it into [0, 1].
        activation = None if c.normalize else torch.nn.Identity()
        return _load(c.model, lambda where: CrossEncoder(
            where, device=c.device, max_length=c.max_length, trust_remote_code=c.trust_remote_code,
            activation_fn=activation, model_kwargs=_model_kwargs(c.precision)))

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        if not pairs:
            return []
        scores = self.model.predict([list(p) for p in pairs], batch_size=self.config.batch_size,
                                    show_progress_bar=False, convert_to_numpy=True)
        # One column for the usual one-label rerankers; with (not relevant, relevant) labels,
        # the last column is the relevant one.
        return as_floats(np.asarray(scores, dtype=np.float64).reshape(len(pairs), -1)[:, -1], len(pairs))


class BiEncoderScorer(_Lazy):
    """Cosine of normalised embeddings; `embed` also serves dense retrieval."""

    config: BiEncoderConfig

    def text_budget(self, query: str) -> int | None:
        # Texts are encoded alone: the query takes no room, the document prefix does.
        return max(16, self.max_length - len(self.token_ends(self.config.doc_prefix)) - 2)

    def _build(self) -> Any:
        c = self.config
        if c.library == "flag_m3":
            from FlagEmbedding import BGEM3FlagModel

            limit = c.max_length or _M3_MAX_LENGTH
            return _load(c.model, lambda where: BGEM3FlagModel(
                where, use_fp16=c.precision == "fp16", devices=c.device, batch_size=c.batch_size,
                passage_max_length=limit, query_max_length=limit))
        from sentence_transformers import SentenceTransformer

        model = _load(c.model, lambda where: SentenceTransformer(
            where, device=c.device, trust_remote_code=c.trust_remote_code,
            model_kwargs=_model_kwargs(c.precision)))
        if c.max_length is not None:
            model.max_seq_length = c.max_length
        return model

    def window(self) -> tuple[Any, int]:
        """The model's tokenizer and how many tokens of a text it reads, special tokens included."""
        if self.config.library == "flag_m3":
            return self.model.tokenizer, self.config.max_length or _M3_MAX_LENGTH
        return self.model.tokenizer, int(self.model.max_seq_length)

    def embed(self, texts: Sequence[str], *, queries: bool = False) -> np.ndarray:
        """Unit-length vectors (rows) for texts, with the configured query / document prefix."""
        c = self.config
        prefix, extra = (c.query_prefix, c.query_kwargs) if queries else (c.doc_prefix, c.doc_kwargs)
        inputs = [prefix + t for t in texts]
        if not inputs:
            return np.zeros((0, 0), dtype=np.float32)
        if c.library == "flag_m3":
            vectors = np.asarray(self.model.encode(inputs, batch_size=c.batch_size, **extra)["dense_vecs"])
        else:
            vectors = self.model.encode(inputs, batch_size=c.batch_size, show_progress_bar=False,
                                        convert_to_numpy=True, **extra)
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        if not pairs:
            return []
        queries = list(dict.fromkeys(q for q, _ in pairs))
        texts = list(dict.fromkeys(t for _, t in pairs))
        qv = dict(zip(queries, self.embed(queries, queries=True)))
        tv = dict(zip(texts, self.embed(texts)))
        cosines = [float(np.dot(qv[q], tv[t])) for q, t in pairs]
        if self.config.normalize:
            return [(c + 1) / 2 if not math.isnan(c) else c for c in cosines]
        return cosines
