"""How much prompt text a prefix cache could serve, in PosIR- and FineWeb-PosQ-style builds.

Both shipped recipes (recipes/posir.yaml, recipes/fineweb_posq.yaml) are built with
their own stages and thresholds over a local jsonl corpus (the shipped example articles
by default), every model pointed at the suite's local OpenAI-compatible server, which
answers with the mock LLM (a careful model's answers, made from the prompt's own text).
Rerankers and the retriever become the built-in lexical scorer, so no weights are needed.

The share is computed from the requests the server received, in the order it received
them: for each request, the longest prefix (role markers and text, as a chat template lays
them out) it shares with any earlier request, summed, over all prompt characters.
Target: at least 0.70 for both builds. Kept queries and their thirds are printed beside it.
PosIR's recipe grades without the span in the paper's layout (`cut`); `--without-span
set_aside` measures the opt-in layout that keeps the document whole (see docs/confounds.md
for its risk), and `both` prints the two.

    python benchmarks/prefix_share.py [--corpus FILE.jsonl] [--docs 40] [--without-span cut|set_aside|both]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.backends.llm.mock_backend import mock_answer
from builder.recipe.model import parse_recipe
from builder.run.runner import Runner, RunOptions

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support, when run as a script

from tests.support.openai_server import FakeOpenAIServer  # noqa: E402
from tests.support.prefix_share import prefix_share, request_text  # noqa: E402

ARTICLES = ROOT / "recipes" / "examples" / "articles.jsonl"
BUILDS = {"posir": ("gen", "judge"), "fineweb_posq": ("gen", "deepseek", "gemini", "gpt41mini")}
RERANKERS = {
    "posir": ("minicpm_layerwise", "qwen3_reranker_4b", "bge_m3", "bge_reranker_v2_m3", "qwen3_reranker_06b"),
    "fineweb_posq": ("bce", "mmarco", "jina_turbo", "minicpm_layerwise", "gte_modernbert", "jina_v3"),
}


@dataclass(frozen=True)
class ShareReport:
    build: str
    requests: int
    prompt_chars: int
    share: float
    kept: int
    thirds: dict[str, int]

    def line(self) -> str:
        thirds = ", ".join(f"{k} {v}" for k, v in sorted(self.thirds.items()))
        return (
            f"{self.build:<13} {self.requests:>5} requests  {self.prompt_chars:>10,} prompt chars  "
            f"prefix-cache share {self.share:.2f}  kept {self.kept} queries ({thirds})"
        )


def mock_responder(body: dict[str, Any]) -> str:
    """The mock LLM behind HTTP: what a careful model would answer to our prompts."""
    return mock_answer(body["messages"], seed=0) or ""


def overrides(build: str, base_url: str, corpus: Path, docs: int, without_span: str = "cut") -> list[str]:
    """--set assignments turning a shipped recipe into an offline build against `base_url`;
    PosIR's judge grades without the span in the layout `without_span`."""
    source = {
        "type": "jsonl",
        "path": str(corpus.resolve()),
        "lang": "en",
        "domain": "general",
        "fields": {"id": "id", "text": "text"},
    }
    out = [f"sources=[{json.dumps(source)}]", "tokenizer={kind: words}", f"stages.sample_by_length.n_docs={docs}"]
    for model in BUILDS[build]:
        out += [
            f"models.{model}.base_url={base_url}",
            f"models.{model}.model=mock",
            f"models.{model}.api_key_env=PREFIX_SHARE_KEY",
        ]
    out += [f"rerankers.{name}={{backend: bm25, normalize: true}}" for name in RERANKERS[build]]
    if build == "posir":
        out.append(f"stages.llm_relevance.without_span={without_span}")
    return out


def measure(build: str, work: Path, corpus: Path = ARTICLES, docs: int = 40, without_span: str = "cut") -> ShareReport:
    """Build one shipped recipe in `work` against a fresh local server and measure it."""
    os.environ.setdefault("PREFIX_SHARE_KEY", "local")
    with FakeOpenAIServer(responder=mock_responder) as srv:
        loaded = parse_recipe(
            ROOT / "recipes" / f"{build}.yaml", overrides(build, srv.base_url, corpus, docs, without_span)
        )
        result = Runner(loaded, RunOptions(run_root=work / "runs", out_dir=work / "out")).run()
        texts = [request_text(body["messages"]) for body in srv.requests]
    queries = result.bench.queries
    tag = "chunk_tag" if build == "fineweb_posq" else "position_tag"
    thirds = Counter(t for t in queries[tag].to_list() if t) if tag in queries.columns else Counter()
    return ShareReport(build, len(texts), sum(map(len, texts)), prefix_share(texts), queries.height, dict(thirds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ARTICLES, help="jsonl with id and text")
    parser.add_argument("--docs", type=int, default=40, help="documents each build samples")
    parser.add_argument(
        "--without-span",
        choices=("cut", "set_aside", "both"),
        default="cut",
        help="PosIR's layout for grading without the span",
    )
    args = parser.parse_args()
    layouts = ("cut", "set_aside") if args.without_span == "both" else (args.without_span,)
    for build in BUILDS:
        for layout in layouts if build == "posir" else ("cut",):
            with tempfile.TemporaryDirectory() as tmp:
                report = measure(build, Path(tmp), args.corpus, args.docs, layout)
                print(report.line() + (f" (without_span: {layout})" if build == "posir" else ""), flush=True)


if __name__ == "__main__":
    main()
