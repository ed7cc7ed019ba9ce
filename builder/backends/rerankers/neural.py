"""Neural rerankers: FlagEmbedding, sentence-transformers cross-encoders, bi-encoders.

Heavy libraries (torch, FlagEmbedding, sentence_transformers) are imported when a model
is first used, so recipes validate and `--help` answers without them. Models load from
a hub id, a local folder, or `pkg:<package>/<folder>` (resolved offline).

Scoring runs in model batches fixed by `length_batches`; with a pool (see pooled.py) the
batches run on Ray workers that each hold a copy of the model, while this process keeps
only the tokenizer that windowing needs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from builder.backends.llm import BackendUnavailable
from builder.backends.rerankers.base import Pair, RerankerBase, as_floats, length_batches
from builder.backends.rerankers.config import BiEncoderConfig, CrossEncoderConfig, FlagConfig
from builder.backends.tokenizers import resolve_local

# BGE-M3 reads up to 8192 tokens; FlagEmbedding's own default for passages is only 512.
_M3_MAX_LENGTH = 8192


class RerankerLoadError(BackendUnavailable):
    """The model could not be loaded (not downloaded, offline, wrong path)."""


def _where(model: str) -> str:
    local = resolve_local(model)
    return str(local) if local is not None else model


@contextmanager
def _no_loading_bar() -> Iterator[None]:
    """transformers' "Loading weights" bar, hidden while a scorer loads: the load takes a
    second and the bar, in every build and eval log, says nothing a user can act on."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def _load(model: str, build: Any) -> Any:
    try:
        with _no_loading_bar():
            return build(_where(model))
    except Exception as exc:  # noqa: BLE001 - any load failure gets the same advice
        raise RerankerLoadError(
            f"could not load reranker model {model!r}: {exc}. Offline, give a local folder "
            "(or pkg:<package>/<folder>) and set HF_HUB_OFFLINE=1."
        ) from exc


def _tokenizer_only(config: Any) -> Any | None:
    """The model's tokenizer without its weights; None where it does not load alone."""
    try:
        from transformers import AutoTokenizer

        where = _where(config.model)
        return AutoTokenizer.from_pretrained(
            where, subfolder=_transformer_folder(where), trust_remote_code=config.trust_remote_code
        )
    except Exception:  # noqa: BLE001 - the caller then loads the whole model, which explains a failure
        return None


def _transformer_folder(where: str) -> str:
    """Where a sentence-transformers folder keeps its tokenizer (modules.json); "" elsewhere."""
    modules = Path(where) / "modules.json"
    if not modules.is_file():
        return ""
    for module in json.loads(modules.read_text(encoding="utf-8")):
        if module.get("type", "").endswith("models.Transformer"):
            return str(module.get("path", ""))
    return ""


class BatchPool(Protocol):
    """Runs `fn(scorer, batches)` on workers that each build their own copy of the scorer;
    one result per batch, in order."""

    def map(self, fn: Callable[[Any, list[Any]], list[Any]], batches: list[Any]) -> list[Any]: ...


def _score_batches(scorer: Any, batches: list[list[Pair]]) -> list[list[float]]:
    return [scorer.score_batch(batch) for batch in batches]


def _embed_batches(scorer: Any, batches: list[tuple[bool, list[str]]]) -> list[np.ndarray]:
    return [scorer.embed_batch(inputs, queries=queries) for queries, inputs in batches]


def _model_kwargs(precision: str) -> dict[str, Any]:
    """The weights' dtype, always named: transformers 5 otherwise keeps the dtype the
    checkpoint was saved in, so an fp16 hub model would run in fp16 under `fp32`."""
    import torch
    import transformers
    from packaging.version import Version

    # transformers renamed the argument in 4.56; older releases know only the old name.
    key = "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"
    return {key: {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]}


def _full_precision(built: Any, precision: str) -> Any:
    """FlagEmbedding casts to fp16 / bf16 itself but leaves fp32 to the checkpoint's dtype."""
    module = getattr(built, "model", None)
    if precision == "fp32" and module is not None and hasattr(module, "float"):
        module.float()
    return built


class _Lazy(RerankerBase):
    """Holds a model that is built on first use and dropped by `close`."""

    def __init__(self, name: str, config: Any, pool: BatchPool | None = None) -> None:
        self.name = name
        self.config = config
        self.normalized = bool(config.normalize)
        self.pool = pool
        self._model: Any = None
        self._tokenizer: Any = None

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
    def tokenizer(self) -> Any:
        """The model's tokenizer; with a pool, loaded alone (the weights live on the workers)."""
        if self.pool is None or self._model is not None:
            return self.model.tokenizer
        if self._tokenizer is None:
            self._tokenizer = _tokenizer_only(self.config) or self.model.tokenizer
        return self._tokenizer

    def run_batches(self, fn: Callable[[Any, list[Any]], list[Any]], batches: list[Any]) -> list[Any]:
        """`fn(scorer, batches)` here, or on the pool's workers."""
        if self.pool is None or not batches:
            return fn(self, batches)
        return self.pool.map(fn, batches)

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        plan = length_batches([len(q) + len(t) for q, t in pairs], self.config.batch_size)
        out = [0.0] * len(pairs)
        for batch, scores in zip(plan, self.run_batches(_score_batches, [[pairs[i] for i in b] for b in plan])):
            for i, score in zip(batch, scores):
                out[i] = score
        return out

    def score_batch(self, pairs: list[Pair]) -> list[float]:
        """One forward pass over at most `batch_size` pairs."""
        raise NotImplementedError

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
        tokenizer = self.tokenizer
        try:
            # The whole text, longer than the model reads, is tokenized only to find where to
            # cut its windows: verbose=False keeps transformers from warning about its length.
            offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)[
                "offset_mapping"
            ]
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
        cls = {
            "encoder": FlagEmbedding.FlagReranker,
            "llm": FlagEmbedding.FlagLLMReranker,
            "layerwise": FlagEmbedding.LayerWiseFlagLLMReranker,
        }[c.kind]
        kwargs: dict[str, Any] = {
            "use_fp16": c.precision == "fp16",
            "devices": c.device,
            "batch_size": c.batch_size,
            "max_length": c.max_length,
            "normalize": c.normalize,
            "trust_remote_code": c.trust_remote_code,
        }
        if c.kind != "encoder":
            kwargs["use_bf16"] = c.precision == "bf16"
        if c.kind == "layerwise":
            kwargs["cutoff_layers"] = [c.cutoff_layer]
        return _full_precision(_load(c.model, lambda where: cls(where, **kwargs)), c.precision)

    def score_batch(self, pairs: list[Pair]) -> list[float]:
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
        return _load(
            c.model,
            lambda where: CrossEncoder(
                where,
                device=c.device,
                max_length=c.max_length,
                trust_remote_code=c.trust_remote_code,
                activation_fn=activation,
                model_kwargs=_model_kwargs(c.precision),
            ),
        )

    def score_batch(self, pairs: list[Pair]) -> list[float]:
        scores = self.model.predict(
            [list(p) for p in pairs], batch_size=self.config.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
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
            return _full_precision(
                _load(
                    c.model,
                    lambda where: BGEM3FlagModel(
                        where,
                        use_fp16=c.precision == "fp16",
                        devices=c.device,
                        batch_size=c.batch_size,
                        passage_max_length=limit,
                        query_max_length=limit,
                    ),
                ),
                c.precision,
            )
        from sentence_transformers import SentenceTransformer

        model = _load(
            c.model,
            lambda where: SentenceTransformer(
                where, device=c.device, trust_remote_code=c.trust_remote_code, model_kwargs=_model_kwargs(c.precision)
            ),
        )
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
        (vectors,) = self._embed_groups([(texts, queries)])
        return vectors

    def _embed_groups(self, groups: list[tuple[Sequence[str], bool]]) -> list[np.ndarray]:
        """`embed` for several lists of texts, all their batches in one trip to the pool."""
        c = self.config
        jobs: list[tuple[bool, list[str]]] = []
        plans = []
        for texts, queries in groups:
            prefix = c.query_prefix if queries else c.doc_prefix
            inputs = [prefix + t for t in texts]
            plans.append(length_batches([len(t) for t in inputs], c.batch_size))
            jobs += [(queries, [inputs[i] for i in b]) for b in plans[-1]]
        done = iter(self.run_batches(_embed_batches, jobs))
        out = []
        for (texts, _), plan in zip(groups, plans):
            rows: list[Any] = [None] * len(texts)
            for batch in plan:
                for i, vector in zip(batch, next(done)):
                    rows[i] = vector
            out.append(np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32))
        return out

    def embed_batch(self, inputs: list[str], *, queries: bool) -> np.ndarray:
        """Unit vectors for one batch of prefixed texts: one forward pass."""
        c = self.config
        extra = c.query_kwargs if queries else c.doc_kwargs
        if c.library == "flag_m3":
            vectors = np.asarray(self.model.encode(inputs, batch_size=c.batch_size, **extra)["dense_vecs"])
        else:
            vectors = self.model.encode(
                inputs, batch_size=c.batch_size, show_progress_bar=False, convert_to_numpy=True, **extra
            )
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        if not pairs:
            return []
        queries = list(dict.fromkeys(q for q, _ in pairs))
        texts = list(dict.fromkeys(t for _, t in pairs))
        q_vectors, t_vectors = self._embed_groups([(queries, True), (texts, False)])
        qv = dict(zip(queries, q_vectors))
        tv = dict(zip(texts, t_vectors))
        cosines = [float(np.dot(qv[q], tv[t])) for q, t in pairs]
        if self.config.normalize:
            return [(c + 1) / 2 if not math.isnan(c) else c for c in cosines]
        return cosines
