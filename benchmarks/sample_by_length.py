"""Throughput of token counting + length-bucket sampling against raw batch tokenization.

Generates N documents of 0-2,048 words, trains a small WordPiece tokenizer locally (no
model files needed), then times in one run:
  raw      tokenizers' encode_batch on all texts (what a user would call by hand), and
           encode_batch_fast (no offsets: the cheapest call the library has)
  pipeline HFCounter.count_many + Bench + the sample_by_length stage (what a build does)
and prints documents/s for both, their ratio (target >= 0.8) and the peak RSS.

    python benchmarks/sample_by_length.py [--docs 100000]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from builder.backends.tokenizers import HFCounter  # noqa: E402
from builder.bench import Bench  # noqa: E402
from builder.stages.sample_by_length import SampleByLength, SampleParams  # noqa: E402
from tests.helpers import make_ctx  # noqa: E402


def make_docs(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "zen", "pra", "dul", "quo"]
    vocab = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(6000)]
    return [" ".join(rng.choices(vocab, k=rng.randint(1, 2048))) + "." for _ in range(n)]


def train_tokenizer(texts: list[str], folder: Path) -> Path:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=8000, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(texts[:2000], trainer)
    path = folder / "tokenizer.json"
    tok.save(str(path))
    return path


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    args = parser.parse_args()
    texts = make_docs(args.docs)
    with tempfile.TemporaryDirectory() as tmp:
        path = train_tokenizer(texts, Path(tmp))
        base_mb = _rss_mb()
        t0 = time.perf_counter()
        counter = HFCounter(str(path))
        counts = counter.count_many(texts)
        bench = Bench.of(
            pl.DataFrame(
                {
                    "doc_id": [f"d{i}" for i in range(len(texts))],
                    "text": texts,
                    "n_tokens": counts,
                }
            )
        )
        out = SampleByLength(SampleParams(n_docs=args.docs // 10)).run(bench, make_ctx(Path(tmp)))
        pipe_s = time.perf_counter() - t0
        pipe_peak_mb = _rss_mb()  # measured before the baselines, which hold every encoding
        del bench

        raw_tok = Tokenizer.from_file(str(path))
        t0 = time.perf_counter()
        raw_tok.encode_batch(texts, add_special_tokens=False)
        raw_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        raw_tok.encode_batch_fast(texts, add_special_tokens=False)
        fast_s = time.perf_counter() - t0
    peak_mb = _rss_mb()
    print(f"documents:                     {len(texts):,} ({sum(counts):,} tokens)")
    print(f"raw encode_batch:              {len(texts) / raw_s:,.0f} docs/s ({raw_s:.1f} s)")
    print(f"raw encode_batch_fast:         {len(texts) / fast_s:,.0f} docs/s ({fast_s:.1f} s, no offsets)")
    print(f"count + sample_by_length:      {len(texts) / pipe_s:,.0f} docs/s ({pipe_s:.1f} s)")
    print(f"ratio pipeline / raw:          {raw_s / pipe_s:.2f} (target >= 0.80)")
    print(f"ratio pipeline / raw fast:     {fast_s / pipe_s:.2f}")
    print(f"kept after sampling:           {out.corpus.height:,}")
    print(f"peak RSS, pipeline:            {pipe_peak_mb:,.0f} MiB (texts alone: {base_mb:,.0f} MiB)")
    print(f"peak RSS, with the baselines:  {peak_mb:,.0f} MiB")


if __name__ == "__main__":
    main()
